import t, { type Test } from 'tap';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmod, lstat, mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { request, type IncomingHttpHeaders } from 'node:http';
import { join } from 'node:path';
import { dir } from 'tmp-promise';
import { PodnetError } from '../errors.ts';
import { silentLogger } from '../log.ts';
import { callDaemon } from '../protocol/client.ts';
import { Registry } from '../registry/registry.ts';
import { writeSpoolEntry } from '../registry/spool.ts';
import { jsonChunks, startServer, type RunningServer, type ServerOptions } from './server.ts';
import { liveRecord } from '../testing/records.ts';

// ---- fixtures: a daemon on a temp socket with a real registry ----------------------------------

interface Daemon {
  socketPath: string;
  stateDir: string;
  registry: Registry;
  server: RunningServer;
}

/** A temp dir whose servers are closed, then whose files are removed, when the test ends. */
async function scratch(t: Test): Promise<{ path: string; onEnd(close: () => Promise<void>): void }> {
  const tmp = await dir({ unsafeCleanup: true });
  const closers: (() => Promise<void>)[] = [];
  t.teardown(async () => {
    for (const close of closers.reverse()) await close();
    await tmp.cleanup();
  });
  return { path: tmp.path, onEnd: (close) => closers.push(close) };
}

async function daemon(t: Test, opts: { maxBodyBytes?: number; prepare?: (stateDir: string) => Promise<void>; diff?: ServerOptions['diff']; sandboxes?: ServerOptions['sandboxes'] } = {}): Promise<Daemon> {
  const tmp = await scratch(t);
  const stateDir = join(tmp.path, 'state');
  const socketPath = join(tmp.path, 'run', 'podnet.sock');
  await opts.prepare?.(stateDir);
  const registry = await Registry.open(stateDir, silentLogger);
  const server = await startServer({ socketPath, registry, version: '0.1.0-test', log: silentLogger, maxBodyBytes: opts.maxBodyBytes, ...(opts.diff ? { diff: opts.diff } : {}), ...(opts.sandboxes ? { sandboxes: opts.sandboxes } : {}) });
  tmp.onEnd(() => server.close());
  return { socketPath, stateDir, registry, server };
}

const call = (d: Daemon, method: 'GET' | 'PUT' | 'POST' | 'DELETE', path: string, body?: unknown) =>
  callDaemon({ socketPath: d.socketPath, method, path, body, timeoutMs: 10_000 });

/** What callDaemon rejects with, or undefined when it resolves. */
const failure = (p: Promise<unknown>) => p.then(() => undefined, (err: unknown) => err);

interface RawAnswer {
  status: number;
  headers: IncomingHttpHeaders;
  body: unknown;
}

/** One request with full control of headers and body; `chunks` go out chunked, without a length. */
function raw(socketPath: string, method: string, path: string, send: { headers?: Record<string, string | number>; body?: string; chunks?: string[] } = {}): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, method, path, agent: false, headers: send.headers ?? {} }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (c: Buffer) => parts.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(parts).toString('utf8');
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text === '' ? undefined : JSON.parse(text) });
      });
    });
    req.on('error', reject);
    for (const chunk of send.chunks ?? []) req.write(chunk);
    req.end(send.body);
  });
}

const json = (body: unknown) => {
  const text = JSON.stringify(body);
  return { headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }, body: text };
};

const record = liveRecord;

const route = (containerId: string, ifname = 'eth0') => `/v1/attachments/${containerId}/${ifname}`;

// ---- the socket -------------------------------------------------------------------------------

t.test('the socket is 0600 in a 0700 folder podnet makes', async (t) => {
  const d = await daemon(t);
  const socket = await lstat(d.socketPath);
  t.ok(socket.isSocket(), 'a unix socket');
  t.equal(socket.mode & 0o777, 0o600, 'socket 0600');
  t.equal((await stat(join(d.socketPath, '..'))).mode & 0o777, 0o700, 'folder 0700');
});

