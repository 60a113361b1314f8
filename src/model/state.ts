// The state the planner compares: what should be (resolved, with addresses), what is (observed
// with ip -json, tc -json and /proc/sys), and what podnet did before (applied, kept in the state dir).
import type { DelegatedConfig } from './cni-config.ts';
import type { LinkSpec, LinkType } from './kinds/index.ts';
import type { Bandwidth } from '../protocol/validate.ts';

/** The interface settings podnet can tune, each remembered and restored on its own. */
export interface LinkSettings {
  mtu?: number;
  txqueuelen?: number;
  mac?: string;
  up?: boolean;
  promisc?: boolean;
  /** The VRF the interface is in (its master), "" for none: moving it in or out drops routes and IPv6 addresses (planner/tuning.ts). */
  vrf?: string;
}

export const linkSettingNames = ['mtu', 'txqueuelen', 'mac', 'up', 'promisc', 'vrf'] as const;
export type LinkSettingName = (typeof linkSettingNames)[number];

export type Family = 4 | 6;

export interface ObservedLink {
  name: string;
  mtu: number;
  up: boolean;
  txqueuelen?: number;
  mac?: string;
  promisc?: boolean;
  kind?: string;
  master?: string;
  /** A VRF's table. */
  vrfTable?: number;
  /** Its kind's mode, where the kind has one (a macvlan's, an ipvlan's), as ip -d shows it. */
  mode?: string;
  /** Its alias: on a host link podnet made, its owner mark (model/host-links.ts). */
  alias?: string;
  /** "198.18.5.2/24", as ip shows local/prefixlen. */
  addresses: string[];
}

/** A route as the kernel shows it, normalized: `to` always a CIDR, table a number, metric explicit. */
export interface ObservedRoute {
  family: Family;
  to: string;
  table: number;
  metric: number;
  via?: string;
  dev?: string;
  /** The preferred source (ip's prefsrc). */
  src?: string;
  /** SRv6: the mode and the segments a request gave (inline's trailing :: slot left out). */
  seg6Mode?: 'encap' | 'inline';
  segments?: string[];
  /** The kernel made it (proto kernel): an address's connected route, which follows its interface into and out of a VRF. */
  kernel?: boolean;
}

/** A rule as the kernel shows it has exactly what a request can ask of one. */
export type ObservedRule = ResolvedRule;

export interface Observed {
  pod: ReadonlyMap<string, ObservedLink>;
  /** Host links podnet names (prefix pn): the only host links it may change or remove. */
  host: ReadonlyMap<string, ObservedLink>;
  /** Every host link, by name: parents and underlays an admin names must exist; a tunnel made on the host takes its local address from its underlay's. */
  hostLinks: ReadonlyMap<string, ObservedLink>;
  /** The pod's routes and rules, of the families the desired or applied state has. */
  routes: readonly ObservedRoute[];
  rules: readonly ObservedRule[];
  /** The pod's sysctls by /proc/sys path, of the keys desired or applied. */
  sysctls: ReadonlyMap<string, string>;
  /** Root (tbf) and ingress qdiscs on podnet's host links, by link. */
  qdiscs: ReadonlyMap<string, { root?: string; ingress: boolean }>;
  /** The host ports in podnet's port security table; undefined when the table is not there (or was not read: nothing secured, none wanted). */
  securedPorts?: ReadonlySet<string>;
  /** Why the table cannot secure a port now, when a pass tried to put it: its read or put failed (no nft), or it does not read whole. */
  portSecurityUnavailable?: string;
  /** The fingerprint podnet's marking table in the pod carries (model/marking.ts); undefined when it is not there, or was not read (nothing marked, none wanted). */
  marking?: string;
  /** Why the marking table could not be read (no nft on the node): nothing of it is changed then, and the sandbox fails saying so. */
  markingUnavailable?: string;
  /**
   * Of the guard tables of the sandbox's WireGuard ports on the host, the ones there, each with
   * the fingerprint it carries (undefined: not whole as podnet writes it); undefined when not read
   * (none asked, or the read failed).
   */
  guards?: ReadonlyMap<string, string | undefined>;
  /** The pod's WireGuard interfaces podnet set, as read back (their key, port and peers); undefined when not read (none set, or the read failed). */
  wireguard?: ReadonlyMap<string, ObservedWireguard>;
}

/** The link podnet makes for an attachment: each Network kind's own shape (model/kinds/). */
export type { LinkSpec } from './kinds/index.ts';

export type { Bandwidth } from '../protocol/validate.ts';
import type { AppliedConfig, SecuredPort, WireguardPeer } from '../protocol/validate.ts';
import type { ObservedWireguard } from './wireguard-config.ts';

