// bench/delegate: a cni Network (the reference bridge + host-local) attached at runtime to many
// running pods at once through podnet, against the same plugin ADDs run straight from the command
// line, as many at a time as the daemon runs sandboxes (8). Alternating A B A B, medians:
//  - podnet: the daemon from the built executable, standalone, with PODS sandboxes recorded
//    through the plugin and the Network in its config dir. The clock starts when a
//    PodNetworkConfig selecting every pod lands in the config dir and stops when the daemon
//    reports a delegated result for each (the plugins' ADD answered: net1 is up with its address).
//  - reference: /usr/lib/cni/bridge with ipam host-local, ADD with CNI_IFNAME=net1 into PODS
//    netns of its own, 8 at a time; the clock runs from the first spawn to the last exit.
// So the ratio is what podnet adds to the plugins' own work: reading the request, the durable
// records before and after each ADD, the plan and the report. Taking back is not timed (podnet's
// DEL through the config's removal, the plugin's DEL straight).
// Target: podnet <= 1.5 x the reference. Run as root: npm run bench:delegate [-- RUNS [PODS]]
// PNBENCH_LOG_DIR=DIR keeps the daemon's log; PODNET_BINARY runs another build than dist/podnet.
import { execa } from 'execa';
import { mkdirSync, mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { alternating, countArgument, median, now, onCleanup, percentile, pool, runBenchmark, suffix, until } from './lib/harness.ts';
import { daemonLogFile, deleteLinksAtCleanup, ipv4Of, isUp, linksIn, makeNetns, podnetBinary, prepareFile, recordSandbox, sandboxes, startDaemon } from './lib/podnet.ts';

const target = 1.5;
const warmups = 2;
/** What the daemon runs side by side (sandboxConcurrency); the reference runs as many. */
const width = 8;
const pluginDir = '/usr/lib/cni';
const podnetSubnet = '198.19.92.0/24';
const referenceSubnet = '198.19.93.0/24';

/** The part of a sandbox's report this bench reads: the delegated attachments whose ADD answered. */
interface DelegatedReport {
  containerId: string;
  delegated?: { interface: string; result?: unknown }[];
}

await runBenchmark(async () => {
  const runs = countArgument(2, 10, 'RUNS');
  const pods = countArgument(3, 24, 'PODS');
  const id = suffix();
  const work = mkdtempSync(join(tmpdir(), 'pnbench-delegate-'));
  onCleanup(`remove ${work}`, () => rmSync(work, { recursive: true, force: true }));
  const paths = { socketPath: join(work, 'run/podnet.sock'), stateDir: join(work, 'state'), configDir: join(work, 'config.d') };
  mkdirSync(paths.configDir, { recursive: true, mode: 0o700 });
  const logFile = daemonLogFile(work, `delegate-daemon-${id}.log`);
  const bridge = { podnet: `pn-bd${id}`, reference: `pn-bf${id}` };
  deleteLinksAtCleanup('delete the bridges of this run', () => [bridge.podnet, bridge.reference]);
  const podNs = Array.from({ length: pods }, (_, i) => `pnbd-pod-${id}-${i}`);
  const refNs = Array.from({ length: pods }, (_, i) => `pnbd-ref-${id}-${i}`);
  await makeNetns([...podNs, ...refNs]);

  const daemon = startDaemon(paths, logFile, ['--resync-seconds', '600', '--cni-bin-dir', pluginDir]);
  await daemon.ready();
  const containerIds = podNs.map((_, i) => `pnbench-dpod-${id}-${i}`);
  for (const [i, ns] of podNs.entries()) await recordSandbox(paths, { netns: `/run/netns/${ns}`, containerId: containerIds[i]!, namespace: 'pnbench', name: `pod-${i}` });

  const hostLocal = (name: string, subnet: string) => ({ type: 'host-local', ranges: [[{ subnet }]], dataDir: join(work, `host-local-${name}`) });
  const network = `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: pnbench-delegate }
spec:
  type: cni
  namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: pnbench } }
  cni: { config: ${JSON.stringify({ cniVersion: '1.0.0', type: 'bridge', bridge: bridge.podnet, ipam: hostLocal('podnet', podnetSubnet) })} }
`;
  prepareFile(join(paths.configDir, 'network.pnbench-delegate.yaml'), network).land();
  const configPath = join(paths.configDir, 'podnetworkconfig.pnbench.all.yaml');
  const config = `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: all, namespace: pnbench }
spec:
  podSelector: {}
  attachments: [{ network: pnbench-delegate, interface: net1 }]
`;
  const attached = async () => {
    const items = (await sandboxes(paths.socketPath)).items as unknown as DelegatedReport[];
    return items.filter((r) => containerIds.includes(r.containerId) && r.delegated?.some((d) => d.interface === 'net1' && d.result)).length;
  };
  await until('the pods recorded', async () => ((await sandboxes(paths.socketPath)).items.length === pods ? true : undefined), 30_000);

  const podnetAttach = async (): Promise<number> => {
    if ((await attached()) !== 0) throw new Error('a pod still has net1 before the request');
    const file = prepareFile(configPath, config);
    const start = now();
    file.land();
    const ms = await until('every pod attached', async () => ((await attached()) === pods ? now() - start : undefined), 60_000, 5);
    // Not timed: the kernel agrees for one pod, then the attachments are taken back.
    const net1 = (await linksIn(podNs[pods - 1]!)).find((l) => l.ifname === 'net1');
    if (!isUp(net1) || ipv4Of(net1).length === 0) throw new Error(`net1 in the last pod is not UP with an address: ${JSON.stringify(net1)}`);
    unlinkSync(configPath);
    await until('every attachment taken back', async () => ((await attached()) === 0 ? true : undefined), 60_000);
    return ms;
  };

  const referenceConfig = JSON.stringify({ cniVersion: '1.0.0', name: 'pnbench-delegate-ref', type: 'bridge', bridge: bridge.reference, ipam: hostLocal('reference', referenceSubnet) });
  const plugin = async (command: 'ADD' | 'DEL', ns: string, containerId: string) => {
    const r = await execa(`${pluginDir}/bridge`, [], {
      env: { CNI_COMMAND: command, CNI_CONTAINERID: containerId, CNI_NETNS: `/run/netns/${ns}`, CNI_IFNAME: 'net1', CNI_PATH: pluginDir },
      extendEnv: false,
      input: referenceConfig,
      reject: false,
    });
    if (r.exitCode !== 0) throw new Error(`bridge ${command} in ${ns} failed (${r.exitCode}): ${r.stdout}${r.stderr}`);
  };
  const referenceAttach = async (round: number): Promise<number> => {
    const start = now();
    await pool(refNs, width, (ns, i) => plugin('ADD', ns, `pnbench-dref-${id}-${round}-${i}`));
    const ms = now() - start;
    await pool(refNs, width, (ns, i) => plugin('DEL', ns, `pnbench-dref-${id}-${round}-${i}`));
    return ms;
  };

  const [podnet, reference] = await alternating(runs, warmups, podnetAttach, referenceAttach);

  const [mp, mr] = [median(podnet), median(reference)];
  const ratio = mp / mr;
  const binary = relative(process.cwd(), podnetBinary) || podnetBinary;
  console.log(`runs: ${runs} (alternating, after ${warmups} warm-up rounds), ${pods} pods each, Node ${process.version}, ${binary}`);
  console.log(`podnet delegated attach   median ${mp.toFixed(0)} ms   p90 ${percentile(podnet, 90).toFixed(0)} ms   (${(mp / pods).toFixed(1)} ms a pod; config landed -> every pod's ADD answered, by the daemon's report)`);
  console.log(`bridge ADD, ${width} at a time   median ${mr.toFixed(0)} ms   p90 ${percentile(reference, 90).toFixed(0)} ms   (${(mr / pods).toFixed(1)} ms a pod; ${pluginDir}/bridge + host-local, first spawn to last exit)`);
  console.log(`podnet is ${ratio.toFixed(2)} x the plugins run straight (target <= ${target})`);
  console.log(ratio <= target ? 'PASS' : 'FAIL');
  return ratio <= target ? 0 : 1;
});
