// DSCP marking (an attachment's dscp): one nftables table of podnet's in the pod's netns,
// `inet podnet_marking`, whose postrouting chain sets the DSCP of what leaves each marked
// interface, IPv4 and IPv6. The pod cannot change it without NET_ADMIN, and nothing on the host
// is touched. The table is always written whole, in one nft transaction, and carries a
// fingerprint of its entries (model/table-fingerprint.ts): a table someone deleted or replaced is
// written again. Pure.
import type { ObservedTable } from './port-security.ts';
import { carriedFingerprint, tableFingerprint } from './table-fingerprint.ts';
import type { AppliedState } from './state.ts';
import { byCodeUnits } from '../order.ts';

export type MarkingEntry = NonNullable<AppliedState['marking']>[number];

/** podnet's table in a pod, as nft names it (family and name). */
export const markingTable = 'inet podnet_marking';

/** The entries in a fixed order (by interface): one table whatever the order they were asked in. */
export function sortedMarking(entries: readonly MarkingEntry[]): MarkingEntry[] {
  return [...entries].sort((a, b) => byCodeUnits(a.interface, b.interface));
}

/**
 * The fingerprint a table as nft lists it carries: its first rule's comment, when it is whole as
 * podnet writes it (no flags, its postrouting chain hooked as made); undefined otherwise, which a
 * pass takes as a table to write again.
 */
export function markingFingerprintOf(table: ObservedTable | undefined): string | undefined {
  return carriedFingerprint(table, { postrouting: 'filter postrouting -150 accept' });
}

/** The fingerprint of these entries: a word nft reads unquoted, that changes when they do. */
export function markingFingerprint(entries: readonly MarkingEntry[]): string {
  return tableFingerprint(sortedMarking(entries).map((e) => `${e.interface}=${e.dscp}`).join(','));
}

/**
 * The nft line that leaves the pod with exactly these entries, one transaction of three commands:
 * the table made if missing, deleted, and made again whole (no entries: only deleted). Interface
 * names are quoted: unquoted, nft reads 0x1 as a number and counter as a keyword. They are the
 * schema's (letters, digits, _ . -), and a quoted word of those is the one quote the runner lets
 * through (netns/runner.ts).
 */
export function markingLine(entries: readonly MarkingEntry[]): string {
  const reset = `table ${markingTable}; delete table ${markingTable}`;
  if (entries.length === 0) return reset;
  const rules = sortedMarking(entries).flatMap((e) => [`oifname "${e.interface}" ip dscp set ${e.dscp}`, `oifname "${e.interface}" ip6 dscp set ${e.dscp}`]);
  return `${reset}; table ${markingTable} { chain postrouting { type filter hook postrouting priority mangle; policy accept; counter comment ${markingFingerprint(entries)}; ${rules.join('; ')}; }; }`;
}
