// Nothing the runtime was told succeeded is ever lost while the kernel lives (an ADD's entry goes
// with a power cut, and its sandbox with it: ADR 24), and nothing waits on the daemon: with the
// daemon down, frozen, or killed with SIGKILL in a loop, the records end up equal to the sandboxes
// that live.
import t, { type Test } from 'tap';
import { execa } from 'execa';
import { chmod, mkdir, readdir, writeFile } from 'node:fs/promises';
import { dir } from 'tmp-promise';
import { CniRuntime, type Attachment } from './lib/cni-runtime.ts';
import { daemonSandbox, type DaemonSandbox } from './lib/daemon.ts';
import { missingPrerequisite, podnetBinary } from './lib/env.ts';
import { makeNetns, uniqueName } from './lib/netns.ts';

const skip = missingPrerequisite();

/** podnet alone, as the last plugin of a 1.0.0 list, with a primary result made up for it. */
function podnetList(daemon: DaemonSandbox) {
  return { cniVersion: '1.0.0', name: 'durability', plugins: [{ type: 'podnet', ...daemon.pluginSettings() }] };
}
const primaryResult = { cniVersion: '1.0.0', interfaces: [{ name: 'eth0' }], ips: [{ address: '198.18.50.2/24', interface: 0 }] };

async function plugin(t: Test, daemon: DaemonSandbox, command: 'ADD' | 'DEL', att: Attachment) {
  const runtime = new CniRuntime([daemon.binDir]);
  const list = podnetList(daemon);
  const out = await runtime.invoke(list, list.plugins[0]!, command, att, primaryResult);
  if (command === 'ADD') t.same(out, primaryResult, `ADD ${att.containerId} passed the result through`);
}

async function spoolFiles(daemon: DaemonSandbox): Promise<string[]> {
  return (await readdir(`${daemon.stateDir}/spool`).catch(() => [])).filter((n) => n.endsWith('.json'));
}

async function recordedIds(daemon: DaemonSandbox): Promise<string[]> {
  return (await daemon.records()).map((r) => r.containerId).sort();
}

t.test('daemon down during ADD and DEL, then started: nothing lost', { skip }, async (t) => {
  const daemon = await daemonSandbox(t);
  const netns = await makeNetns(t);
  const atts = ['a', 'b', 'c'].map((id): Attachment => ({ containerId: uniqueName(`down-${id}-`), netns: netns.path, ifname: 'eth0' }));
  for (const att of atts) await plugin(t, daemon, 'ADD', att);
  await plugin(t, daemon, 'DEL', atts[1]!);
  // Each ADD's record, then the same record marked as started without its network (ADR 28), then the DEL.
  t.equal((await spoolFiles(daemon)).length, 7, 'the seven changes wait in the spool');

  await daemon.start();
  t.same(await recordedIds(daemon), [atts[0]!.containerId, atts[2]!.containerId].sort(), 'replayed in order');
  t.ok((await daemon.records()).every((r) => r.startedWithoutNetwork === true), 'each record says its pod started without its network');
  t.same(await spoolFiles(daemon), [], 'the spool is empty once replayed');
});

t.test('a frozen daemon neither blocks nor reorders what the plugins record', { skip }, async (t) => {
  const daemon = await daemonSandbox(t);
  await daemon.start();
  const netns = await makeNetns(t);
  const [gone, kept] = ['gone-', 'kept-'].map((p): Attachment => ({ containerId: uniqueName(p), netns: netns.path, ifname: 'eth0' }));
  const pid = Number((await execa('pgrep', ['-f', `daemon --socket ${daemon.socketPath}`])).stdout.split('\n')[0]);
  process.kill(pid, 'SIGSTOP');
  try {
    // A plugin that waited on the daemon would hang here; podnet's return at once.
    await plugin(t, daemon, 'ADD', gone!);
    await plugin(t, daemon, 'ADD', kept!);
    await plugin(t, daemon, 'DEL', gone!);
  } finally {
    process.kill(pid, 'SIGCONT');
  }
  t.same(await recordedIds(daemon), [kept!.containerId], 'applied in the order the runtime issued them');
  t.same(await spoolFiles(daemon), []);
});

