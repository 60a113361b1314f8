// podnet as a Kubernetes citizen, against a real kube-apiserver (e2e/cluster): the daemon runs as
// its service account with the RBAC of daemonset/rbac.yaml, tenants act as static-token users with
// real RBAC, and the test plays the kubelet: it makes Pod objects bound to the node and runs the
// real CNI chain (the reference bridge plugin, then podnet) with their K8S_POD_* args.
import t, { type Test } from 'tap';
import { execa } from 'execa';
import { readFile } from 'node:fs/promises';
import { CoreV1Api, KubeConfig, KubernetesObjectApi, PatchStrategy, RbacAuthorizationV1Api, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { parseAllDocuments } from 'yaml';
import { dir } from 'tmp-promise';
import { prepareClusterTest, startCluster, type Cluster, type ClusterUser } from './cluster/cluster.ts';
import { daemonSandbox, type DaemonSandbox } from './lib/daemon.ts';
import { hostLinkNames, linkOf, until } from './lib/engine.ts';
import { CniRuntime, type Attachment, type Conflist } from './lib/cni-runtime.ts';
import { missingPrerequisite, referencePluginDir, repoRoot } from './lib/env.ts';
import { addressesIn, makeNetns, removeLinkAtTeardown, uniqueName } from './lib/netns.ts';
import { networkStatusAnnotation } from '../src/model/annotation.ts';
import type { NetworkStatusEntry, PodNetworkConfigStatus } from '../src/protocol/validate.ts';

const skip = (await prepareClusterTest(t)) ?? missingPrerequisite(['/bin/busybox', `${referencePluginDir}/bridge`, `${referencePluginDir}/host-local`]);

const group = 'podnetwork.opdev.io/v1alpha1';
const node = 'node-e2e';
const tenantNamespace = 'tenant-a';
const otherNamespace = 'tenant-b';

interface Clients {
  core: CoreV1Api;
  objects: KubernetesObjectApi;
  rbac: RbacAuthorizationV1Api;
}

function clientsOf(kubeconfig: string): Clients {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  return { core: kc.makeApiClient(CoreV1Api), objects: KubernetesObjectApi.makeApiClient(kc), rbac: kc.makeApiClient(RbacAuthorizationV1Api) };
}

const clientsAs = (cluster: Cluster, user: ClusterUser) => clientsOf(cluster.kubeconfig(user));

/** The objects of a manifest in daemonset/, created as the admin. */
async function createManifest(admin: Clients, file: string): Promise<void> {
  const text = await readFile(`${repoRoot}daemonset/${file}`, 'utf8');
  for (const doc of parseAllDocuments(text)) {
    const object = doc.toJS() as KubernetesObject | null;
    if (object) await admin.objects.create(object);
  }
}

/** A cluster with podnet's CRDs and RBAC, a tenant namespace tenant-a can edit, and a daemon following it. */
async function podnetCluster(t: Test) {
  const cluster = await startCluster(t);
  const admin = clientsAs(cluster, 'admin');
  await createManifest(admin, 'namespace.yaml');
  await createManifest(admin, 'crds.yaml');
  await createManifest(admin, 'rbac.yaml');
  for (const name of [tenantNamespace, otherNamespace]) await admin.core.createNamespace({ body: { metadata: { name } } });
  // What a cluster admin does for a tenant: edit rights in its namespace (podnet's tenant role aggregates into edit).
  await cluster.aggregateClusterRoles();
  for (const [user, namespace] of [['tenant-a', tenantNamespace], ['tenant-b', otherNamespace]] as const) {
    await admin.rbac.createNamespacedRoleBinding({
      namespace,
      body: { metadata: { name: `${user}-edit` }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' }, subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: user }] },
    });
  }
  await until('the CRDs serve', () => admin.objects.list(group, 'Network').then(() => true, () => undefined), 30_000);

  const daemon = await daemonSandbox(t, { args: ['--node-name', node, '--kubeconfig', await cluster.serviceAccountKubeconfig('podnet-system', 'podnet'), '--resync-seconds', '2'] });
  await daemon.start();
  return { cluster, admin, tenant: clientsAs(cluster, 'tenant-a'), daemon };
}

/** The primary network every pod gets first: the reference bridge plugin with host-local, then podnet. */
async function primaryConflist(t: Test, daemon: DaemonSandbox, subnet: string): Promise<Conflist> {
  const ipamDir = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-ipam-' });
  t.teardown(() => ipamDir.cleanup());
  const bridge = uniqueName('cnik');
  removeLinkAtTeardown(t, bridge);
  return {
    cniVersion: '1.0.0',
    name: 'primary',
    plugins: [
      { type: 'bridge', bridge, isGateway: true, ipam: { type: 'host-local', ranges: [[{ subnet }]], dataDir: ipamDir.path } },
      { type: 'podnet', ...daemon.pluginSettings() },
    ],
  };
}

interface RunningPod {
  name: string;
  netns: string;
  netnsPath: string;
  uid: string;
  del(): Promise<void>;
}

/** What a kubelet does: the Pod object (bound to the node), then the runtime's CNI ADD; DEL and deletion at teardown. */
async function runPod(t: Test, admin: Clients, runtime: CniRuntime, list: Conflist, namespace: string, name: string, extra: Partial<V1Pod['metadata']> = {}): Promise<RunningPod> {
  const pod = await admin.core.createNamespacedPod({
    namespace,
    body: { metadata: { name, ...extra }, spec: { nodeName: node, containers: [{ name: 'main', image: 'busybox' }] } },
  });
  const uid = pod.metadata!.uid!;
  const ns = await makeNetns(t);
  const att: Attachment = { containerId: uniqueName('ctr'), netns: ns.path, ifname: 'eth0', args: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${namespace};K8S_POD_NAME=${name};K8S_POD_UID=${uid}` };
  const result = await runtime.add(list, att);
  let deleted = false;
  const del = async () => {
    if (deleted) return;
    deleted = true;
    await runtime.del(list, att, result).catch(() => undefined);
    await admin.core.deleteNamespacedPod({ namespace, name, gracePeriodSeconds: 0 }).catch(() => undefined);
  };
  t.teardown(del);
  return { name, netns: ns.name, netnsPath: ns.path, uid, del };
}

async function networkStatusOf(admin: Clients, namespace: string, name: string): Promise<NetworkStatusEntry[] | undefined> {
  const pod = await admin.core.readNamespacedPod({ namespace, name });
  const text = pod.metadata?.annotations?.[networkStatusAnnotation];
  return text === undefined ? undefined : (JSON.parse(text) as NetworkStatusEntry[]);
}

async function configStatusOf(admin: Clients, namespace: string, name: string): Promise<PodNetworkConfigStatus | undefined> {
  const object = (await admin.objects.read({ apiVersion: group, kind: 'PodNetworkConfig', metadata: { name, namespace } })) as KubernetesObject & { status?: PodNetworkConfigStatus };
  return object.status;
}

async function eventsOf(admin: Clients, namespace: string, name: string): Promise<{ reason: string; message: string; type: string }[]> {
  const list = await admin.core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name}` });
  return list.items.map((e) => ({ reason: e.reason ?? '', message: e.message ?? '', type: e.type ?? '' }));
}

function blueNetwork(namespaces: string[]) {
  return {
    apiVersion: group,
    kind: 'Network',
    metadata: { name: 'blue' },
    spec: {
      type: 'bridge',
      bridge: { name: 'pnk8sblue' },
      ipam: { ranges: [{ subnet: '198.18.101.0/24' }] },
      namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: namespaces }] },
    },
  };
}