t.test('a folder podnet did not make keeps its mode; one others may write into is refused', async (t) => {
  const shared = await daemon(t, { prepare: async (stateDir) => mkdir(join(stateDir, '..', 'run'), { mode: 0o755 }).then(() => undefined) });
  t.equal((await stat(join(shared.socketPath, '..'))).mode & 0o777, 0o755, 'a 0755 folder is left as it was');
  t.equal((await lstat(shared.socketPath)).mode & 0o777, 0o600, 'the socket in it is 0600');

  const tmp = await scratch(t);
  const open = join(tmp.path, 'open');
  await mkdir(open);
  await chmod(open, 0o777);
  const registry = await Registry.open(join(tmp.path, 'state'), silentLogger);
  const refused = await failure(startServer({ socketPath: join(open, 'podnet.sock'), registry, version: 'x', log: silentLogger }));
  t.match(refused, { code: 'INVALID_CONFIG', message: /socket folder .*open is writable by group or others \(mode 777\): chmod 700 it/ });
  t.equal((await stat(open)).mode & 0o777, 0o777, 'and it is not changed');
});

t.test('a second daemon on a served path is refused with BUSY, the first keeps serving', async (t) => {
  const d = await daemon(t);
  const second = await failure(startServer({ socketPath: d.socketPath, registry: d.registry, version: 'x', log: silentLogger }));
  t.ok(second instanceof PodnetError, 'a PodnetError');
  t.match(second, { code: 'BUSY', message: /another podnet daemon is serving/ });
  t.strictSame(await call(d, 'GET', '/healthz'), { status: 'ok' });
});

t.test('a stale socket path is reclaimed', async (t) => {
  t.test('the socket of a daemon that was killed', async (t) => {
    const tmp = await scratch(t);
    const socketPath = join(tmp.path, 'podnet.sock');
    const child = spawn(process.execPath, ['-e', "require('net').createServer().listen(process.argv[1], () => console.log('up'))", socketPath], { stdio: ['ignore', 'pipe', 'inherit'] });
    tmp.onEnd(async () => void child.kill('SIGKILL'));
    await Promise.race([once(child.stdout, 'data'), once(child, 'exit')]);
    child.kill('SIGKILL');
    await once(child, 'exit');
    t.ok((await lstat(socketPath)).isSocket(), 'the dead daemon left its socket');

    const registry = await Registry.open(join(tmp.path, 'state'), silentLogger);
    const server = await startServer({ socketPath, registry, version: 'x', log: silentLogger });
    tmp.onEnd(() => server.close());
    t.strictSame(await callDaemon({ socketPath, method: 'GET', path: '/healthz', timeoutMs: 10_000 }), { status: 'ok' });
  });

  t.test('but never a file that is not a socket', async (t) => {
    const tmp = await scratch(t);
    const socketPath = join(tmp.path, 'podnet.sock');
    await writeFile(socketPath, 'leftover');
    const registry = await Registry.open(join(tmp.path, 'state'), silentLogger);
    const refused = await failure(startServer({ socketPath, registry, version: 'x', log: silentLogger }));
    t.match(refused, { code: 'INVALID_REQUEST', message: /exists and is not a socket; podnet will not remove it/ });
    t.equal(await readFile(socketPath, 'utf8'), 'leftover', 'the file is untouched');
  });

  t.test('the path of a daemon that closed', async (t) => {
    const d = await daemon(t);
    await d.server.close();
    const next = await startServer({ socketPath: d.socketPath, registry: d.registry, version: 'x', log: silentLogger });
    t.teardown(() => next.close());
    t.strictSame(await call(d, 'GET', '/healthz'), { status: 'ok' });
  });
});

// ---- health and status ------------------------------------------------------------------------

t.test('GET /healthz, /readyz and /v1/status', async (t) => {
  const d = await daemon(t, {
    prepare: async (stateDir) => {
      await mkdir(join(stateDir, 'records'), { recursive: true });
      await writeFile(join(stateDir, 'records', 'broken@eth0.json'), 'not json');
    },
  });
  t.strictSame(await call(d, 'GET', '/healthz'), { status: 'ok' });
  t.strictSame(await call(d, 'GET', '/readyz'), { status: 'ready' });

  await call(d, 'PUT', route('aaa'), record('aaa'));
  writeSpoolEntry(d.stateDir, { op: 'del', key: { containerId: 'zzz', ifname: 'eth0' } });
  const status = await call(d, 'GET', '/v1/status?verbose=1');
  t.match(status, { version: '0.1.0-test', attachments: 1, spoolPending: 1, quarantined: [{ file: /^\d+-\d+-broken@eth0\.json$/, reason: /JSON/ }] });
  t.strictSame(Object.keys(status as object).sort(), ['attachments', 'quarantined', 'spoolPending', 'version']);
});