/** A desired attachment with everything decided: names and addresses. */
export interface ResolvedAttachment {
  interface: string;
  network: string;
  link: LinkSpec;
  /** The host end of a veth (bridge kind), pnv and a hash. */
  hostIf: string;
  /** The ifb that shapes the pod's egress (bridge kind with an egress rate), pnb and a hash. */
  ifb: string;
  mtu?: number;
  addresses: string[];
  bandwidth?: Bandwidth;
  /** The DSCP marked on what the pod sends out of it (model/marking.ts). */
  dscp?: number;
  /** A wireguard attachment: its key's file and public key (undefined in a preview, before it is made), and its peers. */
  wireguard?: { privateKeyFile: string; publicKey?: string; peers: WireguardPeer[]; remoteRanges: string[] };
  /** The tunnel remote its attachment chose within its Network's remoteRanges, as the kernel spells it: recorded, what holds its endpoint on the node (model/quotas.ts). */
  remote?: string;
}

/** A VRF device in the pod: its name and table. */
export interface ResolvedVrf {
  name: string;
  table: number;
}

export interface ResolvedTuning {
  interface: string;
  settings: LinkSettings;
}

export interface ResolvedRoute {
  family: Family;
  to: string;
  /** 254 is main: only when the request said "main". */
  table: number;
  metric?: number;
  via?: string;
  dev?: string;
  src?: string;
  seg6?: { mode: 'encap' | 'inline'; segments: string[] };
}

export interface ResolvedRule {
  family: Family;
  priority: number;
  table: number;
  from?: string;
  to?: string;
  fwmark?: number;
}

export interface ResolvedSysctl {
  /** As the request wrote it: net.ipv4.conf.net1.rp_filter. */
  name: string;
  /** Under /proc/sys: net/ipv4/conf/net1/rp_filter (an interface name may hold dots). */
  path: string;
  value: string;
}

/** An attachment of a cni Network: its plugins, run for the pod's interface (src/delegate/). */
export interface ResolvedDelegated {
  interface: string;
  network: string;
  config: DelegatedConfig;
  /** The DSCP marked on what the pod sends out of it, as on a link podnet makes (planner/marking.ts). */
  dscp?: number;
}

/** Everything one sandbox should have. */
export interface Resolved {
  attachments: ResolvedAttachment[];
  /** Not the planner's: the plugins' ADD and DEL run before it plans. */
  delegated: ResolvedDelegated[];
  vrfs: ResolvedVrf[];
  tuning: ResolvedTuning[];
  routes: ResolvedRoute[];
  rules: ResolvedRule[];
  sysctls: ResolvedSysctl[];
}

export interface AppliedAttachment {
  interface: string;
  network: string;
  kind: LinkType;
  /** Bridge kind: the bridge, the host end of the veth, and the ifb when egress is shaped. */
  bridge?: string;
  hostIf?: string;
  ifb?: string;
  /** Bridge kind: the MAC podnet gave the pod end (or found on one an older podnet made). */
  mac?: string;
  /** Bridge kind: what the host end's port admits, as in podnet's nftables sets; absent when its Network's port security is off. */
  portSecurity?: SecuredPort;
  addresses: string[];
  bandwidth?: Bandwidth;
  /** A link made from the host (any kind but bridge): the digest of the spec it was made from (kinds/index.ts linkDigest); another makes it again. */
  made?: string;
  /** A gre or geneve link whose attachment chose its remote: that remote, what holds its endpoint on the node (model/quotas.ts). */
  remote?: string;
  /** A wireguard attachment: its public key, the listen port and peers wg was given, and the ranges its guard on the node admits. */
  wireguard?: { publicKey: string; listenPort: number; peers: WireguardPeer[]; remoteRanges?: string[] };
}

export interface AppliedTuning {
  interface: string;
  /** What the interface had before podnet changed it, for each setting podnet changed. */
  original: LinkSettings;
  /** Routes of the main table by the interface, not podnet's, that the kernel dropped when podnet placed it in a VRF: put back when it leaves. */
  dropped?: ResolvedRoute[];
}

export interface AppliedSysctl {
  path: string;
  value: string;
  /** The value before podnet's first change. */
  original: string;
}

/** What podnet has done to one sandbox; written after each successful pass. */
export interface AppliedState {
  containerId: string;
  /** The pass that wrote it (its journal's id): tells a completed pass from one a crash cut short. */
  pass?: string;
  netns: string;
  attachments: AppliedAttachment[];
  /** The VRF devices podnet made in the pod; absent in a file of an older podnet, or when none. */
  vrfs?: ResolvedVrf[];
  tuning: AppliedTuning[];
  routes: ResolvedRoute[];
  rules: ResolvedRule[];
  sysctls: AppliedSysctl[];
  /** The DSCP podnet marks on what the pod sends out of each interface (model/marking.ts); absent in a file of an older podnet, or when none. */
  marking?: { interface: string; dscp: number }[];
  /** The PodNetworkConfigs the sandbox has whole, each as it last had it (model/desired.ts desiredWhole). */
  configs?: AppliedConfig[];
}

export function emptyApplied(containerId: string, netns: string): AppliedState {
  return { containerId, netns, attachments: [], tuning: [], routes: [], rules: [], sysctls: [] };
}

export function isEmptyApplied(state: AppliedState): boolean {
  return state.attachments.length + (state.vrfs?.length ?? 0) + state.tuning.length + state.routes.length + state.rules.length + state.sysctls.length + (state.marking?.length ?? 0) === 0;
}
