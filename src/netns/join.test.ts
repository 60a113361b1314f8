import t from 'tap';
import { PodnetError } from '../errors.ts';
import { joinBatches } from './join.ts';
import type { BatchResult, StartedBatch } from './batch.ts';

/**
 * A tool whose processes each record the lines they were given and fail at the first line holding
 * "bad": as ip does (stopping there), or as nft does (a transaction: nothing ran). Each process
 * finishes when the test lets it (`finish`), so that batches can be asked for while one runs.
 */
function fakeTool({ transaction }: { transaction: boolean }) {
  const processes: string[][] = [];
  const waiting: (() => void)[] = [];
  const start = (): StartedBatch => ({
    async run(lines) {
      processes.push([...lines]);
      await new Promise<void>((resolve) => waiting.push(resolve));
      if (lines.some((l) => l.includes('killer'))) return { done: 0, unplaced: true, error: new PodnetError('IO_FAILURE', 'ip killed by SIGKILL before saying at which line') };
      const failed = lines.findIndex((l) => l.includes('bad'));
      if (failed < 0) return { done: lines.length };
      return { done: transaction ? 0 : failed, error: new PodnetError('IO_FAILURE', `line ${lines[failed]} failed`) };
    },
    cancel: () => undefined,
  });
  /** Lets every process started so far finish, until none is left running. */
  const finishAll = async () => {
    for (let i = 0; i < 20; i++) {
      await new Promise((r) => setImmediate(r));
      while (waiting.length > 0) waiting.shift()!();
    }
  };
  return { processes, start, finishAll };
}

const summary = (r: BatchResult) => ({ done: r.done, error: r.error?.message });

t.test('a batch with nothing else under way starts its process at once, alone', async (t) => {
  const tool = fakeTool({ transaction: false });
  const joined = joinBatches(tool.start, false);
  const result = joined.run(['link add a']);
  t.same(tool.processes, [['link add a']], 'its process has its lines before anything is awaited');
  await tool.finishAll();
  t.same(summary(await result), { done: 1, error: undefined });
});

t.test('batches asked for while one runs share the next process, each told its own lines', async (t) => {
  const tool = fakeTool({ transaction: false });
  const joined = joinBatches(tool.start, false);
  const first = joined.run(['link add a']);
  const second = joined.run(['link add b', 'link set b up']);
  const third = joined.run(['link add c']);
  await tool.finishAll();
  t.same(tool.processes, [['link add a'], ['link add b', 'link set b up', 'link add c']], 'two processes for three batches');
  t.same((await Promise.all([first, second, third])).map(summary), [
    { done: 1, error: undefined },
    { done: 2, error: undefined },
    { done: 1, error: undefined },
  ]);
});

t.test('ip: the batch whose line failed is told so, those before it are done, those after it run next', async (t) => {
  const tool = fakeTool({ transaction: false });
  const joined = joinBatches(tool.start, false);
  const busy = joined.run(['link add a']);
  const before = joined.run(['link add b']);
  const failing = joined.run(['link add c', 'link set bad up', 'link set c up']);
  const after = joined.run(['link add d', 'link set d up']);
  await tool.finishAll();
  t.same(tool.processes, [['link add a'], ['link add b', 'link add c', 'link set bad up', 'link set c up', 'link add d', 'link set d up'], ['link add d', 'link set d up']], 'the batch after the failure runs again, in a process of its own');
  t.same((await Promise.all([busy, before, failing, after])).map(summary), [
    { done: 1, error: undefined },
    { done: 1, error: undefined },
    { done: 1, error: 'line link set bad up failed' },
    { done: 2, error: undefined },
  ]);
});

t.test('nft: a joined transaction that failed took nothing; its halves run again until the failing batch is alone, and only its failure is told', async (t) => {
  const tool = fakeTool({ transaction: true });
  const joined = joinBatches(tool.start, true);
  const busy = joined.run(['add element a']);
  const good = joined.run(['add element b']);
  const bad = joined.run(['add element bad']);
  await tool.finishAll();
  t.same(tool.processes, [['add element a'], ['add element b', 'add element bad'], ['add element b'], ['add element bad']]);
  t.same((await Promise.all([busy, good, bad])).map(summary), [
    { done: 1, error: undefined },
    { done: 1, error: undefined },
    { done: 0, error: 'line add element bad failed' },
  ]);
});

