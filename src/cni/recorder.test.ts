import t, { type Test } from 'tap';
import { mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { dirname, join } from 'node:path';
import { dir } from 'tmp-promise';
import type { DaemonParts } from '../daemon/routes.ts';
import { startServer } from '../daemon/server.ts';
import { PodnetError } from '../errors.ts';
import { silentLogger } from '../log.ts';
import type { AttachmentKey, AttachmentRecord, FirstPassResponse } from '../protocol/validate.ts';
import { Registry } from '../registry/registry.ts';
import { writeSpoolEntry } from '../registry/spool.ts';
import { spoolRecorder, type Recorder } from './recorder.ts';

// ---- fixtures ---------------------------------------------------------------------------------

interface Node {
  stateDir: string;
  socketPath: string;
  /** The plugin's recorder on this node; CHECK waits for a daemon's answer up to `timeoutMs`, ADD for its first pass up to `firstPassTimeoutMs`. */
  recorder(timeoutMs?: number, firstPassTimeoutMs?: number): Recorder;
  /** The spool's entries, in name order (one writer here, so the order written). */
  spooled(): Promise<unknown[]>;
  /** Runs `close` when the test ends, before the temp dir goes. */
  onEnd(close: () => Promise<void>): void;
}

/** A node's state dir and socket path in a temp dir; no daemon runs yet. */
async function node(t: Test): Promise<Node> {
  const tmp = await dir({ unsafeCleanup: true });
  const closers: (() => Promise<void>)[] = [];
  t.teardown(async () => {
    for (const close of closers.reverse()) await close();
    await tmp.cleanup();
  });
  const stateDir = join(tmp.path, 'state');
  const socketPath = join(tmp.path, 'run', 'podnet.sock');
  return {
    stateDir,
    socketPath,
    recorder: (timeoutMs = 10_000, firstPassTimeoutMs = 0) => spoolRecorder({ socketPath, stateDir, timeoutMs, firstPassTimeoutMs }),
    async spooled() {
      const spool = join(stateDir, 'spool');
      const names = (await readdir(spool).catch(() => [])).filter((n) => n.endsWith('.json')).sort();
      return Promise.all(names.map(async (n) => JSON.parse(await readFile(join(spool, n), 'utf8')) as unknown));
    },
    onEnd: (close) => closers.push(close),
  };
}

/** Starts the daemon of `n` with a real registry on its state dir; `firstPass` answers ADDs' first passes (none: a daemon that follows no documents). */
async function startDaemon(n: Node, firstPass?: DaemonParts['firstPass']): Promise<Registry> {
  const registry = await Registry.open(n.stateDir, silentLogger);
  const server = await startServer({ socketPath: n.socketPath, registry, version: 'test', log: silentLogger, ...(firstPass ? { firstPass } : {}) });
  n.onEnd(() => server.close());
  return registry;
}

/** A unix socket server that takes connections and never answers; counts the connections. */
async function startSilentDaemon(n: Node): Promise<{ connections(): number }> {
  let count = 0;
  const server = createServer((socket) => {
    count++;
    n.onEnd(async () => void socket.destroy());
  });
  await mkdir(dirname(n.socketPath), { recursive: true });
  await new Promise<void>((resolve) => server.listen(n.socketPath, resolve));
  n.onEnd(() => new Promise((resolve) => server.close(() => resolve())));
  return { connections: () => count };
}

function record(containerId: string, network = 'kindnet'): AttachmentRecord {
  return {
    containerId,
    ifname: 'eth0',
    network,
    netns: `/var/run/netns/cni-${containerId}`,
    cniVersion: '1.0.0',
    pod: { namespace: 'shop', name: `pod-${containerId}` },
    prevResult: { cniVersion: '1.0.0', ips: [{ address: '10.244.0.5/24' }] },
    createdAt: '2026-03-01T12:00:00.000Z',
  };
}

const keyFor = (containerId: string): AttachmentKey => ({ containerId, ifname: 'eth0' });
const withUid = (r: AttachmentRecord, uid: string): AttachmentRecord => ({ ...r, pod: { ...r.pod, uid } });
const rejection = (p: Promise<unknown>) => p.then(() => undefined, (err: unknown) => err);

/** A state dir that cannot exist: a path under a regular file. */
async function impossibleStateDir(n: Node): Promise<string> {
  const file = join(dirname(n.stateDir), 'not-a-dir');
  await writeFile(file, '');
  return join(file, 'state');
}

// ---- changes: always into the spool, never waiting on the daemon ------------------------------

t.test('add, del and gc go into the spool, in order', async (t) => {
  const n = await node(t);
  const recorder = n.recorder();
  await recorder.add(record('aaa'));
  await recorder.del(keyFor('bbb'));
  await recorder.gc({ network: 'kindnet', validAttachments: [keyFor('aaa')] });
  t.strictSame(await n.spooled(), [
    { version: 1, op: 'add', record: record('aaa') },
    { version: 1, op: 'del', key: keyFor('bbb') },
    { version: 1, op: 'gc', gc: { network: 'kindnet', validAttachments: [keyFor('aaa')] } },
  ], 'each entry names its format');

  const registry = await startDaemon(n);
  t.strictSame(registry.list(), [record('aaa')], 'the daemon applies them when it starts');
  t.strictSame(await n.spooled(), [], 'and removes them');
});

t.test('with the daemon up, a change still goes through the spool and the daemon applies it', async (t) => {
  const n = await node(t);
  const registry = await startDaemon(n);
  const recorder = n.recorder();
  await recorder.add(record('aaa'));
  t.strictSame(await n.spooled(), [{ version: 1, op: 'add', record: record('aaa') }], 'spooled');
  t.strictSame(await recorder.find(keyFor('aaa')), record('aaa'), 'the daemon answers with it');
  t.strictSame(registry.get(keyFor('aaa')), record('aaa'), 'the daemon applied it');
  t.strictSame(await n.spooled(), [], 'and took it out of the spool');
});

t.test('a daemon that takes connections and never answers does not hold a change up', async (t) => {
  const n = await node(t);
  const silent = await startSilentDaemon(n);
  const recorder = n.recorder(60_000);
  await recorder.add(record('aaa'));
  await recorder.del(keyFor('aaa'));
  await recorder.gc({ network: 'kindnet', validAttachments: [] });
  t.equal((await n.spooled()).length, 3, 'all three recorded');
  t.equal(silent.connections(), 0, 'the daemon was never asked');
});

t.test('a spool that cannot be written: IO_FAILURE naming the spool', async (t) => {
  const n = await node(t);
  const stateDir = await impossibleStateDir(n);
  const recorder = spoolRecorder({ socketPath: n.socketPath, stateDir, timeoutMs: 1000, firstPassTimeoutMs: 0 });
  for (const change of [() => recorder.add(record('aaa')), () => recorder.del(keyFor('aaa')), () => recorder.gc({ network: 'kindnet', validAttachments: [] })]) {
    const err = await rejection(change());
    t.ok(err instanceof PodnetError, 'a PodnetError');
    t.match(err, { code: 'IO_FAILURE', cniCode: 5, message: /^podnet could not record the (add|del|gc) in .*not-a-dir\/state\/spool: ENOTDIR/ });
  }
});

// ---- find -------------------------------------------------------------------------------------

t.test('find asks the daemon when it is up', async (t) => {
  const n = await node(t);
  const registry = await startDaemon(n);
  await registry.apply({ op: 'add', record: record('aaa') });
  const recorder = n.recorder();
  t.strictSame(await recorder.find(keyFor('aaa')), record('aaa'));
  t.equal(await recorder.find(keyFor('zzz')), undefined, 'an attachment the daemon does not know is undefined');
});

/** Records aaa, bbb, ccc on disk, then spools: del aaa, add ddd, gc keeping bbb and ddd. */
async function recordThenSpool(n: Node): Promise<void> {
  const registry = await Registry.open(n.stateDir, silentLogger);
  for (const r of [record('aaa'), record('bbb'), record('ccc')]) await registry.apply({ op: 'add', record: r });
  writeSpoolEntry(n.stateDir, { op: 'del', key: keyFor('aaa') });
  writeSpoolEntry(n.stateDir, { op: 'add', record: record('ddd') });
  writeSpoolEntry(n.stateDir, { op: 'gc', gc: { network: 'kindnet', validAttachments: [keyFor('bbb'), keyFor('ddd')] } });
}

/** find() over the state recordThenSpool leaves, however the daemon fails to answer. */
async function assertFoundOnDisk(t: Test, n: Node, recorder: Recorder): Promise<void> {
  t.equal(await recorder.find(keyFor('aaa')), undefined, 'recorded, then a spooled DEL');
  t.strictSame(await recorder.find(keyFor('bbb')), record('bbb'), 'recorded, listed by the spooled GC');
  t.equal(await recorder.find(keyFor('ccc')), undefined, 'recorded, collected by the spooled GC');
  t.strictSame(await recorder.find(keyFor('ddd')), record('ddd'), 'only in the spool');
  t.equal(await recorder.find(keyFor('eee')), undefined, 'nowhere');
  t.equal((await n.spooled()).length, 3, 'find changes nothing on disk');
}

t.test('find answers from the records and the spool when no daemon runs', async (t) => {
  const n = await node(t);
  await recordThenSpool(n);
  await assertFoundOnDisk(t, n, n.recorder());
});

t.test('find answers from disk when the daemon does not answer within timeoutMs', async (t) => {
  const n = await node(t);
  await recordThenSpool(n);
  const silent = await startSilentDaemon(n);
  await assertFoundOnDisk(t, n, n.recorder(50));
  t.equal(silent.connections(), 5, 'the daemon was asked each time');
});

// ---- ready ------------------------------------------------------------------------------------

t.test('ready', async (t) => {
  t.test('the spool is writable, no daemon needed', async (t) => {
    const n = await node(t);
    await t.resolves(n.recorder().ready());
  });

  t.test('the state dir cannot exist (a path under a regular file): NOT_AVAILABLE', async (t) => {
    const n = await node(t);
    const recorder = spoolRecorder({ socketPath: n.socketPath, stateDir: await impossibleStateDir(n), timeoutMs: 1000, firstPassTimeoutMs: 0 });
    const err = await rejection(recorder.ready());
    t.ok(err instanceof PodnetError, 'a PodnetError');
    t.match(err, { code: 'NOT_AVAILABLE', cniCode: 50, message: /^podnet cannot record attachments: the spool .*not-a-dir\/state\/spool is not writable/ });
  });
});

t.test('DEL waits for a container\'s delegated attachments to be taken back, at most its timeout', async (t) => {
  const n = await node(t);
  const delegated = join(n.stateDir, 'delegated');
  await mkdir(delegated, { recursive: true });
  await writeFile(join(delegated, 'other@net1.json'), '{}');
  let started = Date.now();
  await n.recorder(5000).delegatedGone('c1');
  t.ok(Date.now() - started < 1000, 'no wait when the container has none (another container\'s does not count)');

  await writeFile(join(delegated, 'c1@net1.json'), '{}');
  setTimeout(() => void rm(join(delegated, 'c1@net1.json')), 150);
  started = Date.now();
  await n.recorder(5000).delegatedGone('c1');
  const waited = Date.now() - started;
  t.ok(waited >= 100 && waited < 2000, `it waits until the daemon removed it (${waited} ms)`);

  await writeFile(join(delegated, 'c1@net2.json'), '{}');
  started = Date.now();
  await n.recorder(300).delegatedGone('c1');
  t.ok(Date.now() - started >= 280, 'and gives up after its timeout, without an error');
});

// ---- ADD's first pass: waited for, bounded, never an error --------------------------------------

t.test("ADD's first pass: the daemon is handed the spooled record and the wait, and its answer comes back", async (t) => {
  const n = await node(t);
  const asked: { containerId: string; waitMs: number }[] = [];
  await startDaemon(n, async (r, waitMs) => {
    asked.push({ containerId: r.containerId, waitMs });
    return { outcome: 'applied' };
  });
  const recorder = n.recorder(1000, 3000);
  await recorder.add(record('aaa'));
  t.strictSame(await recorder.firstPass(record('aaa')), { outcome: 'applied' });
  t.same(asked.map((a) => a.containerId), ['aaa'], 'the record taken in from the spool first');
  t.ok(asked[0]!.waitMs <= 3000 && asked[0]!.waitMs > 2000, `the wait left of the plugin's 3000 ms (${asked[0]!.waitMs} ms): what reading the request and the spool took is counted`);
});

t.test("ADD's first pass without a daemon, with one that never answers, or turned off: no answer, no error", async (t) => {
  const n = await node(t);
  t.equal(await n.recorder(1000, 3000).firstPass(record('aaa')), undefined, 'no daemon: not waited for');
  const silent = await startSilentDaemon(n);
  t.equal(await n.recorder(1000, 200).firstPass(record('aaa')), undefined, 'a daemon that never answers: waited for, up to the bound');
  t.equal(silent.connections(), 1);
  t.equal(await n.recorder(1000, 0).firstPass(record('aaa')), undefined, 'turned off');
  t.equal(silent.connections(), 1, 'not asked');
});

t.test("ADD's first pass of a daemon that follows no documents: nothing asked; of an unrecorded sandbox: no answer", async (t) => {
  const n = await node(t);
  await startDaemon(n);
  const recorder = n.recorder(1000, 3000);
  await recorder.add(record('aaa'));
  t.strictSame(await recorder.firstPass(record('aaa')), { outcome: 'nothing-asked' });
  t.equal(await recorder.firstPass(record('zzz')), undefined, 'the daemon has no record of it (404): not an error for the pod');
});

t.test("ADD's first pass of a pod the daemon's hints call quiet: nothing asked, and the daemon not asked", async (t) => {
  const n = await node(t);
  const silent = await startSilentDaemon(n);
  const hints = join(n.stateDir, 'quiet-pods');
  await mkdir(hints, { recursive: true });
  await writeFile(join(hints, 'uid-quiet'), '');
  const recorder = n.recorder(1000, 200);
  t.strictSame(await recorder.firstPass(withUid(record('aaa'), 'uid-quiet')), { outcome: 'nothing-asked' }, 'a pod of this node that asks nothing');
  t.equal(silent.connections(), 0);
  t.equal(await recorder.firstPass(withUid(record('bbb'), 'uid-asks')), undefined, 'another pod: the daemon is asked');
  t.equal(silent.connections(), 1);
  await writeFile(join(hints, '_all'), '');
  t.strictSame(await recorder.firstPass(record('ccc')), { outcome: 'nothing-asked' }, 'no document asks anything of any pod: no UID needed');
  t.equal(silent.connections(), 1);
});

t.test("an ADD whose first pass did not make the pod's network marks its record: its containers start first", async (t) => {
  const n = await node(t);
  await n.recorder(1000, 3000).firstPass(record('aaa'));
  t.strictSame(await n.spooled(), [{ version: 1, op: 'add', record: { ...record('aaa'), startedWithoutNetwork: true } }], 'no daemon: the record again, marked');

  const answers: Record<string, FirstPassResponse> = {
    bbb: { outcome: 'applied' },
    ccc: { outcome: 'pending' },
    ddd: { outcome: 'refused', error: 'required', unmet: [] },
    eee: { outcome: 'failed', error: 'the host has no interface eth9' },
  };
  const registry = await startDaemon(n, async (r) => answers[r.containerId]!);
  const recorder = n.recorder(1000, 3000);
  for (const id of Object.keys(answers)) {
    await recorder.add(record(id));
    await recorder.firstPass(record(id));
  }
  await mkdir(join(n.stateDir, 'quiet-pods'), { recursive: true });
  await writeFile(join(n.stateDir, 'quiet-pods', 'uid-quiet'), '');
  await recorder.add(withUid(record('fff'), 'uid-quiet'));
  await recorder.firstPass(withUid(record('fff'), 'uid-quiet'));
  await registry.drainSpool();
  const marked = registry.list().filter((r) => r.startedWithoutNetwork === true).map((r) => r.containerId);
  t.strictSame(marked, ['aaa', 'ccc', 'eee'], 'marked when not answered, pending or failed; not when applied or answered by a hint');
  t.equal(registry.get(keyFor('ddd')), undefined, 'refused: its record is gone (its ADD fails)');
});