t.test('an answer is the JSON of its body, written in pieces: a list of thousands of sandboxes is never one string', async (t) => {
  const bodies: unknown[] = [
    { items: [], documentProblems: [] },
    { a: 1, skipped: undefined, fn: () => 1, list: [1, undefined, 'é', { b: [null] }], nested: { c: [1, 2] } },
    [1, 2, 3],
    'text',
    null,
    { at: new Date(0) },
    { toJSON: () => ({ replaced: true }) },
    // eslint-disable-next-line no-sparse-arrays
    { holes: [1, , 3], leading: [, 1] },
    { own: Object.assign([1, 2], { toJSON: () => 'mine' }) },
    new String('boxed'),
    Object.assign(Object.create(null) as object, { bare: [1] }),
    new Map([['a', 1]]),
  ];
  for (const body of bodies) t.equal(jsonChunks(body).join(''), JSON.stringify(body), JSON.stringify(body));
  const items = Array.from({ length: 3000 }, (_, i) => ({ containerId: `c${i}`, name: `pod-${i}`, note: 'x'.repeat(500) }));
  const list = { items, documentProblems: [] };
  const chunks = jsonChunks(list);
  t.equal(chunks.join(''), JSON.stringify(list), 'a list of 3,000 items as JSON.stringify writes it');
  t.ok(chunks.length > 40 && chunks.every((c) => c.length <= 32 * 1024), `in ${chunks.length} pieces of at most 32 KiB`);
  const long = { items: ['x'.repeat(40_000), 'y'] };
  t.equal(jsonChunks(long).join(''), JSON.stringify(long), 'an element longer than a piece goes out whole');

  const d = await daemon(t, { sandboxes: () => list as unknown as ReturnType<NonNullable<ServerOptions['sandboxes']>> });
  const answer = await raw(d.socketPath, 'GET', '/v1/sandboxes');
  t.equal(answer.status, 200);
  t.equal(Number(answer.headers['content-length']), Buffer.byteLength(`${JSON.stringify(list)}\n`), 'its length is told, as before');
  t.equal((answer.body as { items: unknown[] }).items.length, 3000, 'and the client reads it whole');
});

// ---- attachments ------------------------------------------------------------------------------

t.test('PUT, GET and DELETE an attachment', async (t) => {
  const d = await daemon(t);
  const r = record('aaa');
  t.strictSame(await call(d, 'PUT', route('aaa'), r), { record: r, netnsExists: true }, 'PUT answers the view');
  t.strictSame(d.registry.get(r), r, 'the registry has it');
  t.strictSame(await call(d, 'GET', route('aaa')), { record: r, netnsExists: true }, 'GET answers the same');

  const gone = record('bbb', { ifname: 'net1', netns: '/var/run/netns/cni-gone' });
  t.strictSame(await call(d, 'PUT', route('bbb', 'net1'), gone), { record: gone, netnsExists: false }, 'a missing netns shows');
  t.strictSame(await call(d, 'GET', '/v1/attachments'), { items: [{ record: r, netnsExists: true }, { record: gone, netnsExists: false }] });

  t.strictSame(await call(d, 'DELETE', route('aaa')), { removed: true });
  t.strictSame(await call(d, 'DELETE', route('aaa')), { removed: false }, 'a second DELETE succeeds, removing nothing');
  const missing = await failure(call(d, 'GET', route('aaa')));
  t.ok(missing instanceof PodnetError, 'a PodnetError');
  t.match(missing, { code: 'NOT_FOUND', message: 'no attachment recorded for container aaa interface eth0' });
  t.strictSame((await Registry.open(d.stateDir, silentLogger)).list(), [gone], 'the changes are on disk');
});

