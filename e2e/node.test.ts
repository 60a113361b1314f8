// podnet on a real node, the way a cluster admin installs it and a tenant uses it: containerd and a
// kubelet run the DaemonSet from `kubectl apply -k`, pods are made by the kubelet and networked by
// the primary CNI with podnet chained, and everything is done and checked through kubectl and the
// API only (kubectl exec to look inside pods). Every test runs on containerd 1.6 (Debian's) and on
// containerd 2, one after the other. See e2e/cluster/node.ts for the node itself.
import t, { type Test } from 'tap';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { execa } from 'execa';
import { stringify } from 'yaml';
import { networkStatusAnnotation, networksAnnotation } from '../src/model/annotation.ts';
import { prepareClusterTest, startCluster } from './cluster/cluster.ts';
import { busyboxImage, machineTraces, missingNodePrerequisite, nodeProcesses, nodeRuntimes, otherNodeRunning, prepareNodeTest, startNode, type Node, type NodeRuntime } from './cluster/node.ts';
import { until } from './lib/engine.ts';
import { ensureHelm } from './cluster/binaries.ts';
import { missingPrerequisite, repoRoot } from './lib/env.ts';
import { installPodnet, overlay, podnetImage, tenantMayCreate as mayCreate } from './lib/podnet-node.ts';
import { bridgeNetwork, podNetworkConfig } from './lib/kube.ts';

const skip = missingPrerequisite(['/usr/sbin/debootstrap']) ?? missingNodePrerequisite() ?? (await prepareClusterTest(t)) ?? (await prepareNodeTest(t));

const tenant = 'tenant-a';

const podJson = async (node: Node, namespace: string, name: string) => JSON.parse((await node.kubectl(['get', 'pod', '-n', namespace, name, '-o', 'json'])).stdout) as { metadata: { annotations?: Record<string, string> } };

/** The IPv4 address (with prefix) of `ifname` in the pod, as `ip` inside it tells, or undefined. */
async function podAddress(node: Node, namespace: string, pod: string, ifname: string): Promise<string | undefined> {
  const { stdout, exitCode } = await node.kubectl(['exec', '-n', namespace, pod, '--', 'ip', '-o', '-4', 'addr', 'show', 'dev', ifname], { reject: false });
  return exitCode === 0 ? /inet (\S+)/.exec(stdout)?.[1] : undefined;
}

/** What the node tests leave to check after their teardown: their cgroups and links. */
const made: { nodes: Node[]; links: string[] } = { nodes: [], links: [] };
const tracesBefore = skip ? undefined : await machineTraces();
/** A node of another test process that ran when this file started changed the machine before these traces were taken. */
const otherNodeAtStart = skip ? false : await otherNodeRunning();

interface CacheEntry {
  networkName: string;
  containerId: string;
  netns?: string;
  cniArgs?: [string, string][];
}

/**
 * The node's libcni cache entries of the primary network (containerd caches its loopback network
 * too). A file being written or removed as it is read is left out: a caller that waits polls again.
 */
async function primaryCacheEntries(node: Node): Promise<CacheEntry[]> {
  const results = join(node.folder('/var/lib/cni'), 'results');
  const entries = await Promise.all(
    (await readdir(results)).map(async (name) => {
      try {
        return [JSON.parse(await readFile(join(results, name), 'utf8')) as CacheEntry];
      } catch {
        return [];
      }
    }),
  );
  return entries.flat().filter((e) => e.networkName === 'primary');
}

const podArg = (entry: CacheEntry, key: string, value: string) => entry.cniArgs?.some(([k, v]) => k === key && v === value) === true;

/** The netns each cache entry of the pod's primary attachment names. */
async function cachedNetnsOf(node: Node, pod: string): Promise<(string | undefined)[]> {
  return (await primaryCacheEntries(node)).filter((e) => podArg(e, 'K8S_POD_NAME', pod)).map((e) => e.netns);
}

