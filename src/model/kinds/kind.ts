// What a Network kind is to podnet: everything that differs by a Network's spec.type, as data and
// pure functions, so that each phase asks the kind (index.ts) instead of naming it.
import { isIP } from 'node:net';
import { contains, formatIp, parseCidr, parseIp } from '../cidr.ts';
import type { ConfigProblem, DelegatedConfig } from '../cni-config.ts';
import type { Bandwidth, Network, WireguardPeer } from '../../protocol/validate.ts';

/** The schema's Network types (spec.type): the keys of the kinds table. */
export type NetworkType = Network['spec']['type'];

/** An address an allocator handed out: the ip with its range's prefix length ("198.18.5.2/24", "2001:db8::2/64"), and the range's gateway. */
export interface Allocation {
  address: string;
  gateway?: string;
}

/** What is wrong with a field of a Network's spec: the field ("spec.bridge.name") and why. */
export interface SpecProblem {
  field: string;
  reason: string;
}

/** What an attachment asks of its Network beyond a link: its own addresses, rate limits, a MAC, a DSCP, its tunnel's remote. */
export interface AttachmentAsks {
  ips?: readonly string[];
  bandwidth?: Bandwidth;
  mac?: string;
  dscp?: number;
  remote?: string;
  /** A wireguard attachment's peers. */
  peers?: readonly WireguardPeer[];
}

/** A point-to-point tunnel's remote as its Network gives it: its own (`remote`), or one each attachment chooses within `ranges`; `field` names where. */
export interface TunnelRemote {
  remote?: string;
  ranges?: readonly string[];
  field: string;
}

/** What an attachment may not ask on a kind, whatever its Network allows, each with why (the problem's reason). */
export type RefusedAsks = { readonly [asked in keyof AttachmentAsks]?: string };

/** What of an attachment's asks its Network cannot have: the field under the attachment ("ips", "ips[1]"), and why. */
export interface AttachmentRefusal {
  field: keyof AttachmentAsks | `ips[${number}]` | `peers[${number}].${string}`;
  reason: string;
}

/** The link's part of an attachment the planner gives a kind: the pod interface, its MTU and the pod's netns path. */
export interface PodLink {
  interface: string;
  mtu?: number;
  netns: string;
}

/** A host bridge podnet makes on first use (planner/bridges.ts): its name, its gateway addresses, and whether its ports are secured. */
export interface HostBridge {
  name: string;
  addresses: readonly string[];
  portSecurity: boolean;
}

/** How the planner makes a kind's link in the pod, and what it needs on the host first. */
export type LinkMaking =
  /** A veth whose host end goes on a bridge podnet makes; the planner makes the pair, its port security and its rate limits (planner/links.ts). */
  | { readonly veth: HostBridge }
  /** One `ip link add` run on the host that makes the link straight inside the pod; the host interface it needs (a parent, an underlay) must be there. */
  | {
      readonly createInPod: (pod: PodLink) => string;
      readonly hostInterface?: string;
      /**
       * Whether a link made again from a changed spec can be made while `old`, the one it replaces,
       * still is: then a kernel that refuses the new one leaves the pod its old one. Not where the
       * new link may hold what the old one holds (a VNI and port its spec kept, the socket being
       * the host's), or the kernel takes no second link beside it: the old one goes first.
       */
      besideOld(old: { readonly mode?: string }): boolean;
    }
  /**
   * An `ip link add` run on the host under a name of podnet's own (`link.name`), before the planner
   * moves the link into the pod under the pod's name: for a kind whose kernel code sends by the
   * routes of the netns a link is made in, and keeps them when the link moves (ip tunnels). Made
   * straight in the pod, such a link would route in the pod, which has no way to the remote.
   */
  | { readonly createOnHost: (link: HostMadeLink) => string | { problem: string }; readonly hostInterface?: string };

/** The name and MTU a link made on the host before it moves into the pod gets there, and its underlay's addresses (CIDR) as the host has them. */
export interface HostMadeLink {
  name: string;
  mtu?: number;
  underlayAddresses: readonly string[];
}

/** The parts every kind has. */
interface KindBase<T extends NetworkType> {
  readonly type: T;
  /** What an attachment to a Network of this kind may not ask (model/desired.ts tells it at the asking field). */
  refusedAsks(network: Network): RefusedAsks;
  /**
   * What is wrong with a Network of this kind as its admin wrote it, beside the other Networks:
   * told on the Network (model/document-problems.ts), and no attachment to it is made while it is.
   */
  specProblems(network: Network, networks: ReadonlyMap<string, Network>): SpecProblem[];
  /**
   * Why a node can have only one attachment to a Network of this kind, when it can: a tunnel's
   * endpoint is the node's (its VNI and port, or its remote and key), whichever pod it is moved
   * into, and the kernel refuses a second one alike.
   */
  readonly onePerNode?: string;
  /** A point-to-point tunnel's remote, as its Network gives it: what an attachment's remote is checked against (kinds/index.ts). */
  tunnelRemote?(network: Network): TunnelRemote;
}

