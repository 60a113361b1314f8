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
import { execa, type ResultPromise } from 'execa';
import { mkdirSync, mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { alternating, countArgument, median, now, onCleanup, percentile, runBenchmark, suffix, until } from './lib/harness.ts';
import {
  daemonLogFile,
  deleteLinksAtCleanup,
  ipv4Of,
  isUp,
  linksIn,
  makeNetns,
  podnetBinary,
  prepareFile,
  recordSandbox,
  sandboxes,
  startDaemon,
  type LinkState,
} from './lib/podnet.ts';

const target = 0.75;
const warmups = 3;
const referencePlugin = '/usr/lib/cni/bridge';
const podnetSubnet = { prefix: '198.19.90.', cidr: '198.19.90.0/24' };
const referenceSubnet = { prefix: '198.19.91.', cidr: '198.19.91.0/24' };

/**
 * A netns's links as `ip monitor link address` reports them, and waits on them. Each wait
 * resolves with the monotonic time the event that satisfied it reached this process. ip 6.1's
 * monitor prints text (it ignores -json): "3: net1@if4: <BROADCAST,UP,LOWER_UP> mtu ..." for a
 * link, "3: net1    inet 198.19.90.2/24 ..." for an address, "Deleted " before a removal.
 */
class LinkMonitor {
  private readonly links = new Map<string, LinkState>();
  private waiters: { check: () => boolean; resolve: (at: number) => void }[] = [];
  private readonly proc: ResultPromise;

  constructor(netnsName: string) {
    this.proc = execa('ip', ['-n', netnsName, 'monitor', 'link', 'address'], { reject: false, buffer: false, stdin: 'ignore', stderr: 'ignore' });
    onCleanup(`stop ip monitor in ${netnsName}`, () => {
      this.proc.kill('SIGTERM');
      return this.proc.catch(() => undefined);
    });
    let partial = '';
    this.proc.stdout!.on('data', (chunk: Buffer) => {
      const at = now();
      const lines = (partial + chunk.toString('utf8')).split('\n');
      partial = lines.pop() ?? '';
      for (const line of lines) this.parse(line);
      this.waiters = this.waiters.filter((w) => (w.check() ? (w.resolve(at), false) : true));
    });
  }

  get(ifname: string): LinkState | undefined {
    return this.links.get(ifname);
  }

  /** Resolves at the first event after which `check` holds. */
  waitFor(what: string, check: () => boolean, timeoutMs = 15_000): Promise<number> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`ip monitor saw no ${what} within ${timeoutMs} ms`)), timeoutMs);
      this.waiters.push({
        check,
        resolve: (at) => {
          clearTimeout(timer);
          resolve(at);
        },
      });
    });
  }

  private parse(line: string): void {
    const address = /^(Deleted )?\d+: ([^\s:@]+)\s+(inet6?) (\S+)/.exec(line);
    if (address) {
      const [, deleted, ifname, family, local] = address;
      if (deleted && !this.links.has(ifname!)) return; // the link went first
      const link = this.linkNamed(ifname!);
      const [ip, prefix] = local!.split('/');
      const others = (link.addr_info ?? []).filter((a) => `${a.local}/${a.prefixlen}` !== local);
      link.addr_info = deleted ? others : [...others, { family: family!, local: ip!, prefixlen: Number(prefix) }];
      return;
    }
    const link = /^(Deleted )?\d+: ([^\s:@]+)(?:@[^:\s]+)?: <([^>]*)> mtu (\d+)/.exec(line);
    if (!link) return; // continuation lines (link/ether, valid_lft) and other objects
    const [, deleted, ifname, flags, mtu] = link;
    if (deleted) {
      this.links.delete(ifname!);
      return;
    }
    Object.assign(this.linkNamed(ifname!), { flags: flags!.split(','), mtu: Number(mtu) });
  }

  private linkNamed(ifname: string): LinkState {
    let link = this.links.get(ifname);
    if (!link) this.links.set(ifname, (link = { ifname, flags: [], mtu: 0, addr_info: [] }));
    return link;
  }
}

const attachedIn = (subnet: { prefix: string }) => (l: LinkState | undefined) => isUp(l) && ipv4Of(l).some((a) => a.startsWith(subnet.prefix));

