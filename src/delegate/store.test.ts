import t from 'tap';
import { readdir, readFile, writeFile } from 'node:fs/promises';
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
  t.match(told.find((c) => c.file.endsWith('c8@net1.json'))?.reason, /must have required property 'interface'/);
  t.equal((await readdir(join(tmp.path, 'quarantine'))).length, 2, 'kept for a human');
  t.same((await readdir(join(tmp.path, 'delegated'))).sort(), ['c1@net1.json']);
});

t.test('a record is written with its format; one of an older podnet, without it, is still read', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  new DelegatedStore(tmp.path, () => undefined).put(record);
  const file = join(tmp.path, 'delegated', 'c1@net1.json');
  t.same(JSON.parse(await readFile(file, 'utf8')), { version: 1, ...record });
  await writeFile(file, JSON.stringify(record));
  t.same(new DelegatedStore(tmp.path, () => t.fail('nothing is set aside')).all(), [record]);
});

t.test('a record that fails its schema is set aside, never run: a plugin path, a name with spaces, another name, a bad result, an unknown version', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  const planted: Record<string, unknown> = {
    'c2@net1.json': { ...record, containerId: 'c2', config: { ...record.config, plugins: [{ type: '../../bin/sh' }] } },
    'c3@net1.json': { ...record, containerId: 'c3', netns: '/run/netns/x y' },
    'c4@net1.json': { ...record, containerId: 'c5' },
    'c6@net1.json': { ...record, containerId: 'c6', result: { ips: 'all' } },
    'c7@net1.json': { version: 2, ...record, containerId: 'c7' },
  };
  new DelegatedStore(tmp.path, () => undefined).all();
  for (const [name, body] of Object.entries(planted)) await writeFile(join(tmp.path, 'delegated', name), JSON.stringify(body));
  const told: { file: string; reason: string }[] = [];
  t.same(new DelegatedStore(tmp.path, (file, _as, reason) => told.push({ file, reason })).all(), []);
  const why = new Map(told.map((c) => [c.file.split('/').pop(), c.reason]));
  t.same([...why.keys()].sort(), Object.keys(planted));
  t.match(why.get('c2@net1.json'), /at \/config\/plugins\/0\/type: must be /);
  t.match(why.get('c3@net1.json'), /at \/netns: must be /);
  t.match(why.get('c4@net1.json'), /holds the record of c5@net1.json/);
  t.match(why.get('c6@net1.json'), /at \/result\/\w+/);
  t.match(why.get('c7@net1.json'), /at \/version: must be equal to constant/);
  t.equal((await readdir(join(tmp.path, 'quarantine'))).length, 5);
});
