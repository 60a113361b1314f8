// bench/record-drain: a daemon's start after N pods were created while it was down, as during an
// upgrade of the DaemonSet in pod churn. Each pod's plugin ADD (the built executable, as a runtime
// runs it) spooled its entry; the daemon makes a record of each before it lists them. Time from
// the daemon's spawn until GET /v1/attachments lists all N, a fresh state dir each round, with
// another build's daemon (--against FILE) alternated in the same run on the same entries; medians.
// Run as root: npm run bench:record-drain [-- N] [--rounds R] [--busy-disk] [--against FILE]
//   N: pods (default 200); R: rounds per build (default 5);
//   --busy-disk: another process writes 512 MiB files with fsync beside the state dirs all along,
//   as kubelet, image pulls and logs keep a node's disk busy (an fsync then waits behind them).
// PODNET_BINARY runs another build than dist/podnet (its plugin makes the entries of both).
import { execa } from 'execa';
import { cpSync, mkdtempSync, realpathSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { keepDiskBusy, median, now, onCleanup, optionValue, pool, runBenchmark, suffix, until } from './lib/harness.ts';
import { daemonLogFile, getJson, makeNetns, podnetBinary, recordSandbox, startDaemon } from './lib/podnet.ts';

await runBenchmark(async () => {
  const args = process.argv.slice(2);
  const count = Number(args.find((a, i) => !a.startsWith('-') && !['--rounds', '--against'].includes(args[i - 1] ?? '')) ?? 200);
  const rounds = Number(optionValue('--rounds') ?? 5);
  if (!Number.isInteger(count) || count < 1 || count > 10_000) throw new Error(`N must be an integer from 1 to 10000, not ${count}`);
  if (!Number.isInteger(rounds) || rounds < 1) throw new Error(`--rounds must be a positive integer, not ${rounds}`);
  const against = optionValue('--against');
  if (against !== undefined && realpathSync(against) === realpathSync(podnetBinary)) throw new Error(`--against ${against} is the build measured: give another`);
  const busyDisk = args.includes('--busy-disk');
  const id = suffix();
  const work = mkdtempSync(join(tmpdir(), 'pnbench-drain-'));
  onCleanup(`remove ${work}`, () => rmSync(work, { recursive: true, force: true }));
  const netnsName = `pndr-${id}`;
  await makeNetns([netnsName]);

  // The entries, made once by the plugin with no daemon listening; each round starts from a copy.
  const spooled = join(work, 'spooled');
  const socketPath = join(work, 'run/podnet.sock');
  const pods = Array.from({ length: count }, (_, i) => ({ netns: `/run/netns/${netnsName}`, containerId: `pnbench-${id}-${i}`, namespace: 'pnbench', name: `pod-${i}` }));
  await pool(pods, 4, (pod) => recordSandbox({ socketPath, stateDir: spooled }, pod));

  if (busyDisk) onCleanup('stop the disk writer', keepDiskBusy(work));
  const builds = against ? [podnetBinary, against] : [podnetBinary];
  const seconds = new Map<string, number[]>(builds.map((b) => [b, []]));
  for (let round = 0; round < rounds; round++) {
    for (const [b, binary] of builds.entries()) {
      const stateDir = join(work, `state-${round}-${b}`);
      cpSync(spooled, stateDir, { recursive: true });
      // The copy reaches the disk before the clock runs: a daemon's first fsync would pay for it otherwise.
      await execa('sync', ['--file-system', stateDir]);
      const daemon = startDaemon({ socketPath, stateDir }, daemonLogFile(work, `drain-${id}-${round}-${b}.log`), [], { binary });
      const listedAt = await until(
        `the daemon of ${binary} listing ${count} attachments`,
        async () => {
          if (daemon.exited()) throw new Error(`the daemon exited; its log: ${daemon.logFile}`);
          const r = await getJson(socketPath, '/v1/attachments').catch(() => undefined);
          return r?.status === 200 && (r.body as { items: unknown[] }).items.length === count ? now() : undefined;
        },
        120_000,
        10,
      );
      seconds.get(binary)!.push((listedAt - daemon.spawnedAt) / 1000);
      await daemon.stop('SIGTERM');
      rmSync(stateDir, { recursive: true, force: true });
    }
  }

  console.log(`${count} pods' ADD entries spooled while the daemon was down; ${rounds} rounds, alternating; Node ${process.version}${busyDisk ? '; the disk kept busy' : ''}`);
  for (const binary of builds) {
    const s = seconds.get(binary)!;
    console.log(`${binary === podnetBinary ? 'this build' : binary}: spawn -> all ${count} listed, median ${median(s).toFixed(2)} s (${s.map((x) => x.toFixed(2)).join(', ')})`);
  }
  return 0;
});