/** A node with podnet's image known to it, and a tenant namespace tenant-a may edit. */
async function podnetNode(t: Test, runtime: NodeRuntime, subnets: { primary: string; blue: string }) {
  const cluster = await startCluster(t, { forNode: true });
  const node = await startNode(t, cluster, { primarySubnet: subnets.primary, runtime });
  made.nodes.push(node);
  made.links.push(node.primaryBridge);
  const tag = await podnetImage(t, node);
  const asTenant = (args: string[], input?: string) => node.kubectl(['-n', tenant, ...args], { as: 'tenant-a', input });
  const tenantMayCreate = (resource: string, why: string) => mayCreate(node.kubectl, resource, why);
  await node.kubectl(['create', 'namespace', tenant]);
  await node.kubectl(['create', 'rolebinding', '-n', tenant, 'tenant-a-edit', '--clusterrole=edit', '--user=tenant-a']);
  await tenantMayCreate('pods', 'the aggregation controller filled edit');
  return {
    cluster,
    node,
    tag,
    asTenant,
    /** A tenant's pod labelled app=cnf, `restart` as kubectl run's. */
    runPod: (name: string, restart: 'Never' | 'Always' = 'Never') => asTenant(['run', name, `--image=${busyboxImage}`, '--image-pull-policy=Never', '--labels=app=cnf', `--restart=${restart}`, '--', '/bin/sleep', '3600']),
    /** podnet installed the admin's way, and Ready. */
    install: () => installPodnet(t, cluster, node, tag),
    /** The admin's bridge Network blue, offered to the tenant's namespace, on a bridge of the test's own. */
    async offerBlue() {
      const network = bridgeNetwork(t, 'blue', [subnets.blue], [tenant]);
      made.links.push(network.spec.bridge.name);
      await node.kubectl(['apply', '-f', '-'], { input: stringify(network) });
      await tenantMayCreate('podnetworkconfigs', "edit aggregates podnet's tenant role");
      return network.spec.bridge.name;
    },
    /** The tenant's config: net1 on blue for every app=cnf pod. */
    configBlue: () => asTenant(['apply', '-f', '-'], stringify(podNetworkConfig(tenant, 'cnf-blue', { podSelector: { matchLabels: { app: 'cnf' } }, attachments: [{ network: 'blue', interface: 'net1' }] }))),
    /** net1's address in the pod once it has one. */
    net1Of: (pod: string) => until(`${pod} has net1 on blue`, () => podAddress(node, tenant, pod, 'net1'), 60_000),
    async ping(from: string, to: string) {
      const ping = await node.kubectl(['exec', '-n', tenant, from, '--', 'ping', '-c', '1', '-W', '5', to.split('/')[0]!], { reject: false });
      t.equal(ping.exitCode, 0, `${from} pings ${to} over net1`, { output: `${ping.stdout}${ping.stderr}` });
    },
  };
}

