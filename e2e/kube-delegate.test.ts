// Delegated Networks through the Kubernetes API, against a real kube-apiserver: an admin's cni
// Network runs the config of a Multus NetworkAttachmentDefinition for pods a tenant annotates
// (no interface named: podnet picks net1), network-status shows the plugin's result, a plugin's
// CNI error reaches the config's status and the pod's Events, and a Network naming a definition
// that is not there is Degraded naming the field.
import t, { type Test } from 'tap';
import { execa } from 'execa';
import { readdir } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { dir } from 'tmp-promise';
import { prepareClusterTest } from './cluster/cluster.ts';
import { linkOf, until } from './lib/engine.ts';
import { CniRuntime } from './lib/cni-runtime.ts';
import { missingPrerequisite, referencePluginDir } from './lib/env.ts';
import { removeLinkAtTeardown, uniqueName } from './lib/netns.ts';
import {
  addressOn,
  annotate,
  configStatusOf,
  eventsOf,
  gone,
  group,
  networkStatusWhen,
  podnetCluster,
  podNetworkConfig,
  primaryConflist,
  runPod,
  tenantNamespace,
  type Clients,
} from './lib/kube.ts';

const skip = (await prepareClusterTest(t)) ?? missingPrerequisite(['/bin/busybox', `${referencePluginDir}/bridge`, `${referencePluginDir}/host-local`]);

/** The NetworkAttachmentDefinition CRD as Multus installs it: spec.config, a JSON text. */
async function definitionsServed(admin: Clients): Promise<void> {
  await admin.objects.create({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: 'network-attachment-definitions.k8s.cni.cncf.io' },
    spec: {
      group: 'k8s.cni.cncf.io',
      scope: 'Namespaced',
      names: { plural: 'network-attachment-definitions', singular: 'network-attachment-definition', kind: 'NetworkAttachmentDefinition', shortNames: ['net-attach-def'] },
      versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', properties: { config: { type: 'string' } } } } } } }],
    },
  } as never);
  await until('NetworkAttachmentDefinitions are served', () => admin.objects.list('k8s.cni.cncf.io/v1', 'NetworkAttachmentDefinition').then(() => true, () => undefined), 30_000);
}

const cniNetwork = (name: string, cni: object) => ({
  apiVersion: group,
  kind: 'Network',
  metadata: { name },
  spec: { type: 'cni', cni, namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: [tenantNamespace] }] } },
});

async function hostLocalAddresses(dataDir: string, network: string): Promise<string[]> {
  const path = `${dataDir}/${network}`;
  return existsSync(path) ? (await readdir(path)).filter((n) => /^\d+\.\d+\.\d+\.\d+$/.test(n)) : [];
}

async function degraded(admin: Clients, name: string) {
  return until(`Network ${name} is Degraded`, async () => {
    const object = (await admin.objects.read({ apiVersion: group, kind: 'Network', metadata: { name } })) as { status?: { conditions?: { type: string; status: string; reason: string; message: string }[] } };
    return object.status?.conditions?.find((c) => c.type === 'Degraded' && c.status === 'True');
  });
}

