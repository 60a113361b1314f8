// bench/kube-scale: many nodes following one PodNetworkConfig, on the real kube-apiserver of the
// e2e harness (e2e/cluster). NODES podnet daemons (default 10) in Kubernetes mode, each in a netns
// of its own acting as a node (its bridge, host veth ends and nftables table there), with its own
// state dir and PODS sandboxes (default 50): pod objects bound to the node, their netns recorded
// through the plugin (CNI ADD) as a runtime would. One PodNetworkConfig, fleet, selects every pod
// of those nodes: net1 on a bridge Network, and an MTU on net1. Beside them one more node, solo,
// runs as many pods under a config of its own: the anchor, a single node, in the same run.
//
// Each round changes net1's MTU in fleet, then in solo, and times each from the patch request:
//  - applied: until every selected sandbox's daemon reports the new spec applied whole
//    (GET /v1/sandboxes, what `podnet explain` shows: applied state is committed after its
//    commands ran);
//  - told: until the config's status says every pod ready at the new generation.
// and counts, from each node's metrics, what the change cost the API server: writes of the
// config's status per node (target at most one), its other writes, and the watch events it received.
// Printed: medians of each, fleet as a ratio of solo (target: at most 3 x), and the status's size.
// bench/kube-status computes the status of 10,000 pods on 100 nodes and writes it.
//
// The daemons reach the API server through e2e/lib/relay.ts (127.0.0.1 of their netns, the same
// port); they run as the DaemonSet's service account, without admission.yaml, whose policy wants
// a token bound to a node's pod.
// Run as root, after `npm run build`: npm run bench:kube-scale [-- NODES PODS ROUNDS]
import { execa } from 'execa';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { request } from 'node:http';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { group } from '../e2e/lib/kube.ts';
import { podnetCluster } from './lib/kube.ts';
import type { PodNetworkConfigStatus } from '../src/protocol/validate.ts';
import { countArgument, median, now, onCleanup, pool, runBenchmark, sleep, suffix, until } from './lib/harness.ts';
import { daemonLogFile, makeNetns, recordSandbox, sandboxes, startDaemon, type RunningDaemon } from './lib/podnet.ts';
import { relay } from '../e2e/lib/relay.ts';

const nodeCount = countArgument(2, 10, 'NODES');
const podsPerNode = countArgument(3, 50, 'PODS');
const rounds = countArgument(4, 5, 'ROUNDS');
const targetRatio = 3;
const metricsPort = 9109;
const id = suffix();
const network = `pnscale-${id}`;
const bridge = `pn-sc${id}`;
const mtus = [1400, 1300];

interface Node {
  name: string;
  netns: string;
  namespace: string;
  socketPath: string;
  metricsSocket: string;
  daemon?: RunningDaemon;
}

interface Cost {
  /** Writes of the config's status: server-side applies of podnetworkconfigs. */
  statusWrites: number;
  /** Writes of pods' network-status annotations. */
  podWrites: number;
  /** Events posted. */
  eventWrites: number;
  /** Writes the API server refused or did not answer: a node that failed writes fewer. */
  failedWrites: number;
  /** Objects its informers were told of. */
  events: number;
  /** CPU seconds of the daemon and its commands (ip, nft). */
  cpu: number;
}