for (const runtime of nodeRuntimes) {
  t.test(`${runtime}: installed with kubectl apply -k on a kubelet node, podnet attaches a tenant network to running pods and takes it back`, { skip, timeout: 900_000 }, async (t) => {
    const { cluster, node, tag, asTenant, runPod, install, offerBlue, configBlue, net1Of, ping } = await podnetNode(t, runtime, { primary: '198.18.230.0/24', blue: '198.18.231.0/24' });
    const conflistBefore = await readFile(join(node.folder('/etc/cni/net.d'), '10-primary.conflist'), 'utf8');

    // A pod that runs before podnet is installed. containerd 1.6's libcni caches no netns for it,
    // so podnet finds it through the CRI; containerd 2's caches it, and the cache is enough.
    await runPod('cnf-early');
    await asTenant(['wait', '--for=condition=Ready', 'pod/cnf-early', '--timeout=120s']);
    const cached = await cachedNetnsOf(node, 'cnf-early');
    if (runtime === 'containerd-1.6') t.strictSame(cached, [undefined], "containerd 1.6's libcni cached cnf-early's attachment with no netns");
    else t.match(cached, [/^\/var\/run\/netns\/cni-/], "containerd 2's libcni cached cnf-early's netns");

    await install();
    const chained = JSON.parse(await readFile(join(node.folder('/etc/cni/net.d'), '10-primary.conflist'), 'utf8')) as { plugins: { type: string }[] };
    t.same(chained.plugins.map((p) => p.type), ['bridge', 'podnet'], "the install container chained podnet after the primary in the node's conflist");
    t.ok(existsSync(join(node.folder('/opt/cni/bin'), 'podnet')), "and put the executable into the node's CNI bin dir");

    const bridge = await offerBlue();
    // The tenant's part, with no privilege at all: two more pods, then a PodNetworkConfig for all three.
    for (const name of ['cnf-a', 'cnf-b']) await runPod(name);
    await asTenant(['wait', '--for=condition=Ready', 'pod', '-l', 'app=cnf', '--timeout=120s']);
    await configBlue();

    const [a, b, early] = [await net1Of('cnf-a'), await net1Of('cnf-b'), await net1Of('cnf-early')];
    t.match(a, /^198\.18\.231\./, 'cnf-a got an address of blue');
    t.match(b, /^198\.18\.231\./, 'cnf-b got an address of blue');
    t.match(early, /^198\.18\.231\./, 'so did cnf-early, which ran before podnet was installed');
    await ping('cnf-a', b);
    await ping('cnf-early', a);

    // Pods created with their network asked, by the config that selects app=cnf and by the
    // annotation: their init container fails, and with it the pod (restartPolicy Never), unless
    // the network is there before it starts (ADR 28).
    const needsNetwork = (name: string, ifname: string, annotations?: Record<string, string>) => ({
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name, labels: { app: 'cnf' }, ...(annotations ? { annotations } : {}) },
      spec: {
        restartPolicy: 'Never',
        initContainers: [{ name: 'needs-network', image: busyboxImage, imagePullPolicy: 'Never', command: ['sh', '-c', `ip -4 addr show dev ${ifname} | grep -q 'inet 198.18.231.'`] }],
        containers: [{ name: 'main', image: busyboxImage, imagePullPolicy: 'Never', command: ['/bin/sleep', '3600'] }],
      },
    });
    await asTenant(['apply', '-f', '-'], stringify(needsNetwork('cnf-born', 'net1')));
    await asTenant(['apply', '-f', '-'], stringify(needsNetwork('cnf-annotated', 'net7', { [networksAnnotation]: 'blue@net7' })));
    await asTenant(['wait', '--for=condition=Ready', 'pod/cnf-born', 'pod/cnf-annotated', '--timeout=120s']);
    t.pass("pods asking blue at their creation, by the config and by the annotation, found it in their init container");
    await asTenant(['delete', 'pod', 'cnf-born', 'cnf-annotated', '--wait=true']);

    // The daemon away (its DaemonSet kept off the node): a pod the config selects starts all the
    // same, without net1; net1 comes once the daemon is back, and the pod is told it came late.
    const daemonSet = ['-n', 'podnet-system', 'daemonset/podnet'];
    await node.kubectl(['patch', ...daemonSet, '--type=merge', '-p', JSON.stringify({ spec: { template: { spec: { nodeSelector: { 'podnet-e2e/away': 'true' } } } } })]);
    await until('no podnet daemon pod on the node', async () => ((await node.kubectl(['get', 'pods', '-n', 'podnet-system', '-l', 'app.kubernetes.io/name=podnet', '-o', 'name'])).stdout.trim() === '' ? true : undefined), 120_000);
    await runPod('cnf-late');
    await asTenant(['wait', '--for=condition=Ready', 'pod/cnf-late', '--timeout=120s']);
    t.equal(await podAddress(node, tenant, 'cnf-late', 'net1'), undefined, 'cnf-late runs without net1 while the daemon is away');
    await node.kubectl(['patch', ...daemonSet, '--type=json', '-p', JSON.stringify([{ op: 'remove', path: '/spec/template/spec/nodeSelector/podnet-e2e~1away' }])]);
    await node.kubectl(['rollout', 'status', ...daemonSet, '--timeout=180s']);
    t.match(await net1Of('cnf-late'), /^198\.18\.231\./, 'net1 once the daemon is back');
    await until("cnf-late's network-status says net1 was made after its containers started", async () => {
      const value = (await podJson(node, tenant, 'cnf-late')).metadata.annotations?.[networkStatusAnnotation];
      return value && (JSON.parse(value) as { interface?: string; madeAfterStart?: boolean }[]).some((e) => e.interface === 'net1' && e.madeAfterStart === true) ? true : undefined;
    });
    const eventsOf = async (pod: string, reason: string) =>
      (await asTenant(['get', 'events', '--field-selector', `involvedObject.name=${pod},reason=${reason}`, '-o', 'jsonpath={range .items[*]}{.message}{"\\n"}{end}'])).stdout.trim();
    t.match(await until('an AttachedAfterStart Warning on cnf-late', async () => (await eventsOf('cnf-late', 'AttachedAfterStart')) || undefined), /attached net1 to Network blue .*after the pod's containers had started/);
    t.equal(await eventsOf('cnf-late', 'FailedCreatePodSandBox'), '', 'its sandbox was made at the first try: podnet away failed nothing');
    await asTenant(['delete', 'pod', 'cnf-late', '--wait=true']);

    // A pod that requires an attachment to a Network that does not exist yet: its sandbox fails,
    // naming the attachment, and is tried again by the kubelet, leaving no port of its other
    // attachment on blue's bridge; once the admin makes the Network, the pod runs with both.
    const ports = async () => (JSON.parse((await execa('ip', ['-json', 'link', 'show', 'master', bridge])).stdout) as unknown[]).length;
    const portsBefore = await ports();
    const selections = [{ name: 'blue', interface: 'net2' }, { name: 'green', interface: 'net3', required: true }];
    const requiring = {
      apiVersion: 'v1',
      kind: 'Pod',
      metadata: { name: 'cnf-required', annotations: { [networksAnnotation]: JSON.stringify(selections) } },
      spec: { containers: [{ name: 'main', image: busyboxImage, imagePullPolicy: 'Never', command: ['/bin/sleep', '3600'] }] },
    };
    await asTenant(['apply', '-f', '-'], stringify(requiring));
    t.match(
      await until('FailedCreatePodSandBox on cnf-required', async () => (await eventsOf('cnf-required', 'FailedCreatePodSandBox')) || undefined, 120_000),
      /net3 on Network green \(Pod tenant-a\/cnf-required metadata\.annotations\["podnetwork\.opdev\.io\/networks"\]\[1\]\): no Network named green/,
      'the kubelet tells which required attachment and why',
    );
    await until("blue's bridge has no more ports than before cnf-required: nothing of its failed sandboxes left", async () => ((await ports()) === portsBefore ? true : undefined), 60_000);
    const green = bridgeNetwork(t, 'green', ['198.18.236.0/24'], [tenant]);
    made.links.push(green.spec.bridge.name);
    await node.kubectl(['apply', '-f', '-'], { input: stringify(green) });
    await asTenant(['wait', '--for=condition=Ready', 'pod/cnf-required', '--timeout=180s']);
    t.match(await podAddress(node, tenant, 'cnf-required', 'net3'), /^198\.18\.236\./, 'once green exists the kubelet made the pod, with net3 on green');
    t.match(await podAddress(node, tenant, 'cnf-required', 'net2'), /^198\.18\.231\./, 'and net2 on blue');
    await asTenant(['delete', 'pod', 'cnf-required', '--wait=true']);

    const status = await until('cnf-a tells net1 in its network-status', async () => {
      const value = (await podJson(node, tenant, 'cnf-a')).metadata.annotations?.[networkStatusAnnotation];
      return value?.includes('"net1"') ? value : undefined;
    });
    t.match(status, a.split('/')[0]!, "the pod's network-status annotation names net1's address");
    const events = await until('an Attached event on cnf-a', async () => {
      const { stdout } = await asTenant(['get', 'events', '--field-selector', 'involvedObject.name=cnf-a', '-o', 'jsonpath={range .items[*]}{.reason}{"\\n"}{end}']);
      return stdout.split('\n').includes('Attached') ? stdout : undefined;
    });
    t.ok(events, 'the tenant sees an Attached event on its pod');

    await asTenant(['delete', 'podnetworkconfig', 'cnf-blue']);
    for (const pod of ['cnf-a', 'cnf-b', 'cnf-early']) await until(`${pod}: net1 is gone`, async () => ((await podAddress(node, tenant, pod, 'net1')) === undefined ? true : undefined), 60_000);
    t.pass('deleting the config took net1 out of every running pod');

    // The annotation, on a running pod, as `kubectl annotate` sets and removes it.
    await asTenant(['annotate', 'pod', 'cnf-a', `${networksAnnotation}=blue@net5`]);
    t.match(await until('cnf-a has net5 on blue', () => podAddress(node, tenant, 'cnf-a', 'net5'), 60_000), /^198\.18\.231\./, 'annotating a running pod attached net5 on blue');
    await asTenant(['annotate', 'pod', 'cnf-a', `${networksAnnotation}-`]);
    await until('cnf-a: net5 is gone', async () => ((await podAddress(node, tenant, 'cnf-a', 'net5')) === undefined ? true : undefined), 60_000);
    t.pass('removing the annotation took net5 out');

    // Uninstall as daemonset/uninstall.yaml says: the DaemonSet gone, then the uninstall DaemonSet.
    await asTenant(['delete', 'pod', 'cnf-a', 'cnf-b', 'cnf-early', '--wait=true']);
    await node.kubectl(['delete', 'daemonset', '-n', 'podnet-system', 'podnet', '--wait=true']);
    const uninstall = await overlay(t, cluster, tag, 'uninstall');
    await node.kubectl(['apply', '-k', uninstall]);
    await node.kubectl(['rollout', 'status', '-n', 'podnet-system', 'daemonset/podnet-uninstall', '--timeout=180s']);
    t.equal(await readFile(join(node.folder('/etc/cni/net.d'), '10-primary.conflist'), 'utf8'), conflistBefore, "uninstall gave the primary's conflist back as it was");
    t.notOk(existsSync(join(node.folder('/opt/cni/bin'), 'podnet')), 'and took the executable out of the bin dir');
    t.equal((await execa('ip', ['link', 'show', 'dev', bridge], { reject: false })).exitCode, 1, "and the Network's bridge off the host");
    await node.kubectl(['delete', '-k', uninstall, '--wait=true']);
  });

  interface PodState {
    status?: {
      phase?: string;
      initContainerStatuses?: { name: string; restartCount: number; state?: { terminated?: { reason?: string; exitCode?: number } }; lastState?: { terminated?: { reason?: string } } }[];
    };
  }

  t.test(`${runtime}: the daemon pod deleted and the DaemonSet rolled to a new image while pods come and go: no pod waits on podnet or fails, no attachment is lost`, { skip, timeout: 900_000 }, async (t) => {
    const { node, tag, asTenant, runPod, install, offerBlue, configBlue, net1Of } = await podnetNode(t, runtime, { primary: '198.18.232.0/24', blue: '198.18.233.0/24' });
    await install();
    await offerBlue();
    await runPod('cnf-steady');
    await asTenant(['wait', '--for=condition=Ready', 'pod/cnf-steady', '--timeout=120s']);
    await configBlue();
    const steady = await net1Of('cnf-steady');

    // The churn: a pod made every moment, each waited for Ready, the one before deleted.
    const readyIn: { pod: string; ms: number; failed?: string }[] = [];
    let churning = true;
    const churn = (async () => {
      for (let i = 0; churning; i++) {
        const pod = `churn-${i}`;
        const started = Date.now();
        // A failure is recorded, not thrown: nothing awaits this loop until it ends.
        const failed = (error: Error) => error.message;
        const ready = await runPod(pod).then(() => asTenant(['wait', '--for=condition=Ready', `pod/${pod}`, '--timeout=90s'])).then(() => undefined, failed);
        readyIn.push({ pod, ms: Date.now() - started, ...(ready ? { failed: ready } : {}) });
        if (i > 1) await asTenant(['delete', 'pod', `churn-${i - 2}`, '--wait=false', '--ignore-not-found']).catch(() => undefined);
      }
    })();

    const daemonPods = async () => (JSON.parse((await node.kubectl(['get', 'pods', '-n', 'podnet-system', '-l', 'app.kubernetes.io/name=podnet', '-o', 'json'])).stdout) as { items: ({ metadata: { name: string } } & PodState)[] }).items;
    const seenDaemonPods = new Map<string, PodState>();
    const remember = async () => {
      for (const pod of await daemonPods()) seenDaemonPods.set(pod.metadata.name, pod);
    };
    await until('a few pods made before podnet goes', async () => (readyIn.length >= 2 ? true : undefined), 60_000);
    await node.kubectl(['delete', 'pod', '-n', 'podnet-system', '-l', 'app.kubernetes.io/name=podnet', '--wait=true']);
    await node.kubectl(['rollout', 'status', '-n', 'podnet-system', 'daemonset/podnet', '--timeout=180s']);
    await remember();

    // A new image: the same build under another tag, as a release would be.
    const next = `${tag}-next`;
    await execa('podman', ['tag', `localhost/podnet:${tag}`, `localhost/podnet:${next}`]);
    t.teardown(() => execa('podman', ['rmi', '--force', `localhost/podnet:${next}`], { reject: false }));
    await node.importImage(`localhost/podnet:${next}`);
    const madeBefore = readyIn.length;
    await node.kubectl(['set', 'image', '-n', 'podnet-system', 'daemonset/podnet', `install=localhost/podnet:${next}`, `daemon=localhost/podnet:${next}`]);
    await node.kubectl(['rollout', 'status', '-n', 'podnet-system', 'daemonset/podnet', '--timeout=180s']);
    await remember();
    await until('a few pods made after the rollout', async () => (readyIn.length >= madeBefore + 2 ? true : undefined), 90_000);
    churning = false;
    await churn;

    t.strictSame(readyIn.filter((r) => r.failed), [], `every one of ${readyIn.length} pods made meanwhile got Ready`);
    const slowest = Math.max(...readyIn.map((r) => r.ms));
    t.ok(slowest < 30_000, `no pod waited on podnet: the slowest took ${slowest} ms to get Ready`);
    const sandboxFailures = (await asTenant(['get', 'events', '--field-selector', 'reason=FailedCreatePodSandBox', '-o', 'name'])).stdout.trim();
    t.equal(sandboxFailures, '', 'no sandbox failed to be made');

    t.equal(await podAddress(node, 'tenant-a', 'cnf-steady', 'net1'), steady, 'the pod that ran throughout kept net1 and its address');
    const alive = readyIn.slice(-2).map((r) => r.pod);
    for (const pod of alive) t.match(await net1Of(pod), /^198\.18\.233\./, `${pod}, made during the last rollout, has net1`);

    t.ok(seenDaemonPods.size >= 2, `seen ${seenDaemonPods.size} daemon pods`);
    for (const [name, pod] of seenDaemonPods) {
      const install = pod.status?.initContainerStatuses?.find((c) => c.name === 'install');
      t.equal(install?.state?.terminated?.reason, 'Completed', `${name}: the install container completed within its memory limit`);
      t.equal(install?.restartCount, 0, `${name}: and was never restarted (an OOM kill would restart it)`);
    }
  });

  t.test(`${runtime}: a node restart (containerd and the kubelet stopped, every pod process gone, both started again) converges: the pods the kubelet makes again have net1`, { skip, timeout: 900_000 }, async (t) => {
    const { node, asTenant, runPod, install, offerBlue, configBlue, net1Of, ping } = await podnetNode(t, runtime, { primary: '198.18.234.0/24', blue: '198.18.235.0/24' });
    await install();
    await offerBlue();
    for (const pod of ['cnf-a', 'cnf-b']) await runPod(pod, 'Always');
    await asTenant(['wait', '--for=condition=Ready', 'pod', '-l', 'app=cnf', '--timeout=120s']);
    await configBlue();
    await net1Of('cnf-a');
    await net1Of('cnf-b');

    const sandboxesBefore = await sandboxIds(node);
    await node.restart();
    // The kubelet makes each pod a new sandbox (a runtime may keep the dead ones' cache entries
    // for a while: they are not what is waited for).
    await until(
      'the kubelet made new sandboxes for both pods',
      async () => {
        const made = (await primaryCacheEntries(node)).filter((e) => !sandboxesBefore.includes(e.containerId));
        return ['cnf-a', 'cnf-b'].every((pod) => made.some((e) => podArg(e, 'K8S_POD_NAME', pod))) ? true : undefined;
      },
      240_000,
    );
    await node.kubectl(['rollout', 'status', '-n', 'podnet-system', 'daemonset/podnet', '--timeout=180s']);
    await asTenant(['wait', '--for=condition=Ready', 'pod', '-l', 'app=cnf', '--timeout=120s']);
    const b = await net1Of('cnf-b');
    await net1Of('cnf-a');
    await ping('cnf-a', b);
  });
}