t.test('a NetworkAttachmentDefinition run for annotated pods; its result in network-status; a plugin error in status and Events', { skip }, async (t: Test) => {
  const { admin, tenant, daemon } = await podnetCluster(t, ['--cni-bin-dir', referencePluginDir]);
  const runtime = new CniRuntime([referencePluginDir, daemon.binDir]);
  const list = await primaryConflist(t, daemon, '198.18.114.0/24');
  const ipam = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-ipam-' });
  t.teardown(() => ipam.cleanup());
  const bridge = uniqueName('cnin');
  removeLinkAtTeardown(t, bridge);
  await definitionsServed(admin);
  // The spec's dns key: the bridge plugin returns it in its result.
  const config = {
    cniVersion: '1.0.0',
    name: 'nadnet',
    plugins: [{ type: 'bridge', bridge, isGateway: true, dns: { nameservers: ['198.18.113.53'], search: ['cnf.example'] }, ipam: { type: 'host-local', ranges: [[{ subnet: '198.18.113.0/24' }]], dataDir: ipam.path } }],
  };
  await admin.objects.create({ apiVersion: 'k8s.cni.cncf.io/v1', kind: 'NetworkAttachmentDefinition', metadata: { name: 'bridge-conf', namespace: tenantNamespace }, spec: { config: JSON.stringify(config) } } as never);
  await admin.objects.create(cniNetwork('nad', { networkAttachmentDefinition: { namespace: tenantNamespace, name: 'bridge-conf' } }));
  const brokenBridge = `${bridge}x`;
  removeLinkAtTeardown(t, brokenBridge);
  await admin.objects.create(cniNetwork('broken', { config: { type: 'bridge', bridge: brokenBridge, ipam: { type: 'host-local', dataDir: ipam.path } } }));
  await admin.objects.create(cniNetwork('ghost', { networkAttachmentDefinition: { namespace: tenantNamespace, name: 'not-there' } }));

  const pods = [await runPod(t, admin, runtime, list, tenantNamespace, 'cnf-1', { labels: { app: 'cnf' } }), await runPod(t, admin, runtime, list, tenantNamespace, 'cnf-2', { labels: { app: 'cnf' } })];
  const addresses: string[] = [];
  for (const pod of pods) {
    await annotate(tenant, tenantNamespace, pod.name, 'nad');
    addresses.push((await addressOn(pod, 'net1', '198.18.113.')).split('/')[0]!);
    const entries = await networkStatusWhen(admin, pod, 'lists net1', (s) => s.some((e) => e.interface === 'net1'));
    const net1 = entries.find((e) => e.interface === 'net1')!;
    t.equal(net1.name, 'nad', `${pod.name}: net1 is on Network nad, named by podnet`);
    t.same(net1.ips, [addresses.at(-1)], `${pod.name}: the address host-local gave`);
    t.same(net1.gateway, ['198.18.113.1'], `${pod.name}: the gateway from the plugin's result`);
    t.match(net1.dns, { nameservers: ['198.18.113.53'], search: ['cnf.example'] }, `${pod.name}: the DNS from the plugin's result`);
    t.match(net1.mac, /^[0-9a-f]{2}(:[0-9a-f]{2}){5}$/);
  }
  const ping = await execa('ip', ['netns', 'exec', pods[0]!.netns, '/bin/busybox', 'ping', '-c', '1', '-W', '2', addresses[1]!], { reject: false });
  t.equal(ping.exitCode, 0, 'cnf-1 reaches cnf-2 over the definition\'s network');

  // A tenant's config asks for a Network whose plugin refuses its config: told, nothing left.
  await tenant.objects.create(podNetworkConfig(tenantNamespace, 'wants-broken', { podSelector: { matchLabels: { app: 'cnf' } }, attachments: [{ network: 'broken' }] }));
  const condition = await until('the config is Degraded with the plugin\'s error', async () => {
    const c = (await configStatusOf(admin, tenantNamespace, 'wants-broken'))?.conditions?.find((c) => c.type === 'Degraded' && c.status === 'True');
    return c?.message.includes('CNI error') ? c : undefined;
  });
  t.match(condition.message, /pod cnf-\d: spec\.attachments\[0\]: Network broken: plugin bridge ADD: CNI error \d+.*: .+/, 'the field, the Network, the plugin, its code and message');
  const failed = await until('an AttachFailed Event on the pod', async () => (await eventsOf(admin, tenantNamespace, 'cnf-1')).find((e) => e.reason === 'AttachFailed' && e.message.includes('Network broken')));
  t.match(failed.message, /net2 \(Network broken\): Network broken: plugin bridge ADD: CNI error/);
  t.equal(await linkOf(pods[0]!.netns, 'net2'), undefined, 'nothing of it is in the pod');
  t.ok(await linkOf(pods[0]!.netns, 'net1'), 'net1 is untouched');

  // A Network naming a definition that is not there.
  const ghost = await degraded(admin, 'ghost');
  t.equal(ghost.reason, 'InvalidSpec');
  t.match(ghost.message, /^spec\.cni\.networkAttachmentDefinition: there is no NetworkAttachmentDefinition tenant-a\/not-there/);

  // The annotation removed from one pod: DEL with the cached result releases its address.
  await annotate(tenant, tenantNamespace, 'cnf-1', null);
  await gone(pods[0]!, 'net1');
  await until("host-local released cnf-1's address", async () => ((await hostLocalAddresses(ipam.path, 'nadnet')).join() === addresses[1] ? true : undefined));
  t.ok(await linkOf(pods[1]!.netns, 'net1'), 'cnf-2 keeps its net1');
});
