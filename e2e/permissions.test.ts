// PodNetworkPermissions against a real kube-apiserver (e2e/cluster): an admin limits what tenant-a
// may ask; the admission policy of daemonset/permissions.yaml refuses a config that asks more, at
// the tenant's write, naming the field and the permission; the daemon refuses what got past it (a
// config written before the permission, a pod's annotation) and tells it in the config's status
// and the pod's network-status; tenant-b, which has no permission, is unchanged. Tenants act as
// users with the built-in edit role, the daemon as its service account.
import t from 'tap';
import { execa } from 'execa';
import type { KubernetesObject } from '@kubernetes/client-node';
import { prepareClusterTest } from './cluster/cluster.ts';
import { until } from './lib/engine.ts';
import { CniRuntime } from './lib/cni-runtime.ts';
import { missingPrerequisite, referencePluginDir } from './lib/env.ts';
import {
  addressOn,
  annotate,
  bridgeNetwork,
  clientsAs,
  configStatusOf,
  createManifest,
  gone,
  group,
  mergePatch,
  networkStatusWhen,
  otherNamespace,
  podnetCluster,
  podNetworkConfig,
  primaryConflist,
  runPod,
  tenantNamespace,
  type Clients,
} from './lib/kube.ts';

const skip = (await prepareClusterTest(t)) ?? missingPrerequisite(['/bin/busybox', `${referencePluginDir}/bridge`, `${referencePluginDir}/host-local`]);

/** The API server's answer to a write: 0 when it took it, else its code and message. */
async function refusalOf(write: Promise<unknown>): Promise<{ code: number; message: string }> {
  return write.then(
    () => ({ code: 0, message: '' }),
    (err: { code?: number; body?: unknown }) => {
      const body = typeof err.body === 'string' ? (JSON.parse(err.body) as { message?: string }) : (err.body as { message?: string } | undefined);
      return { code: err.code ?? -1, message: body?.message ?? String(err) };
    },
  );
}

const permission = (name: string, spec: object) => ({ apiVersion: group, kind: 'PodNetworkPermission', metadata: { name, namespace: tenantNamespace }, spec });
const routeIn = async (netns: string, prefix: string) => (await execa('ip', ['-n', netns, 'route', 'show', 'table', '100'])).stdout.includes(prefix);

