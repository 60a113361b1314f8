// `podnet install` and `podnet uninstall` on real folders, with the built executable: each example
// primary of cni-conf/ chained and given back, a .conf primary, a primary that appears late or
// rewrites its file, bad input and folders that refuse writes, a copy while the old binary runs,
// and the daemon chaining podnet again after the primary rewrote its config.
import t, { type Test } from 'tap';
import { execa } from 'execa';
import { copyFile, mkdir, readFile, readdir, stat, writeFile } from 'node:fs/promises';
import { dir } from 'tmp-promise';
import { missingPrerequisite, podnetBinary, repoRoot } from './lib/env.ts';
import { daemonSandbox } from './lib/daemon.ts';
import { until } from './lib/engine.ts';

const skip = missingPrerequisite();

interface Dirs {
  root: string;
  bin: string;
  conf: string;
}

async function cniDirs(t: Test): Promise<Dirs> {
  const tmp = await dir({ unsafeCleanup: true, prefix: 'podnet-install-' });
  t.teardown(async () => {
    // A tmpfs a test mounted goes before the folder.
    await execa('umount', ['-R', `${tmp.path}/bin`], { reject: false });
    await execa('umount', ['-R', `${tmp.path}/conf`], { reject: false });
    await tmp.cleanup();
  });
  const dirs = { root: tmp.path, bin: `${tmp.path}/bin`, conf: `${tmp.path}/conf` };
  await mkdir(dirs.bin);
  await mkdir(dirs.conf);
  return dirs;
}

const podnet = (args: string[], dirs: Dirs) =>
  execa(podnetBinary, [...args, '--cni-bin-dir', dirs.bin, '--cni-conf-dir', dirs.conf], { reject: false });
const install = (dirs: Dirs, ...extra: string[]) => podnet(['install', '--wait-seconds', '0', ...extra], dirs);
const uninstall = (dirs: Dirs) => podnet(['uninstall', '--keep-pods', '--state-dir', `${dirs.root}/state`], dirs);

/** The folder's files and their text: what "nothing changed" is checked against. */
async function snapshot(folder: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  for (const name of (await readdir(folder)).sort()) out[name] = name === 'podnet' ? `${(await stat(`${folder}/${name}`)).size} bytes` : await readFile(`${folder}/${name}`, 'utf8');
  return out;
}

type Plugin = Record<string, unknown>;

