// JSON in one spelling whatever order an object's keys came in: what compares two documents, or
// names a spec by a digest, by what they say. Pure.
import { byCodeUnits } from '../order.ts';

/** JSON with every object's keys sorted: two values that say the same give the same text. */
export function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => byCodeUnits(a, b))) : v));
}