t.test("an admin's PodNetworkPermission holds a namespace to what it allows, at admission and on the node", { skip, timeout: 240_000 }, async (t) => {
  const { admin, tenant, daemon, cluster } = await podnetCluster(t);
  await createManifest(admin, 'permissions.yaml');
  const runtime = new CniRuntime([referencePluginDir, daemon.binDir]);
  const list = await primaryConflist(t, daemon, '198.18.149.0/24');
  const blue = bridgeNetwork(t, 'blue', ['198.18.150.0/24'], [tenantNamespace, otherNamespace]);
  await admin.objects.create(blue);
  const cnf = await runPod(t, admin, runtime, list, tenantNamespace, 'cnf-1', { labels: { app: 'cnf' } });
  const other = await runPod(t, admin, runtime, list, otherNamespace, 'other-1', { labels: { app: 'cnf' } });
  const routed = (namespace: string, name: string) =>
    podNetworkConfig(namespace, name, { podSelector: { matchLabels: { app: 'cnf' } }, attachments: [{ network: 'blue', interface: 'net1' }], routes: [{ to: '198.18.151.0/24', dev: 'eth0', table: 100 }] });

  // Before any permission: tenant-a's config with a route is taken and applied.
  await tenant.objects.create(routed(tenantNamespace, 'early'));
  await addressOn(cnf, 'net1', '198.18.150.');
  await until('cnf-1 has the route in table 100', async () => ((await routeIn(cnf.netns, '198.18.151.0/24')) ? true : undefined));

  // A tenant cannot give itself a permission: they are the admin's.
  const own = await refusalOf(tenant.objects.create(permission('mine', { allow: ['attachments', 'routes'] })));
  t.equal(own.code, 403, 'a tenant with edit may not create a PodNetworkPermission');

  await admin.objects.create(permission('attachments-only', { allow: ['attachments'] }));
  const read = (await tenant.objects.read({ apiVersion: group, kind: 'PodNetworkPermission', metadata: { name: 'attachments-only', namespace: tenantNamespace } })) as KubernetesObject & { spec: { allow: string[] } };
  t.same(read.spec.allow, ['attachments'], 'the tenant reads what its namespace may ask');

  // The node: the config that predates the permission is refused whole, and its status says why.
  await gone(cnf, 'net1');
  await until('the route (via eth0, which stays) is taken back too', async () => ((await routeIn(cnf.netns, '198.18.151.0/24')) ? undefined : true));
  const status = await until('early is Degraded naming the permission', async () => {
    const s = await configStatusOf(admin, tenantNamespace, 'early');
    const degraded = s?.conditions?.find((c) => c.type === 'Degraded' && c.status === 'True');
    return degraded?.message.includes('PodNetworkPermission') ? degraded : undefined;
  });
  t.match(status.message, /spec\.routes\[0\].*PodNetworkPermission tenant-a\/attachments-only does not let namespace tenant-a ask routes/);

  // Admission: a new config with a route is refused at the write, naming the field and the
  // permission; the policy takes a moment to see the permission, so the write is tried until then.
  const refused = await until('the policy refuses a config with a route', async () => {
    const answer = await refusalOf(tenant.objects.create(routed(tenantNamespace, 'late')));
    if (answer.code === 0) await tenant.objects.delete(routed(tenantNamespace, 'late'));
    return answer.code === 0 ? undefined : answer;
  });
  t.equal(refused.code, 403);
  t.match(refused.message, /spec\.routes\[0\]: PodNetworkPermission tenant-a\/attachments-only does not let namespace tenant-a ask routes/);
  const mtu = await refusalOf(tenant.objects.create(podNetworkConfig(tenantNamespace, 'mtu', { podSelector: {}, interfaces: [{ name: 'eth0', mtu: 1400 }] })));
  t.match(mtu.message, /spec\.interfaces\[0\]: PodNetworkPermission tenant-a\/attachments-only does not let namespace tenant-a ask interfaces/);
  const capped = { podSelector: {}, attachments: [{ network: 'blue', interface: 'net3' }, { network: 'blue', interface: 'net4', bandwidth: { ingressRate: 1000000, ingressBurst: 100000 } }] };
  const bandwidth = await refusalOf(tenant.objects.create(podNetworkConfig(tenantNamespace, 'capped', capped)));
  t.match(bandwidth.message, /spec\.attachments\[1\]\.bandwidth: PodNetworkPermission tenant-a\/attachments-only does not let namespace tenant-a ask bandwidth/);
  const marked = { podSelector: {}, attachments: [{ network: 'blue', interface: 'net3', dscp: 46 }] };
  const marking = await refusalOf(tenant.objects.create(podNetworkConfig(tenantNamespace, 'marked', marked)));
  t.match(marking.message, /spec\.attachments\[0\]\.dscp: PodNetworkPermission tenant-a\/attachments-only does not let namespace tenant-a ask marking/, 'a DSCP needs marking');
  // A second permission in the namespace: each is checked, with its MTU bounds.
  await admin.objects.create(permission('mtu-floor', { allow: ['attachments', 'interfaces', 'sysctls'], mtu: { min: 1280, max: 9000 } }));
  const low = await until('the policy holds the second permission\'s MTU bounds too', async () => {
    const answer = await refusalOf(tenant.objects.create(podNetworkConfig(tenantNamespace, 'low', { podSelector: {}, sysctls: [{ name: 'net.ipv6.conf.eth0.mtu', value: '1200' }] })));
    if (answer.code === 0) await tenant.objects.delete(podNetworkConfig(tenantNamespace, 'low', {}));
    return answer.message.includes('mtu-floor') ? answer : undefined;
  });
  t.match(low.message, /spec\.sysctls\[0\]\.value: PodNetworkPermission tenant-a\/mtu-floor lets namespace tenant-a set no MTU below 1280; this asks 1200/);
  await admin.objects.delete(permission('mtu-floor', {}));
  // Only spec writes are judged: a label on the config that predates the permission is taken.
  await mergePatch(tenant, { apiVersion: group, kind: 'PodNetworkConfig', metadata: { name: 'early', namespace: tenantNamespace, labels: { team: 'a' } } } as KubernetesObject);

  // The tenant takes the route out: the edit is taken, and net1 comes back.
  const fixed = routed(tenantNamespace, 'early');
  await tenant.objects.replace({ ...fixed, metadata: { ...fixed.metadata, resourceVersion: await resourceVersion(tenant, 'early') }, spec: { ...fixed.spec, routes: [] } } as KubernetesObject);
  await addressOn(cnf, 'net1', '198.18.150.');

  // The annotation: no policy reads it; the daemon refuses what the namespace may not ask and says so in network-status.
  await admin.objects.replace({ ...permission('attachments-only', { allow: ['interfaces'] }), metadata: { name: 'attachments-only', namespace: tenantNamespace, resourceVersion: await resourceVersion(admin, 'attachments-only', 'PodNetworkPermission') } } as KubernetesObject);
  await gone(cnf, 'net1');
  await annotate(admin, tenantNamespace, 'cnf-1', JSON.stringify([{ name: 'blue', interface: 'net2' }]));
  const entries = await networkStatusWhen(admin, cnf, 'tells the annotation refused', (s) => s.some((e) => e.problem?.includes('PodNetworkPermission')));
  t.match(entries.find((e) => e.problem)?.problem, /\[0\].*PodNetworkPermission tenant-a\/attachments-only does not let namespace tenant-a ask attachments/);
  t.notOk(entries.some((e) => e.interface === 'net2'), 'net2 was not attached');

  // tenant-b has no permission: its config with a route is taken and applied.
  await clientsAs(cluster, 'tenant-b').objects.create(routed(otherNamespace, 'late'));
  await addressOn(other, 'net1', '198.18.150.');
  await until('other-1 has the route in table 100', async () => ((await routeIn(other.netns, '198.18.151.0/24')) ? true : undefined));
});

async function resourceVersion(client: Clients, name: string, kind = 'PodNetworkConfig'): Promise<string> {
  const object = await client.objects.read({ apiVersion: group, kind, metadata: { name, namespace: tenantNamespace } });
  return object.metadata!.resourceVersion!;
}
