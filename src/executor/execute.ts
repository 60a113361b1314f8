// Runs a plan's steps: consecutive steps of one namespace go to ip in one batch. Before anything
// runs, the undo actions of the steps are journaled in the state dir (actions, never command
// lines: src/model/undo.ts); when a step fails, the steps already taken in this pass are undone
// in reverse, so a pass applies entirely or not at all. A journal found at start belongs to a pass
// a crash cut short: its undo runs then (runJournalUndo), and the next reconcile converges from a
// clean slate.
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { PodnetError, toPodnetError } from '../errors.ts';
import { stateLayout } from '../protocol/paths.ts';
import { bearsMark } from '../model/host-links.ts';
import { host, sameWhere, type Command, type Step, type Tool, type Where } from '../model/step.ts';
import { renderUndo, type UndoAction } from '../model/undo.ts';
import { parseDocument, type Journal } from '../protocol/validate.ts';
import { joinsOthers, type BatchResult } from '../netns/batch.ts';
import type { NetnsRunner, ReadAfter } from '../netns/runner.ts';
import { ensurePrivateDir, removeFile, writeFileAtomic } from '../registry/atomic-file.ts';
import { kernelState } from '../registry/boot.ts';
import { setAside, type OnQuarantined } from '../registry/quarantine.ts';
import { formatVersion, readStateDocument, stateDocumentText } from '../registry/state-document.ts';

/**
 * Runs `commands` in order, one batch per run of commands of one namespace and tool. Each batch's
 * process starts while the batch before it runs (after that batch has its lines: a start blocks
 * the daemon until the new process has exec'd), so a small pass of a host batch and a pod batch
 * pays for one process start, not two (a large one runs its host batches apart: runStaged).
 */
async function runInBatches(run: NetnsRunner, commands: readonly Command[], readBack?: ReadBack): Promise<BatchResult> {
  const groups: { where: Where; tool: Tool; lines: string[] }[] = [];
  for (const { where, tool, line } of commands) {
    const last = groups.at(-1);
    if (last && sameWhere(last.where, where) && last.tool === tool) last.lines.push(line);
    else groups.push({ where, tool, lines: [line] });
  }
  // The read goes at the end of the last batch when that is ip's in its netns: after it nothing changes there.
  const last = groups.at(-1);
  const readAfter = readBack && last && last.tool === 'ip' && sameWhere(last.where, readBack.where) ? readBack.read : undefined;
  const start = (i: number) => groups[i] && run.start(groups[i].where, groups[i].tool, i === groups.length - 1 ? readAfter : undefined);
  let done = 0;
  let read: unknown[] | undefined;
  let current = start(0);
  for (const [i, group] of groups.entries()) {
    // run() hands the lines over before it first waits.
    const running = current!.run(group.lines);
    try {
      current = start(i + 1);
    } catch (err) {
      // The batch under way finishes first, so that what it took is counted and undone.
      const result = await running;
      return { done: done + result.done, error: result.error ?? toPodnetError(err) };
    }
    const result = await running;
    done += result.done;
    read = result.read;
    if (result.error) {
      current?.cancel();
      return { done, error: result.error };
    }
  }
  return read ? { done, read } : { done };
}

/** How a large pass runs a sandbox's steps (daemon/stages.ts, ADR 23). */
export interface Together {
  /** Runs `steps`, the plan's leading host steps, once every sandbox of its wave has planned, joined with theirs. */
  lead(steps: () => Promise<BatchResult>): Promise<BatchResult>;
  /** Tells the wave that this sandbox has planned and leads with no such step: no one waits for it. */
  planned(): void;
}

/**
 * `runInBatches`, with the plan's leading steps of the host's joined batches (ip, nft) run
 * through `together` first, when given. Those batches then start no process for the ones after
 * them: the rest waits for the sandbox's turn.
 */
async function runStaged(run: NetnsRunner, commands: readonly Command[], readBack?: ReadBack, together?: Together): Promise<BatchResult> {
  const found = together ? commands.findIndex((c) => !joinsOthers(c.where, c.tool)) : 0;
  const lead = found === -1 ? commands.length : found;
  if (lead === 0) {
    together?.planned();
    return runInBatches(run, commands, readBack);
  }
  const first = await together!.lead(() => runInBatches(run, commands.slice(0, lead)));
  if (first.error || lead === commands.length) return first;
  const rest = await runInBatches(run, commands.slice(lead), readBack);
  return { ...rest, done: lead + rest.done };
}

