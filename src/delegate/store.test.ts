import t from 'tap';
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { dir } from 'tmp-promise';
import { DelegatedStore, type DelegatedRecord } from './store.ts';

const record: DelegatedRecord = {
  containerId: 'c1',
  interface: 'net1',
  network: 'plugged',
  config: { name: 'plugged', cniVersion: '1.0.0', plugins: [{ type: 'bridge' }] },
  netns: '/run/netns/x',
  args: 'IgnoreUnknown=1',
  result: { cniVersion: '1.0.0', ips: [{ address: '198.18.5.2/24' }] },
};

t.test('records survive a new store (a restart), per container and interface', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  const told: string[] = [];
  new DelegatedStore(tmp.path, (f) => told.push(f)).put(record);
  const again = new DelegatedStore(tmp.path, (f) => told.push(f));
  t.same(again.of('c1'), [record]);
  t.same(again.of('c2'), []);
  again.remove(record);
  t.same(new DelegatedStore(tmp.path, () => undefined).all(), []);
  t.same(told, []);
});

t.test('a record that cannot be read is set aside in quarantine/ and told, the others still read', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  new DelegatedStore(tmp.path, () => undefined).put(record);
  await writeFile(join(tmp.path, 'delegated', 'c9@net1.json'), '{ not json');
  await writeFile(join(tmp.path, 'delegated', 'c8@net1.json'), '{"containerId": "c8"}');
  const told: { file: string; reason: string }[] = [];
  const store = new DelegatedStore(tmp.path, (file, _as, reason) => told.push({ file, reason }));
  t.same(store.all(), [record]);
  t.same(told.map((c) => c.file.split('/').pop()).sort(), ['c8@net1.json', 'c9@net1.json']);
  t.match(told.find((c) => c.file.endsWith('c8@net1.json'))?.reason, /not a delegated record/);
  t.equal((await readdir(join(tmp.path, 'quarantine'))).length, 2, 'kept for a human');
  t.same((await readdir(join(tmp.path, 'delegated'))).sort(), ['c1@net1.json']);
});