await runBenchmark(async () => {
  const runs = countArgument(2, 40, 'RUNS');
  const id = suffix();
  const work = mkdtempSync(join(tmpdir(), 'pnbench-attach-'));
  onCleanup(`remove ${work}`, () => rmSync(work, { recursive: true, force: true }));
  const paths = { socketPath: join(work, 'run/podnet.sock'), stateDir: join(work, 'state'), configDir: join(work, 'config.d') };
  mkdirSync(paths.configDir, { recursive: true, mode: 0o700 });
  const logFile = daemonLogFile(work, `attach-daemon-${id}.log`);

  const ns = { pod: `pnba-pod-${id}`, keeper: `pnba-keep-${id}`, ref: `pnba-ref-${id}` };
  const bridge = { podnet: `pn-ba${id}`, reference: `pn-br${id}` };
  const hostEnds = new Set<string>();
  // Cleanup runs backwards: the daemon stops first, then the namespaces go (and the veths with
  // them), then whatever link is left on the host.
  deleteLinksAtCleanup('delete the bridges and host veths of this run', () => [bridge.podnet, bridge.reference, ...hostEnds]);
  await makeNetns(Object.values(ns));

  const daemon = startDaemon(paths, logFile, ['--resync-seconds', '60']);
  await daemon.ready();

  // The pod first: the daemon reconciles sandboxes in the order they were recorded.
  const pod = { netns: `/run/netns/${ns.pod}`, containerId: `pnbench-pod-${id}`, namespace: 'pnbench', name: 'pod' };
  const keeper = { netns: `/run/netns/${ns.keeper}`, containerId: `pnbench-keeper-${id}`, namespace: 'pnbench', name: 'keeper' };
  await recordSandbox(paths, pod);
  await recordSandbox(paths, keeper);

  const document = (kind: string, name: string, spec: string, namespace = true) =>
    `apiVersion: podnetwork.opdev.io/v1alpha1\nkind: ${kind}\nmetadata: { name: ${name}${namespace ? ', namespace: pnbench' : ''} }\nspec:\n${spec}`;
  const network = document(
    'Network',
    'pnbench-attach',
    `  type: bridge\n  bridge: { name: ${bridge.podnet} }\n  ipam: { ranges: [{ subnet: ${podnetSubnet.cidr} }] }\n  namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: pnbench } }\n`,
    false,
  );
  const configFor = (name: string) =>
    document('PodNetworkConfig', name, `  podSelector: { matchLabels: { podnetwork.opdev.io/pod-name: ${name} } }\n  attachments: [{ network: pnbench-attach, interface: net1 }]\n`);
  prepareFile(join(paths.configDir, 'network.pnbench-attach.yaml'), network).land();
  prepareFile(join(paths.configDir, 'podnetworkconfig.pnbench.keeper.yaml'), configFor('keeper')).land();

  const reportOf = async (containerId: string) => (await sandboxes(paths.socketPath)).items.find((r) => r.containerId === containerId);
  const keeperReport = await until(
    'the keeper pod attached (the bridge made)',
    async () => {
      const r = await reportOf(keeper.containerId);
      if (r?.lastError) throw new Error(`the daemon failed to attach the keeper pod: ${r.lastError}`);
      return r?.applied?.attachments.some((a) => a.interface === 'net1') ? r : undefined;
    },
    30_000,
    20,
  );
  for (const a of keeperReport.desired.attachments) hostEnds.add(a.hostIf);
  await until('the pod recorded', () => reportOf(pod.containerId), 30_000, 20);

  const monitor = new LinkMonitor(ns.pod);
  const refMonitor = new LinkMonitor(ns.ref);
  // Proof that each monitor listens: a change made now must reach it.
  for (const [m, name] of [[monitor, ns.pod], [refMonitor, ns.ref]] as const) {
    const seen = m.waitFor('lo up', () => isUp(m.get('lo')) || !!m.get('lo')?.flags.includes('UP'));
    await execa('ip', ['-n', name, 'link', 'set', 'lo', 'up']);
    await seen;
  }

  const configPath = join(paths.configDir, 'podnetworkconfig.pnbench.pod.yaml');
  const podConfig = configFor('pod');
  const podnetAttach = async (): Promise<number> => {
    if (monitor.get('net1')) throw new Error('net1 is still in the pod before the request');
    const file = prepareFile(configPath, podConfig);
    const attached = monitor.waitFor('net1 UP with its address', () => attachedIn(podnetSubnet)(monitor.get('net1')));
    const start = now();
    file.land();
    const ms = (await attached) - start;
    // Not timed: the kernel agrees, then the attachment is taken back.
    const net1 = (await linksIn(ns.pod)).find((l) => l.ifname === 'net1');
    if (!attachedIn(podnetSubnet)(net1)) throw new Error(`net1 in the pod is not UP with an address: ${JSON.stringify(net1)}`);
    const report = await reportOf(pod.containerId);
    for (const a of report?.desired.attachments ?? []) hostEnds.add(a.hostIf);
    const gone = monitor.waitFor('net1 removed', () => !monitor.get('net1'));
    unlinkSync(configPath);
    await gone;
    await until(
      'the daemon to commit the removal',
      async () => ((await reportOf(pod.containerId))?.applied?.attachments.length === 0 ? true : undefined),
      15_000,
    );
    return ms;
  };

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

  const [podnet, reference] = await alternating(runs, warmups, podnetAttach, referenceAttach);
  referenceReady.splice(0, warmups);

  const [mp, mr] = [median(podnet), median(reference)];
  const ratio = mp / mr;
  const binary = relative(process.cwd(), podnetBinary) || podnetBinary;
  console.log(`runs: ${runs} (alternating, after ${warmups} warm-up rounds), Node ${process.version}, ${binary}`);
  console.log(
    `podnet attach    median ${mp.toFixed(1)} ms   p90 ${percentile(podnet, 90).toFixed(1)} ms   ` +
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
