// podnet on a cluster of two real nodes (e2e/cluster/node.ts): the first in the machine's network
// namespace, the second in one of its own, joined by an underlay as two machines on a LAN. What
// only shows across nodes: a Network served on both and its status summed from both, a vxlan
// Network that joins pods of the two nodes, each daemon held to its own node. Everything is done
// and checked through kubectl and the API (kubectl exec to look inside pods); containerd 2 on both.
import t from 'tap';
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { networkStatusAnnotation } from '../src/model/annotation.ts';
import { ensureNodeBinaries } from './cluster/binaries.ts';
import { prepareClusterTest, type Cluster } from './cluster/cluster.ts';
import { missingNodePrerequisite, nodeProcesses, prepareNodeTest, underlay, type Node } from './cluster/node.ts';
import { until } from './lib/engine.ts';
import { missingPrerequisite } from './lib/env.ts';
import { bridgeNetwork, group, podNetworkConfig } from './lib/kube.ts';
import { tenant, twoNodes } from './lib/two-nodes.ts';
import { tenantMayCreate } from './lib/podnet-node.ts';
import { claimedPod, claimSpec, driver, slicesOf } from './lib/claims.ts';

const skip = missingPrerequisite(['/usr/sbin/debootstrap']) ?? missingNodePrerequisite() ?? (await prepareClusterTest(t)) ?? (await prepareNodeTest(t));

/** The resident memory of every process of a node, in MiB. */
async function residentMiB(node: Node): Promise<number> {
  let kib = 0;
  for (const pid of await nodeProcesses(node.root, node.cgroupRoot)) {
    const status = await readFile(`/proc/${pid}/status`, 'utf8').catch(() => '');
    kib += Number(/^VmRSS:\s+(\d+)/m.exec(status)?.[1] ?? 0);
  }
  return Math.round(kib / 1024);
}

/** podnet's daemon pods, by the node each runs on. */
async function daemonPods(kubectl: Node['kubectl']): Promise<Map<string, string>> {
  const listed = (await kubectl(['get', 'pods', '-n', 'podnet-system', '-l', 'app.kubernetes.io/name=podnet', '-o', 'jsonpath={range .items[*]}{.spec.nodeName} {.metadata.name}{"\\n"}{end}'])).stdout;
  return new Map(listed.split('\n').filter((l) => l !== '').map((l) => l.split(' ') as [string, string]));
}

/** The service-account token the kubelet mounted in a daemon pod, as the daemon reads it. */
async function tokenOf(kubectl: Node['kubectl'], pod: string): Promise<string> {
  return (await kubectl(['exec', '-n', 'podnet-system', pod, '-c', 'daemon', '--', 'cat', '/var/run/secrets/kubernetes.io/serviceaccount/token'])).stdout.trim();
}

/** kubectl with a bearer token and nothing else of a kubeconfig. */
async function kubectlWithToken(cluster: Cluster, token: string, args: string[]) {
  const { kubectl } = await ensureNodeBinaries();
  const result = await execa(kubectl, ['--kubeconfig=/dev/null', `--server=${cluster.server}`, `--certificate-authority=${cluster.caFile}`, `--token=${token}`, ...args], { reject: false });
  return { stdout: result.stdout, stderr: result.stderr, exitCode: result.exitCode ?? -1 };
}

/** An object's field by kubectl's jsonpath. */
const jsonpath = async (kubectl: Node['kubectl'], args: string[], path: string) => (await kubectl(['get', ...args, '-o', `jsonpath=${path}`])).stdout;

