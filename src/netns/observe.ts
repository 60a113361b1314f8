// What is there now, read with ip -json, tc -json and /proc/sys: links with their settings and
// addresses, routes and rules of one address family, the qdiscs on podnet's host links, nft and
// wg for podnet's tables and WireGuard interfaces.
import { PodnetError } from '../errors.ts';
import type { Family, ObservedLink, ObservedRoute, ObservedRule } from '../model/state.ts';
import { host, type Where } from '../model/step.ts';
import { markingFingerprintOf, markingTable } from '../model/marking.ts';
import { portSecurityTable, securedPortsOf } from '../model/port-security.ts';
import { hasPodnetPrefix } from '../model/host-links.ts';
import { guardFingerprintOf } from '../model/wireguard-guard.ts';
import type { ObservedWireguard } from '../model/wireguard-config.ts';
import type { NetnsRunner, ReadAfter } from './runner.ts';

interface IpAddrEntry {
  ifname: string;
  mtu: number;
  txqlen?: number;
  link_type?: string;
  address?: string;
  flags?: string[];
  master?: string;
  ifalias?: string;
  linkinfo?: { info_kind?: string; info_data?: { table?: number; mode?: string } };
  addr_info?: { local: string; prefixlen: number; scope?: string }[];
}

interface IpRouteEntry {
  dst: string;
  table?: string;
  metric?: number;
  gateway?: string;
  dev?: string;
  prefsrc?: string;
  encap?: string;
  mode?: string;
  segs?: string[];
  type?: string;
  protocol?: string;
}

interface IpRuleEntry {
  priority: number;
  /** Present (null) on the kernel's VRF rule, `from all lookup [l3mdev-table]`. */
  l3mdev?: null;
  src?: string;
  srclen?: number;
  dst?: string;
  dstlen?: number;
  fwmark?: string;
  table?: string;
}

interface TcQdiscEntry {
  kind: string;
  dev: string;
  root?: boolean;
  handle?: string;
}

function toLink(e: IpAddrEntry): ObservedLink {
  return {
    name: e.ifname,
    mtu: e.mtu,
    up: e.flags?.includes('UP') ?? false,
    promisc: e.flags?.includes('PROMISC') ?? false,
    ...(e.txqlen !== undefined ? { txqueuelen: e.txqlen } : {}),
    // A tunnel's (gre, ipip, sit) address is its local IP, and a loopback's all zeros: no MAC.
    ...(e.address && e.link_type === 'ether' ? { mac: e.address } : {}),
    ...(e.linkinfo?.info_kind ? { kind: e.linkinfo.info_kind } : {}),
    ...(e.master ? { master: e.master } : {}),
    ...(e.linkinfo?.info_kind === 'vrf' && e.linkinfo.info_data?.table !== undefined ? { vrfTable: e.linkinfo.info_data.table } : {}),
    ...(typeof e.linkinfo?.info_data?.mode === 'string' ? { mode: e.linkinfo.info_data.mode } : {}),
    ...(e.ifalias ? { alias: e.ifalias } : {}),
    // Link-local IPv6 addresses are the kernel's, not a request's.
    addresses: (e.addr_info ?? []).filter((a) => a.scope !== 'link').map((a) => `${a.local}/${a.prefixlen}`),
  };
}

/** How the links are read: by a query of their own, or at the end of a batch that changed them (ReadAfter). */
export const linksRead: ReadAfter = { options: ['-d'], commands: ['addr show'] };

/** The links in the answers of linksRead, by name; throws when ip answered something else than a list of links. */
export function linksOf(answers: readonly unknown[]): Map<string, ObservedLink> {
  const [entries] = answers;
  if (!Array.isArray(entries) || !entries.every((e) => typeof (e as IpAddrEntry | null)?.ifname === 'string')) {
    throw new PodnetError('IO_FAILURE', `ip -json addr show answered something other than a list of links: ${JSON.stringify(entries)?.slice(0, 200)}`);
  }
  return new Map((entries as IpAddrEntry[]).map((e) => [e.ifname, toLink(e)]));
}

/** Every link of `where`, by name. */
export async function observeLinks(run: NetnsRunner, where: Where): Promise<Map<string, ObservedLink>> {
  return linksOf(await run.query(where, 'ip', linksRead.options, linksRead.commands));
}

const tableNumbers: Record<string, number> = { default: 253, main: 254, local: 255 };

function tableOf(name: string | undefined): number {
  return name === undefined ? 254 : (tableNumbers[name] ?? Number(name));
}

function prefixOf(family: Family, address: string, length: number | undefined): string {
  if (address === 'default' || address === 'all') return family === 4 ? '0.0.0.0/0' : '::/0';
  if (address.includes('/')) return address;
  return `${address}/${length ?? (family === 4 ? 32 : 128)}`;
}

/**
 * An SRv6 route as a request gives it. In inline mode the kernel shows one more segment, ::, the
 * slot the packet's own destination takes: it is not the request's.
 */
function seg6Of(mode: string | undefined, segs: string[]): Pick<ObservedRoute, 'seg6Mode' | 'segments'> {
  const inline = mode === 'inline';
  return { seg6Mode: inline ? 'inline' : 'encap', segments: inline && segs.at(-1) === '::' ? segs.slice(0, -1) : segs };
}

