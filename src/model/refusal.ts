// What the node refuses of what the documents ask, across its sandboxes (model/admission.ts): an
// interface's part, or a whole generation of a config (ADR 17). Pure types.
import type { Problem } from '../protocol/validate.ts';

/** One interface's part of a sandbox that the node refuses (a quota, an address or MAC another has), with the problem to tell. */
export interface Refusal {
  interface: string;
  problem: Problem;
}

/** The node's refusals of one kind, by container id. */
export type Refusals = ReadonlyMap<string, readonly Refusal[]>;

/** A generation of a config the node refused as a whole for one sandbox, because it refused a part of it, with why. */
export interface RefusedGeneration {
  config: string;
  /** generationOf its spec. */
  generation: string;
  problem: Problem;
}

/** Adds `refusal` to `sandbox`'s refusals in `refused`. */
export function addRefusal(refused: Map<string, Refusal[]>, sandbox: string, refusal: Refusal): void {
  const mine = refused.get(sandbox);
  if (mine) mine.push(refusal);
  else refused.set(sandbox, [refusal]);
}