t.test('two nodes: podnet on both, a config whose status counts the pods of both, each daemon held to its own node, a node that leaves out of every status and back clean', { skip, timeout: 900_000 }, async (t) => {
  const { cluster, nodes, kubectl, asTenant, install, runPodOn, addressOf } = await twoNodes(t, ['198.18.224.0/24', '198.18.225.0/24']);
  t.equal(await install(), '2/2', 'kubectl apply -k daemonset/ runs podnet on both nodes, both Ready');

  const blue = bridgeNetwork(t, 'blue', ['198.18.226.0/24'], [tenant]);
  await kubectl(['apply', '-f', '-'], { input: stringify(blue) });
  await runPodOn(nodes[0], 'cnf-one');
  await runPodOn(nodes[1], 'cnf-two');
  await asTenant(['apply', '-f', '-'], stringify(podNetworkConfig(tenant, 'cnf-blue', { podSelector: { matchLabels: { app: 'cnf' } }, attachments: [{ network: 'blue', interface: 'net1' }] })));
  t.match(await addressOf('cnf-one', 'net1'), /^198\.18\.226\./, 'the pod on the first node got net1');
  t.match(await addressOf('cnf-two', 'net1'), /^198\.18\.226\./, 'so did the pod on the second');
  for (const node of nodes) t.comment(`node ${node.name}: ${await residentMiB(node)} MiB resident (containerd, kubelet, shims, podnet's daemon and a pod)`);

  const ready = await until('READY counts both nodes\' pods', async () => {
    const value = await jsonpath(kubectl, ['pnc', '-n', tenant, 'cnf-blue'], '{.status.ready}');
    return value === '2/2' ? value : undefined;
  }, 60_000);
  t.equal(ready, '2/2', 'kubectl get pnc: READY 2/2');
  const entries = JSON.parse(await jsonpath(kubectl, ['pnc', '-n', tenant, 'cnf-blue'], '{.status.nodes}')) as { name: string; selected: number; ready: number }[];
  t.same(entries.map((e) => [e.name, e.selected, e.ready]).sort(), nodes.map((n) => [n.name, 1, 1]).sort(), 'status.nodes: an entry per node, one pod each');
  t.equal(await until('the Network is served on both nodes', async () => ((await jsonpath(kubectl, ['pnet', 'blue'], '{.status.ready}')) === '2/2' ? '2/2' : undefined), 60_000), '2/2', 'kubectl get pnet: READY 2/2');
  const printed = (await kubectl(['get', 'pnet', 'blue'])).stdout;
  t.match(printed, /blue\s+bridge\s+2\/2/, 'as kubectl prints it');

  // Each daemon's token, read from inside its pod, reaches only its own node's pods and entries.
  const daemons = await daemonPods(kubectl);
  t.same([...daemons.keys()].sort(), nodes.map((n) => n.name).sort(), 'a daemon pod on each node');
  const pods = { [nodes[0].name]: 'cnf-one', [nodes[1].name]: 'cnf-two' };
  for (const node of nodes) {
    const [pod, token] = [daemons.get(node.name)!, await tokenOf(kubectl, daemons.get(node.name)!)];
    const other = nodes.find((n) => n !== node)!;
    const withToken = (args: string[]) => kubectlWithToken(cluster, token, ['--dry-run=server', ...args]);
    const annotate = (name: string) => withToken(['patch', 'pod', '-n', tenant, name, '--type=merge', '-p', JSON.stringify({ metadata: { annotations: { [networkStatusAnnotation]: '[]' } } })]);
    t.equal((await annotate(pods[node.name]!)).exitCode, 0, `${pod} may write the network-status of its own node's pod`);
    const foreign = await annotate(pods[other.name]!);
    t.equal(foreign.exitCode, 1, `${pod} may not write the other node's pod`);
    t.match(foreign.stderr, `Error from server (Forbidden): pods "${pods[other.name]!}" is forbidden: ValidatingAdmissionPolicy 'podnet-node-pods' with binding 'podnet-node-pods' denied request: podnet's daemon on node ${node.name} may patch only pods bound to node ${node.name}; pod ${tenant}/${pods[other.name]!} is bound to node ${other.name}`);
    for (const [resource, name, what] of [['pnc', 'cnf-blue', 'PodNetworkConfig tenant-a/cnf-blue'], ['pnet', 'blue', 'Network blue']] as const) {
      const entries = JSON.parse(await jsonpath(kubectl, [resource, ...(resource === 'pnc' ? ['-n', tenant] : []), name], '{.status.nodes}')) as { name: string }[];
      const change = (of: string) =>
        withToken(['patch', resource, ...(resource === 'pnc' ? ['-n', tenant] : []), name, '--subresource=status', '--type=json', '-p', JSON.stringify([{ op: 'remove', path: `/status/nodes/${entries.findIndex((e) => e.name === of)}` }])]);
      t.equal((await change(node.name)).exitCode, 0, `${pod} may write its own entry of ${what}`);
      const theirs = await change(other.name);
      t.equal(theirs.exitCode, 1, `${pod} may not remove the other node's entry of ${what}`);
      t.match(theirs.stderr, new RegExp(`Forbidden.*podnet's daemon on node ${node.name} may write only node ${node.name}'s entry in status.nodes of ${what}`));
    }
  }

  // The controller runs on the control plane's node, as its affinity prefers: a worker that
  // leaves does not take it along (when its own node leaves, Kubernetes starts it again elsewhere
  // once the pod garbage collector has let its pod go, ADR 32).
  const controllerAt = await until('the controller scheduled', async () => (await jsonpath(kubectl, ['pods', '-n', 'podnet-system', '-l', 'app.kubernetes.io/name=podnet-controller'], '{.items[*].spec.nodeName}')) || undefined, 60_000);
  t.equal(controllerAt, nodes[0].name, "podnet's controller runs on the control plane's node");

  // The second node leaves, as an autoscaler takes a machine away: the machine stops, then its
  // Node object is deleted. Its entries go from every status, told once each.
  await nodes[1].leave();
  const left = Date.now();
  await kubectl(['delete', 'node', nodes[1].name]);
  const cleanMs = await until('the gone node out of every status', async () => {
    const config = JSON.parse(await jsonpath(kubectl, ['pnc', '-n', tenant, 'cnf-blue'], '{.status}')) as { ready?: string; nodes?: { name: string }[] };
    const network = JSON.parse(await jsonpath(kubectl, ['pnet', 'blue'], '{.status}')) as { ready?: string; nodes?: { name: string }[] };
    const named = [...(config.nodes ?? []), ...(network.nodes ?? [])].some((n) => n.name === nodes[1].name);
    return !named && config.ready === '1/1' && network.ready === '1/1' ? Date.now() - left : undefined;
  }, 120_000);
  t.comment(`the gone node's entries left every status ${cleanMs} ms after its Node was deleted`);
  const managers = async (args: string[]) => (await kubectl(['get', ...args, '--show-managed-fields', '-o', 'jsonpath={.metadata.managedFields[*].manager}'])).stdout.split(' ');
  for (const args of [['pnc', '-n', tenant, 'cnf-blue'], ['pnet', 'blue']]) {
    const left = await until(`${args.join(' ')} has no line of the gone node in its managedFields`, async () => {
      const now = await managers(args);
      return now.includes(`podnet/${nodes[1].name}`) ? undefined : now;
    }, 30_000);
    t.ok(left.includes(`podnet/${nodes[0].name}`) && !left.includes(`podnet/${nodes[1].name}`), `${args.join(' ')}: the gone node's field manager is out of managedFields, the live node's stays`);
  }
  t.ok(cleanMs < 30_000, `within 30 s of its Node's deletion (${cleanMs} ms): READY counts only the pods that remain`);
  const told = async (namespace: string, name: string) => (await kubectl(['get', 'events', '-n', namespace, '--field-selector', `involvedObject.name=${name},reason=NodeGone`, '-o', 'jsonpath={range .items[*]}{.message}{"\\n"}{end}'])).stdout.trim().split('\n').filter((l) => l !== '');
  t.same(await told(tenant, 'cnf-blue'), [`node ${nodes[1].name} is gone from the cluster: removed from status.nodes (READY 1/1)`], "the config's NodeGone Event, told once");
  t.same(await told('default', 'blue'), [`node ${nodes[1].name} is gone from the cluster: removed from status.nodes (READY 1/1)`], "the Network's, in default, told once");

  // Its pods go with it (the pod garbage collector's work, done here at once unless it was done
  // already), and it comes back under its name.
  await asTenant(['delete', 'pod', 'cnf-two', '--force', '--grace-period=0', '--ignore-not-found']);
  await nodes[1].rejoin();
  await until('podnet Ready on both nodes again', async () => ((await install.ready()) === '2/2' ? true : undefined), 180_000);
  await runPodOn(nodes[1], 'cnf-three');
  t.match(await addressOf('cnf-three', 'net1'), /^198\.18\.226\./, 'a pod on the node that came back gets net1');
  const again = await until('READY counts the node that came back, from its new pods alone', async () => {
    const value = await jsonpath(kubectl, ['pnc', '-n', tenant, 'cnf-blue'], '{.status.ready}');
    return value === '2/2' ? value : undefined;
  }, 60_000);
  t.equal(again, '2/2');
  const fresh = JSON.parse(await jsonpath(kubectl, ['pnc', '-n', tenant, 'cnf-blue'], '{.status.nodes}')) as { name: string; selected: number }[];
  t.same(fresh.find((e) => e.name === nodes[1].name)?.selected, 1, 'its entry counts its one new pod, nothing from before it left');
  t.same(await told(tenant, 'cnf-blue'), [`node ${nodes[1].name} is gone from the cluster: removed from status.nodes (READY 1/1)`], 'and no Event was told again');
});