/** The pod's unicast routes (every table) and rules of one family, in one ip process. */
export async function observeRouting(run: NetnsRunner, where: Where, family: Family): Promise<{ routes: ObservedRoute[]; rules: ObservedRule[] }> {
  const [routes, rules] = (await run.query(where, 'ip', [`-${family}`], ['route show table all', 'rule show'])) as [IpRouteEntry[], IpRuleEntry[]];
  return {
    routes: routes
      .filter((r) => (r.type ?? 'unicast') === 'unicast')
      .map((r) => ({
        family,
        to: prefixOf(family, r.dst, undefined),
        table: tableOf(r.table),
        metric: r.metric ?? 0,
        ...(r.gateway ? { via: r.gateway } : {}),
        ...(r.dev ? { dev: r.dev } : {}),
        ...(r.prefsrc ? { src: r.prefsrc } : {}),
        ...(r.encap === 'seg6' && r.segs ? seg6Of(r.mode, r.segs) : {}),
        ...(r.protocol === 'kernel' ? { kernel: true } : {}),
      })),
    // The kernel's own rule for VRFs (l3mdev, at 1000 once a netns had a VRF) is no one's request: a
    // request's rule at its priority is not someone else's, and it stays when podnet's VRFs go.
    rules: rules.filter((r) => r.l3mdev === undefined).map((r) => ({
      family,
      priority: r.priority,
      // A rule whose action is not a lookup (prohibit, unreachable, goto) shows no table: the kernel's 0, no request's.
      table: r.table === undefined ? 0 : tableOf(r.table),
      ...(r.src && r.src !== 'all' ? { from: prefixOf(family, r.src, r.srclen) } : {}),
      ...(r.dst && r.dst !== 'all' ? { to: prefixOf(family, r.dst, r.dstlen) } : {}),
      ...(r.fwmark ? { fwmark: Number(r.fwmark) } : {}),
    })),
  };
}

/** The root qdisc kind and whether an ingress qdisc is there, for each host link named pn*. */
export async function observeQdiscs(run: NetnsRunner): Promise<Map<string, { root?: string; ingress: boolean }>> {
  const [entries] = (await run.query('host', 'tc', [], ['qdisc show'])) as [TcQdiscEntry[]];
  const out = new Map<string, { root?: string; ingress: boolean }>();
  for (const q of entries) {
    if (!hasPodnetPrefix(q.dev)) continue;
    const entry = out.get(q.dev) ?? { ingress: false };
    if (q.root) entry.root = q.kind;
    if (q.kind === 'ingress') entry.ingress = true;
    out.set(q.dev, entry);
  }
  return out;
}

/** What a pass reads of the kernel, on the host and in pods' netns. */
export interface NetnsObserver {
  links(where: Where): Promise<Map<string, ObservedLink>>;
  routing(where: Where, family: Family): Promise<{ routes: ObservedRoute[]; rules: ObservedRule[] }>;
  /** The root qdisc kind and whether an ingress qdisc is there, for each host link named pn*. */
  qdiscs(): Promise<Map<string, { root?: string; ingress: boolean }>>;
  /** The values of sysctls by path under /proc/sys; a path that does not exist is left out. */
  sysctls(where: Where, paths: readonly string[]): Promise<Map<string, string>>;
  /** The host ports in podnet's port security table (model/port-security.ts); undefined when the table is not there or not whole. */
  securedPorts(): Promise<Set<string> | undefined>;
  /** The fingerprint of podnet's marking table in a netns (model/marking.ts); undefined when it is not there. */
  marking(where: Where): Promise<string | undefined>;
  /** Of these guard tables of WireGuard ports on the host (model/wireguard-guard.ts), the ones there, with their fingerprints. */
  guards(tables: readonly string[]): Promise<Map<string, string | undefined>>;
  /** Of these WireGuard interfaces in a netns, the ones there and read, with their public key, port and peers. */
  wireguard(where: Where, devs: readonly string[]): Promise<Map<string, ObservedWireguard>>;
}

/** The kernel as `run`'s ip, tc and /proc/sys show it. */
export function netnsObserver(run: NetnsRunner): NetnsObserver {
  return {
    links: (where) => observeLinks(run, where),
    routing: (where, family) => observeRouting(run, where, family),
    qdiscs: () => observeQdiscs(run),
    sysctls: (where, paths) => run.readSysctls(where, paths),
    securedPorts: async () => securedPortsOf(await run.readNftTable(host, portSecurityTable)),
    guards: async (tables) => {
      const read = await Promise.all(tables.map(async (name) => [name, await run.readNftTable(host, name)] as const));
      return new Map(read.flatMap(([name, table]) => (table ? [[name, guardFingerprintOf(table)] as const] : [])));
    },
    marking: async (where) => markingFingerprintOf(await run.readNftTable(where, markingTable)),
    wireguard: async (where, devs) => {
      // One that cannot be read (not a WireGuard interface under that name) is left out alone: the others are compared.
      const read = await Promise.all(devs.map(async (dev) => [dev, await run.readWireguard(where, dev).catch(() => undefined)] as const));
      return new Map(read.flatMap(([dev, seen]) => (seen ? [[dev, seen] as const] : [])));
    },
  };
}
