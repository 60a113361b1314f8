// Port security on the bridge ports podnet makes: a pod's port admits only frames from the pod's
// own MAC with its assigned addresses (IPv4 with ARP, IPv6 with neighbor discovery and the
// link-local address of its MAC) and drops the rest, so a pod holding NET_ADMIN in its own netns
// cannot send as another pod, nor answer for another's address, nor act as a router (docs/adr/0016).
//
// One nftables table of podnet's own, `bridge podnet`, whose rules never change: a port is only
// entries in its sets, keyed by the host end's name. Securing or releasing a port is one nft
// transaction of element adds and deletes, whatever the number of ports; nothing podnet did not
// make (other tables, iptables) is read or touched. Hooked at the bridge's prerouting, before the
// bridge learns a source MAC or the host's stack sees the frame. Pure: the lines nft reads.
import { createHash } from 'node:crypto';
import { formatIp, parseIp } from './cidr.ts';
import type { SecuredPort } from '../protocol/validate.ts';

export type { SecuredPort } from '../protocol/validate.ts';

/** podnet's own table: its family and name, as nft's commands take them. */
export const portSecurityTable = 'bridge podnet';
const table = portSecurityTable;

/**
 * The table, its sets and its rules: made when a pass needs a port secured and the table is not
 * there. Each `add` is a no-op on what exists and each chain is flushed before its rules, so it
 * can be put again over a table someone changed, keeping the ports' entries.
 *  - Only IPv4, ARP and IPv6 frames pass (a VLAN tag, LLDP or STP from a pod is dropped), from
 *    the port's MAC, with a source address of the port (ARP's sender too).
 *  - No DHCP from a pod (podnet assigns the addresses), nor a router's messages (RA, redirect,
 *    router renumbering, multicast queries).
 *  - Neighbor discovery: the target of an advertisement is one of the port's addresses, and a
 *    link-layer option is the port's MAC, first and only (Linux reads the first one behind any
 *    other). Duplicate address detection (from ::, to the solicited-node group, for one of the
 *    port's addresses) and multicast listener reports from :: pass.
 */
export function portSecurityRuleset(): string[] {
  const chains = ['prerouting', 'port', 'a4', 'v4', 'v6', 'ns', 'na'];
  return [
    `add table ${table}`,
    `add set ${table} ports { type ifname; }`,
    `add set ${table} macs { type ifname . ether_addr; }`,
    `add set ${table} addr4 { type ifname . ether_addr . ipv4_addr; }`,
    `add set ${table} addr6 { type ifname . ether_addr . ipv6_addr; }`,
    // nft 1.0 has no name for an ND target or a link-layer option: raw bits of the ICMPv6 header.
    `add set ${table} nd6 { typeof meta iifname . ether saddr . @th,64,128; }`,
    `add set ${table} ndll { typeof meta iifname . @th,208,48; }`,
    `add chain ${table} prerouting { type filter hook prerouting priority -300; policy accept; }`,
    ...chains.slice(1).map((c) => `add chain ${table} ${c}`),
    ...chains.map((c) => `flush chain ${table} ${c}`),
    ...[
      'prerouting iifname @ports goto port',
      'port iifname . ether saddr != @macs drop',
      'port ether type arp goto a4',
      'port ether type ip goto v4',
      'port ether type ip6 goto v6',
      'port drop',
      'a4 arp htype != 1 drop',
      'a4 arp ptype != ip drop',
      'a4 arp hlen != 6 drop',
      'a4 arp plen != 4 drop',
      'a4 iifname . arp saddr ether . arp saddr ip @addr4 accept',
      'a4 arp operation request arp saddr ip 0.0.0.0 iifname . arp saddr ether . arp daddr ip @addr4 accept',
      'a4 drop',
      'v4 udp sport 67 drop',
      'v4 igmp type membership-query drop',
      'v4 iifname . ether saddr . ip saddr @addr4 accept',
      'v4 drop',
      'v6 icmpv6 type { mld-listener-query, nd-router-advert, nd-redirect, router-renumbering } drop',
      'v6 icmpv6 type nd-neighbor-solicit goto ns',
      'v6 icmpv6 type nd-neighbor-advert goto na',
      'v6 udp sport 547 drop',
      'v6 iifname . ether saddr . ip6 saddr @addr6 accept',
      'v6 ip6 saddr :: icmpv6 type { mld-listener-report, mld2-listener-report } accept',
      'v6 drop',
      // ICMPv6 by its number: nft looks a name up in /etc/protocols, which a node's root (podnet's
      // image among them, without netbase) may lack, and the first put of the table then fails.
      'ns ip6 nexthdr != 58 drop',
      'ns ip6 saddr :: ip6 daddr ff02::1:ff00:0/104 ip6 length 24 iifname . ether saddr . @th,64,128 @nd6 accept',
      'ns ip6 saddr :: ip6 daddr ff02::1:ff00:0/104 ip6 length 32 @th,192,16 0x0e01 iifname . ether saddr . @th,64,128 @nd6 accept',
      'ns iifname . ether saddr . ip6 saddr != @addr6 drop',
      'ns ip6 length 24 accept',
      'ns ip6 length 32 @th,192,16 0x0101 iifname . @th,208,48 @ndll accept',
      'ns drop',
      'na ip6 nexthdr != 58 drop',
      'na iifname . ether saddr . ip6 saddr != @addr6 drop',
      'na iifname . ether saddr . @th,64,128 != @nd6 drop',
      'na ip6 length 24 accept',
      'na ip6 length 32 @th,192,16 0x0201 iifname . @th,208,48 @ndll accept',
      'na drop',
    ].map((rule) => `add rule ${table} ${rule}`),
  ];
}

