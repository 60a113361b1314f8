import t from 'tap';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { launcher } from './launcher.ts';

// The launcher as the source tree runs it: this Node, bin/podnet.ts, PODNET_LAUNCHER=1.
const entry = join(import.meta.dirname, '../../bin/podnet.ts');
const env = { PATH: process.env['PATH'] ?? '', LC_ALL: 'C' };
const bounds = { maxStdoutBytes: 1 << 20, maxStderrBytes: 1 << 16, env };

/** The pids of this process's children that are launchers. */
function launcherPids(): number[] {
  const children = readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  return children.filter((pid) => {
    try {
      return readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').includes('PODNET_LAUNCHER=1');
    } catch {
      return false;
    }
  });
}

t.test('a tool started by the launcher gets its input, and its output and status come back', async (t) => {
  // A variable of the daemon's, there before its launcher starts: the launcher has it, its tools must not.
  process.env['PODNET_TEST_DAEMON_ONLY'] = "the daemon's";
  t.teardown(() => delete process.env['PODNET_TEST_DAEMON_ONLY']);
  const tools = launcher([process.execPath, entry]);
  t.teardown(() => tools.close());
  const cat = tools.start('/bin/cat', [], bounds);
  cat.feed('a line\nand another\n');
  t.same(await cat.exited, { code: 0, signal: null, stdout: 'a line\nand another\n', stderr: '', stdoutCut: false, stderrCut: false });
  t.notOk(cat.running(), 'it is not running once it has exited');
  const failing = tools.start('/bin/sh', ['-c', 'echo oops >&2; exit 3'], bounds);
  failing.feed('');
  t.match(await failing.exited, { code: 3, stderr: 'oops\n' });
  const printenv = tools.start('/usr/bin/env', ['-0'], bounds);
  printenv.feed('');
  // What tap puts in every process it sees start (its coverage hooks and their NODE_OPTIONS, some values of many lines) aside.
  const seen = (await printenv.exited).stdout.split('\0').filter((v) => v !== '' && !v.startsWith('_TAPJS_') && !v.startsWith('NODE_OPTIONS='));
  t.same(seen.sort(), [`LC_ALL=C`, `PATH=${process.env['PATH'] ?? ''}`], "its environment is what the request gave, nothing of the daemon's");
});

t.test('its output is bounded as the request says', async (t) => {
  const tools = launcher([process.execPath, entry]);
  t.teardown(() => tools.close());
  const yes = tools.start('/usr/bin/head', ['-c', '100000', '/dev/zero'], { ...bounds, maxStdoutBytes: 1000 });
  yes.feed('');
  const exit = await yes.exited;
  t.equal(exit.stdout.length, 1000);
  t.equal(exit.stdoutCut, true);
});

t.test('a tool that cannot start, and one killed, are told as startProcess tells them', async (t) => {
  const tools = launcher([process.execPath, entry]);
  t.teardown(() => tools.close());
  const missing = tools.start('/nonexistent/tool', [], bounds);
  missing.feed('');
  await t.rejects(missing.exited, /ENOENT/);
  const sleeper = tools.start('/bin/sleep', ['3'], bounds);
  sleeper.kill();
  t.match(await sleeper.exited, { code: null, signal: 'SIGKILL' });
});

t.test('a launcher that dies fails what it had under way, saying so, and the next start makes a new one', async (t) => {
  // Its pid: the one launcher among this process's children that was not there before it started.
  const before = new Set(launcherPids());
  const tools = launcher([process.execPath, entry]);
  t.teardown(() => tools.close());
  const sleeper = tools.start('/bin/sleep', ['3'], bounds);
  let pid: number | undefined;
  for (let i = 0; i < 100 && pid === undefined; i++) {
    pid = launcherPids().find((p) => !before.has(p));
    if (pid === undefined) await new Promise((r) => setTimeout(r, 20));
  }
  t.ok(pid, 'the launcher runs');
  process.kill(pid!, 'SIGKILL');
  await t.rejects(sleeper.exited, /podnet's launcher ended \(SIGKILL\) before the process it started ended/);
  const echo = tools.start('/bin/echo', ['again'], bounds);
  echo.feed('');
  t.equal((await echo.exited).stdout, 'again\n', 'a new launcher started the next tool');
});

t.test('closed, a launcher fails what it had under way and goes', async (t) => {
  const before = new Set(launcherPids());
  const tools = launcher([process.execPath, entry]);
  const sleeper = tools.start('/bin/sleep', ['3'], bounds);
  let pids = new Set<number>();
  for (let i = 0; i < 100 && pids.size === 0; i++) {
    pids = new Set(launcherPids().filter((p) => !before.has(p)));
    if (pids.size === 0) await new Promise((r) => setTimeout(r, 20));
  }
  t.equal(pids.size, 1, 'its launcher runs');
  tools.close();
  await t.rejects(sleeper.exited, /podnet's launcher was closed/);
  for (let i = 0; i < 100 && launcherPids().some((p) => pids.has(p)); i++) await new Promise((r) => setTimeout(r, 20));
  t.notOk(launcherPids().some((p) => pids.has(p)), 'its process has exited');
});

t.test('a stop sent to the whole process group is the daemon\'s: the launcher goes on serving', async (t) => {
  const before = new Set(launcherPids());
  const tools = launcher([process.execPath, entry]);
  t.teardown(() => tools.close());
  const first = tools.start('/bin/true', [], bounds);
  first.feed('');
  await first.exited;
  const [pid] = launcherPids().filter((p) => !before.has(p));
  t.ok(pid, 'its launcher runs');
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP'] as const) process.kill(pid!, signal);
  await new Promise((r) => setTimeout(r, 200));
  const echo = tools.start('/bin/echo', ['still'], bounds);
  echo.feed('');
  t.equal((await echo.exited).stdout, 'still\n');
  t.ok(launcherPids().includes(pid!), 'and it is the same launcher');
});

t.test('started by hand, with no daemon to launch for, it says so and exits', async (t) => {
  const run = spawnSync(process.execPath, [entry], { env: { ...env, PODNET_LAUNCHER: '1' }, encoding: 'utf8', timeout: 20_000 });
  t.equal(run.status, 2);
  t.match(run.stderr, /the launcher runs only as the daemon's child/);
});
