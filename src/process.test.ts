import t, { type Test } from 'tap';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { spawn } from 'node:child_process';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { findExecutable, probePidNamespaces, startProcess, type PidNamespaces, type ProcessOptions } from './process.ts';

const node = process.execPath;
const bounds: ProcessOptions = { maxStdoutBytes: 1 << 20, maxStderrBytes: 4096 };

function run(file: string, args: readonly string[], options: ProcessOptions = bounds, input = '') {
  const started = startProcess(file, args, options);
  started.feed(input);
  return started.exited;
}

/** Whether `pid` is gone: no such process, or a zombie no one has reaped yet (a container's init may not). */
function gone(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z');
  } catch {
    return true;
  }
}

async function eventually(check: () => boolean): Promise<boolean> {
  for (let i = 0; i < 100 && !check(); i++) await sleep(20);
  return check();
}

t.test('findExecutable', async (t) => {
  const dir = t.testdir({ empty: {}, plain: { tool: 'not executable' }, folder: { tool: {} }, bin: { tool: '#!/bin/true\n' }, later: { tool: '#!/bin/true\n' } });
  chmodSync(join(dir, 'bin', 'tool'), 0o755);
  chmodSync(join(dir, 'later', 'tool'), 0o755);
  chmodSync(join(dir, 'plain', 'tool'), 0o644);
  chmodSync(join(dir, 'folder', 'tool'), 0o755);
  const at = (...names: string[]) => names.map((n) => join(dir, n));
  t.equal(findExecutable('tool', at('empty')), undefined, 'a dir without it');
  t.equal(findExecutable('tool', at('plain')), undefined, 'a file that is not executable, even to root');
  t.equal(findExecutable('tool', at('folder')), undefined, 'a directory named like it');
  t.equal(findExecutable('tool', at('empty', 'plain', 'folder', 'bin', 'later')), join(dir, 'bin', 'tool'), 'the first dir that has it executable');
  t.equal(findExecutable('tool', []), undefined, 'no dirs');
});

t.test('an exit of any kind resolves with its code or signal', async (t) => {
  t.match(await run('/bin/true', []), { code: 0, signal: null, stdout: '', stderr: '', stdoutCut: false, stderrCut: false });
  t.match(await run('/bin/false', []), { code: 1, signal: null });
  t.match(await run(node, ['-e', 'process.exit(7)']), { code: 7, signal: null });
  t.match(await run(node, ['-e', 'process.kill(process.pid, "SIGTERM")']), { code: null, signal: 'SIGTERM' });
});

t.test('stdin is fed and closed; stdout and stderr are collected apart', async (t) => {
  t.match(await run('/bin/cat', [], bounds, 'to cat\n'), { code: 0, stdout: 'to cat\n', stderr: '' });
  const args = ['-e', 'process.stdin.pipe(process.stderr); process.stdout.write("out")'];
  t.match(await run(node, args, bounds, 'in'), { code: 0, stdout: 'out', stderr: 'in' });
});

t.test('a process that exits before reading its input is not an error', async (t) => {
  t.match(await run('/bin/true', [], bounds, 'x'.repeat(1 << 20)), { code: 0 });
});

t.test('env is the whole environment when given', async (t) => {
  const result = await run(node, ['-e', 'process.stdout.write(JSON.stringify(process.env))'], { ...bounds, env: { ONLY: 'this' } });
  const env = JSON.parse(result.stdout) as Record<string, string>;
  t.equal(env['ONLY'], 'this');
  // Not t.same: tap adds its own variables to every process a test starts.
  t.notOk('PATH' in env || 'HOME' in env, "none of the daemon's own");
});

t.test('output is kept up to its bound, and the process is read to its end', async (t) => {
  // Far past a pipe's 64 KiB: a process whose output were no longer read would never exit.
  const script = 'process.stdout.write("o".repeat(1 << 20)); process.stderr.write("e".repeat(1 << 20))';
  const result = await run(node, ['-e', script], { maxStdoutBytes: 1000, maxStderrBytes: 10 });
  t.equal(result.code, 0);
  t.equal(result.stdout, 'o'.repeat(1000));
  t.equal(result.stderr, 'e'.repeat(10));
  t.ok(result.stdoutCut && result.stderrCut, 'both are marked cut');
  const exact = await run(node, ['-e', 'process.stdout.write("o".repeat(1000))'], { maxStdoutBytes: 1000, maxStderrBytes: 10 });
  t.match(exact, { stdout: 'o'.repeat(1000), stdoutCut: false }, 'output exactly at the bound is whole');
});