/** podnet's table as nft lists it: the rules in each of its chains, and the names in each of its sets of single names. */
export interface ObservedTable {
  rules: ReadonlyMap<string, number>;
  names: ReadonlyMap<string, ReadonlySet<string>>;
  /** Each base chain's hook, as `type hook priority policy` ("filter prerouting -300 accept"), by chain. */
  hooks: ReadonlyMap<string, string>;
  /**
   * Whether it has flags: podnet sets none. `flags dormant` leaves every chain of it blind, and
   * nft 1.0.6 prints a dormant table's flags from freed memory (a name of the table's, its own
   * release name, or JSON cut short), so any flags at all count.
   */
  flagged: boolean;
  /** Its rules' comments, in order (podnet's marking table holds a fingerprint of its entries in its first rule's: model/marking.ts). */
  comments: readonly string[];
}

/**
 * How many rules the ruleset puts in each chain, and the hook of each (empty for a chain that a
 * rule jumps to), by chain: taken from its lines once, not at every read of a table.
 */
const { rulesPerChain, hookPerChain } = (() => {
  const counts = new Map<string, number>();
  const hooks = new Map<string, string>();
  for (const line of portSecurityRuleset()) {
    const chain = /^add chain \S+ \S+ (\S+)/.exec(line)?.[1];
    if (chain && !counts.has(chain)) {
      counts.set(chain, 0);
      const hook = /\{ type (\S+) hook (\S+) priority (-?\d+); policy (\w+); \}$/.exec(line);
      hooks.set(chain, hook ? hook.slice(1).join(' ') : '');
    }
    const ruled = /^add rule \S+ \S+ (\S+) /.exec(line)?.[1];
    if (ruled) counts.set(ruled, (counts.get(ruled) ?? 0) + 1);
  }
  return { rulesPerChain: counts as ReadonlyMap<string, number>, hookPerChain: hooks as ReadonlyMap<string, string> };
})();

/**
 * The ports `table` secures; undefined when it is not there or not whole: a chain missing,
 * holding other than the ruleset's rules or hooked otherwise, or the table given flags (dormant). A port's release or securing puts the table and its
 * sets where they are gone (an operator's `nft flush ruleset`), not its chains: that table drops
 * nothing. Undefined makes the next pass put the ruleset again, and every secured port its entries.
 */
