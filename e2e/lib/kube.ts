// What the Kubernetes e2e tests share: a real control plane with podnet's CRDs, RBAC and tenants
// (e2e/cluster), a daemon following it as its service account, and the kubelet's part played by
// the test: Pod objects bound to the node and the real CNI chain run for them.
import type { Test } from 'tap';
import { readFile } from 'node:fs/promises';
import { CoreV1Api, KubeConfig, KubernetesObjectApi, loadAllYaml, PatchStrategy, RbacAuthorizationV1Api, type KubernetesObject, type V1Pod } from '@kubernetes/client-node';
import { dir } from 'tmp-promise';
import { startCluster, type Cluster, type ClusterUser } from '../cluster/cluster.ts';
import { daemonSandbox, type DaemonSandbox } from './daemon.ts';
import { hostLinkNames, linkOf, until } from './engine.ts';
import { CniRuntime, type Attachment, type Conflist } from './cni-runtime.ts';
import { repoRoot } from './env.ts';
import { addressesIn, makeNetns, removeLinkAtTeardown, uniqueName } from './netns.ts';
import { networksAnnotation, networkStatusAnnotation } from '../../src/model/annotation.ts';
import { hostInterfaceName } from '../../src/model/host-links.ts';
import type { NetworkStatusEntry, PodNetworkConfigStatus } from '../../src/protocol/validate.ts';

export const group = 'podnetwork.opdev.io/v1alpha1';
export const node = 'node-e2e';
export const tenantNamespace = 'tenant-a';
export const otherNamespace = 'tenant-b';

export interface Clients {
  core: CoreV1Api;
  objects: KubernetesObjectApi;
  rbac: RbacAuthorizationV1Api;
}

export function clientsOf(kubeconfig: string): Clients {
  const kc = new KubeConfig();
  kc.loadFromFile(kubeconfig);
  return { core: kc.makeApiClient(CoreV1Api), objects: KubernetesObjectApi.makeApiClient(kc), rbac: kc.makeApiClient(RbacAuthorizationV1Api) };
}

export const clientsAs = (cluster: Cluster, user: ClusterUser) => clientsOf(cluster.kubeconfig(user));

/**
 * The objects of a manifest in daemonset/, created as the admin, as kubectl sends them. Read
 * through client-node's own YAML loader: its serializer knows a CRD's schema keys by their model
 * names, and would silently drop the x-kubernetes-* keys of a plain parsed object.
 */
export async function createManifest(admin: Clients, file: string): Promise<void> {
  const text = await readFile(`${repoRoot}daemonset/${file}`, 'utf8');
  for (const object of loadAllYaml(text) as (KubernetesObject | null)[]) {
    if (object) await admin.objects.create(object);
  }
}

/** Once every podnet CRD serves: a daemon lists each before it is ready. */
export async function crdsServe(admin: Clients): Promise<void> {
  for (const kind of ['Network', 'PodNetworkConfig', 'PodNetworkPermission']) await until(`the ${kind} CRD serves`, () => admin.objects.list(group, kind).then(() => true, () => undefined), 30_000);
}

/** A cluster with podnet's CRDs and RBAC, a tenant namespace tenant-a can edit, and a daemon following it. */
export async function podnetCluster(t: Test, daemonArgs: string[] = []) {
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
  await crdsServe(admin);

  const daemon = await daemonSandbox(t, { args: ['--node-name', node, '--kubeconfig', await cluster.serviceAccountKubeconfig('podnet-system', 'podnet'), '--resync-seconds', '2', ...daemonArgs] });
  await daemon.start();
  t.teardown(() => {
    if (!t.passing()) process.stderr.write(`--- last lines of the daemon's log (test failed) ---\n${daemon.log().trimEnd().split('\n').slice(-40).join('\n')}\n`);
  });
  return { cluster, admin, tenant: clientsAs(cluster, 'tenant-a'), daemon };
}

