// bench/plugin-add: what podnet adds to a pod's creation. Median wall time of a podnet ADD through
// the built executable (daemon up, spool entry written; the pod asks for nothing, which the
// daemon's hint tells the plugin without a round trip, ADR 28) against two anchors measured in the
// same run, alternating A B C A B C ...:
//  - `node -e 0` on the same pinned Node: the floor of any Node executable's start;
//  - the reference `tuning` plugin in podnet's chain position, with the same prevResult;
// and podnet VERSION, the executable's start with nothing to write: what the plugin's own code
// costs over Node's floor.
// Targets (issue 20): podnet ADD / node -e 0 <= 1.10, VERSION <= 1.0. Whole processes, at least 40
// rounds. Run as root: npm run bench [-- RUNS] [--busy-disk]
//   --busy-disk: a process writes 512 MiB files with fsync in the state dir's file system all along,
//   as kubelet, image pulls and logs keep a node's disk busy (an fsync then waits behind them).
//   --against FILE: another build's ADD and VERSION in the same alternation, with the same daemon,
//   to tell two builds apart on a machine whose floor moves between runs; each build's goes first
//   every other round.
// PODNET_BINARY runs another build than dist/podnet.
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { keepDiskBusy, optionValue } from './lib/harness.ts';
import { podnetBinary } from './lib/podnet.ts';

const runs = Number(process.argv.slice(2).find((a, i, all) => !a.startsWith('-') && all[i - 1] !== '--against') ?? 40);
const busyDisk = process.argv.includes('--busy-disk');
const against = optionValue('--against');
const target = 1.1;
const versionTarget = 1.0;

const work = mkdtempSync(`${tmpdir()}/podnet-bench-`);
const netnsName = `pnbench${process.pid}`;
const socketPath = `${work}/run/podnet.sock`;
const stateDir = `${work}/state`;
execFileSync('ip', ['netns', 'add', netnsName]);
execFileSync('ip', ['-n', netnsName, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'peer0']);

const prevResult = {
  cniVersion: '1.0.0',
  interfaces: [{ name: 'eth0', sandbox: `/run/netns/${netnsName}` }],
  ips: [{ address: '198.18.70.2/24', gateway: '198.18.70.1', interface: 0 }],
};
const config = (type: string, extra: object = {}) =>
  JSON.stringify({ cniVersion: '1.0.0', name: 'bench', type, ...extra, prevResult });
const podnetConfig = config('podnet', { socketPath, stateDir });
const tuningConfig = config('tuning');

function timeOnce(file: string, args: string[], input: string, env: NodeJS.ProcessEnv): number {
  const start = process.hrtime.bigint();
  const r = spawnSync(file, args, { input, env });
  const ms = Number(process.hrtime.bigint() - start) / 1e6;
  if (r.status !== 0) throw new Error(`${file} ${args.join(' ')} failed: ${r.stdout}${r.stderr}`);
  return ms;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
};

