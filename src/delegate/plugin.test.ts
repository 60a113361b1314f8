// PluginRunner with plugins that are small executables of this test's own (a script run by the
// project's Node, no shell), recording how they were run: env and stdin as the CNI spec passes them.
import t, { type Test } from 'tap';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { DelegatedConfig } from '../model/cni-config.ts';
import { podNetns } from '../testing/netns.ts';
import { PluginRunner } from './plugin.ts';

/** A plugin that appends what it was run with to `log` and prints `answer`, exiting with `exit`. */
function plugin(dir: string, name: string, log: string, answer: object | string = {}, exit = 0): void {
  const path = join(dir, name);
  const printed = typeof answer === 'string' ? answer : JSON.stringify(answer);
  writeFileSync(
    path,
    `#!${process.execPath}
const { appendFileSync, readFileSync } = require('node:fs');
const stdin = readFileSync(0, 'utf8');
appendFileSync(${JSON.stringify(log)}, JSON.stringify({ plugin: ${JSON.stringify(name)}, command: process.env.CNI_COMMAND, ifname: process.env.CNI_IFNAME, stdin: JSON.parse(stdin) }) + '\\n');
process.stdout.write(${JSON.stringify(printed)});
process.exit(${exit});
`,
  );
  chmodSync(path, 0o755);
}

/** A plugin whose code is `body`, run by the project's Node. */
function scriptPlugin(dir: string, name: string, body: string): void {
  const path = join(dir, name);
  writeFileSync(path, `#!${process.execPath}\n${body}`);
  chmodSync(path, 0o755);
}

