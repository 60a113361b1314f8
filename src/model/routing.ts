// Routes and rules as the kernel keys and spells them: a config's route or rule in canonical form
// (subnets without host bits, addresses in one spelling, main as table 254), or the field that
// cannot be and why. Pure.
import type { Route, Rule } from '../protocol/validate.ts';
import { formatCidr, formatIp, networkAddress, parseCidr, parseIp, sameIp } from './cidr.ts';
import type { Family, ResolvedRoute, ResolvedRule } from './state.ts';

/** One route per family, table, destination and metric, as the kernel keys them. */
export function routeKey(r: { family: Family; table: number; to: string; metric?: number }): string {
  return `route ${r.family} ${r.table} ${r.to} ${r.metric ?? defaultMetric(r.family)}`;
}

/** The metric the kernel gives a route that names none. */
export function defaultMetric(family: Family): number {
  return family === 4 ? 0 : 1024;
}

/** One rule per family and priority: podnet's rules are told apart by priority. */
export function ruleKey(r: { family: Family; priority: number }): string {
  return `rule ${r.family} ${r.priority}`;
}

/** The kernel's main routing table. */
export const mainTable = 254;
/** A field of a route or rule that cannot be, and why. */
export type Refused = { field: string; reason: string };

/** A subnet in canonical form; refused when host bits are set, as the kernel would. */
function canonicalSubnet(text: string, field: string): { cidr: string; family: Family } | Refused {
  const cidr = parseCidr(text);
  if (!cidr) return { field, reason: `${text} is not an address with a prefix length` };
  if (!sameIp(networkAddress(cidr), cidr.ip)) return { field, reason: `${text} has host bits set; the subnet is ${formatIp(networkAddress(cidr))}/${cidr.prefix}` };
  return { cidr: formatCidr(cidr), family: cidr.ip.family };
}

function canonicalIp(text: string, family: Family, field: string): string | Refused {
  const ip = parseIp(text);
  if (!ip) return { field, reason: `${text} is not an IP address` };
  if (ip.family !== family) return { field, reason: `${text} is IPv${ip.family}, the route is IPv${family}` };
  return formatIp(ip);
}

/** Why a pod gets no VRF of the name a route, rule or interface names: the one wording, which a config judged alone (document-problems.ts) leaves out for a VRF another config of its namespace has. */
export function noVrfReason(name: string): string {
  return `the pod gets no VRF named ${name}: none of the configs that select it has it in spec.vrfs, or a conflict took it`;
}

/** The table of a VRF the pod's configs make, by name; undefined when none of that name. */
export type VrfTables = (name: string) => number | undefined;

/** The table a route or rule names: its own, main, or its VRF's (the schema lets it name one of table and vrf). */
function tableOf(r: Route | Rule, vrfTables: VrfTables): number | Refused {
  if (r.vrf === undefined) return r.table === 'main' || r.table === undefined ? mainTable : r.table;
  return vrfTables(r.vrf) ?? { field: 'vrf', reason: noVrfReason(r.vrf) };
}

export function resolveRoute(r: Route, vrfTables: VrfTables): ResolvedRoute | Refused {
  const to = canonicalSubnet(r.to, 'to');
  if ('reason' in to) return to;
  const table = tableOf(r, vrfTables);
  if (typeof table !== 'number') return table;
  const route: ResolvedRoute = { family: to.family, to: to.cidr, table };
  if (r.metric !== undefined) route.metric = r.metric;
  if (r.via !== undefined) {
    const via = canonicalIp(r.via, to.family, 'via');
    if (typeof via !== 'string') return via;
    route.via = via;
  }
  if (r.dev !== undefined) route.dev = r.dev;
  if (r.src !== undefined) {
    const src = canonicalIp(r.src, to.family, 'src');
    if (typeof src !== 'string') return src;
    route.src = src;
  }
  if (r.seg6) {
    if (!r.dev) return { field: 'dev', reason: 'an SRv6 route needs the interface it leaves by (dev)' };
    const segments: string[] = [];
    for (const [i, text] of r.seg6.segments.entries()) {
      const segment = canonicalIp(text, 6, `seg6.segments[${i}]`);
      if (typeof segment !== 'string') return segment;
      segments.push(segment);
    }
    const mode = r.seg6.mode ?? 'encap';
    if (mode === 'inline' && to.family === 4) return { field: 'seg6.mode', reason: 'inline SRv6 applies to IPv6 routes only; use encap' };
    route.seg6 = { mode, segments };
  }
  return route;
}

export function resolveRule(r: Rule, vrfTables: VrfTables): ResolvedRule | Refused {
  const families = new Set<Family>();
  const table = tableOf(r, vrfTables);
  if (typeof table !== 'number') return table;
  const rule: Partial<ResolvedRule> = { priority: r.priority, table };
  for (const side of ['from', 'to'] as const) {
    const text = r[side];
    if (text === undefined) continue;
    const subnet = canonicalSubnet(text, side);
    if ('reason' in subnet) return subnet;
    // A /0 selects everything, which the kernel stores (and shows) as no selector at all.
    if (!subnet.cidr.endsWith('/0')) rule[side] = subnet.cidr;
    families.add(subnet.family);
  }
  if (r.family) families.add(r.family === 'ipv4' ? 4 : 6);
  if (families.size > 1) return { field: 'family', reason: 'from, to and family name different address families' };
  if (r.fwmark !== undefined) rule.fwmark = r.fwmark;
  return { ...rule, family: [...families][0] ?? 4 } as ResolvedRule;
}