t.test('containerd-2: installed, upgraded and uninstalled with helm: the chart runs podnet as kubectl apply -k does, an upgrade rolls it, an uninstall keeps the tenants\' configs', { skip, timeout: 900_000 }, async (t) => {
  const { cluster, node, tag, asTenant, runPod, offerBlue, configBlue, net1Of } = await podnetNode(t, 'containerd-2', { primary: '198.18.237.0/24', blue: '198.18.238.0/24' });
  const helm = await ensureHelm();
  const server = new URL(cluster.server);
  // What this machine lacks (no kube-proxy): the apiserver's address, as the kustomize overlay of installPodnet gives it.
  const env = [{ name: 'KUBERNETES_SERVICE_HOST', value: server.hostname }, { name: 'KUBERNETES_SERVICE_PORT', value: server.port }];
  const helmRun = (args: string[]) => execa(helm, [...args, '--kubeconfig', cluster.kubeconfig('admin')], { all: true });
  await helmRun(['install', 'podnet', `${repoRoot}charts/podnet`, '--set', `image.tag=${tag}`, '--set-json', `extraEnv=${JSON.stringify(env)}`, '--set', 'controller.hostNetwork=true', '--wait', '--timeout', '5m']);
  await node.kubectl(['rollout', 'status', '-n', 'podnet-system', 'daemonset/podnet', '--timeout=180s']);
  const chained = JSON.parse(await readFile(join(node.folder('/etc/cni/net.d'), '10-primary.conflist'), 'utf8')) as { plugins: { type: string }[] };
  t.same(chained.plugins.map((p) => p.type), ['bridge', 'podnet'], "helm's install chained podnet after the primary");

  await offerBlue();
  await runPod('cnf-helm', 'Always');
  await asTenant(['wait', '--for=condition=Ready', 'pod/cnf-helm', '--timeout=120s']);
  await configBlue();
  const address = await net1Of('cnf-helm');
  t.match(address, /^198\.18\.238\./, 'a tenant pod got net1 on blue');

  await helmRun(['upgrade', 'podnet', `${repoRoot}charts/podnet`, '--reuse-values', '--set', 'limits.maxAttachmentsPerPod=8', '--wait', '--timeout', '5m']);
  await node.kubectl(['rollout', 'status', '-n', 'podnet-system', 'daemonset/podnet', '--timeout=180s']);
  const ds = JSON.parse((await node.kubectl(['get', 'daemonset', '-n', 'podnet-system', 'podnet', '-o', 'json'])).stdout) as { spec: { template: { spec: { containers: { args: string[] }[] } } } };
  t.match(ds.spec.template.spec.containers[0]!.args.join(' '), /--max-attachments-per-pod 8/, 'the upgrade gave the daemon the new limit');
  t.equal(await podAddress(node, tenant, 'cnf-helm', 'net1'), address, 'the pod kept net1 and its address through the upgrade');

  await helmRun(['uninstall', 'podnet', '--wait', '--timeout', '5m']);
  t.equal((await node.kubectl(['get', 'daemonset', '-n', 'podnet-system', 'podnet'], { reject: false })).exitCode, 1, 'the DaemonSet is gone');
  // (The tenant's roles went with the chart: the admin looks.)
  t.equal((await node.kubectl(['get', 'podnetworkconfig', '-n', tenant, 'cnf-blue'], { reject: false })).exitCode, 0, "the CRDs and the tenants' configs are kept");
});