/** A kind whose link podnet makes, and whose addresses podnet gives (spec.ipam, or brought where spec.staticAddresses allows). */
export interface LinkKind<T extends NetworkType, S extends { kind: T }> extends KindBase<T> {
  readonly attachedBy: 'podnet';
  /** The link an attachment gets (model/resolve.ts); `allocations` are its addresses, with their ranges' gateways; `asked`, the tunnel remote it chose, checked already. */
  linkSpec(network: Network, allocations: readonly Allocation[], asked?: Pick<AttachmentAsks, 'remote'>): S;
  /** How the planner makes the link in the pod (planner/links.ts), and what it needs on the host first. */
  making(spec: S): LinkMaking;
  /** The link as `podnet explain` shows it. */
  describe(spec: S): string;
}

/** A kind whose plugins attach it and choose its addresses (src/delegate/): podnet gives none and takes none an attachment brings. */
export interface DelegatedKind<T extends NetworkType> extends KindBase<T> {
  readonly attachedBy: 'plugins';
  /** The plugin list run for each attachment, or what is wrong with it. */
  delegatedConfig(network: Network): DelegatedConfig | ConfigProblem;
  /** The plugins as `podnet explain` shows them. */
  describe(config: DelegatedConfig): string;
}

/**
 * One Network kind: the entry of its spec.type in the kinds table. The members taking a link spec
 * are methods, whose parameters TypeScript compares both ways: a kind's own spec fits `{ kind: T }`.
 */
export type NetworkKind<T extends NetworkType> = LinkKind<T, { kind: T }> | DelegatedKind<T>;

/** Why an attachment to a kind whose link has no host end cannot have rate limits. */
export function noHostEndToShape(type: NetworkType): string {
  return `rate limits need a bridge Network: podnet shapes on its host end of a veth, and a ${type} link has none`;
}

/** The ` mtu N` of an `ip link add`, when the Network sets one. */
export function mtuArgument(pod: PodLink): string {
  return pod.mtu ? ` mtu ${pod.mtu}` : '';
}

/**
 * What is wrong with a tunnel's remote, or the ranges it is chosen in: the schema's pattern lets
 * through what is no address (198.18.0.999) or no unicast one, which `ip` would refuse at every pass.
 */
export function tunnelRemoteProblems(type: 'gre' | 'geneve' | 'wireguard', remote: string | undefined, ranges: readonly string[] = []): SpecProblem[] {
  const field = `spec.${type}.remote`;
  const wrong = remote === undefined ? undefined : remoteRefusal(type, remote);
  const badRange = ranges.findIndex((r) => parseCidr(r) === undefined);
  return [
    ...(wrong ? [{ field, reason: wrong }] : []),
    ...(badRange >= 0 ? [{ field: `spec.${type}.remoteRanges[${badRange}]`, reason: `${ranges[badRange]} is not an address with a prefix length` }] : []),
  ];
}

/** A gre or geneve Network's tunnel remote: its own, or the ranges each attachment chooses one in. */
export function tunnelRemoteOf(type: 'gre' | 'geneve', spec: { remote?: string; remoteRanges?: string[] } | undefined): TunnelRemote {
  return { ...(spec?.remote ? { remote: spec.remote } : {}), ...(spec?.remoteRanges ? { ranges: spec.remoteRanges } : {}), field: `spec.${type}.remote` };
}

/**
 * Why an endpoint chosen in a Network's ranges cannot be (remoteRefusal), or is outside them:
 * `rangesField` names them (spec.gre.remoteRanges).
 */
export function endpointRefusal(type: string, address: string, network: string, rangesField: string, ranges: readonly string[]): string | undefined {
  return remoteRefusal(type, address) ?? (withinRanges(address, ranges) ? undefined : `${address} is outside Network ${network}'s ${rangesField} (${ranges.join(', ')})`);
}

/** Why a tunnel of `type` cannot go to `remote`: it is no address, no unicast one, the node's own loopback, or IPv4 written as IPv6. */
export function remoteRefusal(type: string, remote: string): string | undefined {
  if (isIP(remote) === 0) return `${remote} is not an IPv4 or IPv6 address`;
  if (isMulticastOrUnspecified(remote)) return `${remote} is not a unicast address: a ${type} tunnel goes to one endpoint`;
  if (/^127\./.test(remote) || /^[0:]*:1$/.test(remote)) return `${remote} is a loopback address: a ${type} tunnel goes to another host`;
  if (/^[0:]*:ffff:/i.test(remote)) return `${remote} is an IPv4 address written as IPv6: write it as IPv4`;
  return undefined;
}

/** A remote in the one spelling the kernel shows (lower case, IPv6 compressed): a link's spec, and its digest, do not change with how it was written. */
export function canonicalRemote(remote: string): string {
  const ip = parseIp(remote);
  return ip ? formatIp(ip) : remote;
}

/** Whether `remote` is inside one of `ranges`. */
export function withinRanges(remote: string, ranges: readonly string[]): boolean {
  const ip = parseIp(remote);
  return ip !== undefined && ranges.some((r) => {
    const cidr = parseCidr(r);
    return cidr !== undefined && cidr.ip.family === ip.family && contains(cidr, ip);
  });
}

function isMulticastOrUnspecified(ip: string): boolean {
  if (isIP(ip) === 4) {
    const first = Number(ip.split('.')[0]);
    return ip === '0.0.0.0' || ip === '255.255.255.255' || (first >= 224 && first <= 239);
  }
  return /^ff/i.test(ip) || /^[0:]+$/.test(ip);
}
