// Runs a plan's steps: consecutive steps of one namespace go to ip in one batch. Before anything
// runs, the steps are journaled in the state dir; when a step fails, the steps already taken in
// this pass are undone in reverse, so a pass applies entirely or not at all. A journal found at
// start belongs to a pass a crash cut short: its undo runs then (runJournalUndo), and the next
// reconcile converges from a clean slate.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PodnetError } from '../errors.ts';
import type { Step } from '../model/state.ts';
import type { IpRunner, Where } from '../netns/ip.ts';
import { ensurePrivateDir, removeFileDurable, writeFileAtomic } from '../registry/atomic-file.ts';

export const journalFolder = 'journal';

function sameWhere(a: Where, b: Where): boolean {
  return a === 'host' ? b === 'host' : b !== 'host' && a.netns === b.netns;
}

/** Runs `lines` (each with its namespace) in order, one batch per run of a namespace. */
async function runInBatches(ip: IpRunner, lines: readonly { where: Where; line: string }[]): Promise<{ done: number; error?: PodnetError }> {
  let done = 0;
  while (done < lines.length) {
    const where = lines[done]!.where;
    let end = done;
    while (end < lines.length && sameWhere(lines[end]!.where, where)) end++;
    const result = await ip.batch(where, lines.slice(done, end).map((l) => l.line));
    done += result.done;
    if (result.error) return { done, error: result.error };
  }
  return { done };
}

/** Undo lines of the first `taken` steps, last first; failures there are only reported. */
async function undo(ip: IpRunner, steps: readonly Step[], taken: number): Promise<PodnetError[]> {
  const errors: PodnetError[] = [];
  const lines = steps.slice(0, taken).flatMap((s) => (s.undo ? [s.undo] : [])).reverse();
  // Undo keeps going past a failure: one stuck step must not keep the others in place.
  for (const l of lines) {
    const r = await ip.batch(l.where, [l.line]);
    if (r.error) errors.push(r.error);
  }
  return errors;
}

export interface ExecuteResult {
  error?: PodnetError;
  undoErrors: PodnetError[];
}

export async function execute(ip: IpRunner, stateDir: string, key: string, steps: readonly Step[]): Promise<ExecuteResult> {
  if (steps.length === 0) return { undoErrors: [] };
  const dir = join(stateDir, journalFolder);
  ensurePrivateDir(dir);
  const journal = join(dir, `${key}.json`);
  writeFileAtomic(journal, JSON.stringify(steps));
  const run = await runInBatches(ip, steps);
  const undoErrors = run.error ? await undo(ip, steps, run.done) : [];
  removeFileDurable(journal);
  return run.error ? { error: run.error, undoErrors } : { undoErrors };
}

/** At start: takes back every pass a crash cut short. The keys it found. */
export async function runJournalUndo(ip: IpRunner, stateDir: string): Promise<string[]> {
  const dir = join(stateDir, journalFolder);
  ensurePrivateDir(dir);
  const keys: string[] = [];
  for (const name of readdirSync(dir).filter((n) => n.endsWith('.json'))) {
    const steps = JSON.parse(readFileSync(join(dir, name), 'utf8')) as Step[];
    // Which steps ran is unknown: undo all; an undo of a step that never ran fails harmlessly.
    await undo(ip, steps, steps.length);
    removeFileDurable(join(dir, name));
    keys.push(name.slice(0, -'.json'.length));
  }
  return keys;
}