t.test('a tenant attaches two running pods to an admin\'s Network through the API alone', { skip }, async (t) => {
  const { admin, tenant, daemon } = await podnetCluster(t);
  removeLinkAtTeardown(t, 'pnk8sblue');
  const runtime = new CniRuntime([referencePluginDir, daemon.binDir]);
  const list = await primaryConflist(t, daemon, '198.18.100.0/24');
  await admin.objects.create(blueNetwork([tenantNamespace]));
  const pods = [await runPod(t, admin, runtime, list, tenantNamespace, 'cnf-1', { labels: { app: 'cnf' } }), await runPod(t, admin, runtime, list, tenantNamespace, 'cnf-2', { labels: { app: 'cnf' } })];

  const config = {
    apiVersion: group,
    kind: 'PodNetworkConfig',
    metadata: { name: 'fast', namespace: tenantNamespace },
    spec: { podSelector: { matchLabels: { app: 'cnf' } }, attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'eth0', mtu: 1400 }] },
  };
  await tenant.objects.create(config);

  const addresses = new Map<string, string>();
  for (const pod of pods) {
    const address = await until(`${pod.name} has net1 with an address`, async () => {
      const net1 = (await addressesIn(pod.netns)).find((l) => l.ifname === 'net1');
      return net1?.addresses.find((a) => a.startsWith('198.18.101.'));
    });
    addresses.set(pod.name, address.split('/')[0]!);
    t.equal((await linkOf(pod.netns, 'eth0'))?.mtu, 1400, `${pod.name}: eth0 has the MTU the config asks`);
  }
  await execa('ip', ['netns', 'exec', pods[0]!.netns, '/bin/busybox', 'ping', '-c', '1', '-W', '2', addresses.get('cnf-2')!]);
  t.pass('cnf-1 reaches cnf-2 over the new network');

  const status = await until('the config reports both pods', async () => {
    const s = await configStatusOf(admin, tenantNamespace, 'fast');
    return s?.pods?.length === 2 && s.ready === '2/2' ? s : undefined;
  });
  for (const entry of status.pods!) {
    t.equal(entry.node, node, `${entry.name}: written by the node that serves it`);
    const net1 = entry.interfaces?.find((i) => i.name === 'net1');
    t.same(net1?.addresses, [`${addresses.get(entry.name)}/24`], `${entry.name}: the address it got`);
    t.equal(net1?.network, 'blue');
    t.notOk(entry.error);
  }
  t.equal(status.conditions?.find((c) => c.type === 'Degraded')?.status, 'False');

  for (const pod of pods) {
    const entries = await until(`${pod.name}'s network-status lists net1`, async () => {
      const s = await networkStatusOf(admin, tenantNamespace, pod.name);
      return s?.some((e) => e.interface === 'net1') ? s : undefined;
    });
    const primary = entries.find((e) => e.default);
    t.equal(primary?.interface, 'eth0', `${pod.name}: the primary interface is there, marked default`);
    t.match(primary?.ips?.[0], /^198\.18\.100\./);
    const net1 = entries.find((e) => e.interface === 'net1')!;
    t.equal(net1.name, 'blue');
    t.same(net1.ips, [addresses.get(pod.name)]);
    t.match(net1.mac, /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/, 'with its MAC');
  }
  const events = await eventsOf(admin, tenantNamespace, 'cnf-1');
  t.ok(events.some((e) => e.reason === 'Attached' && e.message.includes('net1') && e.message.includes('blue')), 'an Attached Event on the pod');

  // The tenant changes the spec: the pods follow.
  await tenant.objects.patch(
    { apiVersion: group, kind: 'PodNetworkConfig', metadata: { name: 'fast', namespace: tenantNamespace }, spec: { interfaces: [{ name: 'eth0', mtu: 1300 }] } } as KubernetesObject,
    undefined,
    undefined,
    undefined,
    undefined,
    PatchStrategy.MergePatch,
  );
  for (const pod of pods) await until(`${pod.name}: eth0 follows the new MTU`, async () => ((await linkOf(pod.netns, 'eth0'))?.mtu === 1300 ? true : undefined));
  await until('status observes the new generation', async () => {
    const object = (await admin.objects.read({ apiVersion: group, kind: 'PodNetworkConfig', metadata: { name: 'fast', namespace: tenantNamespace } })) as KubernetesObject & { status?: PodNetworkConfigStatus };
    return object.status?.observedGeneration === object.metadata?.generation ? true : undefined;
  });

  // Deleting the config takes everything back.
  await tenant.objects.delete({ apiVersion: group, kind: 'PodNetworkConfig', metadata: { name: 'fast', namespace: tenantNamespace } });
  for (const pod of pods) {
    await until(`${pod.name}: net1 is gone`, async () => ((await linkOf(pod.netns, 'net1')) === undefined ? true : undefined));
    t.equal((await linkOf(pod.netns, 'eth0'))?.mtu, 1500, `${pod.name}: eth0 has its MTU back`);
  }
  await until('no host link of podnet is left', async () => ((await hostLinkNames('pn')).filter((n) => n === 'pnk8sblue' || n.startsWith('pnv')).length === 0 ? true : undefined));
  const after = await until('network-status no longer lists net1', async () => {
    const s = await networkStatusOf(admin, tenantNamespace, 'cnf-1');
    return s && !s.some((e) => e.interface === 'net1') ? s : undefined;
  });
  t.equal(after.length, 1, 'only the primary interface is left');
  await until('a Detached Event on the pod', async () => ((await eventsOf(admin, tenantNamespace, 'cnf-1')).some((e) => e.reason === 'Detached') ? true : undefined));
});

