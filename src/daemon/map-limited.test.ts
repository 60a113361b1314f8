import t from 'tap';
import { mapLimited } from './map-limited.ts';

t.test('at most limit at a time, results in order', async (t) => {
  let running = 0;
  let most = 0;
  const results = await mapLimited([5, 1, 4, 2, 3, 0], 2, async (n) => {
    running++;
    most = Math.max(most, running);
    await new Promise((r) => setTimeout(r, n));
    running--;
    return n * 10;
  });
  t.same(results, [50, 10, 40, 20, 30, 0]);
  t.equal(most, 2);
  t.same(await mapLimited([], 4, async () => 1), []);
});

t.test('a rejection rejects the whole once the others ended', async (t) => {
  const ended: number[] = [];
  await t.rejects(
    mapLimited([1, 2, 3], 3, async (n) => {
      await new Promise((r) => setTimeout(r, n));
      if (n === 1) throw new Error('one failed');
      ended.push(n);
    }),
    { message: 'one failed' },
  );
  t.same(ended.sort(), [2, 3]);
});
