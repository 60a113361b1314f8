// A prepared claim's status as KEP-4817 gives it (ResourceClaim status.devices[]): for each device
// allocated from this node's pool, a Ready condition (or why not) and its network data: the pod's
// interface, its addresses in CIDR form, its MAC. A claim reserved for several pods of the node
// tells the first pod's interface (the status has one entry per device). Pure.
import { claimDocumentName } from '../model/identity.ts';
import type { Condition } from '../protocol/validate.ts';
import { condition, unmetRequired, type SandboxFacts } from '../status/status.ts';
import { driverName } from './devices.ts';
import type { PreparedClaim } from './prepared.ts';
import { claimRequestField } from './prepare.ts';

/** One entry of a ResourceClaim's status.devices, as podnet writes it (resource.k8s.io/v1 AllocatedDeviceStatus). */
export interface AllocatedDeviceStatus {
  driver: string;
  pool: string;
  device: string;
  shareID?: string;
  conditions: Condition[];
  networkData?: { interfaceName: string; ips: string[]; hardwareAddress?: string };
}

/** The API's bounds on networkData (KEP-4817): what goes past them is left out rather than refused. */
const maxIps = 16;

/**
 * The status of each of the claim's devices, from the pass's facts of the first of its pods this
 * node has a sandbox of (undefined: none yet). `previous`: what was last written, whose conditions
 * keep their transition times while they hold.
 */
export function claimDeviceStatuses(claim: PreparedClaim, facts: SandboxFacts | undefined, previous: readonly AllocatedDeviceStatus[], now: string): AllocatedDeviceStatus[] {
  const document = claimDocumentName(claim.claim);
  return claim.devices.map((d): AllocatedDeviceStatus => {
    const key = { driver: driverName, pool: d.pool, device: d.device, ...(d.shareId ? { shareID: d.shareId } : {}) };
    const before = previous.find((p) => p.pool === d.pool && p.device === d.device && p.shareID === d.shareId)?.conditions;
    const ready = (status: boolean, reason: string, message: string) => [condition('Ready', status, reason, message, before, now)];
    if (!facts) return { ...key, conditions: ready(false, 'PodNotStarted', 'no pod the claim is reserved for has a sandbox on this node yet') };
    const field = claimRequestField(d.request);
    const want = facts.wanted.attachments.find((w) => w.from === document && w.field === field);
    const made = want ? facts.applied?.attachments.find((a) => a.interface === want.interface && a.network === d.network) : undefined;
    if (!want || !made) {
      const unmet = unmetRequired(facts, [{ document, field, network: d.network, ...(want ? { interface: want.interface } : {}) }])[0];
      return { ...key, conditions: ready(false, 'NotAttached', unmet?.reason ?? 'not attached yet') };
    }
    const mac = facts.links?.get(made.interface)?.mac ?? made.mac;
    return {
      ...key,
      conditions: ready(true, 'Attached', `${made.interface} of pod ${facts.namespace}/${facts.name} is on Network ${d.network}`),
      networkData: { interfaceName: made.interface, ips: made.addresses.slice(0, maxIps), ...(mac ? { hardwareAddress: mac } : {}) },
    };
  });
}
