// A table podnet writes whole in one nft transaction (DSCP marking's, a WireGuard port's guard)
// carries a fingerprint of what it holds as the comment of its first rule, a counter (nft 1.0.6
// lists no table's or chain's comment as JSON): a pass compares the one it reads with the one it
// wants, and a table someone deleted, emptied or replaced is written again. Pure.
import { createHash } from 'node:crypto';
import type { ObservedTable } from './port-security.ts';

/** The fingerprint of what a table holds, said as `text`: a word nft reads unquoted, that changes when the text does. */
export function tableFingerprint(text: string): string {
  return `podnet.${createHash('sha256').update(text).digest('hex').slice(0, 16)}`;
}

/**
 * The fingerprint `table` as nft lists it carries, when it is whole as podnet writes it: no
 * flags, exactly the base chains `hooks` names, each hooked as made ("type hook priority
 * policy"), and, when `rules` is given, exactly its chains with that many rules each; undefined
 * otherwise (not there, or changed), which a pass takes as a table to write again.
 */
export function carriedFingerprint(table: ObservedTable | undefined, hooks: Readonly<Record<string, string>>, rules?: Readonly<Record<string, number>>): string | undefined {
  if (!table || table.flagged) return undefined;
  const hooked = table.hooks.size === Object.keys(hooks).length && Object.entries(hooks).every(([chain, hook]) => table.hooks.get(chain) === hook);
  const counted = rules === undefined || (table.rules.size === Object.keys(rules).length && Object.entries(rules).every(([chain, count]) => table.rules.get(chain) === count));
  return hooked && counted ? table.comments[0] : undefined;
}
