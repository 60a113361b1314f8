// What is wrong with a Network whatever node or pod it serves: the checks an attachment would meet
// later, made on the spec alone so that its status can say so before any pod asks. Pure.
import { rangesProblem } from '../ipam/pools.ts';
import type { Network } from '../protocol/validate.ts';
import { documentName, type Problem } from './desired.ts';
import { delegatedConfigOf, isConfigProblem } from './cni-config.ts';

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

/** The problems of a Network's spec, each naming its field. */
export function networkSpecProblems(network: Network, networks: ReadonlyMap<string, Network>): Problem[] {
  const document = documentName(network);
  const problems: Problem[] = [];
  const ranges = network.spec.ipam?.ranges;
  const range = ranges ? rangesProblem(network.metadata.name, ranges) : undefined;
  if (range) problems.push({ document, field: `spec.ipam.ranges[${range.index}]`, reason: range.reason });
  if (network.spec.type === 'cni') {
    const config = delegatedConfigOf(network);
    if (isConfigProblem(config)) problems.push({ document, ...config });
  }
  const shared = sharedBridgeReason(network, networks);
  if (shared) problems.push({ document, field: network.spec.bridge?.name !== undefined ? 'spec.bridge.name' : 'metadata.name', reason: shared });
  return problems;
}
