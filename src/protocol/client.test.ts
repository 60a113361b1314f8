import t, { type Test } from 'tap';
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { callDaemon, unreachable } from './client.ts';

/** A folder with a short path: a unix socket's path holds at most 107 bytes. */
function shortDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'pn-client-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const get = (socketPath: string) => callDaemon({ socketPath, method: 'GET', path: '/v1/status', timeoutMs: 5000 });

t.test('a daemon that is not there is told as such, with what to check', async (t) => {
  const dir = shortDir(t);
  await t.rejects(get(join(dir, 'podnet.sock')), { code: 'NOT_AVAILABLE', message: /^no podnet daemon serves .*podnet\.sock \(there is no socket\): is the daemon running, and is that its socket\?$/ });
  writeFileSync(join(dir, 'stale.sock'), '');
  await t.rejects(get(join(dir, 'stale.sock')), { code: 'NOT_AVAILABLE', message: /^no podnet daemon serves .*stale\.sock \(the socket is there, nothing listens\)/ });
});

t.test('a socket this user may not open says to run as root', { skip: process.geteuid?.() === 0 ? 'root may open any socket' : false }, async (t) => {
  const dir = shortDir(t);
  const path = join(dir, 'podnet.sock');
  const server = createServer().listen(path);
  await new Promise((resolve) => server.once('listening', resolve));
  t.teardown(() => server.close());
  chmodSync(path, 0o000);
  await t.rejects(get(path), { message: /permission denied\): the daemon's socket is root's alone; run this as root/ });
});

t.test('the words for each way the socket fails', async (t) => {
  const err = (code: string) => Object.assign(new Error(code), { code });
  t.match(unreachable('/run/podnet/podnet.sock', err('EACCES')), /^may not open \/run\/podnet\/podnet\.sock \(permission denied\)/);
  t.equal(unreachable('/run/podnet/podnet.sock', err('EMFILE')), 'podnet daemon not reachable at /run/podnet/podnet.sock: EMFILE');
});
