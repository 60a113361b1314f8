// What a sandbox gets once its wanted state (desired.ts) has names and addresses: each attachment's
// link spec from its Network's kind (kinds/), its host links' names, its addresses from the allocator the
// caller gives (the node's IPAM takes them; `podnet diff` only previews), and each delegated Network's
// plugin list. Pure but for the allocator.
import { PodnetError, toPodnetError } from '../errors.ts';
import type { IpRange, Network } from '../protocol/validate.ts';
import { isConfigProblem } from './cni-config.ts';
import type { DesiredAttachment, DesiredSandbox, Problem } from './desired.ts';
import { hostInterfaceName } from './host-links.ts';
import { kindOf, type Allocation, type AnyLinkKind } from './kinds/index.ts';
import { canonicalRemote } from './kinds/kind.ts';
import type { Resolved, ResolvedAttachment, ResolvedDelegated } from './state.ts';

/** An address an allocator handed out (the IPAM's too). */
export type { Allocation };

/**
 * The addresses `owner` gets on a Network: one from each range, or exactly the `requested` static
 * ones; the same ones again for an owner that holds some. Throws with the reason it cannot.
 */
export type AddressAllocator = (network: string, ranges: readonly IpRange[], owner: string, requested?: readonly string[]) => Allocation[];

/** The WireGuard key of an owner (addressOwner) on a Network: the file wg reads and its public key, made on the node (daemon/wireguard-keys.ts); a preview makes none. */
export type KeyOf = (network: string, owner: string) => { file: string; publicKey?: string };

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
  keyOf?: KeyOf,
): { desired: Resolved; problems: Problem[] } {
  const problems = [...wanted.problems];
  const attachments: ResolvedAttachment[] = [];
  const delegated: ResolvedDelegated[] = [];
  for (const want of wanted.attachments) {
    const kind = kindOf(want.network);
    if (kind.attachedBy === 'plugins') {
      const config = kind.delegatedConfig(want.network);
      if (isConfigProblem(config)) problems.push({ document: want.from, field: want.field, reason: `Network ${want.network.metadata.name}: ${config.field}: ${config.reason}` });
      else delegated.push({ interface: want.interface, network: want.network.metadata.name, config, ...(want.dscp !== undefined ? { dscp: want.dscp } : {}) });
      continue;
    }
    try {
      attachments.push(resolveAttachment(containerId, want, kind, networks, allocate, keyOf));
    } catch (err) {
      problems.push({ document: want.from, field: want.field, reason: toPodnetError(err).message });
    }
  }
  const tuning = wanted.tuning.map((t) => ({ interface: t.interface, settings: t.settings }));
  return { desired: { attachments, delegated, vrfs: wanted.vrfs.map(({ name, table }) => ({ name, table })), tuning, routes: wanted.routes, rules: wanted.rules, sysctls: wanted.sysctls }, problems };
}

function resolveAttachment(containerId: string, want: DesiredAttachment, kind: AnyLinkKind, networks: ReadonlyMap<string, Network>, allocate: AddressAllocator, keyOf: KeyOf | undefined): ResolvedAttachment {
  const network = want.network;
  const spec = network.spec;
  // A Network its kind finds wrong (a bridge another Network names) gets no links.
  const [wrong] = kind.specProblems(network, networks);
  if (wrong) throw new PodnetError('INVALID_REQUEST', wrong.reason);
  const allocations = spec.ipam ? allocate(network.metadata.name, spec.ipam.ranges, addressOwner(containerId, want.interface), want.ips) : (want.ips ?? []).map((address) => ({ address }));
  return {
    interface: want.interface,
    network: network.metadata.name,
    link: kind.linkSpec(network, allocations, want.remote !== undefined ? { remote: want.remote } : {}),
    hostIf: hostInterfaceName(containerId, want.interface),
    ifb: hostInterfaceName(containerId, want.interface, 'pnb'),
    ...(spec.mtu ? { mtu: spec.mtu } : {}),
    addresses: allocations.map((a) => a.address),
    ...(want.bandwidth ? { bandwidth: want.bandwidth } : {}),
    ...(want.dscp !== undefined ? { dscp: want.dscp } : {}),
    ...(want.remote !== undefined ? { remote: canonicalRemote(want.remote) } : {}),
    ...(kind.type === 'wireguard' ? { wireguard: wireguardOf(containerId, want, keyOf) } : {}),
  };
}

/** A wireguard attachment's key and peers; without a key maker (no node to make one on) it cannot be. */
function wireguardOf(containerId: string, want: DesiredAttachment, keyOf: KeyOf | undefined): NonNullable<ResolvedAttachment['wireguard']> {
  if (!keyOf) throw new PodnetError('NOT_AVAILABLE', 'a WireGuard key is made on the node, by its daemon');
  const key = keyOf(want.network.metadata.name, addressOwner(containerId, want.interface));
  return { privateKeyFile: key.file, ...(key.publicKey !== undefined ? { publicKey: key.publicKey } : {}), peers: want.peers ?? [], remoteRanges: [...(want.network.spec.wireguard?.remoteRanges ?? [])] };
}
