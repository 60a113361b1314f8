// The node's guard of a WireGuard attachment's port (docs/adr/0037): WireGuard moves a peer's
// endpoint to wherever its last authenticated packet came from, and the interface's socket is the
// node's, so a Network's remoteRanges hold only where the node's firewall holds them. One
// nftables table of podnet's on the node per attachment, named as its host links are (pnw and a
// hash), lets the interface's UDP port receive from and send to the ranges alone, IPv4 and IPv6
// (a family without a range: none of it). Written whole in one transaction before the interface is
// made, again when the port or ranges change or the table on the node is not the one written (it
// carries a fingerprint of what it holds: model/table-fingerprint.ts), deleted with the
// attachment. Pure.
import { formatCidr, parseCidr } from './cidr.ts';
import { hostInterfaceName } from './host-links.ts';
import type { ObservedTable } from './port-security.ts';
import { carriedFingerprint, tableFingerprint } from './table-fingerprint.ts';

/** The attachment's guard table as nft names it (family and name). */
export function guardTable(containerId: string, podInterface: string): string {
  return `inet ${hostInterfaceName(containerId, podInterface, 'pnw')}`;
}

/** The nft line that leaves the node without the guard `table` (made if missing, then deleted: one transaction that holds whether it was there or not). */
export function guardDelLine(table: string): string {
  return `table ${table}; delete table ${table}`;
}

/** The ranges in the one spelling nft reads: an IPv6 range written with a dotted quad it refuses. */
function canonicalRanges(ranges: readonly string[]): string[] {
  return ranges.map((r) => {
    const cidr = parseCidr(r);
    return cidr ? formatCidr(cidr) : r;
  });
}

/** The fingerprint of a guard of `port` to `ranges`: a word nft reads unquoted, that changes when they do. */
export function guardFingerprint(port: number, ranges: readonly string[]): string {
  return tableFingerprint(`${port} ${canonicalRanges(ranges).join(',')}`);
}

/**
 * The fingerprint a guard table as nft lists it carries: its first rule's comment, when it is
 * whole as podnet writes it (no flags, its two chains hooked as made, the counter and a rule per
 * family in input, a rule per family in output); undefined otherwise, which a pass takes as a
 * guard to write again.
 */
export function guardFingerprintOf(table: ObservedTable): string | undefined {
  return carriedFingerprint(table, { input: 'filter input 0 accept', output: 'filter output 0 accept' }, { input: 3, output: 2 });
}

/** The nft line that leaves the node with the guard `table` exactly so: `port` talks with `ranges` alone. */
export function guardLine(table: string, port: number, ranges: readonly string[]): string {
  const canonical = canonicalRanges(ranges);
  const byFamily = (v6: boolean) => canonical.filter((r) => r.includes(':') === v6);
  const rules = (way: 'saddr' | 'daddr', portWay: 'dport' | 'sport') =>
    ([[false, 'ip', 'ipv4'], [true, 'ip6', 'ipv6']] as const).map(([v6, family, proto]) => {
      const allowed = byFamily(v6);
      return allowed.length > 0 ? `udp ${portWay} ${port} ${family} ${way} != { ${allowed.join(', ')} } drop` : `meta nfproto ${proto} udp ${portWay} ${port} drop`;
    });
  const chain = (name: 'input' | 'output', lines: string[]) => `chain ${name} { type filter hook ${name} priority filter; policy accept; ${lines.join('; ')}; }`;
  const input = [`counter comment ${guardFingerprint(port, ranges)}`, ...rules('saddr', 'dport')];
  return `${guardDelLine(table)}; table ${table} { ${chain('input', input)}; ${chain('output', rules('daddr', 'sport'))}; }`;
}