/** The ids of the tenant's pod sandboxes, as containerd's libcni cache names them. */
async function sandboxIds(node: Node): Promise<string[]> {
  return (await primaryCacheEntries(node)).filter((e) => podArg(e, 'K8S_POD_NAMESPACE', tenant)).map((e) => e.containerId);
}

t.test('the machine is left as it was found: no kubelet folders, sysctls, iptables chains, cgroups or links of the nodes', { skip }, async (t) => {
  if (otherNodeAtStart || (await otherNodeRunning())) t.comment('another process ran a node on this machine when this file started, or runs one now: its kubelet folders, sysctls and chains are not ours to judge');
  else t.strictSame(await machineTraces(), tracesBefore, 'no kubelet folder, sysctl or iptables chain changed');
  const cgroupsLeft = made.nodes.map((n) => n.cgroupRoot).filter((c) => existsSync(`/sys/fs/cgroup/memory${c}`) || existsSync(`/sys/fs/cgroup${c}`));
  t.strictSame(cgroupsLeft, [], 'no cgroup of a node is left');
  const processesLeft = [];
  for (const node of made.nodes) processesLeft.push(...(await nodeProcesses(node.root, node.cgroupRoot)));
  t.strictSame(processesLeft, [], 'no process of a node is left (containerd shims included)');
  t.strictSame(made.nodes.map((n) => n.root).filter((root) => existsSync(root)), [], "no node's folder is left");
  const linksLeft = [];
  for (const link of made.links) if ((await execa('ip', ['link', 'show', 'dev', link], { reject: false })).exitCode === 0) linksLeft.push(link);
  t.strictSame(linksLeft, [], 'no link of a node is left');
});