t.test('reads apply what the plugins spooled before them', async (t) => {
  const d = await daemon(t);
  writeSpoolEntry(d.stateDir, { op: 'add', record: record('aaa') });
  t.strictSame(await call(d, 'GET', route('aaa')), { record: record('aaa'), netnsExists: true }, 'GET of one attachment');
  writeSpoolEntry(d.stateDir, { op: 'del', key: { containerId: 'aaa', ifname: 'eth0' } });
  writeSpoolEntry(d.stateDir, { op: 'add', record: record('bbb') });
  t.strictSame(await call(d, 'GET', '/v1/attachments'), { items: [{ record: record('bbb'), netnsExists: true }] }, 'GET of the list');
  t.equal(await d.registry.spoolPending(), 0, 'the spool is drained');
});

t.test('PUT whose record is not the one of its path: 400 INVALID_REQUEST', async (t) => {
  const d = await daemon(t);
  const err = await failure(call(d, 'PUT', route('bbb'), record('aaa')));
  t.match(err, { code: 'INVALID_REQUEST', message: 'record of aaa/eth0 sent to the path of bbb/eth0' });
  t.equal(d.registry.size, 0, 'nothing recorded');
  const answer = await raw(d.socketPath, 'PUT', route('aaa', 'net1'), json(record('aaa')));
  t.equal(answer.status, 400);
  t.match(answer.body, { code: 'INVALID_REQUEST' });
});

t.test('an invalid body: 400 naming the violation', async (t) => {
  const d = await daemon(t);
  const answer = await raw(d.socketPath, 'PUT', route('aaa'), json(record('aaa', { netns: '/var/run/netns/../../etc/passwd' })));
  t.equal(answer.status, 400);
  t.match(answer.body, { code: 'INVALID_REQUEST', message: /^invalid attachment record: at \/netns: must be / });
  t.match(await raw(d.socketPath, 'PUT', route('aaa'), { headers: { 'content-type': 'application/json' }, body: '{"containerId":' }), {
    status: 400,
    body: { code: 'INVALID_REQUEST', message: /request body is not JSON/ },
  });
  t.match(await raw(d.socketPath, 'PUT', route('aaa'), { headers: { 'content-type': 'application/json' }, body: `${'['.repeat(150_000)}${']'.repeat(150_000)}` }), {
    status: 400,
    body: { code: 'INVALID_REQUEST', message: 'request body nests arrays and objects more than 64 deep' },
  });
  t.equal(d.registry.size, 0, 'nothing recorded');
});

t.test('a bad key in the path: 400', async (t) => {
  const d = await daemon(t);
  for (const path of [route('aaa', '%2E%2E'), route('aaa', 'a%3Ab'), route('has%20space')]) {
    const answer = await raw(d.socketPath, 'GET', path);
    t.equal(answer.status, 400, path);
    t.match(answer.body, { code: 'INVALID_REQUEST', message: /^invalid attachment in the request path: at \/(ifname|containerId)/ });
  }
  const malformed = await raw(d.socketPath, 'GET', route('%ZZ'));
  t.equal(malformed.status, 400, 'a malformed percent-escape is the client\'s error');
});

t.test('an ifname holding a NUL is refused with 400, not a failed write', async (t) => {
  const d = await daemon(t);
  const answer = await raw(d.socketPath, 'PUT', route('aaa', 'eth%00'), json(record('aaa', { ifname: 'eth\u0000' })));
  t.equal(answer.status, 400, 'status 400');
  t.equal(d.registry.size, 0, 'nothing recorded');
});

t.test('a body that is not application/json: 415', async (t) => {
  const d = await daemon(t);
  const text = JSON.stringify(record('aaa'));
  const types: Record<string, string>[] = [{ 'content-type': 'text/plain' }, {}];
  for (const headers of types) {
    const answer = await raw(d.socketPath, 'PUT', route('aaa'), { headers: { ...headers, 'content-length': Buffer.byteLength(text) }, body: text });
    t.equal(answer.status, 415, JSON.stringify(headers));
    t.match(answer.body, { code: 'UNSUPPORTED_MEDIA_TYPE', message: /request body must be application\/json/ });
  }
  const withCharset = await raw(d.socketPath, 'PUT', route('aaa'), { headers: { 'content-type': 'application/json; charset=utf-8' }, body: text });
  t.equal(withCharset.status, 200, 'a charset parameter is fine');
});

