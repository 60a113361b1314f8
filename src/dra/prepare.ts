// What preparing a ResourceClaim on this node means (docs/adr/0033): from the claim as the API
// server has it, the devices the scheduler allocated from this node's pool, the Network each is,
// and the attachment's parameters (its opaque config for the driver), checked as a
// PodNetworkConfig's attachment is: the Network admits the claim's namespace and is served here,
// the parameters are the schema's and the Network allows what they bring. Anything wrong refuses
// the whole claim, naming the field; nothing is made for it. Pure.
import { PodnetError } from '../errors.ts';
import { macRefusal, networkRefusal } from '../model/desired.ts';
import { attachmentRefusal } from '../model/kinds/index.ts';
import { parseDocument, type ClaimParameters, type Network } from '../protocol/validate.ts';
import { deviceNameOf, driverName } from './devices.ts';
import type { PreparedClaim } from './prepared.ts';

/** A ResourceClaim (resource.k8s.io/v1), the fields podnet reads. */
export interface ClaimObject {
  metadata: { namespace?: string; name: string; uid?: string };
  spec?: { devices?: { config?: DeviceConfig[] } };
  status?: {
    allocation?: { devices?: { results?: { request: string; driver: string; pool: string; device: string; shareID?: string }[]; config?: (DeviceConfig & { source?: string })[] } };
    reservedFor?: { resource?: string; name?: string; uid?: string }[];
  };
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
}

/** The claim prepared on this node, or why it cannot be: a message naming the claim's field. */
export function prepareClaim(claim: ClaimObject, ctx: PrepareContext): PreparedClaim | { error: string } {
  const namespace = claim.metadata.namespace ?? '';
  const name = claim.metadata.name;
  const uid = claim.metadata.uid ?? '';
  const results = (claim.status?.allocation?.devices?.results ?? []).filter((r) => r.driver === driverName && r.pool === ctx.node);
  if (results.length === 0) return { error: `ResourceClaim ${namespace}/${name} has no device of driver ${driverName} allocated on node ${ctx.node}` };
  const pods = (claim.status?.reservedFor ?? []).filter((r) => r.resource === 'pods' && r.uid).map((r) => r.uid!);
  const byDevice = new Map([...ctx.networks.values()].map((n) => [deviceNameOf(n.metadata.name), n]));
  const devices: PreparedClaim['devices'] = [];
  for (const result of results) {
    const network = byDevice.get(result.device);
    if (!network) return { error: `ResourceClaim ${namespace}/${name}: request ${result.request} was allocated device ${result.device}, which is no Network podnet knows (deleted since?)` };
    const refused = networkRefusal(network, { namespace, namespaceLabels: ctx.namespaceLabels, nodeLabels: ctx.nodeLabels });
    if (refused) return { error: `ResourceClaim ${namespace}/${name}: request ${result.request}: ${refused}` };
    const parameters = parametersFor(claim, result.request);
    if ('error' in parameters) return { error: `ResourceClaim ${namespace}/${name}: ${parameters.error}` };
    const given = parameters.parameters;
    if (given) {
      const asked = { ...(given.ips ? { ips: given.ips } : {}), ...(given.bandwidth ? { bandwidth: given.bandwidth } : {}), ...(given.mac ? { mac: given.mac } : {}) };
      const problem = attachmentRefusal(network, asked);
      if (problem) return { error: `ResourceClaim ${namespace}/${name}: ${parameters.field}.${problem.field}: ${problem.reason}` };
      const mac = given.mac === undefined ? undefined : macRefusal(given.interface ?? 'its interface', network);
      if (mac) return { error: `ResourceClaim ${namespace}/${name}: ${parameters.field}.mac: ${mac}` };
    }
    devices.push({ request: result.request, pool: result.pool, device: result.device, network: network.metadata.name, ...(result.shareID ? { shareId: result.shareID } : {}), ...(given ? { parameters: given } : {}) });
  }
  const interfaces = devices.map((d) => d.parameters?.interface).filter((i) => i !== undefined);
  const twice = interfaces.find((i, n) => interfaces.indexOf(i) !== n);
  if (twice) return { error: `ResourceClaim ${namespace}/${name}: two of its requests ask for interface ${twice}` };
  return { claim: { namespace, name, uid }, pods, devices };
}

/**
 * The parameters of podnet's driver that apply to a request, read against their schema: the
 * claim's own config (spec.devices.config, named by its index there) over its class's; a request
 * of a list of alternatives ("net/first") takes what names its list. Two of the claim's own for one
 * request are refused: which one was meant cannot be told.
 */
function parametersFor(claim: ClaimObject, request: string): { parameters?: ClaimParameters; field?: string } | { error: string } {
  const applies = (config: DeviceConfig) => config.opaque?.driver === driverName && (!config.requests || config.requests.length === 0 || config.requests.includes(request) || config.requests.includes(request.split('/')[0]!));
  const own = (claim.spec?.devices?.config ?? []).map((config, i) => ({ config, field: `spec.devices.config[${i}].opaque.parameters` })).filter(({ config }) => applies(config));
  if (own.length > 1) return { error: `${own.map((o) => o.field).join(' and ')} both configure request ${request}; give one` };
  const fromClass = (claim.status?.allocation?.devices?.config ?? []).map((config, i) => ({ config, field: `its DeviceClass's config (status.allocation.devices.config[${i}])` })).filter(({ config }) => config.source === 'FromClass' && applies(config));
  const chosen = own[0] ?? fromClass.at(-1);
  if (!chosen) return {};
  try {
    return { parameters: parseDocument('ClaimParameters', chosen.config.opaque!.parameters, chosen.field), field: chosen.field };
  } catch (err) {
    return { error: err instanceof PodnetError ? err.message : String(err) };
  }
}
