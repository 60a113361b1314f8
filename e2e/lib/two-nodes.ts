// Two real nodes (e2e/cluster/node.ts) under one control plane, with podnet's image known to both
// and a tenant namespace tenant-a may edit: what the tests across nodes start from.
import type { Test } from 'tap';
import { startCluster } from '../cluster/cluster.ts';
import { busyboxImage, startNode, type Node } from '../cluster/node.ts';
import { until } from './engine.ts';
import { installPodnet, podnetImage, tenantMayCreate } from './podnet-node.ts';

export const tenant = 'tenant-a';

/** The label kubeadm puts on a control-plane node, which podnet's controller prefers (daemonset/controller.yaml). */
export const controlPlaneLabel = 'node-role.kubernetes.io/control-plane';

/** Two nodes with podnet's image known to both, and a tenant namespace tenant-a may edit. */
export async function twoNodes(t: Test, primaries: [string, string]) {
  const cluster = await startCluster(t, { forNode: true });
  const began = Date.now();
  const first = await startNode(t, cluster, { primarySubnet: primaries[0], runtime: 'containerd-2' });
  const firstReady = Date.now();
  const second = await startNode(t, cluster, { primarySubnet: primaries[1], runtime: 'containerd-2', second: true });
  t.comment(`nodes Ready: the first in ${((firstReady - began) / 1000).toFixed(1)} s (with the controllers), the second in ${((Date.now() - firstReady) / 1000).toFixed(1)} s`);
  const tag = await podnetImage(t, first);
  await second.importImage(`localhost/podnet:${tag}`);
  const kubectl = first.kubectl;
  // The first node shares the machine's network with etcd and the API server: it is the control
  // plane's node, labelled as kubeadm labels one, where podnet's controller prefers to run.
  await kubectl(['label', 'node', first.name, `${controlPlaneLabel}=`]);
  const asTenant = (args: string[], input?: string) => kubectl(['-n', tenant, ...args], { as: 'tenant-a', input });
  const readyDaemons = async () => (await kubectl(['get', 'daemonset', '-n', 'podnet-system', 'podnet', '-o', 'jsonpath={.status.numberReady}/{.status.desiredNumberScheduled}'])).stdout;
  await kubectl(['create', 'namespace', tenant]);
  await kubectl(['create', 'rolebinding', '-n', tenant, 'tenant-a-edit', '--clusterrole=edit', '--user=tenant-a']);
  await tenantMayCreate(kubectl, 'pods', 'the aggregation controller filled edit');
  return {
    cluster,
    nodes: [first, second] as const,
    kubectl,
    asTenant,
    /** podnet installed the admin's way; its DaemonSet's Ready pods of those scheduled, as "2/2". */
    install: Object.assign(
      async () => {
        await installPodnet(t, cluster, first, tag);
        return readyDaemons();
      },
      { ready: () => readyDaemons() },
    ),
    /** A tenant pod labelled app=cnf and cnf=<its name> on `node`, Ready. */
    async runPodOn(node: Node, name: string) {
      await asTenant(['run', name, `--image=${busyboxImage}`, '--image-pull-policy=Never', `--labels=app=cnf,cnf=${name}`, '--restart=Never', `--overrides=${JSON.stringify({ spec: { nodeName: node.name } })}`, '--', '/bin/sleep', '3600']);
      await asTenant(['wait', '--for=condition=Ready', `pod/${name}`, '--timeout=120s']);
    },
    /** The IPv4 address (with prefix) of `ifname` in the pod, once it has one. */
    addressOf: (pod: string, ifname: string) =>
      until(`${pod} has ${ifname}`, async () => {
        const { stdout, exitCode } = await asTenant(['exec', pod, '--', 'ip', '-o', '-4', 'addr', 'show', 'dev', ifname]).catch(() => ({ stdout: '', exitCode: 1 }));
        return exitCode === 0 ? /inet (\S+)/.exec(stdout)?.[1] : undefined;
      }, 90_000),
  };
}

