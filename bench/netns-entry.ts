// bench/netns-entry: what one command in a pod's netns costs as the node's mount table grows, by
// the two ways iproute2 can be put there (ADR 23): `ip -n NAME`, which unshares a mount namespace
// to mount the netns's /sys (a copy of every mount of the node), and `nsenter --net=PATH ip`, one
// exec more and no copy. A node's mount table holds a netns mount per pod and each container's
// root, /dev/shm, secrets and volumes beside; the bench adds named netns (one mount each) until the
// table has the counts asked for. Each side runs `-json -d link show` in one netns, alternating,
// started from Node as the daemon's launcher starts its tools.
// Run as root: npm run bench:netns-entry [-- RUNS]   (default 200 commands a side per table size)
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { alternating, countArgument, median, now, runBenchmark, suffix } from './lib/harness.ts';
import { makeNetns } from './lib/podnet.ts';

const tableSizes = [0, 500, 2000];

/** Milliseconds from the spawn of `file args` until it exited, which it must do with 0. */
function timed(file: string, args: readonly string[]): Promise<number> {
  const started = now();
  return new Promise((resolve, reject) => {
    const child = spawn(file, args, { stdio: ['ignore', 'ignore', 'pipe'], env: { PATH: process.env['PATH'] ?? '', LC_ALL: 'C' } });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('error', reject);
    child.on('close', (code) => (code === 0 ? resolve(now() - started) : reject(new Error(`${file} ${args.join(' ')} exited ${code}: ${stderr}`))));
  });
}

const mounts = () => readFileSync('/proc/self/mountinfo', 'utf8').split('\n').filter(Boolean).length;

await runBenchmark(async () => {
  const runs = countArgument(2, 200, 'RUNS');
  const id = suffix();
  const target = `pnne-${id}`;
  await makeNetns([target]);
  const base = mounts();
  let made = 0;
  console.log(`one \`-json -d link show\` in a netns, ${runs} a side, alternating; medians (ms)`);
  console.log('mounts   ip -n   nsenter --net   ip -n / nsenter');
  for (const size of tableSizes) {
    const more = Math.max(0, base + size - mounts());
    if (more > 0) {
      await makeNetns(Array.from({ length: more }, (_, i) => `pnne-${id}-${made + i}`));
      made += more;
    }
    const [byIp, byNsenter] = await alternating(
      runs,
      10,
      () => timed('ip', ['-n', target, '-json', '-d', 'link', 'show']),
      () => timed('nsenter', [`--net=/run/netns/${target}`, '--', 'ip', '-json', '-d', 'link', 'show']),
    );
    const [a, b] = [median(byIp), median(byNsenter)];
    console.log(`${String(mounts()).padStart(6)}   ${a.toFixed(2).padStart(5)}   ${b.toFixed(2).padStart(13)}   ${(a / b).toFixed(2).padStart(15)}`);
  }
  return 0;
});