t.test('a body over maxBodyBytes: 413', async (t) => {
  const d = await daemon(t, { maxBodyBytes: 64 });
  const big = json(record('aaa'));
  const declared = await raw(d.socketPath, 'PUT', route('aaa'), big);
  t.equal(declared.status, 413, 'declared length over the limit');
  t.match(declared.body, { code: 'PAYLOAD_TOO_LARGE', message: /over the 64-byte limit/ });
  t.equal(declared.headers.connection, 'close', 'the connection is closed');

  const text = big.body;
  const streamed = await raw(d.socketPath, 'PUT', route('aaa'), { headers: { 'content-type': 'application/json' }, chunks: [text.slice(0, 50), text.slice(50)] });
  t.equal(streamed.status, 413, 'a chunked body, no length declared, over the limit');
  t.match(streamed.body, { code: 'PAYLOAD_TOO_LARGE', message: 'request body is over the 64-byte limit' });
  t.equal(d.registry.size, 0, 'nothing recorded');
});

t.test('an unknown path: 404 NOT_FOUND', async (t) => {
  const d = await daemon(t);
  for (const path of ['/', '/v2/attachments', '/v1/attachments/aaa', '/v1/attachments/aaa/eth0/extra', '/healthz/']) {
    const answer = await raw(d.socketPath, 'GET', path);
    t.equal(answer.status, 404, path);
    t.match(answer.body, { code: 'NOT_FOUND', message: /^no such path / });
  }
});

t.test('a method a path does not take: 405 with Allow', async (t) => {
  const d = await daemon(t);
  const cases: [string, string, string][] = [
    ['POST', '/healthz', 'GET'],
    ['DELETE', '/v1/status', 'GET'],
    ['PATCH', route('aaa'), 'GET, PUT, DELETE'],
    ['GET', '/v1/gc', 'POST'],
  ];
  for (const [method, path, allow] of cases) {
    const answer = await raw(d.socketPath, method, path);
    t.equal(answer.status, 405, `${method} ${path}`);
    t.equal(answer.headers.allow, allow);
    t.match(answer.body, { code: 'METHOD_NOT_ALLOWED', message: `${method} is not allowed on ${path}` });
  }
});

// ---- GC ---------------------------------------------------------------------------------------

t.test('POST /v1/gc removes only the unlisted records of its network', async (t) => {
  const d = await daemon(t);
  const kept = record('aaa');
  const stale = record('bbb');
  const otherNetwork = record('ccc', { network: 'vlan100' });
  for (const r of [kept, stale, otherNetwork]) await call(d, 'PUT', route(r.containerId), r);

  const answer = await call(d, 'POST', '/v1/gc', { network: 'kindnet', validAttachments: [{ containerId: 'aaa', ifname: 'eth0' }] });
  t.strictSame(answer, { removed: [{ containerId: 'bbb', ifname: 'eth0' }] });
  t.strictSame(d.registry.list(), [kept, otherNetwork]);

  const invalid = await raw(d.socketPath, 'POST', '/v1/gc', json({ network: 'kindnet' }));
  t.match(invalid, { status: 400, body: { code: 'INVALID_REQUEST', message: /^invalid GC request: at \(top level\): must have required property 'validAttachments'/ } });
  t.equal(d.registry.size, 2, 'an invalid GC removes nothing');
});

t.test('POST /v1/diff: each document checked against its kind; 404 without documents to follow', async (t) => {
  const seen: unknown[] = [];
  const d = await daemon(t, { diff: async (documents) => (seen.push(...documents), { documentProblems: [], hostSteps: [], items: [] }) });
  const network = { apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'Network', metadata: { name: 'blue' }, spec: { type: 'bridge' } };
  t.same(await call(d, 'POST', '/v1/diff', { documents: [network] }), { documentProblems: [], hostSteps: [], items: [] });
  t.same(seen, [network]);
  const bad = await failure(call(d, 'POST', '/v1/diff', { documents: [{ ...network, spec: { type: 'bareudp' } }] }));
  t.match(bad, { code: 'INVALID_REQUEST', message: /diff request document 1: .*\/spec\/type/ });
  t.match(await failure(call(d, 'POST', '/v1/diff', { documents: [{ kind: 'Pod' }] })), { code: 'INVALID_REQUEST', message: /kind/ });
  const plain = await daemon(t);
  t.match(await failure(call(plain, 'POST', '/v1/diff', { documents: [] })), { code: 'NOT_FOUND', message: /--config-dir/ });
});