t.test('nft: one failing batch among eight costs six more processes, not eight', async (t) => {
  const tool = fakeTool({ transaction: true });
  const joined = joinBatches(tool.start, true);
  const busy = joined.run(['add element busy']);
  const names = ['a', 'b', 'c', 'd', 'e', 'bad', 'g', 'h'];
  const batches = names.map((n) => joined.run([`add element ${n}`]));
  await tool.finishAll();
  const lines = (...ns: string[]) => ns.map((n) => `add element ${n}`);
  t.same(tool.processes, [lines('busy'), lines(...names), lines('a', 'b', 'c', 'd'), lines('e', 'bad', 'g', 'h'), lines('e', 'bad'), lines('g', 'h'), lines('e'), lines('bad')]);
  const told = ['busy', ...names].map((n) => (n === 'bad' ? { done: 0, error: 'line add element bad failed' } : { done: 1, error: undefined }));
  t.same((await Promise.all([busy, ...batches])).map(summary), told, 'each batch is told its own outcome');
});

t.test('a process that cannot start fails each batch that was to run in it, and the next ones still run', async (t) => {
  let fail = true;
  const tool = fakeTool({ transaction: false });
  const joined = joinBatches(() => {
    if (fail) throw new PodnetError('IO_FAILURE', 'spawn EMFILE');
    return tool.start();
  }, false);
  const [a, b] = [joined.run(['link add a']), joined.run(['link add b'])];
  t.same((await Promise.all([a, b])).map(summary), [
    { done: 0, error: 'spawn EMFILE' },
    { done: 0, error: 'spawn EMFILE' },
  ]);
  fail = false;
  const c = joined.run(['link add c']);
  await tool.finishAll();
  t.same(summary(await c), { done: 1, error: undefined });
});

t.test("ip: a failure on a batch's first line leaves the batches before it done and runs the ones after it again", async (t) => {
  const tool = fakeTool({ transaction: false });
  const joined = joinBatches(tool.start, false);
  const busy = joined.run(['link add a']);
  const before = joined.run(['link add b', 'link set b up']);
  const failing = joined.run(['link add bad']);
  const after = joined.run(['link add d']);
  await tool.finishAll();
  t.same((await Promise.all([busy, before, failing, after])).map(summary), [
    { done: 1, error: undefined },
    { done: 2, error: undefined },
    { done: 0, error: 'line link add bad failed' },
    { done: 1, error: undefined },
  ]);
});

t.test('a failure that names no line is every joined batch\'s, none counted and none run again', async (t) => {
  const tool = fakeTool({ transaction: false });
  const joined = joinBatches(tool.start, false);
  const busy = joined.run(['link add a']);
  const one = joined.run(['link add b']);
  const two = joined.run(['link add killer']);
  await tool.finishAll();
  const results = await Promise.all([busy, one, two]);
  t.same(results.map(summary), [
    { done: 1, error: undefined },
    { done: 0, error: 'ip killed by SIGKILL before saying at which line' },
    { done: 0, error: 'ip killed by SIGKILL before saying at which line' },
  ]);
  t.equal(tool.processes.length, 2, 'nothing ran again');
});

t.test('at most 1000 lines go to one process; the rest wait for the next', async (t) => {
  const tool = fakeTool({ transaction: false });
  const joined = joinBatches(tool.start, false);
  const busy = joined.run(['link add a']);
  const big = Array.from({ length: 3 }, (_, i) => joined.run(Array.from({ length: 400 }, (_, j) => `link add b${i}-${j}`)));
  await tool.finishAll();
  await Promise.all([busy, ...big]);
  t.same(tool.processes.map((p) => p.length), [1, 800, 400], 'two batches of 400 fit in one process, the third waits');
});

t.test('an empty batch runs nothing', async (t) => {
  const tool = fakeTool({ transaction: false });
  t.same(await joinBatches(tool.start, false).run([]), { done: 0 });
  t.same(tool.processes, []);
});

t.test('nft: when both halves fail, failures are many: each batch of them runs alone, not halved further', async (t) => {
  const tool = fakeTool({ transaction: true });
  const joined = joinBatches(tool.start, true);
  const busy = joined.run(['add element busy']);
  const names = ['bad1', 'b', 'bad3', 'd'];
  const batches = names.map((n) => joined.run([`add element ${n}`]));
  await tool.finishAll();
  const lines = (...ns: string[]) => ns.map((n) => `add element ${n}`);
  t.same(tool.processes, [lines('busy'), lines(...names), lines('bad1', 'b'), lines('bad3', 'd'), lines('bad1'), lines('b'), lines('bad3'), lines('d')]);
  t.same(
    (await Promise.all(batches)).map(summary),
    names.map((n) => (n.startsWith('bad') ? { done: 0, error: `line add element ${n} failed` } : { done: 1, error: undefined })),
  );
  await busy;
});