t.test('a vxlan Network across two nodes: pods on each node reach each other over net1, and nothing is left of it once the config goes', { skip, timeout: 900_000 }, async (t) => {
  const { nodes, kubectl, asTenant, install, runPodOn, addressOf } = await twoNodes(t, ['198.18.224.0/24', '198.18.225.0/24']);
  await install();
  // One spec for every node: a multicast group on the underlay, whose device has the same name on both (node.ts).
  const vxlan = {
    apiVersion: group,
    kind: 'Network',
    metadata: { name: 'span' },
    spec: { type: 'vxlan', vxlan: { vni: 4242, group: '239.18.227.1', device: underlay.device }, ipam: { ranges: [{ subnet: '198.18.227.0/24' }] }, staticAddresses: true, namespaceSelector: {} },
  };
  await kubectl(['apply', '-f', '-'], { input: stringify(vxlan) });
  await runPodOn(nodes[0], 'cnf-one');
  await runPodOn(nodes[1], 'cnf-two');
  // The Network's ranges are each node's own: one address per pod, given by the tenant (the admin allows static addresses), so the two nodes never give the same.
  for (const [pod, ip] of [['cnf-one', '198.18.227.11/24'], ['cnf-two', '198.18.227.12/24']] as const) {
    await asTenant(['apply', '-f', '-'], stringify(podNetworkConfig(tenant, `span-${pod}`, { podSelector: { matchLabels: { cnf: pod } }, attachments: [{ network: 'span', interface: 'net1', ips: [ip] }] })));
  }
  t.teardown(async () => {
    if (t.passing()) return;
    for (const args of [['get', 'pnet', 'span', '-o', 'yaml'], ['get', 'pnc', '-n', tenant, '-o', 'yaml'], ['get', 'pod', '-n', tenant, '-o', `jsonpath={range .items[*]}{.metadata.name} {.metadata.annotations.podnetwork\\.opdev\\.io/network-status}{"\\n"}{end}`]]) {
      process.stderr.write(`--- kubectl ${args.join(' ')} (test failed) ---\n${(await kubectl(args, { reject: false })).stdout}\n`);
    }
  });
  t.equal(await addressOf('cnf-one', 'net1'), '198.18.227.11/24');
  t.equal(await addressOf('cnf-two', 'net1'), '198.18.227.12/24');
  for (const [from, to] of [['cnf-one', '198.18.227.12'], ['cnf-two', '198.18.227.11']] as const) {
    const ping = await until(`${from} pings ${to} over net1 across the nodes`, async () => {
      const answer = await asTenant(['exec', from, '--', 'ping', '-c', '1', '-W', '2', to]).catch(() => undefined);
      return answer?.exitCode === 0 ? answer : undefined;
    }, 60_000);
    t.equal(ping.exitCode, 0, `${from} pings ${to} over net1, node to node`);
  }

  await asTenant(['delete', 'pnc', 'span-cnf-one', 'span-cnf-two']);
  for (const pod of ['cnf-one', 'cnf-two']) {
    await until(`${pod} has no net1`, async () => ((await asTenant(['exec', pod, '--', 'ip', 'link', 'show', 'net1']).catch(() => ({ exitCode: 1 }))).exitCode !== 0 ? true : undefined), 60_000);
  }
  for (const node of nodes) {
    const [file, ...args] = node.inNode(['ip', '-d', '-o', 'link', 'show', 'type', 'vxlan']);
    const left = await until(`no vxlan device of span on ${node.name}`, async () => {
      const shown = (await execa(file, args)).stdout;
      return shown.includes('id 4242') ? undefined : shown;
    }, 60_000);
    t.notMatch(left, /id 4242/, `node ${node.name} has no vxlan device of the Network left`);
  }
});

