// bench/attach: the runtime attach of one bridge-Network interface with an IPv4 address to a
// running pod, podnet against the reference bridge + host-local plugins doing the same attach from
// the command line (what Multus does per network). Alternating A B A B in one run, medians:
//  - podnet: the daemon from the built executable, standalone (--config-dir), with a bridge
//    Network with IPAM in its config dir and the pod recorded through the plugin (CNI ADD). The
//    clock starts when the PodNetworkConfig lands in the config dir (the rename of an fsynced temp
//    file: the request as the daemon sees it, without the `podnet apply` process's own start) and
//    stops at the netlink event that shows net1 UP with its address in the pod's netns
//    (`ip monitor`, running before the request: no polling delay).
//  - reference: /usr/lib/cni/bridge with ipam host-local, ADD with CNI_IFNAME=net1 in a netns of
//    its own; the clock runs from spawn to exit (the plugin exits once net1 is up with its address).
// On both sides the bridge already exists, as on a node where other pods use the network: a second
// pod stays attached to podnet's Network, and the reference plugin leaves its bridge after DEL.
// Taking the attachment back (the config removed, until net1 is gone; the plugin's DEL) is not timed.
// Target (issue 3): podnet <= 0.75 x the reference. Run as root: npm run bench:attach [-- RUNS]
// PNBENCH_LOG_DIR=DIR keeps the daemon's log; PODNET_BINARY runs another build than dist/podnet.
import { execa } from 'execa';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { alternating, countArgument, median, now, onCleanup, percentile, runBenchmark, suffix } from './lib/harness.ts';
import { attachedIn, LinkMonitor } from './lib/link-monitor.ts';
import { deleteLinksAtCleanup, linksIn, makeNetns, podnetBinary } from './lib/podnet.ts';
import { standaloneAttach } from './lib/standalone-attach.ts';

const target = 0.75;
const warmups = 3;
const referencePlugin = '/usr/lib/cni/bridge';
const podnetSubnet = { prefix: '198.19.90.', cidr: '198.19.90.0/24' };
const referenceSubnet = { prefix: '198.19.91.', cidr: '198.19.91.0/24' };

await runBenchmark(async () => {
  const runs = countArgument(2, 40, 'RUNS');
  const id = suffix();
  const work = mkdtempSync(join(tmpdir(), 'pnbench-attach-ref-'));
  onCleanup(`remove ${work}`, () => rmSync(work, { recursive: true, force: true }));
  const podnet = await standaloneAttach(podnetSubnet);
  const ns = { ref: `pnba-ref-${id}` };
  const bridge = { reference: `pn-br${id}` };
  deleteLinksAtCleanup('delete the reference bridge of this run', () => [bridge.reference]);
  await makeNetns(Object.values(ns));
  const refMonitor = new LinkMonitor(ns.ref);
  await refMonitor.listening();

  const hostLocalDir = join(work, 'host-local');
  const referenceConfig = JSON.stringify({
    cniVersion: '1.0.0',
    name: 'pnbench-attach-ref',
    type: 'bridge',
    bridge: bridge.reference,
    ipam: { type: 'host-local', ranges: [[{ subnet: referenceSubnet.cidr }]], dataDir: hostLocalDir },
  });
  const plugin = (command: 'ADD' | 'DEL', containerId: string) =>
    execa(referencePlugin, [], {
      env: { CNI_COMMAND: command, CNI_CONTAINERID: containerId, CNI_NETNS: `/run/netns/${ns.ref}`, CNI_IFNAME: 'net1', CNI_PATH: '/usr/lib/cni' },
      extendEnv: false,
      input: referenceConfig,
      reject: false,
    });
  const referenceReady: number[] = [];
  const referenceAttach = async (round: number): Promise<number> => {
    if (refMonitor.get('net1')) throw new Error('net1 is still in the reference netns before ADD');
    const containerId = `pnbench-ref-${id}-${round}`;
    const ready = refMonitor.waitFor('net1 UP with its address (reference)', () => attachedIn(referenceSubnet)(refMonitor.get('net1')));
    const start = now();
    const added = await plugin('ADD', containerId);
    const ms = now() - start;
    if (added.exitCode !== 0) throw new Error(`bridge ADD failed (${added.exitCode}): ${added.stdout}${added.stderr}`);
    referenceReady.push((await ready) - start);
    const net1 = (await linksIn(ns.ref)).find((l) => l.ifname === 'net1');
    if (!attachedIn(referenceSubnet)(net1)) throw new Error(`net1 in the reference netns is not UP with an address: ${JSON.stringify(net1)}`);
    const gone = refMonitor.waitFor('net1 removed (reference)', () => !refMonitor.get('net1'));
    const deleted = await plugin('DEL', containerId);
    if (deleted.exitCode !== 0) throw new Error(`bridge DEL failed (${deleted.exitCode}): ${deleted.stdout}${deleted.stderr}`);
    await gone;
    return ms;
  };

  const [podnetTimes, reference] = await alternating(runs, warmups, () => podnet.attach(), referenceAttach);
  referenceReady.splice(0, warmups);

  const [mp, mr] = [median(podnetTimes), median(reference)];
  const ratio = mp / mr;
  const binary = relative(process.cwd(), podnetBinary) || podnetBinary;
  console.log(`runs: ${runs} (alternating, after ${warmups} warm-up rounds), Node ${process.version}, ${binary}`);
  console.log(
    `podnet attach    median ${mp.toFixed(1)} ms   p90 ${percentile(podnetTimes, 90).toFixed(1)} ms   ` +
      '(PodNetworkConfig renamed into the config dir -> net1 UP with its address, by ip monitor in the pod)',
  );
  console.log(
    `bridge ADD       median ${mr.toFixed(1)} ms   p90 ${percentile(reference, 90).toFixed(1)} ms   ` +
      `(${referencePlugin} + host-local, spawn to exit; net1 was ready at ${median(referenceReady).toFixed(1)} ms)`,
  );
  console.log(`podnet attach is ${ratio.toFixed(2)} x the reference (target <= ${target})`);
  console.log(ratio <= target ? 'PASS' : 'FAIL');
  return ratio <= target ? 0 : 1;
});
