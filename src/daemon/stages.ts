// A large pass in two stages (ADR 23), wave by wave. The sandboxes of a wave take turns, a few at
// a time, to read their netns and plan; a plan that starts with host steps (the veth of an
// attachment, its port entries) then gives its turn up and waits until every sandbox of the wave
// has planned, so that those host steps run together, in one ip and one nft process
// (netns/join.ts), not in one each per few sandboxes; after them, each takes a turn again for the
// rest of its steps. A wave's plans wait in memory for its last one: waves bound what a pass holds.
import type { Together } from '../executor/execute.ts';

/** Sandboxes whose leading host steps run together. */
export const waveSize = 100;

/** `part` for each of `items`, `turns` at a time, wave after wave of `waveSize`. */
export async function inStages<T>(items: readonly T[], turns: number, part: (item: T, together: Together) => Promise<void>): Promise<void> {
  for (let first = 0; first < items.length; first += waveSize) {
    const wave = items.slice(first, first + waveSize);
    const staged = stagedPass(wave.length, turns);
    await Promise.all(wave.map((item) => staged.run((together) => part(item, together))));
  }
}

export interface StagedPass {
  /** Runs one sandbox's part of the wave: `part` starts in a turn, and `together` is how its leading host steps wait for the others'. */
  run(part: (together: Together) => Promise<void>): Promise<void>;
}

/** A wave of `sandboxes` sandboxes, `turns` of them reading, planning or applying at a time. */
export function stagedPass(sandboxes: number, turns: number): StagedPass {
  let free = turns;
  const waiting: (() => void)[] = [];
  const takeTurn = (): Promise<void> => {
    if (free > 0) {
      free--;
      return Promise.resolve();
    }
    return new Promise((resolve) => waiting.push(resolve));
  };
  const giveTurn = () => {
    const next = waiting.shift();
    if (next) next();
    else free++;
  };
  // Sandboxes of the wave still planning: the leading host steps run once none is.
  let planning = sandboxes;
  let allPlanned!: () => void;
  const planned = new Promise<void>((resolve) => (allPlanned = resolve));
  const donePlanning = () => {
    if (--planning === 0) allPlanned();
  };
  if (sandboxes === 0) allPlanned();

  return {
    async run(part) {
      await takeTurn();
      let holding = true;
      let stillPlanning = true;
      const stopPlanning = () => {
        if (!stillPlanning) return;
        stillPlanning = false;
        donePlanning();
      };
      const together: Together = async (lead) => {
        // Its turn goes to a sandbox that has not planned yet: every one of the wave must, before any host step runs.
        holding = false;
        giveTurn();
        stopPlanning();
        await planned;
        try {
          return await lead();
        } finally {
          await takeTurn();
          holding = true;
        }
      };
      try {
        await part(together);
      } finally {
        // A sandbox with no leading host steps, or that failed before, holds no one up.
        stopPlanning();
        if (holding) giveTurn();
      }
    },
  };
}