t.test('output is decoded whole, not chunk by chunk', async (t) => {
  // "é" is c3 a9: its two bytes written apart arrive in two chunks.
  const script = 'process.stdout.write(Buffer.from([0xc3]), () => setTimeout(() => process.stdout.write(Buffer.from([0xa9])), 50))';
  t.equal((await run(node, ['-e', script])).stdout, 'é');
});

t.test('a file that cannot be run rejects exited and is not running', async (t) => {
  const started = startProcess('/nonexistent/tool', [], bounds);
  started.feed('');
  await t.rejects(started.exited, { code: 'ENOENT' });
  t.notOk(started.running());
  t.doesNotThrow(() => started.kill(), 'a kill of what never ran does nothing');
});

t.test('running() and kill() of a process of no group of its own', async (t) => {
  const started = startProcess('/bin/sleep', ['30'], bounds);
  t.ok(started.running());
  started.kill();
  t.match(await started.exited, { code: null, signal: 'SIGKILL' });
  t.notOk(started.running());
});

/**
 * A node that starts /bin/sleep holding its stdout, writes the sleep's pid to the file named by
 * its first argument, and waits, or exits when its second argument is `exit`.
 */
const parentOfSleep = `const c = require("node:child_process").spawn("/bin/sleep", ["30"], { stdio: ["ignore", "inherit", "ignore"] });
require("node:fs").writeFileSync(process.argv[1], String(c.pid));
if (process.argv[2] === "exit") process.exit(0);
setInterval(() => {}, 1000);`;

/** Starts parentOfSleep; resolves with it and its sleep's pid once the sleep runs. */
async function startParentOfSleep(t: Test, ownGroup: boolean, then: 'wait' | 'exit' = 'wait') {
  const pidFile = join(t.testdir(), 'pid');
  const started = startProcess(node, ['-e', parentOfSleep, pidFile, then], { ...bounds, ownGroup });
  started.feed('');
  t.ok(await eventually(() => existsSync(pidFile) && readFileSync(pidFile, 'utf8') !== ''), 'the sleep started');
  return { started, sleeper: Number(readFileSync(pidFile, 'utf8')) };
}

t.test('kill() of a process group kills what it started too', async (t) => {
  const { started, sleeper } = await startParentOfSleep(t, true);
  started.kill();
  t.match(await started.exited, { code: null, signal: 'SIGKILL' });
  t.ok(await eventually(() => gone(sleeper)), 'the grandchild is killed with the group');
});

t.test('the exit of a group\'s leader ends what is left of its group, which then holds its pipes no longer', async (t) => {
  const { started, sleeper } = await startParentOfSleep(t, true, 'exit');
  t.ok(await eventually(() => gone(sleeper)), 'the grandchild is killed with the rest of the group');
  t.match(await started.exited, { code: 0, signal: null }, 'exited came, though the sleep held stdout');
});

t.test('kill() without a group of its own leaves what it started, and exited does not wait on the pipe that holds', async (t) => {
  const { started, sleeper } = await startParentOfSleep(t, false);
  t.teardown(() => process.kill(sleeper, 'SIGKILL'));
  started.kill();
  t.match(await started.exited, { code: null, signal: 'SIGKILL' });
  t.notOk(gone(sleeper), 'the grandchild lives on');
});

t.test('a process not held does not keep the event loop alive', async (t) => {
  // A node that starts a cat waiting on its stdin and lets go of it: it exits at once, and cat on the pipe's close.
  const script = `import(${JSON.stringify(join(import.meta.dirname, 'process.ts'))}).then((m) => m.startProcess('/bin/cat', [], { maxStdoutBytes: 1, maxStderrBytes: 1 }).hold(false))`;
  const begun = Date.now();
  const result = await run(node, ['-e', script], bounds);
  t.equal(result.code, 0, result.stderr);
  t.ok(Date.now() - begun < 10_000, 'it exited without waiting on cat');
});

/** Whether this process may make PID and mount namespaces: CAP_SYS_ADMIN, bit 21 of CapEff. */
function hasSysAdmin(): boolean {
  const capEff = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
  return capEff !== undefined && ((BigInt(`0x${capEff}`) >> 21n) & 1n) === 1n;
}

const noNamespaces = hasSysAdmin() ? false : 'needs CAP_SYS_ADMIN (root): unshare --pid makes the PID namespace';

const systemUnshare = findExecutable('unshare', ['/usr/bin', '/bin']);
const noUnshare = noNamespaces || (systemUnshare === undefined ? 'no unshare in /usr/bin or /bin (util-linux)' : false);
const noDeathSignal =
  noUnshare ||
  (findExecutable('setpriv', [dirname(systemUnshare!)]) === undefined ? `no setpriv next to ${systemUnshare} (util-linux): the parent-death signal needs it` : false);