/** The primary network every pod gets first: the reference bridge plugin with host-local, then podnet. */
export async function primaryConflist(t: Test, daemon: DaemonSandbox, subnet: string): Promise<Conflist> {
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

export interface RunningPod {
  namespace: string;
  name: string;
  netns: string;
  netnsPath: string;
  uid: string;
  /** The runtime's container id for it: what names podnet's host links of its interfaces. */
  containerId: string;
  del(): Promise<void>;
}

/** What a kubelet does: the Pod object (bound to the node), then the runtime's CNI ADD; DEL and deletion at teardown. */
export async function runPod(t: Test, admin: Clients, runtime: CniRuntime, list: Conflist, namespace: string, name: string, extra: Partial<V1Pod['metadata']> = {}): Promise<RunningPod> {
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
  return { namespace, name, netns: ns.name, netnsPath: ns.path, uid, containerId: att.containerId, del };
}

export async function networkStatusOf(admin: Clients, namespace: string, name: string): Promise<NetworkStatusEntry[] | undefined> {
  const pod = await admin.core.readNamespacedPod({ namespace, name });
  const text = pod.metadata?.annotations?.[networkStatusAnnotation];
  return text === undefined ? undefined : (JSON.parse(text) as NetworkStatusEntry[]);
}

export async function configStatusOf(admin: Clients, namespace: string, name: string): Promise<PodNetworkConfigStatus | undefined> {
  const object = (await admin.objects.read({ apiVersion: group, kind: 'PodNetworkConfig', metadata: { name, namespace } })) as KubernetesObject & { status?: PodNetworkConfigStatus };
  return object.status;
}

export async function eventsOf(admin: Clients, namespace: string, name: string): Promise<{ reason: string; message: string; type: string }[]> {
  const list = await admin.core.listNamespacedEvent({ namespace, fieldSelector: `involvedObject.name=${name}` });
  return list.items.map((e) => ({ reason: e.reason ?? '', message: e.message ?? '', type: e.type ?? '' }));
}

/**
 * An admin's bridge Network offered to `namespaces`, on a host bridge of a name of its own (another
 * podnet on the machine may have a Network of the same name); the bridge is removed at t's teardown.
 */
export function bridgeNetwork(t: Test, name: string, subnets: string[], namespaces: string[]) {
  const bridge = uniqueName(`pnk${name.slice(0, 5)}`);
  removeLinkAtTeardown(t, bridge);
  return {
    apiVersion: group,
    kind: 'Network',
    metadata: { name },
    spec: {
      type: 'bridge',
      bridge: { name: bridge },
      ipam: { ranges: subnets.map((subnet) => ({ subnet })) },
      namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: namespaces }] },
    },
  };
}

export const blueNetwork = (t: Test, namespaces: string[]) => bridgeNetwork(t, 'blue', ['198.18.101.0/24'], namespaces);

/**
 * Which of the host links podnet would make for these pods' `interfaces` (veth host ends and
 * ifbs, named from the pod's container) and of these `bridges` are on the host: only the test's
 * own, whatever else runs on the machine.
 */
export async function hostLinksLeft(pods: readonly RunningPod[], interfaces: readonly string[], bridges: readonly string[] = []): Promise<string[]> {
  const ours = new Set([...pods.flatMap((p) => interfaces.flatMap((i) => [hostInterfaceName(p.containerId, i), hostInterfaceName(p.containerId, i, 'pnb')])), ...bridges]);
  return (await hostLinkNames('pn')).filter((n) => ours.has(n));
}

export function podNetworkConfig(namespace: string, name: string, spec: object) {
  return { apiVersion: group, kind: 'PodNetworkConfig', metadata: { name, namespace }, spec };
}

/** A merge patch of a namespaced or cluster object, as `kubectl patch --type merge` sends. */
export async function mergePatch(client: Clients, object: KubernetesObject): Promise<void> {
  await client.objects.patch(object, undefined, undefined, undefined, undefined, PatchStrategy.MergePatch);
}

/** Sets (or, with null, removes) the pod's podnetwork.opdev.io/networks annotation in one update. */
export async function annotate(client: Clients, namespace: string, name: string, value: string | null): Promise<void> {
  await mergePatch(client, { apiVersion: 'v1', kind: 'Pod', metadata: { name, namespace, annotations: { [networksAnnotation]: value as string } } });
}

/** An interface's addresses in the pod's netns, once it has one in `prefix`. */
export async function addressOn(pod: RunningPod, ifname: string, prefix: string): Promise<string> {
  return until(`${pod.name} has ${ifname} with an address in ${prefix}`, async () => {
    const link = (await addressesIn(pod.netns)).find((l) => l.ifname === ifname);
    return link?.addresses.find((a) => a.startsWith(prefix));
  });
}

export const gone = (pod: RunningPod, ifname: string) => until(`${pod.name}: ${ifname} is gone`, async () => ((await linkOf(pod.netns, ifname)) === undefined ? true : undefined));

/** The pod's network-status once `ready` accepts it. */
export const networkStatusWhen = (admin: Clients, pod: RunningPod, what: string, ready: (entries: NetworkStatusEntry[]) => boolean) =>
  until(`${pod.name}'s network-status ${what}`, async () => {
    const entries = await networkStatusOf(admin, pod.namespace, pod.name);
    return entries && ready(entries) ? entries : undefined;
  });