/** A bin dir outside the project: a script there is not read as one of the project's modules. */
function binDir(t: Test): string {
  const dir = mkdtempSync(join(tmpdir(), 'podnet-plugin-test-'));
  t.teardown(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

const ran = (log: string) => readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { plugin: string; command: string; ifname?: string; stdin: Record<string, unknown> });
const target = { containerId: 'c1', netns: '/run/netns/c1', ifname: 'net1', args: 'K8S_POD_NAME=a' };
const list = (...types: string[]): DelegatedConfig => ({ name: 'blue', cniVersion: '1.1.0', plugins: types.map((type) => ({ type })) });

t.test('ADD runs the list in order, each given the result so far; DEL runs it in reverse with the cached result', async (t) => {
  const dir = binDir(t);
  const log = join(dir, 'log');
  const result = { cniVersion: '1.1.0', interfaces: [{ name: 'net1', sandbox: '/run/netns/c1' }], ips: [{ address: '198.18.5.2/24', interface: 0 }] };
  plugin(dir, 'first', log, result);
  plugin(dir, 'second', log, { ...result, dns: { nameservers: ['198.18.5.1'] } });
  const runner = new PluginRunner({ binDirs: [dir], timeoutMs: 10_000 });
  t.same(await runner.add(list('first', 'second'), target), { ...result, dns: { nameservers: ['198.18.5.1'] } }, 'the last one\'s result is the list\'s');
  await runner.del(list('first', 'second'), target, result);
  const calls = ran(log);
  t.same(calls.map((c) => `${c.command} ${c.plugin}`), ['ADD first', 'ADD second', 'DEL second', 'DEL first']);
  t.equal(calls[0]!.stdin['prevResult'], undefined, 'the first ADD has no result before it');
  t.same(calls[1]!.stdin['prevResult'], result);
  t.same(calls[2]!.stdin['prevResult'], result, 'DEL is given the cached result');
  t.same(calls.map((c) => [c.stdin['name'], c.stdin['cniVersion'], c.ifname]), Array(4).fill(['blue', '1.1.0', 'net1']));
});

t.test('GC runs every plugin of the list, a missing one included, and throws the first failure after', async (t) => {
  const dir = binDir(t);
  const log = join(dir, 'log');
  plugin(dir, 'present', log);
  const runner = new PluginRunner({ binDirs: [dir], timeoutMs: 10_000 });
  await t.rejects(runner.gc(list('missing', 'present'), []), { code: 'NOT_AVAILABLE', message: /plugin missing is not in the CNI bin dirs/ });
  t.same(ran(log).map((c) => `${c.command} ${c.plugin}`), ['GC present'], 'the plugin after the missing one still ran');
  t.same(ran(log)[0]!.stdin['cni.dev/valid-attachments'], []);
});

t.test('a plugin\'s CNI error is told with its code; an answer that is not a CNI result is refused, naming what is wrong', async (t) => {
  const dir = binDir(t);
  const log = join(dir, 'log');
  plugin(dir, 'refuses', log, { cniVersion: '1.1.0', code: 11, msg: 'no such thing' }, 1);
  plugin(dir, 'badshape', log, { ips: 'all' });
  const runner = new PluginRunner({ binDirs: [dir], timeoutMs: 10_000 });
  await t.rejects(runner.add(list('refuses'), target), { message: /plugin refuses ADD: CNI error 11.*no such thing/ });
  await t.rejects(runner.add(list('badshape'), target), { code: 'DECODE_FAILURE', message: /its result is not a CNI result \(at \/ips: must be array\)/ });
});

t.test('a plugin whose interpreter is missing is not available, told as such', async (t) => {
  const dir = binDir(t);
  writeFileSync(join(dir, 'orphaned'), '#!/nonexistent/interpreter\n');
  chmodSync(join(dir, 'orphaned'), 0o755);
  const runner = new PluginRunner({ binDirs: [dir], timeoutMs: 10_000 });
  await t.rejects(runner.del(list('orphaned'), target, undefined), { code: 'NOT_AVAILABLE', message: /plugin orphaned DEL: could not run .*orphaned/ });
});

/** Whether this process may make PID and mount namespaces: CAP_SYS_ADMIN, bit 21 of CapEff. */
function hasSysAdmin(): boolean {
  const capEff = /^CapEff:\s*([0-9a-f]+)$/m.exec(readFileSync('/proc/self/status', 'utf8'))?.[1];
  return capEff !== undefined && ((BigInt(`0x${capEff}`) >> 21n) & 1n) === 1n;
}

const noNamespaces = hasSysAdmin() ? false : "needs CAP_SYS_ADMIN (root): a plugin's PID namespace is made with unshare --pid";

/**
 * The code of a plugin that starts a sleeper the way a daemon detaches: a middle process in a
 * session of its own starts it, in a session of its own again, and exits, so that the sleeper is
 * an orphan in no group of the plugin's. It holds the plugin's stdout. It writes its
 * /proc/self/ns/pid link and its pid there to `pidFile`. Then the plugin runs `then`.
 */
function detachingPlugin(pidFile: string, then: string): string {
  const sleeper = `const { readlinkSync, renameSync, writeFileSync } = require("node:fs");
writeFileSync(process.argv[1] + ".new", readlinkSync("/proc/self/ns/pid") + " " + process.pid);
renameSync(process.argv[1] + ".new", process.argv[1]);
setTimeout(() => {}, 3_600_000);`;
  const middle = `require("node:child_process").spawn(process.execPath, ["-e", ${JSON.stringify(sleeper)}, process.argv[1]], { detached: true, stdio: ["ignore", "inherit", "ignore"] }).unref();`;
  return `const { existsSync, readFileSync } = require('node:fs');
readFileSync(0);
require('node:child_process').spawn(process.execPath, ['-e', ${JSON.stringify(middle)}, ${JSON.stringify(pidFile)}], { detached: true, stdio: ['ignore', 'inherit', 'ignore'] }).unref();
${then}
`;
}

/** The sleeper of detachingPlugin as this test sees it: its pid here (its PID namespace may be another) and that namespace. */
async function sleeperOf(pidFile: string): Promise<{ pid: number; ns: string }> {
  for (let i = 0; i < 250 && !existsSync(pidFile); i++) await sleep(20);
  const [ns, nsPid] = readFileSync(pidFile, 'utf8').split(' ');
  const pid = readdirSync('/proc').find((entry) => /^\d+$/.test(entry) && sameProcess(Number(entry), ns!, nsPid!));
  if (pid === undefined) throw new Error(`no process is pid ${nsPid} of ${ns}`);
  return { pid: Number(pid), ns: ns! };
}

/** Whether `pid` here is the process `nsPid` of PID namespace `ns` (the last field of its NSpid). */
function sameProcess(pid: number, ns: string, nsPid: string): boolean {
  try {
    if (readlinkSync(`/proc/${pid}/ns/pid`) !== ns) return false;
    return /^NSpid:\s*(.+)$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1]?.trim().split(/\s+/).at(-1) === nsPid;
  } catch {
    return false;
  }
}

