// What a sandbox gets once its wanted state (desired.ts) has names and addresses: each attachment's
// link spec by its Network's type, its host links' names, its addresses from the allocator the
// caller gives (the node's IPAM takes them; `podnet diff` only previews), and each cni Network's
// plugin list. Pure but for the allocator.
import { PodnetError, toPodnetError } from '../errors.ts';
import type { IpRange, Network } from '../protocol/validate.ts';
import { delegatedConfigOf, isConfigProblem } from './cni-config.ts';
import type { DesiredAttachment, DesiredSandbox, Problem } from './desired.ts';
import { hostInterfaceName } from './host-links.ts';
import { bridgeNameOf, sharedBridgeReason } from './network.ts';
import type { LinkSpec, Resolved, ResolvedAttachment, ResolvedDelegated } from './state.ts';

/** An address an allocator handed out: the ip with its range's prefix length ("198.18.5.2/24", "2001:db8::2/64"), and the range's gateway. */
export interface Allocation {
  address: string;
  gateway?: string;
}

/**
 * The addresses `owner` gets on a Network: one from each range, or exactly the `requested` static
 * ones; the same ones again for an owner that holds some. Throws with the reason it cannot.
 */
export type AddressAllocator = (network: string, ranges: readonly IpRange[], owner: string, requested?: readonly string[]) => Allocation[];

/** The owner of an attachment's addresses in the allocator: its sandbox and pod interface. */
export function addressOwner(containerId: string, podInterface: string): string {
  return `${containerId}/${podInterface}`;
}

/** Names, link specs and addresses of a sandbox's wanted attachments; what cannot be had is a problem naming who asked. */
export function resolveSandbox(
  containerId: string,
  wanted: DesiredSandbox,
  networks: ReadonlyMap<string, Network>,
  allocate: AddressAllocator,
): { desired: Resolved; problems: Problem[] } {
  const problems = [...wanted.problems];
  const attachments: ResolvedAttachment[] = [];
  const delegated: ResolvedDelegated[] = [];
  for (const want of wanted.attachments) {
    if (want.network.spec.type === 'cni') {
      const config = delegatedConfigOf(want.network);
      if (isConfigProblem(config)) problems.push({ document: want.from, field: want.field, reason: `Network ${want.network.metadata.name}: ${config.field}: ${config.reason}` });
      else delegated.push({ interface: want.interface, network: want.network.metadata.name, config });
      continue;
    }
    try {
      attachments.push(resolveAttachment(containerId, want, networks, allocate));
    } catch (err) {
      problems.push({ document: want.from, field: want.field, reason: toPodnetError(err).message });
    }
  }
  const tuning = wanted.tuning.map((t) => ({ interface: t.interface, settings: t.settings }));
  return { desired: { attachments, delegated, tuning, routes: wanted.routes, rules: wanted.rules, sysctls: wanted.sysctls }, problems };
}

function resolveAttachment(containerId: string, want: DesiredAttachment, networks: ReadonlyMap<string, Network>, allocate: AddressAllocator): ResolvedAttachment {
  const network = want.network;
  const spec = network.spec;
  const shared = sharedBridgeReason(network, networks);
  if (shared) throw new PodnetError('INVALID_REQUEST', shared);
  const allocations = spec.ipam ? allocate(network.metadata.name, spec.ipam.ranges, addressOwner(containerId, want.interface), want.ips) : (want.ips ?? []).map((address) => ({ address }));
  return {
    interface: want.interface,
    network: network.metadata.name,
    link: linkSpecOf(network, allocations),
    hostIf: hostInterfaceName(containerId, want.interface),
    ifb: hostInterfaceName(containerId, want.interface, 'pnb'),
    ...(spec.mtu ? { mtu: spec.mtu } : {}),
    addresses: allocations.map((a) => a.address),
    ...(want.bandwidth ? { bandwidth: want.bandwidth } : {}),
  };
}

/** The link a Network's type makes in the pod; a bridge Network's gateway addresses go on its bridge. */
function linkSpecOf(network: Network, allocations: readonly Allocation[]): LinkSpec {
  const spec = network.spec;
  const prefixOf = (cidr: string) => cidr.slice(cidr.indexOf('/'));
  switch (spec.type) {
    case 'bridge':
      return {
        kind: 'bridge',
        bridge: bridgeNameOf(network),
        bridgeAddresses: spec.bridge?.gateway ? allocations.flatMap((a) => (a.gateway ? [`${a.gateway}${prefixOf(a.address)}`] : [])) : [],
        portSecurity: spec.bridge?.portSecurity !== false,
      };
    case 'macvlan':
      return { kind: 'macvlan', parent: spec.macvlan!.parent, mode: spec.macvlan!.mode ?? 'bridge' };
    case 'vlan':
      return { kind: 'vlan', parent: spec.vlan!.parent, id: spec.vlan!.id };
    case 'vxlan': {
      const v = spec.vxlan!;
      return { kind: 'vxlan', vni: v.vni, port: v.port ?? 4789, ...(v.remote ? { remote: v.remote } : {}), ...(v.group ? { group: v.group } : {}), ...(v.device ? { device: v.device } : {}) };
    }
    case 'cni':
      throw new PodnetError('INTERNAL', `Network ${network.metadata.name} is delegated: its plugins attach it, not a link podnet makes`);
  }
}