t.test('SIGKILL in a loop under a burst of 100 ADD/DEL: records equal the live sandboxes', { skip }, async (t) => {
  const daemon = await daemonSandbox(t);
  await daemon.start();
  const namespaces = await Promise.all([0, 1, 2, 3].map(() => makeNetns(t)));
  // 60 sandboxes are added; 40 of them are deleted again: 100 plugin runs.
  const sandboxes = Array.from({ length: 60 }, (_, i) => ({
    att: { containerId: `burst-${i}-${uniqueName('')}`, netns: namespaces[i % 4]!.path, ifname: 'eth0' } as Attachment,
    deleted: i % 3 !== 0,
  }));

  let bursting = true;
  let kills = 0;
  const killer = (async () => {
    while (bursting) {
      await new Promise((r) => setTimeout(r, 20 + Math.floor(Math.random() * 80)));
      await daemon.kill();
      kills++;
      await daemon.start();
    }
  })();

  // Four runtimes at once; each sandbox's own ADD and DEL in order, as a runtime issues them.
  const queue = [...sandboxes];
  const failures: string[] = [];
  await Promise.all(
    [0, 1, 2, 3].map(async () => {
      for (let s = queue.shift(); s; s = queue.shift()) {
        try {
          await plugin(t, daemon, 'ADD', s.att);
          if (s.deleted) await plugin(t, daemon, 'DEL', s.att);
        } catch (err) {
          failures.push(`${s.att.containerId}: ${(err as Error).message}`);
        }
      }
    }),
  );
  bursting = false;
  await killer;
  t.same(failures, [], 'every plugin run succeeded');
  t.ok(kills >= 3, `the daemon was killed during the burst (${kills} times)`);

  await daemon.kill();
  await daemon.start();
  const live = sandboxes.filter((s) => !s.deleted).map((s) => s.att.containerId).sort();
  t.same(await recordedIds(daemon), live, 'records equal exactly the live sandboxes');
  t.same(await spoolFiles(daemon), [], 'nothing left in the spool');
  const leftovers = (await readdir(`${daemon.stateDir}/records`)).filter((n) => !n.endsWith('.json'));
  t.same(leftovers, [], 'no temp files left in records/');
});

t.test('a corrupt record file is set aside at start and reported, the others load', { skip }, async (t) => {
  const daemon = await daemonSandbox(t);
  const netns = await makeNetns(t);
  const att: Attachment = { containerId: uniqueName('good-'), netns: netns.path, ifname: 'eth0' };
  await plugin(t, daemon, 'ADD', att);
  await daemon.start();
  await daemon.stop();
  await writeFile(`${daemon.stateDir}/records/torn@eth0.json`, '{"containerId": "torn", "ifn');

  await daemon.start();
  t.same(await recordedIds(daemon), [att.containerId], 'the good record loads');
  const { stdout } = await execa(`${daemon.binDir}/podnet`, ['status', '--socket', daemon.socketPath]);
  t.match(stdout, /quarantined: +1\n {2}\d+-\d+-torn@eth0\.json: .*JSON/, 'podnet status names the file and why');
  t.same((await readdir(`${daemon.stateDir}/quarantine`)).length, 1, 'the file is kept for a human in quarantine/');
});

t.test('a second daemon on the same state directory is refused before it touches anything', { skip }, async (t) => {
  const daemon = await daemonSandbox(t);
  await daemon.start();
  const netns = await makeNetns(t);
  const att: Attachment = { containerId: uniqueName('first-'), netns: netns.path, ifname: 'eth0' };
  const pid = Number((await execa('pgrep', ['-f', `daemon --socket ${daemon.socketPath}`])).stdout.split('\n')[0]);
  process.kill(pid, 'SIGSTOP');
  try {
    // Left in the spool for the first daemon, which is frozen and cannot drain it.
    await plugin(t, daemon, 'ADD', att);
    const second = await execa(`${daemon.binDir}/podnet`, ['daemon', '--socket', `${daemon.root}/other.sock`, '--state-dir', daemon.stateDir], { reject: false });
    t.not(second.exitCode, 0, 'the second daemon exits non-zero');
    t.match(second.stderr, new RegExp(`state directory .* is held by the podnet daemon with pid ${pid}`));
    t.equal((await spoolFiles(daemon)).length, 1, 'it replayed nothing: the entry waits for the first daemon');
  } finally {
    process.kill(pid, 'SIGCONT');
  }
  t.same(await recordedIds(daemon), [att.containerId], 'the first daemon applies it');
});

t.test('a state dir or socket folder a local user could write into is refused at start, naming it; nothing is read or written there', { skip }, async (t) => {
  const tmp = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-' });
  t.teardown(() => tmp.cleanup());
  const open = `${tmp.path}/open`;
  await mkdir(open);
  await chmod(open, 0o777);
  // What a user who could write there plants: a spool entry for the daemon to replay.
  await mkdir(`${open}/spool`, { mode: 0o700 });
  await writeFile(`${open}/spool/planted.json`, '{}');
  const run = await execa(podnetBinary, ['daemon', '--state-dir', open, '--socket', `${tmp.path}/run/podnet.sock`], { reject: false, timeout: 20_000 });
  t.not(run.exitCode, 0, 'the daemon does not start');
  t.match(run.stderr, /state dir .*\/open is writable by group or others \(mode 777\): chmod 700 it/);
  t.same((await readdir(open)).sort(), ['spool'], 'no lock, no folder made');
  t.same(await readdir(`${open}/spool`), ['planted.json'], 'the planted entry untouched');

  const state = `${tmp.path}/state`;
  const sockets = `${tmp.path}/sockets`;
  await mkdir(sockets);
  await chmod(sockets, 0o777);
  const bad = await execa(podnetBinary, ['daemon', '--state-dir', state, '--socket', `${sockets}/podnet.sock`], { reject: false, timeout: 20_000 });
  t.not(bad.exitCode, 0);
  t.match(bad.stderr, /socket folder .*\/sockets is writable by group or others \(mode 777\)/);
});
