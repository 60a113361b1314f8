// When podnet tries a failed thing again: a sandbox whose pass failed, a gone sandbox's delegated
// DEL, a watch of the API server. One backoff for all of them, and the clock it is measured on,
// injected where tests need to move time.

/** Milliseconds since the epoch, as Date.now gives them. */
export type Clock = () => number;

export const systemClock: Clock = () => Date.now();

const firstMs = 500;
const capMs = 30_000;

/** The wait before try number failures + 1: doubling from half a second, up to half a minute. */
export function retryWaitMs(failures: number): number {
  return Math.min(firstMs * 2 ** (Math.max(failures, 1) - 1), capMs);
}

/** Runs `run` once after `ms`, without keeping the process alive for it; the function returned cancels it. */
export type Timer = (ms: number, run: () => void) => () => void;

export const systemTimer: Timer = (ms, run) => {
  const handle = setTimeout(run, ms);
  handle.unref();
  return () => clearTimeout(handle);
};
