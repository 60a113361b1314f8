// `kubectl podnet` as a tenant uses it: the real kubectl finds the executable on PATH as
// kubectl-podnet, and the tenant holds nothing but the built-in view role in the namespace. What it
// prints comes from the real kube-apiserver alone; the daemon (Kubernetes mode) and the CNI chain
// are e2e/kube.test.ts's (the test plays the kubelet).
import t from 'tap';
import { execa } from 'execa';
import { symlink } from 'node:fs/promises';
import { dir } from 'tmp-promise';
import { prepareClusterTest } from './cluster/cluster.ts';
import { ensureNodeBinaries } from './cluster/binaries.ts';
import { until } from './lib/engine.ts';
import { CniRuntime } from './lib/cni-runtime.ts';
import { missingPrerequisite, podnetBinary, referencePluginDir } from './lib/env.ts';
import { bridgeNetwork, group, networkStatusWhen, otherNamespace, podnetCluster, primaryConflist, runPod, tenantNamespace } from './lib/kube.ts';
import { isDocument } from '../src/protocol/validate.ts';

const skip = (await prepareClusterTest(t)) ?? missingPrerequisite([`${referencePluginDir}/bridge`, `${referencePluginDir}/host-local`]);

t.test('a tenant with only the view role explains its pod and lists its namespace with kubectl podnet', { skip, timeout: 300_000 }, async (t) => {
  const { cluster, admin, tenant, daemon } = await podnetCluster(t);
  // tenant-b may only view tenant-a's namespace (and edit its own): the reader here.
  await admin.rbac.createNamespacedRoleBinding({
    namespace: tenantNamespace,
    body: { metadata: { name: 'tenant-b-view' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' }, subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'tenant-b' }] },
  });
  const runtime = new CniRuntime([referencePluginDir, daemon.binDir]);
  const list = await primaryConflist(t, daemon, '198.18.110.0/24');
  await admin.objects.create(bridgeNetwork(t, 'blue', ['198.18.111.0/24'], [tenantNamespace]));
  const pod = await runPod(t, admin, runtime, list, tenantNamespace, 'cnf-1', { labels: { app: 'cnf' } });
  const config = (name: string, network: string, ifname: string, extra: object = {}) => ({
    apiVersion: group,
    kind: 'PodNetworkConfig',
    metadata: { name, namespace: tenantNamespace },
    spec: { podSelector: { matchLabels: { app: 'cnf' } }, attachments: [{ network, interface: ifname }], ...extra },
  });
  await tenant.objects.create(config('fast', 'blue', 'net1', { interfaces: [{ name: 'eth0', mtu: 1400 }] }));
  await tenant.objects.create(config('broken', 'red', 'net2'));
  const entries = await networkStatusWhen(admin, pod, 'tells net1', (e) => e.some((x) => x.interface === 'net1' && x.ips?.length));
  const net1 = entries.find((e) => e.interface === 'net1')!.ips![0]!;

  // kubectl finds the plugin by its name on PATH.
  const { kubectl } = await ensureNodeBinaries();
  const bin = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-kubectl-' });
  t.teardown(() => bin.cleanup());
  await symlink(podnetBinary, `${bin.path}/kubectl-podnet`);
  const asViewer = (args: string[], user: 'tenant-a' | 'tenant-b' = 'tenant-b') =>
    execa(kubectl, ['podnet', ...args, '--kubeconfig', cluster.kubeconfig(user)], { env: { PATH: `${bin.path}:/usr/bin:/bin`, HOME: bin.path }, extendEnv: false, reject: false });

  const explained = await until("explain tells net1, the Attached event and the broken config's state", async () => {
    const out = await asViewer(['explain', 'cnf-1', '-n', tenantNamespace]);
    return out.exitCode === 0 && out.stdout.includes('Attached') && /broken: Ready False/.test(out.stdout) ? out.stdout : undefined;
  });
  t.match(explained, new RegExp(`net1 +blue +${net1.replace(/\./g, '\\.')} `), 'net1 with its address, as network-status has it');
  t.match(explained, /PodNetworkConfig tenant-a\/fast spec\.attachments\[0\]: net1 on Network blue/, 'who asks net1');
  t.match(explained, /fast: Ready True\n +also eth0: mtu 1400/, "the config's state and what else it asks");
  t.match(explained, /\n  PodNetworkConfig tenant-a\/broken: .*spec\.attachments\[0\]\.network: no Network named red/, 'the problem, with the document and field');
  t.match(explained, /Normal +Attached +attached net1 to Network blue/, 'the Events');

  const json = await asViewer(['explain', 'cnf-1', '-n', tenantNamespace, '-o', 'json']);
  const view = JSON.parse(json.stdout) as unknown;
  t.ok(isDocument('PodNetworkViewList', { items: [view] }), '-o json is the schema\'s PodNetworkView');

  const got = await asViewer(['get', '-n', tenantNamespace, '-o', 'wide']);
  t.equal(got.exitCode, 0, got.stderr);
  t.match(got.stdout, /^NAME +INTERFACES +ASKED +PROBLEMS +NODE +CONFIGS\n/, 'a header as kubectl get -o wide has');
  const before = await asViewer(['-n', tenantNamespace, 'get', '-o', 'wide']);
  t.equal(before.stdout, got.stdout, 'the namespace given before the subcommand, as kubectl takes it');
  const row = got.stdout.split('\n').find((line) => line.startsWith('cnf-1 '));
  t.match(row, new RegExp(`^cnf-1 +net1=blue:${net1.replace(/\./g, '\\.')}/mtu \\d+ +2 +\\d+ +\\S+ +broken,fast$`), 'a row per pod, its interfaces in one column');

  const missing = await asViewer(['explain', 'nosuch', '-n', tenantNamespace]);
  t.equal(missing.exitCode, 1, 'a pod that is not there: exit 1');
  t.equal(missing.stderr, 'Error from server (NotFound): pods "nosuch" not found', "said as kubectl says a server's error");
  const forbidden = await asViewer(['get', '-n', otherNamespace], 'tenant-a');
  t.equal(forbidden.exitCode, 1, forbidden.stderr);
  t.match(forbidden.stderr, /^Error from server \(Forbidden\): .*cannot list resource "pods"/, 'no rights in the namespace: Forbidden, from the server');
  // A namespace tenant-b may view, with no pod (a binding, like any RBAC change, takes a moment).
  await admin.core.createNamespace({ body: { metadata: { name: 'kubectl-empty' } } });
  await admin.rbac.createNamespacedRoleBinding({
    namespace: 'kubectl-empty',
    body: { metadata: { name: 'tenant-b-view' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' }, subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'tenant-b' }] },
  });
  const empty = await until('tenant-b may list the pods of kubectl-empty', async () => {
    const out = await asViewer(['get', '-n', 'kubectl-empty']);
    return out.exitCode === 0 ? out : undefined;
  });
  t.equal(empty.stderr, 'No resources found in kubectl-empty namespace.', 'nothing there: said as kubectl says it (execa strips the final newline)');
});
