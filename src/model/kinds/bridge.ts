// The bridge kind: a veth per attachment, its host end on a host bridge podnet makes on first use
// (one bridge per Network), with the bridge's gateway addresses, port security and rate limits.
import type { Network } from '../../protocol/validate.ts';
import type { Allocation, LinkKind } from './kind.ts';

export interface BridgeLink {
  kind: 'bridge';
  bridge: string;
  /** Each range's gateway with its prefix length, when spec.bridge.gateway is set. */
  bridgeAddresses: string[];
  portSecurity: boolean;
}

export const bridgeKind: LinkKind<'bridge', BridgeLink> = {
  type: 'bridge',
  attachedBy: 'podnet',
  // Rate limits are shaped on the veth's host end; addresses and MACs as the Network allows.
  refusedAsks: () => ({}),
  specProblems(network, networks) {
    const shared = sharedBridgeReason(network, networks);
    return shared ? [{ field: network.spec.bridge?.name !== undefined ? 'spec.bridge.name' : 'metadata.name', reason: shared }] : [];
  },
  linkSpec(network, allocations) {
    const bridge = network.spec.bridge;
    return { kind: 'bridge', bridge: bridgeNameOf(network), bridgeAddresses: bridge?.gateway ? gatewayAddresses(allocations) : [], portSecurity: bridge?.portSecurity !== false };
  },
  making: (spec) => ({ veth: { name: spec.bridge, addresses: spec.bridgeAddresses, portSecurity: spec.portSecurity } }),
  describe: (spec) => `bridge ${spec.bridge}, port security ${spec.portSecurity ? 'on' : 'off'}`,
};

/** The host bridge of a bridge Network: the one it names, else pn- and its name, cut to an interface name's 15 bytes. */
export function bridgeNameOf(network: Network): string {
  return network.spec.bridge?.name ?? `pn-${network.metadata.name}`.slice(0, 15);
}

/** Why a bridge Network may not have its bridge: another Network names the same one. */
export function sharedBridgeReason(network: Network, networks: ReadonlyMap<string, Network>): string | undefined {
  if (network.spec.type !== 'bridge') return undefined;
  const bridge = bridgeNameOf(network);
  const others = [...networks.values()].filter((n) => n.spec.type === 'bridge' && n.metadata.name !== network.metadata.name && bridgeNameOf(n) === bridge);
  if (others.length === 0) return undefined;
  return `its host bridge ${bridge} is also the bridge of Network ${others.map((n) => n.metadata.name).join(', ')}: a bridge carries one Network; give each its own spec.bridge.name`;
}

/** Each allocation's range gateway, with the allocation's prefix length: what goes on the bridge. */
function gatewayAddresses(allocations: readonly Allocation[]): string[] {
  return allocations.flatMap((a) => (a.gateway ? [`${a.gateway}${a.address.slice(a.address.indexOf('/'))}`] : []));
}
