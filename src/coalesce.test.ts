import t from 'tap';
import { coalesce } from './coalesce.ts';

t.test('calls during a run merge into one more run, which starts after them', async (t) => {
  const started: number[] = [];
  let release: () => void = () => undefined;
  let runs = 0;
  const run = coalesce(async () => {
    started.push(++runs);
    if (runs === 1) await new Promise<void>((r) => (release = r));
  });
  const first = run();
  const second = run();
  const third = run();
  t.same(started, [1], 'the first run is under way; the others wait');
  release();
  await Promise.all([first, second, third]);
  t.same(started, [1, 2], 'three calls, two runs');
  await run();
  t.same(started, [1, 2, 3], 'a call when idle runs at once');
  await run.idle();
});

t.test('idle resolves after the run under way, also one that failed', async (t) => {
  let done = false;
  const run = coalesce(async () => {
    await new Promise((r) => setTimeout(r, 5));
    done = true;
    throw new Error('boom');
  });
  void run().catch(() => undefined);
  await run.idle();
  t.ok(done);
});
