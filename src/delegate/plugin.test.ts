// PluginRunner with plugins that are small executables of this test's own (a script run by the
// project's Node, no shell), recording how they were run: env and stdin as the CNI spec passes them.
import t, { type Test } from 'tap';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { DelegatedConfig } from '../model/cni-config.ts';
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