t.test('each example primary: chained once, unchanged on a second install, re-chained after the primary rewrites, given back by uninstall', { skip }, async (t) => {
  const examples = (await readdir(`${repoRoot}cni-conf`)).filter((n) => n.endsWith('.conflist'));
  t.ok(examples.length >= 5, `examples: ${examples.join(', ')}`);
  for (const example of examples) {
    await t.test(example, async (t) => {
      const dirs = await cniDirs(t);
      const chained = JSON.parse(await readFile(`${repoRoot}cni-conf/${example}`, 'utf8')) as { plugins: Plugin[] };
      const entry = chained.plugins.find((p) => p['type'] === 'podnet')!;
      const primary = `${JSON.stringify({ ...chained, plugins: chained.plugins.filter((p) => p !== entry) }, null, 4)}\n`;
      await writeFile(`${dirs.conf}/${example}`, primary, { mode: 0o644 });
      const settings = [
        ...(entry['socketPath'] ? ['--socket', String(entry['socketPath'])] : []),
        ...(entry['stateDir'] ? ['--state-dir', String(entry['stateDir'])] : []),
        ...(entry['timeoutMs'] ? ['--timeout-ms', String(entry['timeoutMs'])] : []),
      ];

      const first = await install(dirs, ...settings);
      t.equal(first.exitCode, 0, `podnet install: ${first.stdout}${first.stderr}`);
      t.same(JSON.parse(await readFile(`${dirs.conf}/${example}`, 'utf8')), chained, 'the conflist is the example: podnet last, the rest as the primary wrote it');
      t.equal(await readFile(`${dirs.conf}/${example}.podnet-original`, 'utf8'), primary, "the primary's file is kept beside it");
      t.ok((await readFile(`${dirs.bin}/podnet`)).equals(await readFile(podnetBinary)), 'the executable is in the bin dir');
      t.equal((await stat(`${dirs.bin}/podnet`)).mode & 0o777, 0o755, 'executable by the runtime');
      t.equal((await stat(`${dirs.conf}/${example}`)).mode & 0o777, 0o644, "the conflist keeps the primary's file mode");

      const before = await snapshot(dirs.conf);
      const again = await install(dirs, ...settings);
      t.equal(again.exitCode, 0);
      t.match(again.stdout, /already this executable\n.*already chains podnet/, 'a second install says it changed nothing');
      t.same(await snapshot(dirs.conf), before, 'and changed nothing');

      // The primary rewrites its file (an upgrade): podnet is no longer in it until chained again.
      const rewritten = primary.replace(/\n}\n$/, ',\n    "primaryVersion": "2"\n}\n');
      await writeFile(`${dirs.conf}/${example}`, rewritten);
      t.equal((await install(dirs, ...settings)).exitCode, 0, 'install after the rewrite');
      t.same(JSON.parse(await readFile(`${dirs.conf}/${example}`, 'utf8')), { ...chained, primaryVersion: '2' }, "chained again, with the primary's change");

      const removed = await uninstall(dirs);
      t.equal(removed.exitCode, 0, `podnet uninstall: ${removed.stdout}${removed.stderr}`);
      t.same(await snapshot(dirs.conf), { [example]: rewritten }, "the primary's latest file, byte for byte, and nothing else");
      t.same(await readdir(dirs.bin), [], 'the executable is gone');
    });
  }
});

t.test('a single-plugin .conf primary becomes a .conflist; uninstall gives the .conf back', { skip }, async (t) => {
  const dirs = await cniDirs(t);
  const conf = '{"cniVersion":"0.3.1","name":"cilium","type":"cilium-cni","enable-debug":false}\n';
  await writeFile(`${dirs.conf}/05-cilium.conf`, conf);
  await writeFile(`${dirs.conf}/99-loopback.conf`, '{"cniVersion":"0.3.1","name":"lo","type":"loopback"}\n');
  const done = await install(dirs);
  t.equal(done.exitCode, 0, done.stdout + done.stderr);
  t.same(JSON.parse(await readFile(`${dirs.conf}/05-cilium.conflist`, 'utf8')), {
    cniVersion: '0.3.1',
    name: 'cilium',
    plugins: [{ type: 'cilium-cni', 'enable-debug': false }, { type: 'podnet' }],
  });
  t.same((await readdir(dirs.conf)).sort(), ['05-cilium.conf.podnet-original', '05-cilium.conflist', '99-loopback.conf'], 'the .conf is kept aside, so the runtime loads the list');
  t.equal((await install(dirs)).exitCode, 0, 'install again');
  t.same((await readdir(dirs.conf)).sort(), ['05-cilium.conf.podnet-original', '05-cilium.conflist', '99-loopback.conf'], 'nothing more');
  t.equal((await uninstall(dirs)).exitCode, 0);
  t.same(await snapshot(dirs.conf), { '05-cilium.conf': conf, '99-loopback.conf': '{"cniVersion":"0.3.1","name":"lo","type":"loopback"}\n' }, 'the .conf is back as it was');
});

