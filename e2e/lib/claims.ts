// What the tests of podnet's DRA driver make and read (docs/adr/0033): tenants' claims on podnet's
// Networks, pods that cannot start without the interface a claim gives, and the slices and
// claims as the API server has them.
import type { Node } from '../cluster/node.ts';
import { busyboxImage } from '../cluster/node.ts';

export const driver = 'dra.podnetwork.opdev.io';

export interface Slice {
  metadata: { name: string };
  spec: { driver: string; nodeName?: string; pool: { name: string; generation: number }; devices?: { name: string; attributes?: Record<string, { string?: string }>; capacity?: Record<string, { value: string }>; allowMultipleAllocations?: boolean }[] };
}
export interface Claim {
  metadata: { name: string; uid: string };
  status?: { devices?: { driver: string; pool: string; device: string; conditions?: { type: string; status: string; reason: string }[]; networkData?: { interfaceName?: string; ips?: string[]; hardwareAddress?: string } }[] };
}

export const json = async <T>(node: Node, args: string[]): Promise<T> => JSON.parse((await node.kubectl(['get', ...args, '-o', 'json'])).stdout) as T;

/** podnet's slices of this node, as the API server has them. */
export const slicesOf = async (node: Node) => (await json<{ items: Slice[] }>(node, ['resourceslices', `--field-selector=spec.driver=${driver}`])).items.filter((s) => s.spec.nodeName === node.name);

/** A claim (or template's) request of a Network of podnet's, with its parameters. */
export function claimSpec(network: string, parameters?: Record<string, unknown>) {
  return {
    devices: {
      requests: [{ name: 'net', exactly: { deviceClassName: 'podnet', selectors: [{ cel: { expression: `device.attributes["${driver}"].network == "${network}"` } }] } }],
      ...(parameters ? { config: [{ requests: ['net'], opaque: { driver, parameters: { apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'ClaimParameters', ...parameters } } }] } : {}),
    },
  };
}

/** A pod of the tenant claiming `claim` (a template's name, or a claim's), whose init container fails unless net1 is there with an address of `prefix`. */
export function claimedPod(name: string, claim: { template: string } | { claim: string }, prefix: string, namespace = 'tenant-a') {
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name, namespace },
    spec: {
      restartPolicy: 'Never',
      resourceClaims: [{ name: 'net', ...('template' in claim ? { resourceClaimTemplateName: claim.template } : { resourceClaimName: claim.claim }) }],
      initContainers: [{ name: 'needs-network', image: busyboxImage, imagePullPolicy: 'Never', command: ['sh', '-c', `ip -4 addr show dev net1 | grep -q 'inet ${prefix}'`] }],
      containers: [{ name: 'main', image: busyboxImage, imagePullPolicy: 'Never', command: ['/bin/sleep', '3600'] }],
    },
  };
}

