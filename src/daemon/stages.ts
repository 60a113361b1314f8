// A large pass in two stages (ADR 23), wave by wave. The sandboxes take turns, a few at a time, to
// read their netns and plan. A plan that starts with host steps the host's joined batches take
// (an attachment's veth, its port entries: netns/join.ts) then gives its turn up and waits until
// every sandbox of its wave has planned, so that those steps run together, in one ip and one nft
// process, not in one each per few sandboxes; after them, each takes a turn again for the rest
// of its steps. Once a wave's host steps may run, the next wave starts planning in the turns its
// sandboxes leave. A wave's plans wait in memory for its last one: waves bound what a pass holds.
import type { Together } from '../executor/execute.ts';
import type { Timer } from '../retry.ts';

/** Sandboxes whose leading host steps run together. */
export const waveSize = 100;

/**
 * How long a wave waits, from its first sandbox's plan, for the others before its host steps run
 * without the late ones (those then run theirs as they come, joined as any host batch) and the
 * next wave starts: a sandbox whose plugin or netns is slow holds the pass up this long at most.
 */
export const leadWaitMs = 2000;

/**
 * `part` for each of `items`, wave after wave, `turns` at a time. Every part runs to its end, one
 * that rejects included; then the first rejection rejects the whole (as mapLimited does).
 */
export async function inStages<T>(items: readonly T[], turns: number, timer: Timer, part: (item: T, together: Together) => Promise<void>): Promise<void> {
  const pool = turnPool(turns);
  const runs: Promise<void>[] = [];
  for (let first = 0; first < items.length; first += waveSize) {
    const members = items.slice(first, first + waveSize);
    const wave = stagedWave(members.length, pool, timer);
    runs.push(...members.map((item) => wave.run((together) => part(item, together))));
    await wave.open;
  }
  const failed = (await Promise.allSettled(runs)).find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (failed) throw failed.reason;
}

interface TurnPool {
  take(): Promise<void>;
  give(): void;
}

/** `turns` turns, taken first come, first served. */
function turnPool(turns: number): TurnPool {
  let free = turns;
  const waiting: (() => void)[] = [];
  return {
    take() {
      if (free > 0) {
        free--;
        return Promise.resolve();
      }
      return new Promise((resolve) => waiting.push(resolve));
    },
    give() {
      const next = waiting.shift();
      if (next) next();
      else free++;
    },
  };
}

interface StagedWave {
  /** Runs one sandbox's part: it starts in a turn, and `together` is how its leading host steps wait for the wave's others. */
  run(part: (together: Together) => Promise<void>): Promise<void>;
  /** Resolves once the wave's leading host steps may run: all of it has planned, or its first waited leadWaitMs. */
  open: Promise<void>;
}

function stagedWave(sandboxes: number, turns: TurnPool, timer: Timer): StagedWave {
  let planning = sandboxes;
  let opened = false;
  let waitStarted = false;
  let cancelWait = () => {};
  let release!: () => void;
  const open = new Promise<void>((resolve) => (release = resolve));
  const openNow = () => {
    if (opened) return;
    opened = true;
    cancelWait();
    release();
  };
  if (sandboxes === 0) openNow();

  const run: StagedWave['run'] = async (part) => {
    await turns.take();
    let holding = true;
    let stillPlanning = true;
    const planned = () => {
      if (!stillPlanning) return;
      stillPlanning = false;
      if (--planning === 0) openNow();
      // From the wave's first plan on, a sandbox stuck before its own holds the wave up leadWaitMs at most.
      else if (!opened && !waitStarted) {
        waitStarted = true;
        cancelWait = timer(leadWaitMs, openNow);
      }
    };
    const together: Together = {
      planned,
      async lead(steps) {
        // Its turn goes to a sandbox that has not planned yet: each must, before the host steps run.
        holding = false;
        turns.give();
        planned();
        await open;
        try {
          return await steps();
        } finally {
          await turns.take();
          holding = true;
        }
      },
    };
    try {
      await part(together);
    } finally {
      // A sandbox that failed before it planned holds no one up either.
      planned();
      if (holding) turns.give();
    }
  };
  return { run, open };
}