t.test('an empty conf dir: install waits for the primary, or says what it waited for', { skip }, async (t) => {
  const dirs = await cniDirs(t);
  const gaveUp = await install(dirs);
  t.not(gaveUp.exitCode, 0);
  t.match(gaveUp.stderr, /no CNI network config in .*\/conf after 0 s: podnet chains itself after the cluster's primary plugin/);
  t.same(await readdir(dirs.bin), [], 'nothing copied');
  const waiting = podnet(['install', '--wait-seconds', '20'], dirs);
  await new Promise((r) => setTimeout(r, 500));
  await writeFile(`${dirs.conf}/10-bridge.conflist`, '{"cniVersion":"1.0.0","name":"b","plugins":[{"type":"bridge"}]}');
  const done = await waiting;
  t.equal(done.exitCode, 0, `install once the primary appeared: ${done.stdout}${done.stderr}`);
  t.match(JSON.parse(await readFile(`${dirs.conf}/10-bridge.conflist`, 'utf8')), { plugins: [{ type: 'bridge' }, { type: 'podnet' }] });
});

t.test('bad input is refused with a message naming it, and nothing on the node changes', { skip }, async (t) => {
  for (const [what, text, message] of [
    ['not JSON', '{"cniVersion": "1.0.0", ', /10-primary\.conflist: not JSON \(/],
    ['a version podnet does not speak', '{"cniVersion":"0.2.0","name":"n","plugins":[{"type":"bridge"}]}', /cniVersion 0\.2\.0 is not one podnet speaks/],
    ['a list with a plugin without type', '{"cniVersion":"1.0.0","name":"n","plugins":[{"bridge":"x"}]}', /plugins\[0\] has no "type"/],
  ] as const) {
    const dirs = await cniDirs(t);
    await writeFile(`${dirs.conf}/10-primary.conflist`, text);
    const before = await snapshot(dirs.conf);
    const refused = await install(dirs);
    t.not(refused.exitCode, 0, `${what}: refused`);
    t.match(refused.stderr, message, `${what}: ${refused.stderr.trim()}`);
    t.match(refused.stderr, /podnet changed nothing/);
    t.same(await snapshot(dirs.conf), before, `${what}: the conf dir is as it was`);
    t.same(await readdir(dirs.bin), [], `${what}: nothing copied`);
  }
  const dirs = await cniDirs(t);
  await writeFile(`${dirs.conf}/10-primary.conflist`, '{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"}]}');
  const badSetting = await install(dirs, '--socket', 'relative/path.sock');
  t.not(badSetting.exitCode, 0);
  t.match(badSetting.stderr, /podnet install settings: .*socketPath/, 'a setting the plugin would refuse is refused now');
});

t.test('a read-only conf dir or a full bin dir: a clear error, nothing half-written', { skip }, async (t) => {
  const primary = '{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"}]}';
  const readOnly = await cniDirs(t);
  await writeFile(`${readOnly.conf}/10-primary.conflist`, primary);
  await execa('mount', ['--bind', readOnly.conf, readOnly.conf]);
  await execa('mount', ['-o', 'remount,bind,ro', readOnly.conf]);
  const refused = await install(readOnly);
  t.not(refused.exitCode, 0);
  t.match(refused.stderr, /the CNI conf dir .*\/conf is not writable \(EROFS\); podnet changed nothing/, refused.stderr.trim());
  t.same(await readdir(readOnly.bin), [], 'nothing copied');

  const full = await cniDirs(t);
  await writeFile(`${full.conf}/10-primary.conflist`, primary);
  await execa('mount', ['-t', 'tmpfs', '-o', 'size=1m', 'tmpfs', full.bin]);
  const noSpace = await install(full);
  t.not(noSpace.exitCode, 0);
  t.match(noSpace.stderr, /could not copy .* to .*\/bin\/podnet: .*ENOSPC/, noSpace.stderr.trim());
  t.same(await readdir(full.bin), [], 'no temp file, no partial binary');
  t.same(await snapshot(full.conf), { '10-primary.conflist': primary }, 'the conflist is as it was');
});

t.test('copies over a binary the runtime is running, in a loop: every run succeeds, no partial file is ever run', { skip }, async (t) => {
  const dirs = await cniDirs(t);
  await writeFile(`${dirs.conf}/10-primary.conflist`, '{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"}]}');
  // Two different executables: the built one, and the same with bytes after its end (still runs).
  const other = `${dirs.root}/podnet-other`;
  await copyFile(podnetBinary, other);
  await writeFile(other, Buffer.alloc(4096, 1), { flag: 'a' });
  t.equal((await install(dirs)).exitCode, 0);
  let stop = false;
  let runs = 0;
  const failures: string[] = [];
  const runner = (async () => {
    while (!stop) {
      const r = await execa(`${dirs.bin}/podnet`, [], { env: { CNI_COMMAND: 'VERSION' }, input: '{"cniVersion":"1.0.0"}', reject: false });
      runs++;
      if (r.exitCode !== 0 || !r.stdout.includes('supportedVersions')) failures.push(`exit ${r.exitCode}: ${r.stderr}`);
    }
  })();
  for (let i = 0; i < 6; i++) {
    const r = await install(dirs, '--binary', i % 2 === 0 ? other : podnetBinary);
    if (r.exitCode !== 0) failures.push(`install ${i}: ${r.stderr}`);
  }
  stop = true;
  await runner;
  t.ok(runs > 0, `the plugin ran ${runs} times during the copies`);
  t.same(failures, [], 'no run and no copy failed');
  t.same(await readdir(dirs.bin), ['podnet'], 'no temp file left');
});

t.test('the daemon chains podnet again when the primary rewrites its config', { skip }, async (t) => {
  const dirs = await cniDirs(t);
  const daemon = await daemonSandbox(t, { args: ['--cni-conf-dir', dirs.conf] });
  const single = '{"cniVersion":"0.3.1","name":"cilium","type":"cilium-cni"}\n';
  await writeFile(`${dirs.conf}/05-cilium.conf`, single);
  await daemon.start();
  const entry = { type: 'podnet', socketPath: daemon.socketPath, stateDir: daemon.stateDir };
  const chainedList = async (name: string) => {
    const text = await readFile(`${dirs.conf}/${name}`, 'utf8').catch(() => undefined);
    const list = text === undefined ? undefined : (JSON.parse(text) as { plugins: Plugin[] });
    return list?.plugins.at(-1)?.['type'] === 'podnet' ? list : undefined;
  };
  t.match(await until('chained at start', () => chainedList('05-cilium.conflist'), 10_000), { name: 'cilium', plugins: [{ type: 'cilium-cni' }, entry] }, 'a .conf primary present at start is chained, pointing at this daemon');

  // An upgrade of the primary writes its .conf again: the list is made anew from it.
  await writeFile(`${dirs.conf}/05-cilium.conf`, '{"cniVersion":"0.3.1","name":"cilium","type":"cilium-cni","enable-debug":true}\n');
  t.match(await until('chained after the .conf was rewritten', async () => {
    const list = await chainedList('05-cilium.conflist');
    return list && !(await readdir(dirs.conf)).includes('05-cilium.conf') && list.plugins[0]!['enable-debug'] === true ? list : undefined;
  }, 10_000), { plugins: [{ type: 'cilium-cni', 'enable-debug': true }, entry] }, 'the rewritten .conf is chained within seconds');

  // A new primary that sorts first (the cluster moves to another CNI) is chained too.
  await writeFile(`${dirs.conf}/00-calico.conflist`, '{"cniVersion":"0.3.1","name":"k8s-pod-network","plugins":[{"type":"calico"},{"type":"portmap"}]}');
  t.match(await until('the new primary chained', () => chainedList('00-calico.conflist'), 10_000), { plugins: [{ type: 'calico' }, { type: 'portmap' }, entry] }, 'a new primary is chained within seconds');

  // Uninstall while this daemon runs would be undone by it, now without an executable for the
  // runtime to find: refused, --keep-pods or not, before anything changes.
  const before = await snapshot(dirs.conf);
  for (const keep of [['--keep-pods'], []]) {
    const refused = await podnet(['uninstall', ...keep, '--state-dir', daemon.stateDir], dirs);
    t.not(refused.exitCode, 0, `uninstall ${keep.join(' ')} is refused while the daemon runs`);
    t.match(refused.stderr, /daemon/, refused.stderr.trim());
  }
  t.same(await snapshot(dirs.conf), before, 'the conf dir is as it was');
});
