// The host's batches of sandboxes reconciled at once, run in one process (ADR 21). A large pass
// makes a veth and a port entry on the host for every sandbox it attaches, and each is otherwise a
// process of its own: at 500 sandboxes a thousand starts of ip and nft, each of which blocks the
// daemon while it forks (bench/resync). Batches asked for while one runs wait for it and then run
// together, as a database commits a group: nothing waits when nothing else runs, and the busier
// the pass the larger the group. What each caller is told is what its batch alone would have told
// it: the lines of its own that ran, and its own failure.
import { toPodnetError } from '../errors.ts';
import type { BatchResult, StartedBatch } from './batch.ts';

/** At most this many lines go to one process; the rest wait for the next. */
const maxJoinedLines = 1000;

interface Waiting {
  lines: readonly string[];
  resolve(result: BatchResult): void;
}

export interface JoinedBatches {
  /** Runs `lines` in order, stopping at the first that fails, in a process shared with the batches asked for meanwhile. */
  run(lines: readonly string[]): Promise<BatchResult>;
}

/**
 * Joins batches for one tool in one namespace. `start` starts its process. `transaction`: the tool
 * runs a batch whole or not at all (nft), so a joined batch that fails is run again in halves, to
 * tell the callers whose lines failed from the others; otherwise (ip, stopping at its first
 * failed line) the callers before that line are done, the one holding it is told its failure, and
 * the callers after it, none of whose lines ran, go on to the next process. A failure that names
 * no line (the tool killed) is each caller's, with none of its lines counted, as when alone.
 */
export function joinBatches(start: () => StartedBatch, transaction: boolean): JoinedBatches {
  let queue: Waiting[] = [];
  let draining = false;

  // A joined transaction that failed took nothing: its halves run again, and a half that fails is
  // halved in turn, until the callers whose lines fail are alone: one failing caller among n costs
  // about 2 log2 n more processes, not n. When both halves fail, failures are many (a table that
  // could not be made fails every port entry): each caller of the two runs alone, as halving
  // further would cost more.
  const split = async (group: readonly Waiting[], failed: BatchResult): Promise<void> => {
    if (group.length === 1) return group[0]!.resolve(failed);
    const half = Math.ceil(group.length / 2);
    const failing: [Waiting[], BatchResult][] = [];
    for (const part of [group.slice(0, half), group.slice(half)]) {
      const result = await start().run(part.flatMap((w) => w.lines));
      if (!result.error) for (const w of part) w.resolve({ done: w.lines.length });
      else if (result.unplaced) for (const w of part) w.resolve(result);
      else failing.push([part, result]);
    }
    if (failing.length === 1) return split(...failing[0]!);
    for (const [part, result] of failing) {
      if (part.length === 1) part[0]!.resolve(result);
      else for (const w of part) w.resolve(await start().run(w.lines));
    }
  };

  const runOne = async (group: readonly Waiting[]): Promise<Waiting[]> => {
    const result = await start().run(group.flatMap((w) => w.lines));
    if (!result.error) {
      for (const w of group) w.resolve({ done: w.lines.length });
      return [];
    }
    // A failure that names no line: which callers' lines ran is not known; each is told so, none runs again.
    if (result.unplaced) {
      for (const w of group) w.resolve(result);
      return [];
    }
    if (transaction) {
      await split(group, result);
      return [];
    }
    const notRun: Waiting[] = [];
    let first = 0;
    for (const w of group) {
      if (first + w.lines.length <= result.done) w.resolve({ done: w.lines.length });
      else if (first <= result.done) w.resolve({ done: result.done - first, error: result.error });
      else notRun.push(w);
      first += w.lines.length;
    }
    return notRun;
  };

  const drain = async () => {
    draining = true;
    try {
      while (queue.length > 0) {
        const group: Waiting[] = [];
        let lines = 0;
        while (queue.length > 0 && (group.length === 0 || lines + queue[0]!.lines.length <= maxJoinedLines)) {
          const next = queue.shift()!;
          group.push(next);
          lines += next.lines.length;
        }
        let notRun: Waiting[];
        try {
          notRun = await runOne(group);
        } catch (err) {
          // A process that could not start, or ended without an answer (its launcher gone): which
          // lines ran is not known; each caller is told so, as its own batch would have been.
          for (const w of group) w.resolve({ done: 0, unplaced: true, error: toPodnetError(err) });
          notRun = [];
        }
        queue = [...notRun, ...queue];
      }
    } finally {
      draining = false;
    }
  };

  return {
    run(lines) {
      if (lines.length === 0) return Promise.resolve({ done: 0 });
      return new Promise<BatchResult>((resolve) => {
        queue.push({ lines, resolve });
        if (!draining) void drain();
      });
    },
  };
}
