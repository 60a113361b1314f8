// A bridge Network's host bridge: its name, and whether another Network claims the same one. Pure.
import type { Network } from '../protocol/validate.ts';

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
