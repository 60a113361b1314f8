// podnet's runtime attach as bench/attach measures it, standalone: the daemon from the built
// executable with a bridge Network with IPAM in its config dir, a pod recorded through the plugin,
// and a keeper pod that holds the bridge. The clock starts when the pod's PodNetworkConfig lands in
// the config dir (the rename of an fsynced temp file: the request as the daemon sees it) and stops
// at the netlink event that shows net1 UP with its address in the pod's netns. Taking it back (the
// config removed, until the daemon committed it) is not timed. bench/attach and bench/kube-attach
// (as the anchor of the Kubernetes path) run it.
import { mkdirSync, mkdtempSync, rmSync, unlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { now, onCleanup, suffix, until } from './harness.ts';
import { attachedIn, LinkMonitor } from './link-monitor.ts';
import { daemonLogFile, deleteLinksAtCleanup, linksIn, makeNetns, prepareFile, recordSandbox, sandboxes, startDaemon } from './podnet.ts';

export interface StandaloneAttach {
  /** One attach, timed in ms, then taken back. */
  attach(): Promise<number>;
  /** Links of the host the run made besides the bridge (host veth ends), for a caller's cleanup of its own. */
  hostEnds: ReadonlySet<string>;
}

/** Everything is removed at the benchmark's cleanup. */
export async function standaloneAttach(podnetSubnet: { prefix: string; cidr: string }): Promise<StandaloneAttach> {
  const id = suffix();
  const work = mkdtempSync(join(tmpdir(), 'pnbench-attach-'));
  onCleanup(`remove ${work}`, () => rmSync(work, { recursive: true, force: true }));
  const paths = { socketPath: join(work, 'run/podnet.sock'), stateDir: join(work, 'state'), configDir: join(work, 'config.d') };
  mkdirSync(paths.configDir, { recursive: true, mode: 0o700 });
  const logFile = daemonLogFile(work, `attach-daemon-${id}.log`);

  const ns = { pod: `pnba-pod-${id}`, keeper: `pnba-keep-${id}` };
  const bridge = `pn-ba${id}`;
  const hostEnds = new Set<string>();
  // Cleanup runs backwards: the daemon stops first, then the namespaces go (and the veths with
  // them), then whatever link is left on the host.
  deleteLinksAtCleanup('delete the bridge and host veths of the standalone attach', () => [bridge, ...hostEnds]);
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
    `  type: bridge\n  bridge: { name: ${bridge} }\n  ipam: { ranges: [{ subnet: ${podnetSubnet.cidr} }] }\n  namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: pnbench } }\n`,
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
  await monitor.listening();

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

  return { attach: podnetAttach, hostEnds };
}