export function securedPortsOf(table: ObservedTable | undefined): Set<string> | undefined {
  if (!table || table.flagged) return undefined;
  for (const [chain, count] of rulesPerChain) if (table.rules.get(chain) !== count) return undefined;
  // A chain of the name that is not hooked as the ruleset hooks it (someone else's, made first)
  // sees no frame, whatever it holds.
  for (const [chain, hook] of hookPerChain) if ((table.hooks.get(chain) ?? '') !== hook) return undefined;
  return new Set(table.names.get('ports') ?? []);
}

/**
 * The table and its sets, as `add`s that change nothing where they are: put before a port's
 * entries are added or deleted, so that neither fails on a table someone flushed away (nft fails
 * a whole batch on a missing set). The rules are the ruleset's to put.
 */
function tableAndSets(): string[] {
  return portSecurityRuleset().filter((line) => line.startsWith(`add table `) || line.startsWith(`add set `));
}

/** The nft line that secures `port`: its entries, `ports` last (one transaction anyway). */
export function securePortLine(port: string, secured: SecuredPort): string {
  return [...tableAndSets(), ...entriesOf(port, secured).map(([set, element]) => `add element ${table} ${set} { ${element} }`)].join('; ');
}

/**
 * The nft line that releases `port`: its entries added, then deleted, in one transaction. nft 1.0
 * has no delete that passes over a missing element, and one missing one fails the whole batch:
 * adding first makes a release of what is partly or wholly gone succeed.
 */
export function releasePortLine(port: string, secured: SecuredPort): string {
  const entries = entriesOf(port, secured);
  return [
    ...tableAndSets(),
    ...entries.map(([set, element]) => `add element ${table} ${set} { ${element} }`),
    ...entries.map(([set, element]) => `delete element ${table} ${set} { ${element} }`),
  ].join('; ');
}

function entriesOf(port: string, { mac, addresses }: SecuredPort): [string, string][] {
  const ips = addresses.map((a) => parseIp(a)!);
  const v6 = [...ips.filter((ip) => ip.family === 6).map(formatIp), linkLocalOf(mac)];
  return [
    ['macs', `${port} . ${mac}`],
    ['ndll', `${port} . 0x${mac.replaceAll(':', '')}`],
    ...ips.filter((ip) => ip.family === 4).map((ip): [string, string] => ['addr4', `${port} . ${mac} . ${formatIp(ip)}`]),
    ...v6.map((a): [string, string] => ['addr6', `${port} . ${mac} . ${a}`]),
    ...v6.map((a): [string, string] => ['nd6', `${port} . ${mac} . 0x${parseIp(a)!.value.toString(16).padStart(32, '0')}`]),
    ['ports', port],
  ];
}

/** The IPv6 link-local address the kernel derives from `mac` (EUI-64, what addrgenmode eui64 gives). */
export function linkLocalOf(mac: string): string {
  const bytes = mac.split(':').map((b) => parseInt(b, 16));
  bytes[0]! ^= 0x02;
  const iid = [...bytes.slice(0, 3), 0xff, 0xfe, ...bytes.slice(3)];
  const interfaceId = iid.reduce((n, b) => (n << 8n) | BigInt(b), 0n);
  return formatIp({ family: 6, value: (0xfe80n << 112n) | interfaceId });
}

/**
 * The MAC podnet gives a pod end it makes on a bridge: locally administered, from a hash of the
 * sandbox and the interface, so that port security knows it before the link exists. Another
 * pod's is another hash; a MAC a config asks for is checked across the node (model/macs.ts).
 */
export function podMacOf(containerId: string, podInterface: string): string {
  const hash = createHash('sha256').update(`mac/${containerId}/${podInterface}`).digest();
  return ['02', ...[...hash.subarray(0, 5)].map((b) => b.toString(16).padStart(2, '0'))].join(':');
}

/** Whether two secured ports admit the same. */
export function sameSecuredPort(a: SecuredPort | undefined, b: SecuredPort | undefined): boolean {
  return a === b || (a !== undefined && b !== undefined && a.mac === b.mac && a.addresses.length === b.addresses.length && a.addresses.every((x, i) => x === b.addresses[i]));
}
