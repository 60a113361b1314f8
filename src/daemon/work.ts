// What a pass decides for one live sandbox before it takes it (the reconciler's workOf), which the
// sandbox room works from. Types only.
import type { DesiredSandbox, Problem } from '../model/desired.ts';
import type { SandboxIdentity } from '../model/identity.ts';
import type { RefusedGeneration } from '../model/refusal.ts';
import type { Resolved } from '../model/state.ts';
import type { AttachmentRecord } from '../protocol/validate.ts';

/** A live sandbox and what it should have, decided at the start of a pass. */
export interface SandboxWork {
  record: AttachmentRecord;
  identity: SandboxIdentity;
  desired: Resolved;
  /** `desired` as JSON: what tells a pass whether it changed since the sandbox was last reconciled. */
  desiredJson: string;
  problems: Problem[];
  wanted: DesiredSandbox;
  known: boolean;
  /** Its records as this pass found them (recordsKey): whether a kept view of its netns still holds. */
  records: string;
  /** What it gets with these generations of its configs refused too (ADR 17): for a part the pass finds it cannot plan or make. */
  rewant?: (refused: readonly RefusedGeneration[]) => Pick<SandboxWork, 'wanted' | 'desired' | 'problems' | 'desiredJson' | 'rewant' | 'refused'>;
  /** The generations refused whole already, when its addresses were given (one the IPAM cannot give). */
  refused?: readonly RefusedGeneration[];
}
