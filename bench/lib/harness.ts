// What every benchmark needs around its measurement: a cleanup stack that runs on success, on
// failure and on Ctrl-C (or SIGTERM/SIGHUP), the statistics printed, and small timing helpers.
import { spawn } from 'node:child_process';
import { constants } from 'node:os';
import { randomBytes } from 'node:crypto';

type Task = { what: string; run: () => unknown };
const tasks: Task[] = [];
let cleaning: Promise<void> | undefined;
let interrupted = false;

/** Registers an undo; they run last registered first, each once, failures reported and passed. */
export function onCleanup(what: string, run: () => unknown): void {
  tasks.push({ what, run });
}

export function cleanup(): Promise<void> {
  cleaning ??= (async () => {
    for (let task = tasks.pop(); task; task = tasks.pop()) {
      try {
        await task.run();
      } catch (err) {
        console.error(`cleanup: ${task.what}: ${(err as Error).message}`);
      }
    }
  })();
  return cleaning;
}

for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.on(signal, () => {
    // A second Ctrl-C while cleaning waits for the same cleanup; nothing is left half undone.
    if (!cleaning) console.error(`\n${signal}: cleaning up`);
    interrupted = true;
    void cleanup().finally(() => process.exit(128 + constants.signals[signal]));
  });
}

/** Runs a benchmark: root checked, cleanup always, exit code from the body (1 on an error). */
export async function runBenchmark(body: () => Promise<number>): Promise<void> {
  if (process.getuid?.() !== 0) {
    console.error('this benchmark needs root (network namespaces, links, the daemon): sudo npm run ...');
    process.exitCode = 2;
    return;
  }
  try {
    process.exitCode = await body();
  } catch (err) {
    // After Ctrl-C the children fail too (same process group): that is no finding.
    if (!interrupted) console.error(`benchmark failed: ${(err as Error).stack ?? String(err)}`);
    process.exitCode = 1;
  } finally {
    await cleanup();
  }
}

/** A positive integer argument, or the default. */
export function countArgument(index: number, fallback: number, what: string): number {
  const raw = process.argv[index];
  const n = raw === undefined ? fallback : Number(raw);
  if (!Number.isInteger(n) || n < 1) throw new Error(`${what} must be a positive integer, not "${raw}"`);
  return n;
}

/** The value after `--name` on the command line; none when the option is not given; throws when it has no value. */
export function optionValue(name: string): string | undefined {
  const at = process.argv.indexOf(name);
  if (at < 0) return undefined;
  const value = process.argv[at + 1];
  if (value === undefined || value.startsWith('--')) throw new Error(`${name} needs a value`);
  return value;
}

export const suffix = (): string => randomBytes(3).toString('hex');

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * Runs each side once per round, A then B, `warmups` rounds first whose timings are dropped;
 * each side's timings of the counted rounds. `round` counts from 0, warm-ups included.
 */
export async function alternating(runs: number, warmups: number, a: (round: number) => Promise<number>, b: (round: number) => Promise<number>): Promise<[number[], number[]]> {
  const [as, bs]: [number[], number[]] = [[], []];
  for (let round = 0; round < warmups + runs; round++) {
    const [x, y] = [await a(round), await b(round)];
    if (round < warmups) continue;
    as.push(x);
    bs.push(y);
  }
  return [as, bs];
}

/** Milliseconds on the monotonic clock. */
export const now = (): number => Number(process.hrtime.bigint()) / 1e6;

export function median(xs: readonly number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

/** Nearest-rank percentile. */
export function percentile(xs: readonly number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))]!;
}

/** Polls `probe` every `everyMs` until it returns a value; throws `what` after `timeoutMs`. */
export async function until<T>(what: string, probe: () => Promise<T | undefined> | T | undefined, timeoutMs: number, everyMs = 10): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** Runs `work` over `items`, at most `width` at a time. */
export async function pool<T>(items: readonly T[], width: number, work: (item: T, index: number) => Promise<void>): Promise<void> {
  let next = 0;
  const lane = async () => {
    while (next < items.length) {
      const i = next++;
      await work(items[i]!, i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, items.length) }, lane));
}

/**
 * A process that writes 512 MiB files with fsync in `dir`, again and again, as kubelet, image pulls
 * and logs keep a node's disk busy (an fsync then waits behind them); killed by the function returned.
 */
export function keepDiskBusy(dir: string): () => Promise<void> {
  const writeAndSync = `const fs = require('node:fs'); const chunk = Buffer.alloc(1 << 20);
for (;;) { const fd = fs.openSync(process.argv[1], 'w'); for (let i = 0; i < 512; i++) fs.writeSync(fd, chunk); fs.fsyncSync(fd); fs.closeSync(fd); }`;
  const writer = spawn(process.execPath, ['-e', writeAndSync, `${dir}/busy-disk`], { stdio: 'ignore' });
  // A writer that could not start ends the benchmark, as one that dies does not: the runs say which disk they had.
  const exited = new Promise<void>((resolve, reject) => {
    writer.once('exit', () => resolve());
    writer.once('error', reject);
  });
  return async () => {
    writer.kill('SIGKILL');
    await exited;
  };
}
