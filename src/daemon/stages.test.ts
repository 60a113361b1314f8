import t from 'tap';
import type { Together } from '../executor/execute.ts';
import type { Timer } from '../retry.ts';
import { inStages, leadWaitMs, waveSize } from './stages.ts';

const tick = () => new Promise((resolve) => setImmediate(resolve));

/** A timer the test fires by hand: what was set, and for how long. */
function manualTimer() {
  const set: { ms: number; run: () => void; cancelled: boolean }[] = [];
  const timer: Timer = (ms, run) => {
    const entry = { ms, run, cancelled: false };
    set.push(entry);
    return () => (entry.cancelled = true);
  };
  return { timer, set };
}

/** A sandbox whose planning the test lets go: it records when it reads, leads on the host and applies. */
function sandbox(name: string, events: string[], { leads = true, fails = false } = {}) {
  let plan!: () => void;
  const planned = new Promise<void>((resolve) => (plan = resolve));
  const part = async (together: Together) => {
    events.push(`${name} reads`);
    await planned;
    if (fails) throw new Error(`${name} failed`);
    if (leads) {
      await together.lead(async () => {
        events.push(`${name} host`);
        return { done: 1 };
      });
    } else together.planned();
    events.push(`${name} applies`);
  };
  return { name, part, plan };
}

type Sandbox = ReturnType<typeof sandbox>;

/** Runs `sandboxes` in stages; what each of their runs came to. */
function staged(sandboxes: Sandbox[], turns: number, timer: Timer = manualTimer().timer) {
  const byName = new Map(sandboxes.map((s) => [s.name, s]));
  return inStages(
    sandboxes.map((s) => s.name),
    turns,
    timer,
    (name, together) => byName.get(name)!.part(together),
  );
}

t.test('no host step runs until every sandbox of the wave has planned; then each applies in its turn', async (t) => {
  const events: string[] = [];
  const [a, b, c] = ['a', 'b', 'c'].map((n) => sandbox(n, events)) as [Sandbox, Sandbox, Sandbox];
  const done = staged([a, b, c], 2);
  await tick();
  t.same(events, ['a reads', 'b reads'], 'two turns: the third waits');
  a.plan();
  await tick();
  t.same(events, ['a reads', 'b reads', 'c reads'], "a planned and gave its turn to c; a's host step waits for b and c");
  b.plan();
  await tick();
  t.notOk(
    events.some((e) => e.endsWith('host')),
    'c has not planned: nothing on the host yet',
  );
  c.plan();
  await done;
  t.same(events.slice(3, 6).sort(), ['a host', 'b host', 'c host'], 'the three host steps run together, before any applies');
  t.same(events.slice(6).sort(), ['a applies', 'b applies', 'c applies']);
});

t.test('a sandbox that leads with no host step, or fails, holds no one up; the failure rejects the pass once all have ended', async (t) => {
  const events: string[] = [];
  const a = sandbox('a', events);
  const b = sandbox('b', events, { leads: false });
  const c = sandbox('c', events, { fails: true });
  const done = staged([a, b, c], 1);
  a.plan();
  await tick();
  b.plan();
  await tick();
  t.same(events, ['a reads', 'b reads', 'b applies', 'c reads'], 'b applies in its own turn, without waiting');
  c.plan();
  await t.rejects(done, /c failed/);
  t.same(events.slice(4), ['a host', 'a applies'], "c's failure let a's host step go, and a ended before the pass was told");
});

t.test('a wave waits at most leadWaitMs for a late sandbox; the late one leads alone', async (t) => {
  const events: string[] = [];
  const { timer, set } = manualTimer();
  const [a, slow] = [sandbox('a', events), sandbox('slow', events)];
  const done = staged([a, slow], 8, timer);
  a.plan();
  await tick();
  t.same(
    set.map((s) => s.ms),
    [leadWaitMs],
    'the first to plan sets the wait',
  );
  t.notOk(events.includes('a host'), 'a waits for slow');
  set[0]!.run();
  await tick();
  t.ok(events.includes('a applies'), 'past the wait, a goes on without slow');
  slow.plan();
  await done;
  t.same(events.slice(-2), ['slow host', 'slow applies']);
});

t.test('all planned in time: the wait is cancelled', async (t) => {
  const events: string[] = [];
  const { timer, set } = manualTimer();
  const [a, b] = [sandbox('a', events), sandbox('b', events)];
  const done = staged([a, b], 8, timer);
  a.plan();
  b.plan();
  await done;
  t.ok(set[0]?.cancelled, 'the timer set by a is cancelled once b planned');
});

t.test('waves: the next starts planning once the one before may run its host steps', async (t) => {
  const events: string[] = [];
  const items = Array.from({ length: waveSize + 2 }, (_, i) => i);
  const opened: number[] = [];
  await inStages(items, 8, manualTimer().timer, async (i, together) => {
    events.push(`${i} starts`);
    await together.lead(async () => {
      if (i === 0) opened.push(events.length);
      return { done: 1 };
    });
    events.push(`${i} ends`);
  });
  t.equal(events.filter((e) => e.endsWith('ends')).length, items.length, 'every sandbox ran');
  const secondWave = events.indexOf(`${waveSize} starts`);
  t.equal(events.slice(0, secondWave).filter((e) => e.endsWith('starts')).length, waveSize, 'the whole first wave started before the second');
  t.ok(secondWave >= opened[0]!, "and the second started once the first's host steps could run");
});

t.test('a pass of no sandboxes, or of one, does not wait', async (t) => {
  const { timer, set } = manualTimer();
  await inStages([], 8, timer, async () => {
    t.fail('nothing to run');
  });
  const events: string[] = [];
  const one = sandbox('a', events);
  one.plan();
  await staged([one], 8, timer);
  t.same(events, ['a reads', 'a host', 'a applies']);
  t.ok(set.every((s) => s.cancelled), 'no wait left behind');
});

t.test('a sandbox stuck before it plans holds the next wave up leadWaitMs at most, even when no one of its wave leads', async (t) => {
  const { timer, set } = manualTimer();
  let release!: () => void;
  const stuck = new Promise<void>((resolve) => (release = resolve));
  const started: number[] = [];
  const items = Array.from({ length: waveSize + 1 }, (_, i) => i);
  const done = inStages(items, 8, timer, async (i, together) => {
    started.push(i);
    if (i === 0) await stuck;
    together.planned();
  });
  for (let i = 0; i < 20; i++) await tick();
  t.notOk(started.includes(waveSize), 'the next wave waits for the stuck one');
  t.same(
    set.map((s) => s.ms),
    [leadWaitMs],
    'the wait began at the first plan',
  );
  set[0]!.run();
  for (let i = 0; i < 5; i++) await tick();
  t.ok(started.includes(waveSize), 'past the wait, the next wave starts');
  release();
  await done;
});