/** The pids (of this test's /proc) of every process in the PID namespace `ns` (a /proc/PID/ns/pid link). */
function inNamespace(ns: string): number[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((pid) => {
      try {
        return readlinkSync(`/proc/${pid}/ns/pid`) === ns && !gone(Number(pid));
      } catch {
        return false;
      }
    })
    .map(Number);
}

async function namespaces(t: Test): Promise<PidNamespaces> {
  const unshare = findExecutable('unshare', ['/usr/bin', '/bin']);
  if (unshare === undefined) throw new Error('no unshare in /usr/bin or /bin (util-linux)');
  const probe = await probePidNamespaces(unshare);
  if (typeof probe === 'string') throw new Error(`unshare cannot make a PID namespace here: ${probe}`);
  t.equal(await probePidNamespaces(unshare), probe, 'probed once');
  return probe;
}

/**
 * A node that starts /bin/sleep in a session of its own (setsid) holding nothing of its, writes
 * its pid and its /proc/self/ns/pid link to the file named by its first argument, then exits, or
 * waits when its second argument is `wait`.
 */
const parentOfDetachedSleep = `const { readlinkSync, writeFileSync } = require("node:fs");
require("node:child_process").spawn("/bin/sleep", ["30"], { detached: true, stdio: "ignore" }).unref();
writeFileSync(process.argv[1], JSON.stringify({ pid: process.pid, ns: readlinkSync("/proc/self/ns/pid") }));
if (process.argv[2] !== "wait") process.exit(0);
setInterval(() => {}, 1000);`;

/** What parentOfDetachedSleep wrote, once it has. */
async function seenBy(file: string): Promise<{ pid: number; ns: string }> {
  if (!(await eventually(() => existsSync(file) && readFileSync(file, 'utf8') !== ''))) throw new Error(`nothing written to ${file}`);
  return JSON.parse(readFileSync(file, 'utf8')) as { pid: number; ns: string };
}

t.test('in a PID namespace of its own, a process is pid 1 with its /proc, and what it started in a session of its own ends when it exits', { skip: noNamespaces }, async (t) => {
  const pidNamespace = await namespaces(t);
  const file = join(t.testdir(), 'seen');
  const result = await run(node, ['-e', parentOfDetachedSleep, file, 'exit'], { ...bounds, pidNamespace });
  t.equal(result.code, 0, result.stderr);
  const seen = await seenBy(file);
  t.equal(seen.pid, 1, 'it is pid 1 there');
  t.not(seen.ns, readlinkSync('/proc/self/ns/pid'), "its /proc is its namespace's");
  t.ok(await eventually(() => inNamespace(seen.ns).length === 0), 'nothing is left in its namespace: the detached sleep is gone');
});

t.test('kill() of a process in a PID namespace ends everything in it, also what left its group', { skip: noNamespaces }, async (t) => {
  const pidNamespace = await namespaces(t);
  const file = join(t.testdir(), 'seen');
  const started = startProcess(node, ['-e', parentOfDetachedSleep, file, 'wait'], { ...bounds, pidNamespace, ownGroup: true });
  started.feed('');
  const { ns } = await seenBy(file);
  t.ok(await eventually(() => inNamespace(ns).length === 2), 'it and its sleep run');
  started.kill();
  t.match(await started.exited, { code: null, signal: 'SIGKILL' });
  t.ok(await eventually(() => inNamespace(ns).length === 0), 'nothing is left in its namespace');
});

t.test('an exec that unshare cannot do rejects exited with unshare\'s reason', { skip: noNamespaces }, async (t) => {
  const pidNamespace = await namespaces(t);
  const started = startProcess('/nonexistent/tool', [], { ...bounds, pidNamespace });
  started.feed('');
  await t.rejects(started.exited, { name: 'PodnetError', code: 'NOT_AVAILABLE', message: 'failed to execute /nonexistent/tool: No such file or directory' });
});

