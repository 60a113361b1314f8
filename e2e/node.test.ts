// podnet on a real node, the way a cluster admin installs it and a tenant uses it: containerd and a
// kubelet run the DaemonSet from `kubectl apply -k`, pods are made by the kubelet and networked by
// the primary CNI with podnet chained, and everything is done and checked through kubectl and the
// API only (kubectl exec to look inside pods). See e2e/cluster/node.ts for the node itself.
import t, { type Test } from 'tap';
import { existsSync } from 'node:fs';
import { copyFile, readdir, readFile, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { execa } from 'execa';
import { dir } from 'tmp-promise';
import { stringify } from 'yaml';
import { buildImage } from '../scripts/image.ts';
import { networkStatusAnnotation } from '../src/model/annotation.ts';
import { prepareClusterTest, startCluster, type Cluster } from './cluster/cluster.ts';
import { busyboxImage, machineTraces, missingNodePrerequisite, prepareNodeTest, startNode, type Node } from './cluster/node.ts';
import { until } from './lib/engine.ts';
import { missingPrerequisite, repoRoot } from './lib/env.ts';
import { uniqueName } from './lib/netns.ts';
import { group } from './lib/kube.ts';

const skip = missingPrerequisite(['/usr/sbin/debootstrap']) ?? missingNodePrerequisite() ?? (await prepareClusterTest(t)) ?? (await prepareNodeTest(t));

const tenant = 'tenant-a';

/** The DaemonSet as shipped, with only what this machine lacks: the image's tag of this run, and the apiserver's address (no kube-proxy). */
async function overlay(t: Test, cluster: Cluster, imageTag: string, base: 'install' | 'uninstall'): Promise<string> {
  const folder = await dir({ unsafeCleanup: true, prefix: 'podnet-overlay-' });
  t.teardown(folder.cleanup);
  // kustomize takes a folder from anywhere but a file only from inside the overlay's own.
  if (base === 'uninstall') await copyFile(`${repoRoot}daemonset/uninstall.yaml`, join(folder.path, 'uninstall.yaml'));
  const resources = base === 'install' ? [relative(folder.path, `${repoRoot}daemonset`)] : ['uninstall.yaml'];
  const server = new URL(cluster.server);
  await writeFile(
    join(folder.path, 'kustomization.yaml'),
    stringify({
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      resources,
      images: [{ name: 'localhost/podnet', newTag: imageTag }],
      patches: [
        {
          target: { kind: 'DaemonSet', name: 'podnet' },
          patch: stringify([
            { op: 'add', path: '/spec/template/spec/containers/0/env/-', value: { name: 'KUBERNETES_SERVICE_HOST', value: server.hostname } },
            { op: 'add', path: '/spec/template/spec/containers/0/env/-', value: { name: 'KUBERNETES_SERVICE_PORT', value: server.port } },
          ]),
        },
      ],
    }),
  );
  return folder.path;
}

/** podnet's image of this run, under a tag of its own, made known to the node's containerd. */
async function podnetImage(t: Test, node: Node): Promise<string> {
  const tag = uniqueName('e2e-node-');
  const image = buildImage(`localhost/podnet:${tag}`);
  t.teardown(() => execa('podman', ['rmi', '--force', image], { reject: false }));
  await node.importImage(image);
  return tag;
}

const podJson = async (node: Node, namespace: string, name: string) => JSON.parse((await node.kubectl(['get', 'pod', '-n', namespace, name, '-o', 'json'])).stdout) as { metadata: { annotations?: Record<string, string> } };

/** The IPv4 address (with prefix) of `ifname` in the pod, as `ip` inside it tells, or undefined. */
async function podAddress(node: Node, namespace: string, pod: string, ifname: string): Promise<string | undefined> {
  const { stdout, exitCode } = await node.kubectl(['exec', '-n', namespace, pod, '--', 'ip', '-o', '-4', 'addr', 'show', 'dev', ifname], { reject: false });
  return exitCode === 0 ? /inet (\S+)/.exec(stdout)?.[1] : undefined;
}

/** What the node tests leave to check after their teardown: their cgroups and links. */
const made: { cgroups: string[]; links: string[] } = { cgroups: [], links: [] };
const tracesBefore = skip ? undefined : await machineTraces();

/** The netns each libcni cache entry of the pod's attachments names (containerd's results/ folder). */
async function cachedNetnsOf(node: Node, pod: string): Promise<(string | undefined)[]> {
  const results = join(node.folder('/var/lib/cni'), 'results');
  const entries = await Promise.all((await readdir(results)).map(async (name) => JSON.parse(await readFile(join(results, name), 'utf8')) as { netns?: string; cniArgs?: [string, string][] }));
  return entries.filter((e) => e.cniArgs?.some(([k, v]) => k === 'K8S_POD_NAME' && v === pod)).map((e) => e.netns);
}

t.test('installed with kubectl apply -k on a kubelet and containerd node, podnet attaches a tenant network to running pods and takes it back', { skip, timeout: 900_000 }, async (t) => {
  const cluster = await startCluster(t, { forNode: true });
  const node = await startNode(t, cluster, { primarySubnet: '198.18.230.0/24' });
  made.cgroups.push(node.cgroupRoot);
  made.links.push(node.primaryBridge);
  const conflistBefore = await readFile(join(node.folder('/etc/cni/net.d'), '10-primary.conflist'), 'utf8');
  const tag = await podnetImage(t, node);

  // A tenant namespace with edit rights (the aggregation controller fills edit, and later edit
  // with podnet's tenant role), and a pod in it that runs before podnet is installed: containerd
  // 1.6's libcni caches no netns for it, so podnet finds it through the CRI.
  const asTenant = (args: string[], input?: string) => node.kubectl(['-n', tenant, ...args], { as: 'tenant-a', input });
  const runPod = (name: string) => asTenant(['run', name, `--image=${busyboxImage}`, '--image-pull-policy=Never', '--labels=app=cnf', '--restart=Never', '--', '/bin/sleep', '3600']);
  await node.kubectl(['create', 'namespace', tenant]);
  await node.kubectl(['create', 'rolebinding', '-n', tenant, 'tenant-a-edit', '--clusterrole=edit', '--user=tenant-a']);
  await until('tenant-a may make pods (the aggregation controller filled edit)', async () => ((await node.kubectl(['-n', tenant, 'auth', 'can-i', 'create', 'pods'], { as: 'tenant-a', reject: false })).stdout === 'yes' ? true : undefined), 60_000);
  await runPod('cnf-early');
  await asTenant(['wait', '--for=condition=Ready', 'pod/cnf-early', '--timeout=120s']);
  t.strictSame(await cachedNetnsOf(node, 'cnf-early'), [undefined], "containerd 1.6's libcni cached cnf-early's attachment with no netns");

  const install = await overlay(t, cluster, tag, 'install');
  await node.kubectl(['apply', '-k', install]);
  await node.kubectl(['rollout', 'status', '-n', 'podnet-system', 'daemonset/podnet', '--timeout=180s']);
  const chained = JSON.parse(await readFile(join(node.folder('/etc/cni/net.d'), '10-primary.conflist'), 'utf8')) as { plugins: { type: string }[] };
  t.same(chained.plugins.map((p) => p.type), ['bridge', 'podnet'], "the install container chained podnet after the primary in the node's conflist");
  t.ok(existsSync(join(node.folder('/opt/cni/bin'), 'podnet')), "and put the executable into the node's CNI bin dir");

  // The admin's part: a Network offered to the tenant's namespace.
  const bridge = uniqueName('pnnodenet');
  made.links.push(bridge);
  t.teardown(() => execa('ip', ['link', 'del', bridge], { reject: false }));
  await node.kubectl(['apply', '-f', '-'], {
    input: stringify({
      apiVersion: group,
      kind: 'Network',
      metadata: { name: 'blue' },
      spec: {
        type: 'bridge',
        bridge: { name: bridge },
        ipam: { ranges: [{ subnet: '198.18.231.0/24' }] },
        namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: [tenant] }] },
      },
    }),
  });

  // The tenant's part, with no privilege at all: two more pods, then a PodNetworkConfig for all three.
  await until('tenant-a may make PodNetworkConfigs (edit aggregates podnet tenant role)', async () => ((await node.kubectl(['-n', tenant, 'auth', 'can-i', 'create', 'podnetworkconfigs'], { as: 'tenant-a', reject: false })).stdout === 'yes' ? true : undefined), 60_000);
  for (const name of ['cnf-a', 'cnf-b']) await runPod(name);
  await asTenant(['wait', '--for=condition=Ready', 'pod', '-l', 'app=cnf', '--timeout=120s']);
  await asTenant(['apply', '-f', '-'], stringify({ apiVersion: group, kind: 'PodNetworkConfig', metadata: { name: 'cnf-blue' }, spec: { podSelector: { matchLabels: { app: 'cnf' } }, attachments: [{ network: 'blue', interface: 'net1' }] } }));

  const addressOf = (pod: string) => until(`${pod} has net1 on blue`, () => podAddress(node, tenant, pod, 'net1'), 60_000);
  const [a, b, early] = [await addressOf('cnf-a'), await addressOf('cnf-b'), await addressOf('cnf-early')];
  t.match(a, /^198\.18\.231\./, 'cnf-a got an address of blue');
  t.match(b, /^198\.18\.231\./, 'cnf-b got an address of blue');
  t.match(early, /^198\.18\.231\./, 'so did cnf-early, which ran before podnet was installed');
  for (const [from, to] of [['cnf-a', b], ['cnf-early', a]] as const) {
    const ping = await node.kubectl(['exec', '-n', tenant, from, '--', 'ping', '-c', '1', '-W', '5', to.split('/')[0]!], { reject: false });
    t.equal(ping.exitCode, 0, `${from} pings ${to} over net1`, { output: `${ping.stdout}${ping.stderr}` });
  }

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

t.test('the machine is left as it was found: no kubelet folders, sysctls, iptables chains, cgroups or links of the nodes', { skip }, async (t) => {
  t.strictSame(await machineTraces(), tracesBefore);
  const cgroupsLeft = made.cgroups.filter((c) => existsSync(`/sys/fs/cgroup/memory${c}`) || existsSync(`/sys/fs/cgroup${c}`));
  t.strictSame(cgroupsLeft, [], 'no cgroup of a node is left');
  const linksLeft = [];
  for (const link of made.links) if ((await execa('ip', ['link', 'show', 'dev', link], { reject: false })).exitCode === 0) linksLeft.push(link);
  t.strictSame(linksLeft, [], 'no link of a node is left');
});