// The daemon runs as in production: its own process, started before the measurement.
const daemon = spawn(podnetBinary, ['daemon', '--socket', socketPath, '--state-dir', stateDir], { stdio: 'ignore' });
// Beside the state dir.
const stopWriter = busyDisk ? keepDiskBusy(work) : undefined;
for (let i = 0; i < 100 && !existsSync(socketPath); i++) await new Promise((r) => setTimeout(r, 20));
try {
  const cniEnv = (containerId: string): NodeJS.ProcessEnv => ({
    CNI_COMMAND: 'ADD',
    CNI_CONTAINERID: containerId,
    CNI_NETNS: `/run/netns/${netnsName}`,
    CNI_IFNAME: 'eth0',
    CNI_PATH: '/usr/lib/cni',
    CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=bench;K8S_POD_NAME=bench-0',
  });
  const node: number[] = [];
  const podnet: number[] = [];
  const tuning: number[] = [];
  const version: number[] = [];
  const againstAdd: number[] = [];
  const againstVersion: number[] = [];
  const versionInput = JSON.stringify({ cniVersion: '1.0.0' });
  for (let i = -3; i < runs; i++) {
    const n = timeOnce(process.execPath, ['-e', '0'], '', {});
    // The other build goes first every other round: what runs second runs while the daemon takes
    // in the first one's ADD, and measured 0.02 to 0.13 x slower for it, whichever build it was.
    // Its ADD and VERSION have a tuning run between them, as this build's have.
    const theirs = (): [number, number] | undefined => {
      if (!against) return undefined;
      const add = timeOnce(against, [], podnetConfig, cniEnv(`against${i + 3}`));
      timeOnce('/usr/lib/cni/tuning', [], tuningConfig, cniEnv(`against${i + 3}`));
      return [add, timeOnce(against, [], versionInput, { CNI_COMMAND: 'VERSION' })];
    };
    const theirsFirst = i % 2 !== 0;
    const early = theirsFirst ? theirs() : undefined;
    const p = timeOnce(podnetBinary, [], podnetConfig, cniEnv(`bench${i + 3}`));
    const u = timeOnce('/usr/lib/cni/tuning', [], tuningConfig, cniEnv(`bench${i + 3}`));
    const v = timeOnce(podnetBinary, [], versionInput, { CNI_COMMAND: 'VERSION' });
    const other = theirsFirst ? early : theirs();
    if (i < 0) continue; // warm-up: page cache, first daemon writes
    if (other) {
      againstAdd.push(other[0]);
      againstVersion.push(other[1]);
    }
    node.push(n);
    podnet.push(p);
    tuning.push(u);
    version.push(v);
  }
  // Every ADD measured must end up as a record: what was timed is a change that counts.
  for (let i = 0; i < 250 && readdirSync(`${stateDir}/spool`).length > 0; i++) await new Promise((r) => setTimeout(r, 20));
  const recorded = readdirSync(`${stateDir}/records`).length;
  const expected = (runs + 3) * (against ? 2 : 1);
  if (recorded !== expected) throw new Error(`expected ${expected} records; the daemon has ${recorded}`);
  const [mn, mp, mu, mv] = [median(node), median(podnet), median(tuning), median(version)];
  const [ratio, versionRatio] = [mp / mn, mv / mn];
  console.log(`runs: ${runs} (alternating, after 3 warm-up rounds), Node ${process.version}${busyDisk ? '; the disk kept busy' : ''}`);
  console.log(`node -e 0        median ${mn.toFixed(1)} ms`);
  console.log(`podnet ADD       median ${mp.toFixed(1)} ms   ${ratio.toFixed(2)} x node -e 0 (target <= ${target})`);
  console.log(`podnet VERSION   median ${mv.toFixed(1)} ms   ${versionRatio.toFixed(2)} x node -e 0 (target <= ${versionTarget})`);
  console.log(`tuning ADD       median ${mu.toFixed(1)} ms   podnet ADD is ${(mp / mu).toFixed(1)} x tuning`);
  if (against) {
    const [ma, mav] = [median(againstAdd), median(againstVersion)];
    console.log(`against ${against}:`);
    console.log(`  its ADD        median ${ma.toFixed(1)} ms   ${(ma / mn).toFixed(2)} x node -e 0`);
    console.log(`  its VERSION    median ${mav.toFixed(1)} ms   ${(mav / mn).toFixed(2)} x node -e 0`);
  }
  const pass = ratio <= target && versionRatio <= versionTarget;
  console.log(pass ? 'PASS' : 'FAIL');
  process.exitCode = pass ? 0 : 1;
} finally {
  await stopWriter?.();
  daemon.kill('SIGTERM');
  await new Promise((r) => daemon.once('exit', r));
  execFileSync('ip', ['netns', 'del', netnsName]);
  rmSync(work, { recursive: true, force: true });
}