t.test('probePidNamespaces tells why unshare cannot make the namespaces, and asks once', async (t) => {
  // An unshare that answers as the real one does without CAP_SYS_ADMIN.
  const dir = mkdtempSync(join(tmpdir(), 'podnet-process-test-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  const fake = join(dir, 'unshare');
  const count = join(dir, 'count');
  writeFileSync(fake, `#!${node}\nrequire('node:fs').appendFileSync(${JSON.stringify(count)}, 'x');\nprocess.stderr.write('unshare: unshare failed: Operation not permitted\\n');\nprocess.exit(1);\n`);
  chmodSync(fake, 0o755);
  t.equal(await probePidNamespaces(fake), 'unshare failed: Operation not permitted');
  t.equal(await probePidNamespaces(fake), 'unshare failed: Operation not permitted');
  t.equal(readFileSync(count, 'utf8'), 'x', 'run once');
});

t.test('probePidNamespaces puts the setpriv of unshare\'s folder in front of it, and does without one missing or failing', { skip: noUnshare }, async (t) => {
  const unshare = systemUnshare!;
  const setpriv = findExecutable('setpriv', [dirname(unshare)]);
  if (setpriv === undefined) t.comment(`no setpriv next to ${unshare}: only the cases without one are checked`);
  else t.same(await probePidNamespaces(unshare), { unshare, setpriv }, 'the one next to it');
  // unshare under a name of its own, alone in its folder, then with a setpriv that has no --pdeathsig (util-linux before 2.33).
  const dir = mkdtempSync(join(tmpdir(), 'podnet-process-test-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  for (const [folder, fakeSetpriv] of [['alone', false], ['old', true]] as const) {
    const here = join(dir, folder, 'unshare');
    mkdirSync(dirname(here));
    symlinkSync(unshare, here);
    if (fakeSetpriv) {
      writeFileSync(join(dir, folder, 'setpriv'), `#!${node}\nprocess.stderr.write("setpriv: unrecognized option '--pdeathsig'\\n");\nprocess.exit(1);\n`);
      chmodSync(join(dir, folder, 'setpriv'), 0o755);
    }
    const probe = await probePidNamespaces(here);
    t.same(probe, { unshare: here }, `${folder}: unshare alone`);
    if (typeof probe === 'string') continue;
    const result = await run(node, ['-e', 'process.stdout.write(String(process.pid))'], { ...bounds, pidNamespace: probe });
    t.match(result, { code: 0, stdout: '1' }, `${folder}: still pid 1 of a namespace of its own`);
  }
});

/** Every process (of this test's /proc, zombies left out) whose command line has `marker` as one of its arguments. */
function withArgument(marker: string): { pid: number; argv: string[] }[] {
  return readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .flatMap((pid) => {
      try {
        const argv = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
        return argv.includes(marker) && !gone(Number(pid)) ? [{ pid: Number(pid), argv }] : [];
      } catch {
        return [];
      }
    });
}

/** Polls `check` until it holds or `ms` have passed; whether it held. */
async function within(ms: number, check: () => boolean): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (!check() && Date.now() < deadline) await sleep(20);
  return check();
}

/**
 * A node that, through process.ts (its first argument), starts the file named by its second
 * argument with `300` in a PID namespace of its own, as the plugin runner does, prints the
 * PidNamespaces it used and waits.
 */
const parentInNamespace = `const [processTs, file, unshare] = process.argv.slice(1);
import(processTs).then(async (m) => {
  const pidNamespace = await m.probePidNamespaces(unshare);
  if (typeof pidNamespace === "string") throw new Error(pidNamespace);
  m.startProcess(file, ["300"], { pidNamespace, ownGroup: true, maxStdoutBytes: 1, maxStderrBytes: 4096 }).feed("");
  process.stdout.write(JSON.stringify(pidNamespace));
});`;

t.test('a daemon killed outright takes the PID namespace it started a process in with it', { skip: noDeathSignal }, async (t) => {
  // The marker: a sleep under a name of this test's own, in the command line of unshare and of the sleep.
  const dir = mkdtempSync(join(tmpdir(), 'podnet-process-test-'));
  const sleeper = join(dir, 'sleep');
  symlinkSync(findExecutable('sleep', ['/usr/bin', '/bin'])!, sleeper);
  const parent = spawn(node, ['-e', parentInNamespace, join(import.meta.dirname, 'process.ts'), sleeper, systemUnshare!], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  parent.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
  parent.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
  t.teardown(() => {
    // Whatever of it is left, however the test ended: unshare's death takes its namespace with it.
    parent.kill('SIGKILL');
    for (const { pid } of withArgument(sleeper)) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
    rmSync(dir, { recursive: true, force: true });
  });
  const running = await within(10_000, () => withArgument(sleeper).some(({ argv }) => argv[0] === sleeper));
  t.ok(running, `the sleep runs in its namespace (${output})`);
  if (!running) return;
  parent.kill('SIGKILL');
  await new Promise((resolve) => parent.once('exit', resolve));
  await within(10_000, () => withArgument(sleeper).length === 0);
  t.same(
    withArgument(sleeper).map(({ argv }) => argv.join(' ').trim()),
    [],
    'nothing of it is left: not setpriv, not unshare, not the sleep',
  );
});
