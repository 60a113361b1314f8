import t from 'tap';
import type { BatchResult } from '../netns/runner.ts';
import { inStages, stagedPass, waveSize } from './stages.ts';

const tick = () => new Promise((resolve) => setImmediate(resolve));

/** A sandbox's part of a pass whose steps the test lets go: it records when it plans, leads and applies. */
function sandbox(name: string, events: string[], { leads = true, fails = false } = {}) {
  let plan!: () => void;
  const planned = new Promise<void>((resolve) => (plan = resolve));
  const part = async (together: (lead: () => Promise<BatchResult>) => Promise<BatchResult>) => {
    events.push(`${name} reads`);
    await planned;
    if (fails) throw new Error(`${name} failed`);
    if (leads) {
      await together(async () => {
        events.push(`${name} host`);
        return { done: 1 };
      });
    }
    events.push(`${name} applies`);
  };
  return { part, plan };
}

t.test('no host step runs until every sandbox has planned; then each applies in its turn', async (t) => {
  const events: string[] = [];
  const staged = stagedPass(3, 2);
  const [a, b, c] = ['a', 'b', 'c'].map((n) => sandbox(n, events));
  const done = Promise.all([a, b, c].map((s) => staged.run(s!.part)));
  await tick();
  t.same(events, ['a reads', 'b reads'], 'two turns: the third waits');
  a!.plan();
  await tick();
  t.same(events, ['a reads', 'b reads', 'c reads'], "a planned and gave its turn to c; a's host step waits for b and c");
  b!.plan();
  await tick();
  t.notOk(events.some((e) => e.endsWith('host')), 'c has not planned: nothing on the host yet');
  c!.plan();
  await done;
  t.same(events.slice(3, 6).sort(), ['a host', 'b host', 'c host'], 'the three host steps run together, before any applies');
  t.same(events.slice(6).sort(), ['a applies', 'b applies', 'c applies']);
});

t.test('a sandbox with no leading host step, or one that fails, holds no one up', async (t) => {
  const events: string[] = [];
  const staged = stagedPass(3, 1);
  const a = sandbox('a', events);
  const b = sandbox('b', events, { leads: false });
  const c = sandbox('c', events, { fails: true });
  const runs = [a, b, c].map((s) => staged.run(s.part));
  a.plan();
  await tick();
  b.plan();
  await tick();
  t.same(events, ['a reads', 'b reads', 'b applies', 'c reads'], 'b applies in its own turn, without waiting');
  c.plan();
  const settled = await Promise.allSettled(runs);
  t.same(
    settled.map((s) => s.status),
    ['fulfilled', 'fulfilled', 'rejected'],
  );
  t.same(events.slice(4), ['a host', 'a applies'], "c's failure let a's host step go");
});

t.test('a pass of no sandboxes, or of one, does not wait', async (t) => {
  await stagedPass(0, 8).run(async () => undefined);
  const events: string[] = [];
  const one = sandbox('a', events);
  one.plan();
  await stagedPass(1, 8).run(one.part);
  t.same(events, ['a reads', 'a host', 'a applies']);
});

t.test('a large pass goes wave by wave: no sandbox of a wave starts before the one before has ended', async (t) => {
  const events: string[] = [];
  const items = Array.from({ length: waveSize + 2 }, (_, i) => i);
  await inStages(items, 8, async (i, together) => {
    events.push(`${i} starts`);
    await together(async () => ({ done: 1 }));
    events.push(`${i} ends`);
  });
  const lastEnd = events.lastIndexOf(`${waveSize - 1} ends`);
  const firstOfNext = events.indexOf(`${waveSize} starts`);
  t.ok(events.filter((e) => e.endsWith('ends')).length === items.length, 'every sandbox ran');
  t.ok(events.slice(0, firstOfNext).filter((e) => e.endsWith('ends')).length === waveSize && firstOfNext > lastEnd, 'the second wave starts once the first has ended');
});