/** A read of `where` for the end of a pass's steps (netns/runner.ts ReadAfter). */
export interface ReadBack {
  where: Where;
  read: ReadAfter;
}

/** The undo actions of `steps`, in step order. */
function undoActions(steps: readonly Step[]): UndoAction[] {
  return steps.flatMap((s) => (s.undo ? [s.undo] : []));
}

/** Runs `actions` last first, each rendered into its command; failures there are only reported. */
async function undo(run: NetnsRunner, actions: readonly UndoAction[]): Promise<PodnetError[]> {
  const errors: PodnetError[] = [];
  // Undo keeps going past a failure: one stuck step must not keep the others in place.
  for (const action of [...actions].reverse()) {
    const { where, tool, line } = renderUndo(action);
    const r = await run.batch(where, tool, [line]);
    // A delete of a link that is gone has done what it was for: one made beside the pod's link
    // and renamed to its name since (planner/links.ts), whose rename's undo deleted it first.
    if (r.error && !(action.action === 'link-del' && r.error.message.includes(`Cannot find device "${action.dev}"`))) errors.push(r.error);
  }
  return errors;
}

export interface ExecuteResult {
  error?: PodnetError;
  /** The step that failed, when it is known which one did (its cause names who asked it), and what the tool said of it, before `error` names the cause. */
  failed?: { step: Step; reason: string };
  undoErrors: PodnetError[];
  /** The answers of `readBack`, when the steps all ran and it could be read in their last batch. */
  read?: unknown[];
}

/**
 * Journals the steps under a new pass id, runs them, and on success calls `commit` with that id
 * (which records what is now applied, and the id) before the journal goes. A crash leaves either
 * a journal whose pass was not committed, undone at the next start, or one whose pass was
 * (its id is in the record), which is only removed: undoing a committed pass would put back what
 * it took away and the record no longer lists. A failure that cannot say which steps ran (a tool
 * killed, the launcher gone) undoes them all, as the start's undo of a cut-short pass does: a
 * host link's delete only while the link bears its mark. `readBack` is read at the end of the last batch
 * when that batch is ip's in its netns (a veth made from the host is there by then). `together`:
 * the steps are a large pass's, whose leading host steps run with the other sandboxes' (ADR 23).
 */
export async function execute(run: NetnsRunner, stateDir: string, key: string, steps: readonly Step[], commit: (pass: string) => void, readBack?: ReadBack, together?: Together): Promise<ExecuteResult> {
  const pass = `${Date.now().toString(36)}-${process.hrtime.bigint().toString(36)}`;
  if (steps.length === 0) {
    commit(pass);
    return { undoErrors: [] };
  }
  const dir = join(stateDir, stateLayout.journal);
  ensurePrivateDir(dir);
  const journal = join(dir, `${key}.json`);
  // Checked as it will be read after a crash: a journal the next start would set aside instead of
  // undoing must not let its pass run.
  const written: Journal = { version: formatVersion, pass, undo: undoActions(steps) };
  try {
    parseDocument('Journal', written, `journal of ${key}`, 'INTERNAL');
  } catch (err) {
    return { error: toPodnetError(err), undoErrors: [] };
  }
  writeFileAtomic(journal, stateDocumentText(written), kernelState);
  // A batch whose process ended without an answer (killed, its launcher gone): which of its steps ran is not known.
  const ran = await runStaged(run, steps, readBack, together).catch((err: unknown): BatchResult => ({ done: 0, unplaced: true, error: toPodnetError(err) }));
  // Steps that ran are known: their host links are podnet's, and a read of the host that fails
  // leaves the deletes to run (one of a link moved into its pod since fails harmlessly).
  const taken = undoActions(steps.slice(0, ran.done));
  const undoErrors = !ran.error ? [] : await undo(run, ran.unplaced ? await bearingTheirMarks(run, undoActions(steps)) : await bearingTheirMarks(run, taken).catch(() => taken));
  if (!ran.error) commit(pass);
  removeFile(journal, kernelState);
  if (ran.error && ran.unplaced) return { error: ran.error, undoErrors };
  const failed = steps[ran.done];
  if (ran.error) return { error: namedByCause(ran.error, failed), ...(failed ? { failed: { step: failed, reason: ran.error.message } } : {}), undoErrors };
  return ran.read ? { undoErrors, read: ran.read } : { undoErrors };
}