t.test('tenant isolation: RBAC keeps a tenant in its namespace, a Network not offered is refused', { skip }, async (t) => {
  const { cluster, admin, tenant, daemon } = await podnetCluster(t);
  const runtime = new CniRuntime([referencePluginDir, daemon.binDir]);
  const list = await primaryConflist(t, daemon, '198.18.102.0/24');
  await admin.objects.create(blueNetwork([tenantNamespace]));

  const config = (namespace: string) => ({
    apiVersion: group,
    kind: 'PodNetworkConfig',
    metadata: { name: 'grab', namespace },
    spec: { podSelector: {}, attachments: [{ network: 'blue', interface: 'net1' }] },
  });
  const refused = await tenant.objects.create(config(otherNamespace)).then(
    () => 0,
    (err: { code?: number }) => err.code,
  );
  t.equal(refused, 403, 'tenant-a may not create a PodNetworkConfig in tenant-b');
  const network = await tenant.objects.create({ ...blueNetwork([tenantNamespace]), metadata: { name: 'mine' } }).then(
    () => 0,
    (err: { code?: number }) => err.code,
  );
  t.equal(network, 403, 'a tenant may not create a Network');

  // tenant-b may use its own namespace, but blue is not offered to it.
  const pod = await runPod(t, admin, runtime, list, otherNamespace, 'other-1');
  await clientsAs(cluster, 'tenant-b').objects.create(config(otherNamespace));
  const status = await until('the config is Degraded', async () => {
    const s = await configStatusOf(admin, otherNamespace, 'grab');
    return s?.conditions?.find((c) => c.type === 'Degraded' && c.status === 'True') ? s : undefined;
  });
  t.match(status.conditions!.find((c) => c.type === 'Degraded')!.message, /spec\.attachments\[0\]\.network.*Network blue does not admit namespace tenant-b/);
  await until('a Degraded Event on the config', async () => ((await eventsOf(admin, otherNamespace, 'grab')).some((e) => e.type === 'Warning' && e.reason === 'Degraded') ? true : undefined));
  t.equal(await linkOf(pod.netns, 'net1'), undefined, 'nothing was attached');
});
