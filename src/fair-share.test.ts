import t from 'tap';
import { fairShare } from './fair-share.ts';

const item = (namespace: string, n: number, costly = true) => ({ namespace, name: `${namespace}-${n}`, costly });
const share = (due: ReturnType<typeof item>[], per = 2) => {
  const { now, later } = fairShare(due, (i) => i.namespace, (i) => i.costly, per);
  return { now: now.map((i) => i.name), later: later.map((i) => i.name) };
};

t.test('namespaces take turns: another tenant starts second, however many the first has', async (t) => {
  t.same(share([item('a', 1), item('a', 2), item('b', 1)], 8), { now: ['a-1', 'b-1', 'a-2'], later: [] });
});

t.test('of the sandboxes that run plugins, a namespace takes at most its share a pass; the rest wait for the next', async (t) => {
  const flood = [1, 2, 3, 4].map((n) => item('a', n));
  t.same(share([...flood, item('b', 1)]), { now: ['a-1', 'b-1', 'a-2'], later: ['a-3', 'a-4'] });
});

t.test('sandboxes without plugins are not capped: a resync of every pod stays one pass', async (t) => {
  const native = [1, 2, 3, 4].map((n) => item('a', n, false));
  t.same(share(native), { now: ['a-1', 'a-2', 'a-3', 'a-4'], later: [] });
  t.same(share([item('a', 1), item('a', 2, false), item('a', 3), item('a', 4)]), { now: ['a-1', 'a-2', 'a-3'], later: ['a-4'] });
});

t.test('nothing due: nothing taken', async (t) => {
  t.same(share([]), { now: [], later: [] });
});