/**
 * `actions` without the deletes of host links that do not bear the mark the action carries
 * (model/host-links.ts): the host's links are read once, when there is such an action.
 */
async function bearingTheirMarks(run: NetnsRunner, actions: readonly UndoAction[]): Promise<UndoAction[]> {
  const markedDelete = (a: UndoAction) => (a.action === 'link-del' && a.where === 'host' ? a.mark : undefined);
  if (!actions.some((a) => markedDelete(a) !== undefined)) return [...actions];
  const [links] = (await run.query(host, 'ip', [], ['link show'])) as [{ ifname: string; ifalias?: string }[]];
  const aliases = new Map(links.map((l) => [l.ifname, l.ifalias]));
  return actions.filter((a) => {
    const mark = markedDelete(a);
    if (mark === undefined) return true;
    // Not there: never made, or made on the host and moved into its pod since (a gre link).
    if (a.action !== 'link-del' || !aliases.has(a.dev)) return false;
    const alias = aliases.get(a.dev);
    return bearsMark(alias === undefined ? {} : { alias }, mark);
  });
}

/** A step's failure, named by the document and field that asked for the step, when one did. */
function namedByCause(error: PodnetError, failed: Step | undefined): PodnetError {
  return failed?.cause ? new PodnetError(error.code, `${failed.cause}: ${error.message}`, error.details) : error;
}

/** What the start's undo of cut-short passes is told of the sandboxes, and tells back. */
export interface JournalChecks {
  /** Whether the pass `pass` of `key` completed (its record says so): then nothing is undone. */
  committed(key: string, pass: string): boolean;
  /** The netns podnet recorded for sandbox `key`; undefined for the host's journal or an unknown key. */
  netnsOf(key: string): string | undefined;
  onQuarantined?: OnQuarantined;
}

/**
 * At start: takes back every pass a crash cut short, unless it completed. The keys whose passes it
 * undid. A journal that is not of the current format (an older podnet's held command lines),
 * fails its schema, or acts in a netns other than its sandbox's recorded one (the host's journal:
 * in any netns) is set aside in quarantine/ and told, never run: what it names is not trusted to
 * be podnet's.
 */
export async function runJournalUndo(run: NetnsRunner, stateDir: string, checks: JournalChecks): Promise<string[]> {
  const { committed, netnsOf, onQuarantined = () => undefined } = checks;
  const dir = join(stateDir, stateLayout.journal);
  ensurePrivateDir(dir);
  const keys: string[] = [];
  for (const name of readdirSync(dir).filter((n) => n.endsWith('.json') && !n.startsWith('.'))) {
    const key = name.slice(0, -'.json'.length);
    const path = join(dir, name);
    let journal: { pass: string; undo: UndoAction[] };
    try {
      journal = readStateDocument('Journal', path, `journal ${name}`);
      const own = netnsOf(key);
      const stray = journal.undo.map((a) => a.where).find((w): w is Exclude<Where, 'host'> => w !== 'host' && w.netns !== own);
      if (stray) {
        throw new Error(`journal ${name} acts in netns ${stray.netns}, ${own === undefined ? 'and podnet has recorded no netns for it' : `not in ${own}, the one podnet recorded for it`}`);
      }
    } catch (err) {
      setAside(stateDir, path, (err as Error).message, onQuarantined);
      continue;
    }
    if (!committed(key, journal.pass)) {
      // Which steps ran is unknown: undo all; an undo of a step that never ran fails harmlessly,
      // except a host link's delete, which could hit a link someone made under the name since:
      // it runs only while the link bears podnet's mark.
      await undo(run, await bearingTheirMarks(run, journal.undo));
      keys.push(key);
    }
    removeFile(path, kernelState);
  }
  return keys;
}
