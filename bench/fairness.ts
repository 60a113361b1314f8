// bench/fairness: one tenant floods the node with slow plugins while another attaches (issue 38).
// Namespace flood: PODS pods, each given WIDE attachments on a cni Network whose plugin's ADD
// takes SLOW ms (a script; its result a minimal CNI result). Namespace quiet: one pod, given an
// attachment on a cni Network of the same script without the wait. Alternating, medians:
//  - anchor: quiet's attachment alone, from its config landing in the config dir to the daemon
//    reporting its result;
//  - flooded: the flood's config lands, then, once its first ADDs run, quiet's; the same clock.
// Passes run one at a time: without a share per namespace, quiet's request waits for the pass
// that runs every flood pod's plugins (PODS / 8 waves of SLOW). With it (fair-share.ts) a
// pass takes 8 of a namespace's plugin sandboxes, so quiet waits for one wave at most; and a
// sandbox starts no new plugin call once it spent the pass's plugin time (pluginTimePerPassMs),
// so a wave is one slow ADD of each, not WIDE of them.
// Target (the stated bound): flooded - anchor <= 1.5 x SLOW, whatever PODS and WIDE are.
// Run as root: npm run bench:fairness [-- RUNS [PODS [SLOW [WIDE]]]]; PODNET_BINARY runs another build.
import { chmodSync, mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { alternating, countArgument, median, now, onCleanup, runBenchmark, sleep, suffix, until } from './lib/harness.ts';
import { daemonLogFile, makeNetns, podnetBinary, prepareFile, recordSandbox, sandboxes, startDaemon } from './lib/podnet.ts';

const warmups = 1;

interface DelegatedReport {
  containerId: string;
  delegated?: { interface: string; result?: unknown }[];
}

await runBenchmark(async () => {
  const runs = countArgument(2, 6, 'RUNS');
  const pods = countArgument(3, 40, 'PODS');
  const slowMs = countArgument(4, 1000, 'SLOW');
  const wide = countArgument(5, 1, 'WIDE');
  const id = suffix();
  const work = mkdtempSync(join(tmpdir(), 'pnbench-fairness-'));
  onCleanup(`remove ${work}`, () => rmSync(work, { recursive: true, force: true }));
  const paths = { socketPath: join(work, 'run/podnet.sock'), stateDir: join(work, 'state'), configDir: join(work, 'config.d') };
  mkdirSync(paths.configDir, { recursive: true, mode: 0o700 });
  const bin = join(work, 'bin');
  mkdirSync(bin);
  // ADD waits (its first argument's worth of ms, from the config's "waitMs") and answers a minimal result; DEL and CHECK answer at once.
  const plugin = join(bin, 'pnbench-wait');
  writeFileSync(
    plugin,
    `#!/bin/sh
config=$(cat)
if [ "$CNI_COMMAND" = ADD ]; then
  ms=$(printf '%s' "$config" | sed -n 's/.*"waitMs": *\\([0-9]*\\).*/\\1/p')
  [ -n "$ms" ] && [ "$ms" -gt 0 ] && sleep "$(awk "BEGIN { print $ms / 1000 }")"
  printf '{"cniVersion":"1.0.0","interfaces":[{"name":"%s","sandbox":"%s"}],"ips":[]}' "$CNI_IFNAME" "$CNI_NETNS"
fi
if [ "$CNI_COMMAND" = VERSION ]; then printf '{"cniVersion":"1.0.0","supportedVersions":["0.4.0","1.0.0"]}'; fi
exit 0
`,
  );
  chmodSync(plugin, 0o755);

  const floodNs = Array.from({ length: pods }, (_, i) => `pnbf-flood-${id}-${i}`);
  const quietNs = `pnbf-quiet-${id}`;
  await makeNetns([...floodNs, quietNs]);
  const daemon = startDaemon(paths, daemonLogFile(work, `fairness-daemon-${id}.log`), ['--resync-seconds', '600', '--cni-bin-dir', bin, '--plugin-timeout-seconds', '60']);
  await daemon.ready();
  const floodIds = floodNs.map((_, i) => `pnbench-flood-${id}-${i}`);
  const quietId = `pnbench-quiet-${id}`;
  for (const [i, ns] of floodNs.entries()) await recordSandbox(paths, { netns: `/run/netns/${ns}`, containerId: floodIds[i]!, namespace: 'flood', name: `pod-${i}` });
  await recordSandbox(paths, { netns: `/run/netns/${quietNs}`, containerId: quietId, namespace: 'quiet', name: 'pod-q' });
  await until('the pods recorded', async () => ((await sandboxes(paths.socketPath)).items.length === pods + 1 ? true : undefined), 60_000);

  const network = (name: string, waitMs: number) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: ${name} }
spec:
  type: cni
  namespaceSelector: {}
  cni: { config: { cniVersion: 1.0.0, type: pnbench-wait, waitMs: ${waitMs} } }
`;
  prepareFile(join(paths.configDir, 'network.slow.yaml'), network('pnbench-slow', slowMs)).land();
  prepareFile(join(paths.configDir, 'network.fast.yaml'), network('pnbench-fast', 0)).land();
  const config = (namespace: string, networkName: string, interfaces = 1) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: all, namespace: ${namespace} }
spec:
  podSelector: {}
  attachments: [${Array.from({ length: interfaces }, (_, i) => `{ network: ${networkName}, interface: net${i + 1} }`).join(', ')}]
`;
  const floodPath = join(paths.configDir, 'podnetworkconfig.flood.all.yaml');
  const quietPath = join(paths.configDir, 'podnetworkconfig.quiet.all.yaml');
  /** How many of `ids` have `interfaces` attachments made; 0 interfaces: how many have any. */
  const attached = async (ids: readonly string[], interfaces = 1) => {
    const items = (await sandboxes(paths.socketPath)).items as unknown as DelegatedReport[];
    const made = (r: DelegatedReport) => (r.delegated ?? []).filter((d) => d.result).length;
    return items.filter((r) => ids.includes(r.containerId) && (interfaces === 0 ? made(r) > 0 : made(r) === interfaces)).length;
  };

  /** quiet's attachment, from its config landing to its result reported; `flood`: while the flood's plugins run. */
  const quietAttach = async (flood: boolean): Promise<number> => {
    if (flood) {
      prepareFile(floodPath, config('flood', 'pnbench-slow', wide)).land();
      // Its first pass has started: some of its ADDs run.
      await sleep(Math.min(200, slowMs / 4));
    }
    const file = prepareFile(quietPath, config('quiet', 'pnbench-fast'));
    const start = now();
    file.land();
    const ms = await until("quiet's attachment made", async () => ((await attached([quietId])) === 1 ? now() - start : undefined), 600_000, 5);
    unlinkSync(quietPath);
    if (flood) {
      await until('the flood attached', async () => ((await attached(floodIds, wide)) === pods ? true : undefined), 600_000, 50);
      unlinkSync(floodPath);
    }
    await until('every attachment taken back', async () => ((await attached([...floodIds, quietId], 0)) === 0 ? true : undefined), 600_000, 20);
    return ms;
  };
  const [anchor, flooded] = await alternating(runs, warmups, () => quietAttach(false), () => quietAttach(true));
  const [ma, mf] = [median(anchor), median(flooded)];
  const delay = mf - ma;
  const bound = 1.5 * slowMs;
  const binary = relative(process.cwd(), podnetBinary) || podnetBinary;
  console.log(`runs: ${runs} (alternating, after ${warmups} warm-up round), flood ${pods} pods with ${wide} attachment(s) of a ${slowMs} ms ADD each, Node ${process.version}, ${binary}`);
  console.log(`quiet's attach alone          median ${ma.toFixed(0)} ms`);
  console.log(`quiet's attach under flood    median ${mf.toFixed(0)} ms   (the flood's plugins alone take ${Math.ceil(pods / 8) * wide} waves of ${slowMs} ms)`);
  console.log(`delay ${delay.toFixed(0)} ms = ${(delay / slowMs).toFixed(2)} x one flood ADD (target <= 1.5: one wave, whatever the flood's size and width)`);
  console.log(delay <= bound ? 'PASS' : 'FAIL');
  return delay <= bound ? 0 : 1;
});