t.test("podnet's DRA driver across two nodes: a Network served on one node only draws its claimed pods there, a node's range full keeps the next claimed pod Pending with the scheduler's reason until an address frees, the daemon away forgets no claim, and its removal takes its slices and sockets", { skip, timeout: 900_000 }, async (t) => {
  const { nodes, kubectl, asTenant, install } = await twoNodes(t, ['198.18.242.0/24', '198.18.243.0/24']);
  t.equal(await install(), '2/2', 'podnet Ready on both nodes');
  await kubectl(['label', 'node', nodes[0].name, 'podnet-e2e/edge=true']);
  // edge: served where the label is. small: on both, two addresses on each node.
  const edge = { ...bridgeNetwork(t, 'edge', ['198.18.244.0/24'], [tenant]) };
  edge.spec = { ...edge.spec, nodeSelector: { matchLabels: { 'podnet-e2e/edge': 'true' } } } as typeof edge.spec;
  const small = bridgeNetwork(t, 'small', ['198.18.245.0/24'], [tenant]);
  small.spec.ipam.ranges = [{ subnet: '198.18.245.0/24', rangeStart: '198.18.245.10', rangeEnd: '198.18.245.11' } as { subnet: string }];
  await kubectl(['apply', '-f', '-'], { input: [edge, small].map((n) => stringify(n)).join('---\n') });
  const offered = await until('each node offers what it serves', async () => {
    const [first, second] = [await slicesOf(nodes[0]), await slicesOf(nodes[1])];
    const names = (slices: typeof first) => slices.flatMap((s) => s.spec.devices ?? []).map((d) => d.name).sort().join(',');
    return names(first) === 'edge,small' && names(second) === 'small' ? { first, second } : undefined;
  }, 60_000);
  t.equal(offered.first.flatMap((s) => s.spec.devices ?? []).find((d) => d.name === 'small')?.capacity?.['addresses']?.value, '2', "small's device offers its two addresses");
  t.pass(`edge is a device of ${nodes[0].name} only; small of both`);

  await tenantMayCreate(kubectl, 'resourceclaimtemplates.resource.k8s.io', "edit aggregates DRA's claims");
  const template = (name: string, network: string) => ({ apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaimTemplate', metadata: { name, namespace: tenant }, spec: { spec: claimSpec(network, { interface: 'net1' }) } });
  await asTenant(['apply', '-f', '-'], [template('edge-net1', 'edge'), template('small-net1', 'small')].map((o) => stringify(o)).join('---\n'));
  const nodeOf = async (pod: string) => (await asTenant(['get', 'pod', pod, '-o', 'jsonpath={.spec.nodeName}'])).stdout;
  const runClaimed = async (name: string, templateName: string, prefix: string) => {
    await asTenant(['apply', '-f', '-'], stringify(claimedPod(name, { template: templateName }, prefix)));
  };

  for (const name of ['edge-1', 'edge-2', 'edge-3']) await runClaimed(name, 'edge-net1', '198.18.244.');
  for (const name of ['edge-1', 'edge-2', 'edge-3']) {
    await asTenant(['wait', '--for=condition=Ready', `pod/${name}`, '--timeout=120s']);
    t.equal(await nodeOf(name), nodes[0].name, `${name}, claiming edge, was scheduled on ${nodes[0].name}, the one node that serves it, and started with net1`);
  }
  await asTenant(['delete', 'pod', 'edge-1', 'edge-2', 'edge-3', '--wait=true']);

  // Four claims of small fill both nodes' ranges; the fifth has nowhere to go.
  for (const name of ['small-1', 'small-2', 'small-3', 'small-4']) await runClaimed(name, 'small-net1', '198.18.245.1');
  for (const name of ['small-1', 'small-2', 'small-3', 'small-4']) await asTenant(['wait', '--for=condition=Ready', `pod/${name}`, '--timeout=120s']);
  const placed = await Promise.all(['small-1', 'small-2', 'small-3', 'small-4'].map(nodeOf));
  t.same(nodes.map((n) => placed.filter((p) => p === n.name).length), [2, 2], 'two claimed pods on each node: as many as each node has addresses');
  await runClaimed('small-5', 'small-net1', '198.18.245.1');
  const reason = await until('the scheduler tells why small-5 waits', async () => {
    const events = (await asTenant(['get', 'events', '--field-selector=involvedObject.name=small-5,reason=FailedScheduling', '-o', 'jsonpath={range .items[*]}{.message}{"\\n"}{end}'])).stdout;
    return events.trim() === '' ? undefined : events.trim();
  }, 60_000);
  t.match(reason, /cannot allocate all claims/, `small-5 stays Pending, the scheduler says: ${reason.split('\n')[0]}`);
  t.equal((await asTenant(['get', 'pod', 'small-5', '-o', 'jsonpath={.status.phase}'])).stdout, 'Pending', 'and it runs nowhere without its network');
  const freed = placed[0]!;
  await asTenant(['delete', 'pod', 'small-1', '--wait=true']);
  await asTenant(['wait', '--for=condition=Ready', 'pod/small-5', '--timeout=180s']);
  t.equal(await nodeOf('small-5'), freed, "once small-1's address is back, small-5 runs on its node with net1");

  // The first node's daemon pod deleted while claimed pods run, and one more created meanwhile.
  const daemons = await daemonPods(kubectl);
  const onFirst = (await Promise.all(['small-2', 'small-3', 'small-4', 'small-5'].map(async (p) => [p, await nodeOf(p)] as const))).filter(([, n]) => n === nodes[0].name).map(([p]) => p);
  await kubectl(['delete', 'pod', '-n', 'podnet-system', daemons.get(nodes[0].name)!, '--wait=false']);
  await runClaimed('edge-4', 'edge-net1', '198.18.244.');
  await asTenant(['wait', '--for=condition=Ready', 'pod/edge-4', '--timeout=180s']);
  t.equal(await nodeOf('edge-4'), nodes[0].name, 'a pod claimed while the daemon was away starts once it is back, with net1');
  await until('podnet Ready on both nodes again', async () => ((await install.ready()) === '2/2' ? true : undefined), 180_000);
  const prepared = join(nodes[0].folder('/var/lib/podnet'), 'claims');
  t.equal((await readdir(prepared)).filter((f) => f.endsWith('.json')).length, onFirst.length + 1, "the new daemon has every claim prepared on its node, none forgotten");
  for (const pod of onFirst) {
    const has = await asTenant(['exec', pod, '--', 'ip', '-o', '-4', 'addr', 'show', 'dev', 'net1']);
    t.match(has.stdout, /inet 198\.18\.245\.1[01]\//, `${pod} kept net1 through the daemon's restart`);
  }
  await asTenant(['delete', 'pod', '--all', '--wait=true', '--timeout=120s']);
  await until('every claim unprepared on both nodes', async () => {
    const left = await Promise.all(nodes.map(async (n) => (await readdir(join(n.folder('/var/lib/podnet'), 'claims'))).filter((f) => f.endsWith('.json')).length));
    return left.every((c) => c === 0) ? true : undefined;
  }, 120_000);

  // podnet removed: its sockets go with its daemons, and the kubelets take its slices away.
  await kubectl(['delete', 'daemonset', '-n', 'podnet-system', 'podnet', '--wait=true']);
  const gone = await until("podnet's slices gone from both nodes", async () => ((await slicesOf(nodes[0])).length + (await slicesOf(nodes[1])).length === 0 ? true : undefined), 120_000);
  t.ok(gone, 'no slice of podnet is left (the kubelet removes a driver\'s slices once its plugin is gone)');
  for (const node of nodes) {
    const registry = join(node.folder('/var/lib/kubelet'), 'plugins_registry', `${driver}-reg.sock`);
    const service = join(node.folder('/var/lib/kubelet'), 'plugins', driver, 'dra.sock');
    t.notOk(existsSync(registry) || existsSync(service), `${node.name}: podnet's plugin sockets are gone`);
  }
});
