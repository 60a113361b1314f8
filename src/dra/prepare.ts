// What preparing a ResourceClaim on this node means (docs/adr/0033): from the claim as the API
// server has it, the devices the scheduler allocated from this node's pool, the Network each is,
// and the attachment's parameters (its opaque config for the driver, read against their schema);
// then the rules a pod's attachments keep, from the one merge that keeps them for annotations and
// configs too (model/desired.ts): the Network admits the claim's namespace and is served here, the
// namespace's PodNetworkPermissions allow it, the Network's kind allows what the parameters bring,
// no interface is asked twice or is the primary one. Anything wrong refuses the whole claim,
// naming the field; nothing is made for it. A claim gives one pod its interfaces. Pure.
import { PodnetError } from '../errors.ts';
import { defaultLimits, desiredFor, type NodeLimits } from '../model/desired.ts';
import { claimDocumentName, type ClaimAttachments } from '../model/identity.ts';
import { parseDocument, type ClaimParameters, type Network, type PodNetworkPermission } from '../protocol/validate.ts';
import { deviceNameOf, driverName } from './devices.ts';
import type { PreparedClaim } from './prepared.ts';

/** A ResourceClaim (resource.k8s.io/v1), the fields podnet reads. */
export interface ClaimObject {
  metadata: { namespace?: string; name: string; uid?: string };
  spec?: { devices?: { config?: DeviceConfig[] } };
  status?: {
    allocation?: { devices?: { results?: AllocationResult[]; config?: (DeviceConfig & { source?: string })[] } };
    reservedFor?: { resource?: string; name?: string; uid?: string }[];
  };
}

interface AllocationResult {
  request: string;
  driver: string;
  pool: string;
  device: string;
  shareID?: string;
  adminAccess?: boolean;
}

interface DeviceConfig {
  requests?: string[];
  opaque?: { driver: string; parameters?: unknown };
}

export interface PrepareContext {
  node: string;
  networks: ReadonlyMap<string, Network>;
  namespaceLabels: Record<string, string> | undefined;
  nodeLabels: Record<string, string>;
  /** The claim's namespace's PodNetworkPermissions. */
  permissions: readonly PodNetworkPermission[];
  limits?: NodeLimits;
}

/** The claim prepared on this node, or why it cannot be: a message naming the claim and its field. */
export function prepareClaim(claim: ClaimObject, ctx: PrepareContext): PreparedClaim | { error: string } {
  const namespace = claim.metadata.namespace ?? '';
  const name = claim.metadata.name;
  const what = claimDocumentName({ namespace, name });
  const results = (claim.status?.allocation?.devices?.results ?? []).filter((r) => r.driver === driverName && r.pool === ctx.node);
  if (results.length === 0) return { error: `${what} has no device of driver ${driverName} allocated on node ${ctx.node}` };
  const pods = (claim.status?.reservedFor ?? []).filter((r) => r.resource === 'pods' && r.uid).map((r) => r.uid!);
  if (pods.length > 1) return { error: `${what} is reserved for ${pods.length} pods; a claim on podnet's Networks gives one pod its interfaces (a ResourceClaimTemplate makes one claim per pod)` };
  const byDevice = new Map([...ctx.networks.values()].map((n) => [deviceNameOf(n.metadata.name), n]));
  const devices: PreparedClaim['devices'] = [];
  for (const result of results) {
    if (result.adminAccess) return { error: `${what}: request ${result.request} asks for admin access to device ${result.device}; podnet's Networks give no admin access` };
    if (devices.some((d) => d.request === result.request)) return { error: `${what}: request ${result.request} was allocated more than one of podnet's devices; a request of podnet's gives one interface (allocationMode ExactCount, count 1)` };
    const network = byDevice.get(result.device);
    if (!network) return { error: `${what}: request ${result.request} was allocated device ${result.device}, which is no Network podnet knows (deleted since?)` };
    const parameters = parametersFor(claim, result.request);
    if ('error' in parameters) return { error: `${what}: ${parameters.error}` };
    devices.push({ request: result.request, pool: result.pool, device: result.device, network: network.metadata.name, ...(result.shareID ? { shareId: result.shareID } : {}), ...(parameters.parameters ? { parameters: parameters.parameters } : {}) });
  }
  const prepared: PreparedClaim = { claim: { namespace, name, uid: claim.metadata.uid ?? '' }, pods, devices };
  // The rules of a pod's attachments, for a pod of the claim's namespace on this node asking this claim alone.
  const asked = claimAttachments(prepared);
  const pod = { namespace, name: `(the pod of ${what})`, labels: {}, nodeLabels: ctx.nodeLabels, permissions: ctx.permissions, primaryInterface: 'eth0', claims: [asked], ...(ctx.namespaceLabels ? { namespaceLabels: ctx.namespaceLabels } : {}) };
  const problems = desiredFor(pod, ctx.networks, [], [], ctx.limits ?? defaultLimits).problems.filter((p) => p.document === what);
  if (problems.length > 0) return { error: `${what}: ${problems.map((p) => `${p.field}: ${p.reason}`).join('; ')}` };
  return prepared;
}

/** The field a claim's device is asked by, in problems and status: its request. */
export function claimRequestField(request: string): string {
  return `spec.devices.requests[${request}]`;
}

/** A prepared claim's devices as the attachments its pod asks. */
export function claimAttachments(claim: PreparedClaim): ClaimAttachments {
  return {
    document: claimDocumentName(claim.claim),
    attachments: claim.devices.map((d) => {
      const p = d.parameters;
      return {
        network: d.network,
        field: claimRequestField(d.request),
        ...(p?.interface ? { interface: p.interface } : {}),
        ...(p?.ips ? { ips: p.ips } : {}),
        ...(p?.mac ? { mac: p.mac } : {}),
        ...(p?.bandwidth ? { bandwidth: p.bandwidth } : {}),
        ...(p?.dscp !== undefined ? { dscp: p.dscp } : {}),
        ...(p?.remote !== undefined ? { remote: p.remote } : {}),
        ...(p?.peers ? { peers: p.peers } : {}),
      };
    }),
  };
}

/**
 * The parameters of podnet's driver that apply to a request, read against their schema: the
 * claim's own config (spec.devices.config, named by its index there) over its class's; a request
 * of a list of alternatives ("net/first") takes what names its list. Two of the claim's own for one
 * request are refused: which one was meant cannot be told.
 */
function parametersFor(claim: ClaimObject, request: string): { parameters?: ClaimParameters } | { error: string } {
  const applies = (config: DeviceConfig) => config.opaque?.driver === driverName && (!config.requests || config.requests.length === 0 || config.requests.includes(request) || config.requests.includes(request.split('/')[0]!));
  const own = (claim.spec?.devices?.config ?? []).map((config, i) => ({ config, field: `spec.devices.config[${i}].opaque.parameters` })).filter(({ config }) => applies(config));
  if (own.length > 1) return { error: `${own.map((o) => o.field).join(' and ')} both configure request ${request}; give one` };
  const fromClass = (claim.status?.allocation?.devices?.config ?? []).map((config, i) => ({ config, field: `its DeviceClass's config (status.allocation.devices.config[${i}])` })).filter(({ config }) => config.source === 'FromClass' && applies(config));
  const chosen = own[0] ?? fromClass.at(-1);
  if (!chosen) return {};
  try {
    return { parameters: parseDocument('ClaimParameters', chosen.config.opaque!.parameters, chosen.field) };
  } catch (err) {
    return { error: err instanceof PodnetError ? err.message : String(err) };
  }
}
