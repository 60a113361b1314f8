import t, { type Test } from 'tap';
import { readdir, readFile, stat, utimes, writeFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { dir } from 'tmp-promise';
import { silentLogger } from '../log.ts';
import type { AttachmentKey, AttachmentRecord } from '../protocol/validate.ts';
import { keyOf } from './fold.ts';
import { Registry } from './registry.ts';
import { addOfEarlierBoot, spoolFileName, writeSpoolEntry } from './spool.ts';

/** A fresh state directory, removed when the test ends however it ends. */
async function stateDir(t: Test): Promise<string> {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(tmp.cleanup);
  return tmp.path;
}

function record(containerId: string, network = 'kindnet', netns = `/var/run/netns/cni-${containerId}`): AttachmentRecord {
  return {
    containerId,
    ifname: 'eth0',
    network,
    netns,
    cniVersion: '1.0.0',
    pod: { namespace: 'shop', name: `pod-${containerId}` },
    prevResult: { cniVersion: '1.0.0', ips: [{ address: '10.244.0.5/24' }] },
    createdAt: '2026-03-01T12:00:00.000Z',
  };
}

const keyFor = (containerId: string): AttachmentKey => ({ containerId, ifname: 'eth0' });
const listed = (registry: Registry) => registry.list().map(keyOf).sort();
const ls = async (path: string) => (await readdir(path)).sort();
const reopen = (path: string) => Registry.open(path, silentLogger);

const a = record('aaa');
const b = record('bbb');
const c = record('ccc', 'vlan100');

t.test('open makes the state layout, private', async (t) => {
  const path = await stateDir(t);
  const registry = await reopen(path);
  t.equal(registry.size, 0);
  t.strictSame(await ls(path), ['applied', 'claims', 'delegated', 'ipam', 'journal', 'quarantine', 'quiet-pods', 'records', 'spool', 'wireguard']);
  for (const sub of ['applied', 'claims', 'delegated', 'ipam', 'journal', 'quarantine', 'quiet-pods', 'records', 'spool', 'wireguard']) t.equal((await stat(join(path, sub))).mode & 0o777, 0o700, `${sub} is 0700`);
});

t.test('add, del and gc are on disk when apply resolves', async (t) => {
  const path = await stateDir(t);
  const registry = await reopen(path);
  for (const r of [a, b, c]) t.strictSame(await registry.apply({ op: 'add', record: r }), { put: [r], removed: [] });
  t.strictSame((await reopen(path)).list(), [a, b, c], 'reopened: the same records');

  const recordFile = join(path, 'records', 'aaa@eth0.json');
  t.strictSame(JSON.parse(await readFile(recordFile, 'utf8')), { version: 1, ...a }, 'one file per record, named container@ifname, with its format');
  t.equal((await stat(recordFile)).mode & 0o777, 0o600, 'record files are 0600');

  t.strictSame(await registry.apply({ op: 'del', key: keyFor('aaa') }), { put: [], removed: [keyFor('aaa')] });
  t.strictSame(await registry.apply({ op: 'del', key: keyFor('aaa') }), { put: [], removed: [] }, 'a second DEL removes nothing');
  t.strictSame(listed(await reopen(path)), ['bbb@eth0', 'ccc@eth0'], 'reopened after DEL');

  const gc = await registry.apply({ op: 'gc', gc: { network: 'kindnet', validAttachments: [] } });
  t.strictSame(gc.removed, [keyFor('bbb')], 'GC of kindnet leaves vlan100 alone');
  t.strictSame(listed(await reopen(path)), ['ccc@eth0'], 'reopened after GC');
  t.strictSame(await ls(join(path, 'records')), ['ccc@eth0.json'], 'removed records leave no file');
});

t.test('corrupt record files are quarantined, the others load', async (t) => {
  const path = await stateDir(t);
  const records = join(path, 'records');
  await (await reopen(path)).apply({ op: 'add', record: b });
  const corrupt: Record<string, string> = {
    'notjson@eth0.json': 'not json{',
    'schema@eth0.json': JSON.stringify({ ...record('schema'), ifname: '..' }),
    'other@eth0.json': JSON.stringify(a),
  };
  for (const [name, text] of Object.entries(corrupt)) await writeFile(join(records, name), text);

  const registry = await reopen(path);
  t.strictSame(registry.list(), [b], 'the good record loads');
  t.strictSame(await ls(records), ['bbb@eth0.json'], 'the corrupt files left records/');

  const why = new Map(registry.quarantined().map((q) => [q.file.replace(/^\d+-\d+-/, ''), q]));
  t.strictSame([...why.keys()].sort(), Object.keys(corrupt).sort(), 'each corrupt file is listed');
  t.match(why.get('notjson@eth0.json'), { file: /^\d+-\d+-notjson@eth0\.json$/, reason: /JSON/ });
  t.match(why.get('schema@eth0.json'), { reason: /at \/ifname: must be / });
  t.match(why.get('other@eth0.json'), { reason: /holds the record of aaa@eth0, not of its own name/ });

  const kept = await ls(join(path, 'quarantine'));
  t.strictSame(kept, registry.quarantined().map((q) => q.file).sort(), 'quarantine/ holds the files listed');
  for (const q of registry.quarantined()) {
    const original = corrupt[q.file.replace(/^\d+-\d+-/, '')];
    t.equal(await readFile(join(path, 'quarantine', q.file), 'utf8'), original, `${q.file} is kept as it was`);
  }
  t.strictSame((await reopen(path)).quarantined(), [], 'the next start finds nothing new to set aside');
});

t.test('spooled changes are replayed in order at open, and their files removed', async (t) => {
  const path = await stateDir(t);
  writeSpoolEntry(path, { op: 'add', record: a });
  writeSpoolEntry(path, { op: 'del', key: keyFor('aaa') });
  writeSpoolEntry(path, { op: 'del', key: keyFor('bbb') });
  writeSpoolEntry(path, { op: 'add', record: b });
  t.equal((await ls(join(path, 'spool'))).length, 4);

  const registry = await reopen(path);
  t.equal(registry.get(keyFor('aaa')), undefined, 'add then del: absent');
  t.strictSame(registry.get(keyFor('bbb')), b, 'del then add: present');
  t.strictSame(await ls(join(path, 'spool')), [], 'spool files removed');
  t.equal(await registry.spoolPending(), 0);
  t.strictSame(listed(await reopen(path)), ['bbb@eth0'], 'the replay is on disk');
});

t.test('a spooled GC is replayed against the records on disk', async (t) => {
  const path = await stateDir(t);
  const registry = await reopen(path);
  for (const r of [a, b, c]) await registry.apply({ op: 'add', record: r });
  writeSpoolEntry(path, { op: 'gc', gc: { network: 'kindnet', validAttachments: [keyFor('bbb')] } });
  t.strictSame(listed(await reopen(path)), ['bbb@eth0', 'ccc@eth0']);
});

t.test('corrupt spool files are quarantined, the others replayed', async (t) => {
  const path = await stateDir(t);
  const spool = join(path, 'spool');
  // Spool files as a plugin names them, then spoiled: one cut short, one failing the schema.
  const garbage = basename(writeSpoolEntry(path, { op: 'del', key: keyFor('bbb') }));
  writeSpoolEntry(path, { op: 'add', record: a });
  const invalid = basename(writeSpoolEntry(path, { op: 'del', key: keyFor('bbb') }));
  await writeFile(join(spool, garbage), '{"op":"add",');
  await writeFile(join(spool, invalid), JSON.stringify({ op: 'add', record: { ...b, netns: 'relative/path' } }));

  const registry = await reopen(path);
  t.strictSame(registry.list(), [a], 'the good entry is replayed');
  t.strictSame(await ls(spool), [], 'the spool is empty');
  t.strictSame(registry.quarantined().map((q) => q.file.replace(/^\d+-\d+-/, '')).sort(), [garbage, invalid].sort());
  t.match(registry.quarantined().find((q) => q.file.endsWith(invalid)), { reason: /at \/record\/netns: must be / });
  t.equal((await ls(join(path, 'quarantine'))).length, 2);
});

t.test('a spool entry nested too deep or too big is set aside at once, naming why; it blocks neither the others nor the next start', async (t) => {
  const path = await stateDir(t);
  const spool = join(path, 'spool');
  const deep = basename(writeSpoolEntry(path, { op: 'del', key: keyFor('bbb') }));
  writeSpoolEntry(path, { op: 'add', record: a });
  const big = basename(writeSpoolEntry(path, { op: 'del', key: keyFor('bbb') }));
  await writeFile(join(spool, deep), `{"op":"add","record":${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}}`);
  await writeFile(join(spool, big), JSON.stringify({ op: 'add', record: { ...b, pad: 'x'.repeat(5 * 1024 * 1024) } }));

  const registry = await reopen(path);
  t.strictSame(registry.list(), [a], 'the good entry behind them is replayed');
  const why = new Map(registry.quarantined().map((q) => [q.file.replace(/^\d+-\d+-/, ''), q.reason]));
  t.match(why.get(deep), /nests arrays and objects more than 64 deep/);
  t.match(why.get(big), /is 524\d{4} bytes, more than the 4194304 podnet reads/);
  t.strictSame(await ls(spool), [], 'the spool is empty');
  t.strictSame((await reopen(path)).list(), [a], 'and the next start is clean');
});

t.test('spool entries and records carry their format; those of an older podnet, without one, are read as version 1', async (t) => {
  const path = await stateDir(t);
  const spooled = writeSpoolEntry(path, { op: 'add', record: a });
  t.strictSame(JSON.parse(await readFile(spooled, 'utf8')), { version: 1, op: 'add', record: a }, 'a spool entry is written with its version');
  // What an older podnet wrote: a record file and a spool entry, neither with a version.
  await writeFile(writeSpoolEntry(path, { op: 'add', record: b }), JSON.stringify({ op: 'add', record: b }));
  await (await reopen(path)).apply({ op: 'add', record: c });
  await writeFile(join(path, 'records', 'ccc@eth0.json'), JSON.stringify(c));
  const registry = await reopen(path);
  t.strictSame(registry.list(), [a, b, c], 'read, and the records in memory hold no format');
  t.strictSame(registry.quarantined(), []);
});

t.test('a spool entry or a record of an unknown format is set aside', async (t) => {
  const path = await stateDir(t);
  await reopen(path);
  await writeFile(join(path, 'records', 'aaa@eth0.json'), JSON.stringify({ version: 2, ...a }));
  await writeFile(writeSpoolEntry(path, { op: 'add', record: b }), JSON.stringify({ version: 2, op: 'add', record: b }));
  const registry = await reopen(path);
  t.strictSame(registry.list(), []);
  t.equal(registry.quarantined().length, 2);
  t.ok(registry.quarantined().every((q) => /version: must be equal to constant/.test(q.reason)), 'each for its version');
});

t.test('temp files of cut-short writes are swept at open', async (t) => {
  const path = await stateDir(t);
  await reopen(path);
  const recordTemp = join(path, 'records', '.tmp-aaa@eth0.json.123.abcd');
  const oldSpoolTemp = join(path, 'spool', '.tmp-000000000000001-x.json.9.ab');
  const freshSpoolTemp = join(path, 'spool', '.tmp-000000000000002-x.json.9.cd');
  for (const file of [recordTemp, oldSpoolTemp, freshSpoolTemp]) await writeFile(file, '{"op":');
  const hourAgo = new Date(Date.now() - 60 * 60_000);
  await utimes(oldSpoolTemp, hourAgo, hourAgo);

  const registry = await reopen(path);
  t.strictSame(await ls(join(path, 'records')), [], 'a record temp file is removed');
  t.strictSame(await ls(join(path, 'spool')), ['.tmp-000000000000002-x.json.9.cd'], 'only a spool temp a plugin may still be writing stays');
  t.strictSame(registry.quarantined(), [], 'temp files are not quarantined');
  t.equal(await registry.spoolPending(), 0, 'a spool temp is not pending');
});

t.test('apply replays what was spooled before its own change', async (t) => {
  t.test('ADD in the spool, then DEL over the socket: absent', async (t) => {
    const path = await stateDir(t);
    const registry = await reopen(path);
    writeSpoolEntry(path, { op: 'add', record: a });
    t.strictSame(await registry.apply({ op: 'del', key: keyFor('aaa') }), { put: [], removed: [keyFor('aaa')] });
    t.equal(registry.get(keyFor('aaa')), undefined);
    t.strictSame(await ls(join(path, 'spool')), []);
    t.strictSame(listed(await reopen(path)), []);
  });

  t.test('DEL spooled, then a new ADD of the same key: present', async (t) => {
    const path = await stateDir(t);
    const registry = await reopen(path);
    await registry.apply({ op: 'add', record: a });
    writeSpoolEntry(path, { op: 'del', key: keyFor('aaa') });
    const again = record('aaa', 'kindnet', '/var/run/netns/cni-new');
    await registry.apply({ op: 'add', record: again });
    t.strictSame(registry.get(keyFor('aaa')), again);
    t.strictSame((await reopen(path)).get(keyFor('aaa')), again);
  });
});

t.test('changes applied at once run in call order', async (t) => {
  const path = await stateDir(t);
  const registry = await reopen(path);
  await Promise.all([
    registry.apply({ op: 'add', record: a }),
    registry.apply({ op: 'del', key: keyFor('aaa') }),
    registry.apply({ op: 'add', record: b }),
  ]);
  t.strictSame(listed(registry), ['bbb@eth0']);
  t.strictSame(listed(await reopen(path)), ['bbb@eth0']);
});

t.test('the node\'s own network namespace is never recorded: refused over the socket, set aside from the spool and from records', async (t) => {
  const path = await stateDir(t);
  const node = record('host', 'kindnet', '/proc/self/ns/net');
  const registry = await reopen(path);
  await t.rejects(registry.apply({ op: 'add', record: node }), { code: 'INVALID_REQUEST', message: /is the node's own network namespace, not a pod's/ });
  writeSpoolEntry(path, { op: 'add', record: { ...node, containerId: 'spooled' } });
  await writeFile(join(path, 'records', 'planted@eth0.json'), JSON.stringify({ ...node, containerId: 'planted' }));
  await registry.drainSpool();
  const again = await reopen(path);
  t.strictSame([...listed(registry), ...listed(again)], [], 'nothing names it');
  t.match(
    [...registry.quarantined(), ...again.quarantined()].map((q) => q.reason),
    [/netns \/proc\/self\/ns\/net of container spooled is the node's own/, /netns \/proc\/self\/ns\/net of container planted is the node's own/],
  );
  t.ok(await registry.adopt(record('pod')), 'a pod\'s is still adopted');
  t.notOk(await registry.adopt({ ...node, containerId: 'cached' }), 'the node\'s is not');
});

t.test('a spooled ADD of an earlier boot is not applied (its sandbox went with that kernel); its DEL and GC are', async (t) => {
  const path = await stateDir(t);
  const spool = join(path, 'spool');
  const registry = await reopen(path);
  for (const r of [a, b]) await registry.apply({ op: 'add', record: r });
  const earlier = '0123456789abcdef0123456789abcdef';
  await writeFile(join(spool, spoolFileName(earlier, 5n, 1)), JSON.stringify({ version: 1, op: 'add', record: c }));
  await writeFile(join(spool, spoolFileName(earlier, 6n, 1)), JSON.stringify({ version: 1, op: 'del', key: keyFor('aaa') }));
  writeSpoolEntry(path, { op: 'add', record: { ...c, containerId: 'ddd' } });
  const reopened = await reopen(path);
  t.strictSame(listed(reopened), ['bbb@eth0', 'ddd@eth0'], "the earlier boot's DEL took aaa back; its ADD of ccc was not applied; this boot's ADD was");
  t.strictSame(await ls(spool), [], 'the spool is empty');
  t.strictSame(reopened.quarantined(), [], 'and nothing is set aside');
});

t.test('an ADD under an unknown boot id, or read by a daemon that cannot read its own, is applied', async (t) => {
  const written = spoolFileName('unknown', 5n, 1);
  t.notOk(addOfEarlierBoot(written, { op: 'add' }, 'fedcba9876543210fedcba9876543210'), "the plugin could not read its boot's id");
  t.notOk(addOfEarlierBoot(spoolFileName('0123', 5n, 1), { op: 'add' }, 'unknown'), 'the daemon cannot read its own');
  t.ok(addOfEarlierBoot(spoolFileName('0123', 5n, 1), { op: 'add' }, 'fedc'), 'both known and different: an earlier boot');
  t.notOk(addOfEarlierBoot(spoolFileName('0123', 5n, 1), { op: 'del' }, 'fedc'), 'a DEL of an earlier boot is applied');
});

t.test("a refused ADD's record is withdrawn, unless the spool by then has it marked (the plugin gave up waiting) or it is another sandbox's", async (t) => {
  const path = await stateDir(t);
  const registry = await reopen(path);
  for (const r of [a, b, c]) await registry.apply({ op: 'add', record: r });
  t.equal(await registry.withdraw(a), true);
  t.equal(registry.get(keyFor('aaa')), undefined, 'gone');
  t.strictSame(await ls(join(path, 'records')), ['bbb@eth0.json', 'ccc@eth0.json'], 'its file too');

  writeSpoolEntry(path, { op: 'add', record: { ...b, startedWithoutNetwork: true } });
  t.equal(await registry.withdraw(b), false, 'marked in the spool after the refusal was decided');
  t.equal(registry.get(keyFor('bbb'))?.startedWithoutNetwork, true, 'kept, marked');

  t.equal(await registry.withdraw({ ...c, netns: '/var/run/netns/other', createdAt: '2026-03-01T12:01:00.000Z' }), false, 'a newer ADD of the same container');
  t.ok(registry.get(keyFor('ccc')));
});
