import t, { type Test } from 'tap';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { dir } from 'tmp-promise';
import type { AppliedState } from '../model/state.ts';
import { AppliedStore } from './applied.ts';

async function stateDir(t: Test): Promise<string> {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  return tmp.path;
}

const state: AppliedState = {
  containerId: 'c1',
  pass: 'lq0-1a2b',
  netns: '/run/netns/pod-a',
  attachments: [{ interface: 'net1', network: 'blue', kind: 'bridge', bridge: 'pn-blue', hostIf: 'pnv0123456789', addresses: ['198.18.80.2/24'] }],
  tuning: [{ interface: 'eth0', original: { mtu: 1500, promisc: false } }],
  routes: [{ family: 4, to: '198.18.9.0/24', table: 100, via: '198.18.80.1' }],
  rules: [{ family: 6, priority: 100, table: 100, from: '2001:db8::/64' }],
  sysctls: [{ path: 'net/ipv4/conf/net1/rp_filter', value: '0', original: '1' }],
};

t.test('a state and the host objects are written with their format and read back by a new store', async (t) => {
  const path = await stateDir(t);
  const store = new AppliedStore(path);
  store.put(state);
  store.setBridges(['pn-blue'], 'lq0-1a2c');
  t.same(JSON.parse(await readFile(join(path, 'applied', 'c1.json'), 'utf8')), { version: 1, ...state });
  t.same(JSON.parse(await readFile(join(path, 'host-objects.json'), 'utf8')), { version: 1, bridges: ['pn-blue'], pass: 'lq0-1a2c' });
  const again = new AppliedStore(path, () => t.fail('nothing is set aside'));
  t.same(again.get('c1'), state, 'the version is the file\'s, not the state\'s');
  t.same(again.bridges(), ['pn-blue']);
  t.equal(again.hostPass(), 'lq0-1a2c');
});

t.test('files of an older podnet, without a version, lists or kinds, are read as version 1', async (t) => {
  const path = await stateDir(t);
  new AppliedStore(path);
  await writeFile(join(path, 'applied', 'c1.json'), JSON.stringify({ containerId: 'c1', netns: '/run/netns/pod-a', attachments: [{ interface: 'net1', network: 'blue', bridge: 'pn-blue', hostIf: 'pnv0123456789', addresses: [] }] }));
  await writeFile(join(path, 'host-objects.json'), JSON.stringify({ bridges: ['pn-blue'] }));
  const store = new AppliedStore(path, () => t.fail('nothing is set aside'));
  t.same(store.get('c1'), {
    containerId: 'c1',
    netns: '/run/netns/pod-a',
    attachments: [{ interface: 'net1', network: 'blue', kind: 'bridge', bridge: 'pn-blue', hostIf: 'pnv0123456789', addresses: [] }],
    tuning: [],
    routes: [],
    rules: [],
    sysctls: [],
  });
  t.same(store.bridges(), ['pn-blue']);
});

t.test('a file that fails its schema is set aside in quarantine/ and told; the others are read', async (t) => {
  const path = await stateDir(t);
  new AppliedStore(path).put(state);
  const planted: Record<string, unknown> = {
    'c2.json': { ...state, containerId: 'c2', attachments: [{ interface: 'net1 netns exec', network: 'blue', addresses: [] }] },
    'c3.json': { ...state, containerId: 'c3', attachments: [{ interface: 'net1', network: 'blue', hostIf: 'eth0', addresses: [] }] },
    'c4.json': { ...state, containerId: 'c4', sysctls: [{ path: 'kernel/core_pattern', value: '1', original: '0' }] },
    'c5.json': { ...state, containerId: 'c6' },
    'c7.json': { version: 2, ...state, containerId: 'c7' },
    'c8.json': '{"containerId": ',
  };
  for (const [name, body] of Object.entries(planted)) await writeFile(join(path, 'applied', name), typeof body === 'string' ? body : JSON.stringify(body));
  await writeFile(join(path, 'host-objects.json'), JSON.stringify({ version: 1, bridges: ['eth0'] }));
  const told: { file: string; quarantinedAs: string; reason: string }[] = [];
  const store = new AppliedStore(path, (file, quarantinedAs, reason) => told.push({ file, quarantinedAs, reason }));
  t.same(store.all(), [state], 'the valid state is read');
  t.same(store.bridges(), [], 'bridges of a file set aside are not podnet\'s to remove');
  const why = new Map(told.map((q) => [q.file.split('/').pop(), q.reason]));
  t.same([...why.keys()].sort(), [...Object.keys(planted), 'host-objects.json'].sort());
  t.match(why.get('c2.json'), /at \/attachments\/0\/interface: must be /);
  t.match(why.get('c3.json'), /at \/attachments\/0\/hostIf: must be /);
  t.match(why.get('c4.json'), /at \/sysctls\/0\/path: must be /);
  t.match(why.get('c5.json'), /holds the state of c6/);
  t.match(why.get('c7.json'), /at \/version: must be equal to constant/);
  t.match(why.get('c8.json'), /not JSON/);
  t.match(why.get('host-objects.json'), /at \/bridges\/0: must be /);
  t.same((await readdir(join(path, 'quarantine'))).sort(), told.map((q) => q.quarantinedAs).sort(), 'kept for a human');
  t.same(await readdir(join(path, 'applied')), ['c1.json']);
});