/** Whether the sleeper is gone: no such process, a zombie, or its pid already another's. */
function gone({ pid, ns }: { pid: number; ns: string }): boolean {
  try {
    return readlinkSync(`/proc/${pid}/ns/pid`) !== ns || readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.startsWith('Z');
  } catch {
    return true;
  }
}

async function eventually(check: () => boolean): Promise<boolean> {
  for (let i = 0; i < 250 && !check(); i++) await sleep(20);
  return check();
}

t.test('a plugin that hangs is killed at its timeout with everything it started, a detached orphan in its own session too', { skip: noNamespaces }, async (t) => {
  const dir = binDir(t);
  const pidFile = join(dir, 'sleeper');
  scriptPlugin(dir, 'hangs', detachingPlugin(pidFile, 'setInterval(() => {}, 1000);'));
  const runner = new PluginRunner({ binDirs: [dir], timeoutMs: 4000 });
  const adding = runner.add(list('hangs'), target);
  const sleeper = await sleeperOf(pidFile);
  t.notOk(gone(sleeper), 'the sleeper runs while the plugin hangs');
  await t.rejects(adding, { code: 'TRY_AGAIN_LATER', message: /plugin hangs ADD: no answer in 4 s; killed/ });
  t.ok(await eventually(() => gone(sleeper)), `the sleeper (pid ${sleeper.pid}) is gone after the timeout`);
});

t.test('a plugin that answers leaves nothing running: what it started ends when it exits', { skip: noNamespaces }, async (t) => {
  const dir = binDir(t);
  const pidFile = join(dir, 'sleeper');
  const go = join(dir, 'go');
  const result = { cniVersion: '1.1.0', interfaces: [{ name: 'net1', sandbox: '/run/netns/c1' }], ips: [{ address: '198.18.5.2/24', interface: 0 }] };
  // It answers once the test has seen its sleeper run.
  const answer = `const wait = setInterval(() => { if (!existsSync(${JSON.stringify(go)})) return; clearInterval(wait); process.stdout.write(${JSON.stringify(JSON.stringify(result))}); process.exit(0); }, 10);`;
  scriptPlugin(dir, 'leaves', detachingPlugin(pidFile, answer));
  const runner = new PluginRunner({ binDirs: [dir], timeoutMs: 30_000 });
  const adding = runner.add(list('leaves'), target);
  const sleeper = await sleeperOf(pidFile);
  t.notOk(gone(sleeper), 'the sleeper runs while the plugin does');
  writeFileSync(go, '');
  t.same(await adding, result, 'its answer is read, though the sleeper held its stdout');
  t.ok(await eventually(() => gone(sleeper)), `the sleeper (pid ${sleeper.pid}) is gone after the plugin exited`);
});

t.test('a plugin is pid 1 of its own PID namespace with its /proc; one given a netns through /proc runs in ours, where that path resolves', { skip: noNamespaces }, async (t) => {
  const dir = binDir(t);
  const log = join(dir, 'log');
  scriptPlugin(
    dir,
    'looks',
    `const { appendFileSync, existsSync, readFileSync, readlinkSync } = require('node:fs');
readFileSync(0);
appendFileSync(${JSON.stringify(log)}, JSON.stringify({ pid: process.pid, ns: readlinkSync('/proc/self/ns/pid'), netns: existsSync(process.env.CNI_NETNS) }) + '\\n');
`,
  );
  const runner = new PluginRunner({ binDirs: [dir], timeoutMs: 10_000 });
  const procNetns = podNetns();
  await runner.del(list('looks'), target, undefined);
  await runner.del(list('looks'), { ...target, netns: procNetns }, undefined);
  const [own, ours] = readFileSync(log, 'utf8').trim().split('\n').map((l) => JSON.parse(l) as { pid: number; ns: string; netns: boolean });
  const here = readlinkSync('/proc/self/ns/pid');
  t.equal(own!.pid, 1, 'pid 1 of its namespace');
  t.not(own!.ns, here, 'a namespace of its own, its /proc showing it');
  t.not(ours!.pid, 1);
  t.equal(ours!.ns, here, `with CNI_NETNS=${procNetns}, in this test's PID namespace`);
  t.ok(ours!.netns, 'where it opens that netns');
});