/** The text of GET /metrics of a node's daemon, through its relay. */
function scrape(node: Node): Promise<string> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: node.metricsSocket, path: '/metrics', agent: false, timeout: 30_000, headers: { host: 'podnet' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET /metrics of ${node.name} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

/** The sum of a counter's samples, every label. */
function total(text: string, name: string, labels = ''): number {
  return text
    .split('\n')
    .filter((l) => l.startsWith(`${name}{${labels}`))
    .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
}

/** What a node spent between two readings of its cost. */
function spent(before: Cost, after: Cost): Cost {
  return Object.fromEntries((Object.keys(after) as (keyof Cost)[]).map((k) => [k, after[k] - before[k]])) as Record<keyof Cost, number>;
}

async function costOf(node: Node): Promise<Cost> {
  const text = await scrape(node);
  const ticks = node.daemon!.cpuTicks();
  return {
    statusWrites: total(text, 'podnet_api_writes_total', 'resource="podnetworkconfigs"'),
    podWrites: total(text, 'podnet_api_writes_total', 'resource="pods"'),
    eventWrites: total(text, 'podnet_api_writes_total', 'resource="events"'),
    failedWrites: total(text, 'podnet_api_write_failures_total'),
    events: total(text, 'podnet_api_watch_events_total'),
    cpu: (ticks.self + ticks.children) / 100,
  };
}

await runBenchmark(async () => {
  const work = mkdtempSync(join(tmpdir(), 'pnbench-kube-scale-'));
  onCleanup(`remove ${work}`, () => rmSync(work, { recursive: true, force: true }));
  console.error(`starting a cluster, ${nodeCount} + 1 nodes and ${(nodeCount + 1) * podsPerNode} sandboxes`);
  const { cluster, api, daemonKubeconfig: kubeconfig } = await podnetCluster();
  const port = Number(new URL(cluster.server).port);
  const apiSocket = join(work, 'api.sock');
  const apiRelay = await relay(`unix:${apiSocket}`, `tcp:127.0.0.1:${port}`);
  onCleanup('close the API relay', () => new Promise((r) => apiRelay.close(r)));

  const [fleetNamespace, soloNamespace] = [`pnscale-${id}`, `pnsolo-${id}`];
  for (const name of [fleetNamespace, soloNamespace]) await api.post('/api/v1/namespaces', { metadata: { name } });
  const nodes: Node[] = Array.from({ length: nodeCount + 1 }, (_, i) => {
    const solo = i === nodeCount;
    const name = solo ? `pnsolo-${id}` : `pnscale-${id}-${i}`;
    const folder = join(work, name);
    mkdirSync(folder, { mode: 0o700 });
    return { name, netns: name, namespace: solo ? soloNamespace : fleetNamespace, socketPath: join(folder, 'run/podnet.sock'), metricsSocket: join(folder, 'metrics.sock') };
  });
  const [fleet, solo] = [nodes.slice(0, nodeCount), nodes.slice(nodeCount)];

  // The nodes: a netns each with its lo up and a relay both ways, then the daemon.
  await makeNetns(nodes.map((n) => n.netns));
  for (const node of nodes) await execa('ip', ['-n', node.netns, 'link', 'set', 'dev', 'lo', 'up']);
  await pool(nodes, 4, async (node) => {
    const relayed = execa('ip', ['netns', 'exec', node.netns, process.execPath, join(import.meta.dirname, '../e2e/lib/relay.ts'), `tcp:127.0.0.1:${port}=unix:${apiSocket}`, `unix:${node.metricsSocket}=tcp:127.0.0.1:${metricsPort}`], { reject: false, stdin: 'ignore', stderr: 'inherit' });
    onCleanup(`stop the relay of ${node.name}`, () => void relayed.kill());
    await new Promise<void>((resolve, reject) => {
      relayed.stdout!.once('data', () => resolve());
      void relayed.then((r) => reject(new Error(`the relay of ${node.name} exited: ${r.exitCode}`)));
    });
    const stateDir = join(work, node.name, 'state');
    node.daemon = startDaemon({ socketPath: node.socketPath, stateDir }, daemonLogFile(work, `${node.name}.log`), ['--node-name', node.name, '--kubeconfig', kubeconfig, '--resync-seconds', '60', '--metrics-address', `127.0.0.1:${metricsPort}`], { netns: node.netns });
    await node.daemon.ready(60_000);
  });

  // The pods: objects bound to their node, netns recorded through the plugin.
  const pods = nodes.flatMap((node, i) => Array.from({ length: podsPerNode }, (_, p) => ({ node, name: `${i < nodeCount ? `n${i}` : 'solo'}-pod-${p}`, netnsName: `${node.name}-${p}` })));
  await pool(pods, 8, async (pod) => {
    await api.post(`/api/v1/namespaces/${pod.node.namespace}/pods`, { metadata: { name: pod.name, labels: { app: 'scale' } }, spec: { nodeName: pod.node.name, containers: [{ name: 'main', image: 'busybox' }] } });
  });
  await makeNetns(pods.map((p) => p.netnsName));
  await pool(pods, 4, (pod) => recordSandbox({ socketPath: pod.node.socketPath, stateDir: join(work, pod.node.name, 'state') }, { netns: `/run/netns/${pod.netnsName}`, containerId: `pnscale-${id}-${pod.netnsName}`, namespace: pod.node.namespace, name: pod.name }));

  await api.post(`/apis/${group}/networks`, {
    apiVersion: group,
    kind: 'Network',
    metadata: { name: network },
    spec: { type: 'bridge', bridge: { name: bridge }, ipam: { ranges: [{ subnet: '198.19.128.0/17' }] }, namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: [fleetNamespace, soloNamespace] }] } },
  });
  const configPath = (namespace: string) => `/apis/${group}/namespaces/${namespace}/podnetworkconfigs/net1`;
  const spec = (mtu: number) => ({ podSelector: { matchLabels: { app: 'scale' } }, attachments: [{ network, interface: 'net1' }], interfaces: [{ name: 'net1', mtu }] });
  for (const namespace of [fleetNamespace, soloNamespace]) {
    await api.post(`/apis/${group}/namespaces/${namespace}/podnetworkconfigs`, { apiVersion: group, kind: 'PodNetworkConfig', metadata: { name: 'net1' }, spec: spec(mtus[0]!) });
  }

  /** Whether every sandbox of `group` reports `mtu` applied whole; the first problem seen otherwise. */
  const appliedEverywhere = async (group: readonly Node[], mtu: number): Promise<true | string> => {
    // Every node asked at once: a busy node's late answer does not delay the look at the others.
    const lists = await Promise.all(group.map((node) => sandboxes(node.socketPath)));
    for (const [i, list] of lists.entries()) {
      const node = group[i]!;
      if (list.items.length < podsPerNode) return `${node.name}: ${list.items.length} of ${podsPerNode} sandboxes reported`;
      for (const r of list.items) {
        if (r.lastError) return `${node.name} ${r.name}: ${r.lastError}`;
        const had = (r.applied as { configs?: { spec: ReturnType<typeof spec> }[] } | undefined)?.configs?.[0]?.spec;
        if (had?.interfaces[0]?.mtu !== mtu) return `${node.name} ${r.name}: mtu ${had?.interfaces[0]?.mtu} applied`;
      }
    }
    return true;
  };
  /** The config's status once every pod is ready at its current generation. */
  const toldEverywhere = async (namespace: string, pods: number) => {
    const object = await api.get<{ metadata: { generation: number }; status?: PodNetworkConfigStatus }>(configPath(namespace));
    return object.status?.observedGeneration === object.metadata.generation && object.status.ready === `${pods}/${pods}` ? object : undefined;
  };
  const converged = async (group: readonly Node[], mtu: number, timeoutMs: number) => {
    let last = '';
    const at = await until(`${group.length} nodes applying mtu ${mtu}`, async () => {
      // A daemon busy with its first pass may answer late: that is not yet, not a failure.
      const verdict = await appliedEverywhere(group, mtu).catch((err: Error) => err.message);
      if (verdict === true) return now();
      last = verdict;
      return undefined;
    }, timeoutMs, 50).catch((err: Error) => {
      throw new Error(`${err.message}; last seen: ${last}`);
    });
    const told = await until(`the status of ${group[0]!.namespace}/net1 telling every pod`, async () => ((await toldEverywhere(group[0]!.namespace, group.length * podsPerNode)) ? now() : undefined), timeoutMs, 50);
    return { applied: at, told };
  };

  const setupFrom = now();
  await converged(fleet, mtus[0]!, 600_000);
  await converged(solo, mtus[0]!, 600_000);
  // Until no node writes any more: the pods' network-status and Attached Events of the setup.
  const quiet = async () => {
    let last = '';
    await until('every node done writing', async () => {
      const costs = JSON.stringify((await Promise.all(nodes.map(costOf))).map((c) => [c.statusWrites, c.podWrites, c.eventWrites]));
      if (costs === last) return true;
      last = costs;
      await sleep(2000);
      return undefined;
    }, 600_000);
  };
  await quiet();
  const setupSeconds = (now() - setupFrom) / 1000;
  if (process.env['PNBENCH_DEBUG']) console.error(`after setup: ${JSON.stringify(await Promise.all(nodes.map(costOf)))}`);

  /** One change of one config: its times and what each node of `group` spent on it. */
  const change = async (group: readonly Node[], mtu: number) => {
    const before = await Promise.all(nodes.map(costOf));
    const start = now();
    await api.merge(configPath(group[0]!.namespace), { spec: { interfaces: [{ name: 'net1', mtu }] } });
    const done = await converged(group, mtu, 120_000);
    // Writes a node makes late still count: a second write for one change would show here.
    await sleep(2000);
    const after = await Promise.all(nodes.map(costOf));
    const cost = nodes.map((node, i) => ({ node, ...spent(before[i]!, after[i]!) }));
    if (process.env['PNBENCH_DEBUG']) console.error(`change of ${group[0]!.namespace}: ${JSON.stringify(cost.map((c) => ({ ...c, node: c.node.name })))}`);
    return { applied: done.applied - start, told: done.told - start, cost };
  };
  const results: { fleet: Awaited<ReturnType<typeof change>>; solo: Awaited<ReturnType<typeof change>> }[] = [];
  for (let round = 0; round < rounds; round++) {
    const mtu = mtus[(round + 1) % mtus.length]!;
    results.push({ fleet: await change(fleet, mtu), solo: await change(solo, mtu) });
  }

  const object = await api.get<{ status: PodNetworkConfigStatus }>(configPath(fleetNamespace));
  const statusBytes = Buffer.byteLength(JSON.stringify(object.status));
  const objectBytes = Buffer.byteLength(JSON.stringify(object));
  const med = (pick: (r: (typeof results)[number]) => number) => median(results.map(pick));
  const [fleetApplied, soloApplied] = [med((r) => r.fleet.applied), med((r) => r.solo.applied)];
  const [fleetTold, soloTold] = [med((r) => r.fleet.told), med((r) => r.solo.told)];
  const fleetCosts = results.flatMap((r) => r.fleet.cost.filter((c) => fleet.includes(c.node)));
  const maxStatusWrites = Math.max(...fleetCosts.map((c) => c.statusWrites));
  const perNode = (pick: (c: (typeof fleetCosts)[number]) => number) => median(fleetCosts.map(pick));
  // What a fleet change cost the node that was not part of it: the events of the others' writes.
  const bystander = median(results.map((r) => r.fleet.cost.find((c) => c.node === solo[0])!.events));

  console.log(`${nodeCount} nodes x ${podsPerNode} pods under one PodNetworkConfig, and 1 node x ${podsPerNode} pods under another (the anchor); ${rounds} rounds, each an MTU change of each; Node ${process.version}; setup converged in ${setupSeconds.toFixed(1)} s`);
  console.log(`applied   ${nodeCount} nodes ${(fleetApplied / 1000).toFixed(2)} s   1 node ${(soloApplied / 1000).toFixed(2)} s   ${(fleetApplied / soloApplied).toFixed(2)} x (target <= ${targetRatio})   (patch -> every sandbox reports the new spec applied whole; medians)`);
  console.log(`told      ${nodeCount} nodes ${(fleetTold / 1000).toFixed(2)} s   1 node ${(soloTold / 1000).toFixed(2)} s   ${(fleetTold / soloTold).toFixed(2)} x   (patch -> status ready ${nodeCount * podsPerNode}/${nodeCount * podsPerNode} at the new generation)`);
  console.log(`per node and change: ${perNode((c) => c.statusWrites)} status writes (at most ${maxStatusWrites}; target <= 1), ${perNode((c) => c.podWrites)} network-status patches, ${perNode((c) => c.eventWrites)} Events posted, ${perNode((c) => c.events)} watch events received; the node outside the change received ${bystander}`);
  const soloCpu = median(results.map((r) => r.solo.cost.find((c) => c.node === solo[0])!.cpu));
  const fleetCpu = perNode((c) => c.cpu);
  console.log(`CPU per node and change: ${fleetCpu.toFixed(2)} s in the ${nodeCount}-node change, ${soloCpu.toFixed(2)} s alone (${(fleetCpu / soloCpu).toFixed(2)} x; daemon and its commands); this machine has ${availableParallelism()} cores for all ${nodeCount} nodes`);
  console.log(`status    ${statusBytes} bytes (${nodeCount} node entries); whole object ${objectBytes} bytes with managedFields`);
  const failed = results.flatMap((r) => [...r.fleet.cost, ...r.solo.cost]).reduce((n, c) => n + c.failedWrites, 0);
  if (failed > 0) console.log(`${failed} writes failed during the changes (podnet_api_write_failures_total): the counts above are short of them`);
  const pass = fleetApplied / soloApplied <= targetRatio && maxStatusWrites <= 1 && failed === 0;
  console.log(pass ? 'PASS' : 'FAIL');
  return pass ? 0 : 1;
});
