// podnet as a Kubernetes citizen, against a real kube-apiserver (e2e/cluster): the daemon runs as
// its service account with the RBAC of daemonset/rbac.yaml, tenants act as static-token users with
// real RBAC, and the test plays the kubelet: it makes Pod objects bound to the node and runs the
// real CNI chain (the reference bridge plugin, then podnet) with their K8S_POD_* args.
import t from 'tap';
import { execa } from 'execa';
import { dir } from 'tmp-promise';
import { mkdir, writeFile } from 'node:fs/promises';
import type { KubernetesObject } from '@kubernetes/client-node';
import { prepareClusterTest } from './cluster/cluster.ts';
import { findGo } from './cluster/binaries.ts';
import { linkOf, until } from './lib/engine.ts';
import { CniRuntime } from './lib/cni-runtime.ts';
import { missingPrerequisite, podnetBinary, referencePluginDir, repoRoot } from './lib/env.ts';
import { addressesIn } from './lib/netns.ts';
import { networksAnnotation } from '../src/model/annotation.ts';
import type { PodNetworkConfigStatus } from '../src/protocol/validate.ts';
import { KubeApi } from '../src/kube/api.ts';
import { unrecordedReason } from '../src/status/status.ts';
import {
  addressOn,
  annotate,
  blueNetwork,
  bridgeNetwork,
  clientsAs,
  configStatusOf,
  eventsOf,
  gone,
  hostLinksLeft,
  group,
  mergePatch,
  networkStatusOf,
  networkStatusWhen,
  node,
  otherNamespace,
  podnetCluster,
  podNetworkConfig,
  primaryConflist,
  runPod,
  tenantNamespace,
  type RunningPod,
} from './lib/kube.ts';

const skip = (await prepareClusterTest(t)) ?? missingPrerequisite(['/bin/busybox', `${referencePluginDir}/bridge`, `${referencePluginDir}/host-local`]);

t.test('a tenant attaches two running pods to an admin\'s Network through the API alone', { skip }, async (t) => {
  const { admin, tenant, daemon } = await podnetCluster(t);
  const runtime = new CniRuntime([referencePluginDir, daemon.binDir]);
  const list = await primaryConflist(t, daemon, '198.18.100.0/24');
  const blue = blueNetwork(t, [tenantNamespace]);
  await admin.objects.create(blue);
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
    return s?.ready === '2/2' ? s : undefined;
  });
  // One entry for the node, its counts: the status does not grow with the pods (ADR 18); each
  // pod's addresses are its network-status annotation's to say (below).
  t.same(status.nodes, [{ name: node, selected: 2, ready: 2 }], 'the node that serves both pods counts them, ready');
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
  // Events are posted after the pod's annotation: waited for, not read once.
  const attached = await until('an Attached Event on cnf-1', async () => (await eventsOf(admin, tenantNamespace, 'cnf-1')).find((e) => e.reason === 'Attached' && e.message.includes('net1') && e.message.includes('blue')));
  t.ok(attached, 'an Attached Event on the pod');

  // The tenant changes the spec: the pods follow.
  await mergePatch(tenant, { apiVersion: group, kind: 'PodNetworkConfig', metadata: { name: 'fast', namespace: tenantNamespace }, spec: { interfaces: [{ name: 'eth0', mtu: 1300 }] } } as KubernetesObject);
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
  await until("no host link of the pods' net1 is left, and the unused bridge is gone", async () => ((await hostLinksLeft(pods, ['net1'], [blue.spec.bridge.name])).length === 0 ? true : undefined));
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
  await admin.objects.create(blueNetwork(t, [tenantNamespace]));

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
  const network = await tenant.objects.create({ ...blueNetwork(t, [tenantNamespace]), metadata: { name: 'mine' } }).then(
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

t.test('the pod annotation attaches and detaches on a running pod; one update that adds and removes keeps network-status whole', { skip }, async (t) => {
  const { admin, tenant, daemon } = await podnetCluster(t);
  const runtime = new CniRuntime([referencePluginDir, daemon.binDir]);
  const list = await primaryConflist(t, daemon, '198.18.104.0/24');
  await admin.objects.create(blueNetwork(t, [tenantNamespace]));
  await admin.objects.create(bridgeNetwork(t, 'green', ['198.18.103.0/24'], [tenantNamespace]));
  // The pod starts without the annotation; the tenant adds it later, with its own rights on pods.
  const pod = await runPod(t, admin, runtime, list, tenantNamespace, 'cnf-1');
  await networkStatusWhen(admin, pod, 'lists the primary interface', (s) => s.some((e) => e.default));

  await annotate(tenant, tenantNamespace, pod.name, 'blue');
  const blue = await addressOn(pod, 'net1', '198.18.101.');
  const first = await networkStatusWhen(admin, pod, 'lists net1', (s) => s.some((e) => e.interface === 'net1'));
  t.same(
    first.map((e) => [e.interface, e.name, e.default ?? false]),
    [['eth0', 'primary', true], ['net1', 'blue', false]],
    'the primary interface, then the attachment the annotation named (given the first free name, net1)',
  );
  t.same(first[1]!.ips, [blue.split('/')[0]]);

  // One update takes blue away and asks for green on an interface the tenant names.
  await annotate(tenant, tenantNamespace, pod.name, 'green@net5');
  const green = await addressOn(pod, 'net5', '198.18.103.');
  await gone(pod, 'net1');
  const second = await networkStatusWhen(admin, pod, 'follows the update', (s) => s.some((e) => e.interface === 'net5') && !s.some((e) => e.interface === 'net1'));
  t.same(second.map((e) => [e.interface, e.name]), [['eth0', 'primary'], ['net5', 'green']], 'the whole truth: eth0 kept, net1 gone, net5 there');
  t.same(second[1]!.ips, [green.split('/')[0]]);
  t.notOk(second.some((e) => e.problem), 'no entry tells a problem');
  const events = await until('Events for both changes', async () => {
    const list = await eventsOf(admin, tenantNamespace, pod.name);
    return list.some((e) => e.reason === 'Detached') && list.some((e) => e.reason === 'Attached' && e.message.includes('net5')) ? list : undefined;
  });
  t.ok(events.some((e) => e.reason === 'Attached' && /net1 to Network blue .*\(asked by the pod annotation\)/.test(e.message)), 'the first attach was told, and who asked');
  t.ok(events.some((e) => e.reason === 'Detached' && e.message === 'detached net1 from Network blue'));

  // Removing the annotation takes back what it asked.
  await annotate(tenant, tenantNamespace, pod.name, null);
  await gone(pod, 'net5');
  const last = await networkStatusWhen(admin, pod, 'lists only the primary interface', (s) => s.length === 1);
  t.equal(last[0]!.interface, 'eth0');
  await until("no host link of the pod's attachments is left", async () => ((await hostLinksLeft([pod], ['net1', 'net5'])).length === 0 ? true : undefined));
});

t.test('bad input: a CR wrong in meaning is Degraded naming the field; a malformed annotation is told and touches nothing else', { skip }, async (t) => {
  const { admin, tenant, daemon } = await podnetCluster(t);
  const runtime = new CniRuntime([referencePluginDir, daemon.binDir]);
  const list = await primaryConflist(t, daemon, '198.18.105.0/24');
  await admin.objects.create(blueNetwork(t, [tenantNamespace]));
  // Both pass the CRD's schema (a CIDR's shape), not podnet's checks.
  await admin.objects.create(bridgeNetwork(t, 'overlap', ['198.18.106.0/24', '198.18.106.128/25'], [tenantNamespace]));
  await admin.objects.create(bridgeNetwork(t, 'badcidr', ['198.18.300.0/24'], [tenantNamespace]));
  const pod = await runPod(t, admin, runtime, list, tenantNamespace, 'cnf-1', { labels: { app: 'cnf' } });
  await tenant.objects.create(podNetworkConfig(tenantNamespace, 'fast', { podSelector: { matchLabels: { app: 'cnf' } }, attachments: [{ network: 'blue', interface: 'net1' }] }));
  const address = await addressOn(pod, 'net1', '198.18.101.');

  for (const [name, field, reason] of [
    ['overlap', 'spec.ipam.ranges[1]', /ranges 198\.18\.106\.0\/24 and 198\.18\.106\.128\/25 overlap/],
    ['badcidr', 'spec.ipam.ranges[0]', /subnet "198\.18\.300\.0\/24" is not a CIDR/],
  ] as const) {
    const degraded = await until(`Network ${name} is Degraded`, async () => {
      const object = (await admin.objects.read({ apiVersion: group, kind: 'Network', metadata: { name } })) as KubernetesObject & { status?: { conditions?: { type: string; status: string; reason: string; message: string }[] } };
      return object.status?.conditions?.find((c) => c.type === 'Degraded' && c.status === 'True');
    });
    t.equal(degraded.reason, 'InvalidSpec', `${name}: the spec is at fault`);
    t.ok(degraded.message.startsWith(`${field}: `), `${name}: the message names ${field}`);
    t.match(degraded.message, reason);
  }

  await tenant.objects.create(
    podNetworkConfig(tenantNamespace, 'bad', {
      podSelector: { matchLabels: { app: 'cnf' } },
      attachments: [
        { network: 'nosuch', interface: 'net2' },
        { network: 'blue', interface: 'eth0' },
        { network: 'overlap', interface: 'net3' },
      ],
    }),
  );
  const condition = await until('the config is Degraded for all three', async () => {
    const c = (await configStatusOf(admin, tenantNamespace, 'bad'))?.conditions?.find((c) => c.type === 'Degraded' && c.status === 'True');
    return c?.message.includes('nothing of it applies') ? c : undefined;
  });
  t.equal(condition.reason, 'InvalidSpec');
  t.match(condition.message, /spec\.attachments\[0\]\.network: no Network named nosuch/);
  t.match(condition.message, /spec\.attachments\[1\]\.interface: eth0 is the pod's primary interface/);
  t.match(condition.message, /pod cnf-1: spec: nothing of it applies to the pod until all of it can/, 'a config applies whole or not at all (ADR 17)');
  t.equal(await linkOf(pod.netns, 'net3'), undefined, 'nothing of the bad Network was made');
  t.equal((await addressesIn(pod.netns)).find((l) => l.ifname === 'net1')?.addresses.includes(address), true, 'net1 of the good config is untouched');

  // A malformed annotation: told on the pod, and nothing else of its networking changes.
  const before = await linkOf(pod.netns, 'net1');
  await annotate(tenant, tenantNamespace, pod.name, '[{"name": "blue", "interface": ');
  const warning = await until('an InvalidAnnotation Event on the pod', async () => (await eventsOf(admin, tenantNamespace, pod.name)).find((e) => e.reason === 'InvalidAnnotation'));
  t.equal(warning.type, 'Warning');
  t.match(warning.message, /metadata\.annotations\["podnetwork\.opdev\.io\/networks"\]: /, 'it names the annotation');
  const entries = await networkStatusWhen(admin, pod, 'tells the annotation is wrong', (s) => s.some((e) => e.name === networksAnnotation));
  t.same(entries.filter((e) => e.problem === undefined).map((e) => e.interface), ['eth0', 'net1'], 'eth0 and net1 stay listed');
  t.match(entries.find((e) => e.name === networksAnnotation)?.problem, /metadata\.annotations/);
  const after = await linkOf(pod.netns, 'net1');
  t.same([after?.ifindex, after?.address, after?.mtu], [before?.ifindex, before?.address, before?.mtu], 'net1 is the same link as before');
  t.equal((await linkOf(pod.netns, 'eth0'))?.mtu, 1500, 'eth0 is untouched');
});

t.test('convergence: the daemon restarted, the API server restarted, a watch expired (410)', { skip }, async (t) => {
  const { cluster, admin, tenant, daemon } = await podnetCluster(t);
  const runtime = new CniRuntime([referencePluginDir, daemon.binDir]);
  const list = await primaryConflist(t, daemon, '198.18.107.0/24');
  await admin.objects.create(blueNetwork(t, [tenantNamespace]));
  await admin.objects.create(bridgeNetwork(t, 'green', ['198.18.103.0/24'], [tenantNamespace]));
  const pod = await runPod(t, admin, runtime, list, tenantNamespace, 'cnf-1', { labels: { app: 'cnf' } });
  const fast = (mtu: number) => podNetworkConfig(tenantNamespace, 'fast', { podSelector: { matchLabels: { app: 'cnf' } }, attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'eth0', mtu }] });
  await tenant.objects.create(fast(1400));
  const address = await addressOn(pod, 'net1', '198.18.101.');
  const net1 = await linkOf(pod.netns, 'net1');
  await until('the Attached Event', async () => ((await eventsOf(admin, tenantNamespace, pod.name)).some((e) => e.reason === 'Attached') ? true : undefined));
  const sameNet1 = async (when: string) => {
    const now = await linkOf(pod.netns, 'net1');
    // The kernel adds an IPv6 link-local address of its own a moment after the link is up.
    const addresses = (await addressesIn(pod.netns)).find((l) => l.ifname === 'net1')?.addresses.filter((a) => !a.startsWith('fe80:'));
    t.same([now?.ifindex, now?.address, addresses], [net1?.ifindex, net1?.address, [address]], `${when}: net1 is the same link with the same address`);
  };

  // The daemon dies; the tenant changes the config and the pod's annotation meanwhile.
  await daemon.kill();
  await mergePatch(tenant, fast(1300) as KubernetesObject);
  await annotate(tenant, tenantNamespace, pod.name, 'green@net5');
  await daemon.start();
  await addressOn(pod, 'net5', '198.18.103.');
  await until('eth0 follows the MTU changed while the daemon was down', async () => ((await linkOf(pod.netns, 'eth0'))?.mtu === 1300 ? true : undefined));
  await sameNet1('after the daemon restarted');
  const attached = (await eventsOf(admin, tenantNamespace, pod.name)).filter((e) => e.reason === 'Attached' && e.message.includes('net1'));
  t.equal(attached.length, 1, 'the restart told no attach again');

  // The API server restarts; the daemon watches again and follows the next change.
  await cluster.restartApiserver();
  await annotate(tenant, tenantNamespace, pod.name, null);
  await gone(pod, 'net5');
  await sameNet1('after the API server restarted');

  // An outage long enough that the watches' resourceVersions expire: 410 Gone, then a new list.
  const relists = () => daemon.log().split('\n').filter((l) => l.includes('listing again')).length;
  const relistsBefore = relists();
  await cluster.expireWatches();
  await tenant.objects.delete({ apiVersion: group, kind: 'PodNetworkConfig', metadata: { name: 'fast', namespace: tenantNamespace } });
  await gone(pod, 'net1');
  await until('eth0 has its MTU back', async () => ((await linkOf(pod.netns, 'eth0'))?.mtu === 1500 ? true : undefined));
  t.ok(relists() > relistsBefore, 'the daemon listed again after its watches expired');
  const status = await networkStatusWhen(admin, pod, 'lists only the primary interface', (s) => s.length === 1);
  t.equal(status[0]!.interface, 'eth0');
});

t.test('the daemon refuses a Kubernetes mode it cannot follow, saying which option is wrong', { skip: missingPrerequisite() }, async (t) => {
  const tmp = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-' });
  t.teardown(() => tmp.cleanup());
  const daemon = (...args: string[]) => execa(podnetBinary, ['daemon', '--socket', `${tmp.path}/podnet.sock`, '--state-dir', `${tmp.path}/state`, ...args], { reject: false, timeout: 10_000 });
  const badName = await daemon('--node-name', 'Node_1,spec.nodeName!=x');
  t.not(badName.exitCode, 0);
  t.match(badName.stderr, /--node-name \(a Kubernetes node name\)/, 'a node name that is not a DNS name is refused before it reaches a field selector');
  const both = await daemon('--node-name', 'node-1', '--config-dir', `${tmp.path}/config.d`);
  t.not(both.exitCode, 0);
  t.match(both.stderr, /not both/);
  const lonelyKubeconfig = await daemon('--kubeconfig', `${tmp.path}/kubeconfig`);
  t.match(lonelyKubeconfig.stderr, /--kubeconfig needs --node-name/);
  const emptyLimit = await daemon('--config-dir', `${tmp.path}/config.d`, '--max-attachments-per-pod', '');
  t.match(emptyLimit.stderr, /--max-attachments-per-pod must be a whole number from 0 to 1024, not ""/, 'an empty limit is no limit of 0');
  const lonelyStandard = await daemon('--config-dir', `${tmp.path}/config.d`, '--standard-network-status');
  t.match(lonelyStandard.stderr, /--standard-network-status needs --node-name/);
  // Multus writes the standard network-status itself: two writers would overwrite each other.
  await mkdir(`${tmp.path}/net.d`);
  await writeFile(`${tmp.path}/net.d/00-multus.conf`, JSON.stringify({ cniVersion: '0.3.1', name: 'multus-cni-network', type: 'multus-shim' }));
  const multus = await daemon('--node-name', 'node-1', '--kubeconfig', `${tmp.path}/kubeconfig`, '--cni-conf-dir', `${tmp.path}/net.d`, '--standard-network-status');
  t.not(multus.exitCode, 0);
  t.match(multus.stderr, /--standard-network-status: the node's primary CNI config .*00-multus\.conf is Multus's/, 'refused at start, saying why');
});

t.test("--standard-network-status: the Network Plumbing WG's own client library reads the pod's interfaces from k8s.v1.cni.cncf.io/network-status as podnet wrote it", { skip: skip ?? (findGo() ? undefined : 'needs Go to build the client library\'s reader') }, async (t) => {
  const conf = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-netd-' });
  t.teardown(() => conf.cleanup());
  await writeFile(`${conf.path}/10-primary.conflist`, JSON.stringify({ cniVersion: '1.0.0', name: 'primary', plugins: [{ type: 'bridge' }] }));
  const { admin, daemon } = await podnetCluster(t, ['--standard-network-status', '--cni-conf-dir', conf.path]);
  // The reader: a small Go program on the library (e2e/nad-status), built here.
  const out = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-nad-' });
  t.teardown(() => out.cleanup());
  await execa(findGo()!, ['build', '-o', `${out.path}/nad-status`, '.'], { cwd: `${repoRoot}e2e/nad-status`, env: { GOTOOLCHAIN: 'local', GOWORK: 'off', GOFLAGS: '-mod=mod', CGO_ENABLED: '0' } });

  const runtime = new CniRuntime([referencePluginDir, daemon.binDir]);
  const list = await primaryConflist(t, daemon, '198.18.112.0/24');
  await admin.objects.create(bridgeNetwork(t, 'blue', ['198.18.113.0/24'], [tenantNamespace]));
  const pod = await runPod(t, admin, runtime, list, tenantNamespace, 'cnf-std', { annotations: { [networksAnnotation]: 'blue@net1, red@net2' } });
  const own = await networkStatusWhen(admin, pod, 'lists net1, and red as a problem', (s) => s.some((e) => e.interface === 'net1' && e.ips?.length) && s.some((e) => e.problem));
  const read = async (...args: string[]) => {
    const object = await admin.core.readNamespacedPod({ namespace: tenantNamespace, name: pod.name });
    return execa(`${out.path}/nad-status`, args, { input: JSON.stringify(object), reject: false });
  };
  const parsed = await until('the standard annotation, as the library reads it', async () => {
    const r = await read('-strict');
    return r.exitCode === 0 ? (JSON.parse(r.stdout) as { name: string; interface?: string; ips?: string[]; mac?: string; default?: boolean }[]) : undefined;
  });
  const net1 = own.find((e) => e.interface === 'net1')!;
  t.same(parsed.map((e) => [e.name, e.interface, e.default ?? false]), [['primary', 'eth0', true], ['blue', 'net1', false]], 'the primary interface and net1: what the pod has, not the Network it could not get');
  t.same(parsed[1]!.ips, net1.ips);
  t.equal(parsed[1]!.mac, net1.mac);
  // The reader is strict: podnet's own annotation (its problem entries) in the standard's place is refused.
  const object = await admin.core.readNamespacedPod({ namespace: tenantNamespace, name: pod.name });
  object.metadata!.annotations!['k8s.v1.cni.cncf.io/network-status'] = JSON.stringify(own);
  const strict = await execa(`${out.path}/nad-status`, ['-strict'], { input: JSON.stringify(object), reject: false });
  t.equal(strict.exitCode, 1, 'fields the standard does not have are refused');
  t.match(strict.stderr, /not the standard's fields: .*"problem"/);

  // Multus comes to the node: from then on it writes the standard annotation, and podnet stops.
  await writeFile(`${conf.path}/00-multus.conf`, JSON.stringify({ cniVersion: '0.3.1', name: 'multus-cni-network', type: 'multus-shim' }));
  await until('the daemon says it stopped writing the standard annotation', async () => (daemon.log().includes('podnet no longer writes it') ? true : undefined));
  await annotate(admin, tenantNamespace, pod.name, 'blue@net1, blue@net3');
  await networkStatusWhen(admin, pod, 'lists net3', (s) => s.some((e) => e.interface === 'net3' && e.ips?.length));
  const after = await read();
  t.notOk((JSON.parse(after.stdout) as { interface?: string }[]).some((e) => e.interface === 'net3'), "net3 is in podnet's own annotation, not in the standard one, which Multus writes now");
});

t.test('cleanup: a label removed, a Network deleted, a pod deleted each take back exactly what they caused', { skip }, async (t) => {
  const { admin, tenant, daemon } = await podnetCluster(t);
  const runtime = new CniRuntime([referencePluginDir, daemon.binDir]);
  const list = await primaryConflist(t, daemon, '198.18.108.0/24');
  const blue = blueNetwork(t, [tenantNamespace]);
  const green = bridgeNetwork(t, 'green', ['198.18.103.0/24'], [tenantNamespace]);
  await admin.objects.create(blue);
  await admin.objects.create(green);
  const pods = [await runPod(t, admin, runtime, list, tenantNamespace, 'cnf-1', { labels: { app: 'cnf' } }), await runPod(t, admin, runtime, list, tenantNamespace, 'cnf-2', { labels: { app: 'cnf' } })];
  const [one, two] = pods as [RunningPod, RunningPod];
  const selector = { matchLabels: { app: 'cnf' } };
  await tenant.objects.create(podNetworkConfig(tenantNamespace, 'blue', { podSelector: selector, attachments: [{ network: 'blue', interface: 'net1' }] }));
  await tenant.objects.create(podNetworkConfig(tenantNamespace, 'green', { podSelector: selector, attachments: [{ network: 'green', interface: 'net2' }] }));
  for (const pod of pods) {
    await addressOn(pod, 'net1', '198.18.101.');
    await addressOn(pod, 'net2', '198.18.103.');
  }

  // The pod's label goes: what the configs selecting it gave goes, the other pod keeps its own.
  await mergePatch(tenant, { apiVersion: 'v1', kind: 'Pod', metadata: { name: one.name, namespace: tenantNamespace, labels: { app: null as unknown as string } } });
  await gone(one, 'net1');
  await gone(one, 'net2');
  t.ok(await linkOf(two.netns, 'net1'), 'cnf-2 keeps net1');
  t.ok(await linkOf(two.netns, 'net2'), 'cnf-2 keeps net2');

  // The admin deletes a Network: its attachments and its host bridge go, the other Network's stay.
  await admin.objects.delete({ apiVersion: group, kind: 'Network', metadata: { name: 'green' } });
  await gone(two, 'net2');
  await until('the green host bridge is gone', async () => ((await linkOf(undefined, green.spec.bridge.name)) === undefined ? true : undefined));
  t.ok(await linkOf(two.netns, 'net1'), 'cnf-2 keeps net1 of blue');
  t.ok(await linkOf(undefined, blue.spec.bridge.name), 'the blue host bridge stays');

  // The pod object is deleted (before the runtime's CNI DEL): its netns loses what podnet made.
  await admin.core.deleteNamespacedPod({ namespace: tenantNamespace, name: two.name, gracePeriodSeconds: 0 });
  await gone(two, 'net1');
  t.ok(await linkOf(two.netns, 'eth0'), 'the primary interface is not podnet\'s to take');
  await until("no host link of the pods' attachments is left, nor their bridges", async () => ((await hostLinksLeft(pods, ['net1', 'net2'], [blue.spec.bridge.name, green.spec.bridge.name])).length === 0 ? true : undefined));
});

t.test("a pod that ran before podnet and that podnet has no record of says so when it asks for a network: network-status, an Event, the log, the config's status", { skip }, async (t) => {
  const { cluster, admin, tenant, daemon } = await podnetCluster(t);
  await admin.objects.create(blueNetwork(t, [tenantNamespace]));
  // Bound to the node and running, as the kubelet reports it: its sandbox's CNI ADD ran before
  // podnet was chained, so podnet never recorded it.
  const name = 'before-podnet';
  await admin.core.createNamespacedPod({ namespace: tenantNamespace, body: { metadata: { name, labels: { app: 'old' } }, spec: { nodeName: node, containers: [{ name: 'main', image: 'busybox' }] } } });
  t.teardown(() => admin.core.deleteNamespacedPod({ namespace: tenantNamespace, name, gracePeriodSeconds: 0 }).catch(() => undefined));
  const api = KubeApi.load(cluster.kubeconfig('admin'));
  await api.merge(`/api/v1/namespaces/${tenantNamespace}/pods/${name}/status`, { status: { phase: 'Running', podIP: '198.18.100.250', startTime: new Date().toISOString() } });

  await tenant.objects.create(podNetworkConfig(tenantNamespace, 'old-ones', { podSelector: { matchLabels: { app: 'old' } }, attachments: [{ network: 'blue', interface: 'net1' }] }));
  // Told once it has been seen running without a record for 30 s (unrecordedGraceMs).
  const entries = await until('its network-status says why nothing is attached', async () => {
    const status = await networkStatusOf(admin, tenantNamespace, name);
    return status?.some((e) => e.problem) ? status : undefined;
  }, 60_000);
  t.same(entries, [{ name: `PodNetworkConfig ${tenantNamespace}/old-ones`, problem: unrecordedReason.notRecorded }]);
  const events = await until('a Warning Event on the pod', async () => {
    const list = await eventsOf(admin, tenantNamespace, name);
    return list.some((e) => e.reason === 'NotRecorded') ? list : undefined;
  });
  t.match(events.find((e) => e.reason === 'NotRecorded'), { type: 'Warning', message: new RegExp(`^PodNetworkConfig ${tenantNamespace}/old-ones: podnet has no record of this pod's sandbox`) });
  t.match(daemon.log(), new RegExp(`a pod asks for what podnet cannot give it.*${tenantNamespace}/${name}`), 'and the log says it');
  const status = await until("the config's status counts it failing", async () => {
    const s = await configStatusOf(admin, tenantNamespace, 'old-ones');
    return s?.ready === '0/1' ? s : undefined;
  });
  t.same(status.nodes?.[0]?.failingPods, [{ name, reason: unrecordedReason.notRecorded }]);
  t.equal(daemon.log().split('a pod asks for what podnet cannot give it').length - 1, 1, 'told once, not every pass');

  // The config gone, nothing asks: what was written on the pod is taken back.
  await tenant.objects.delete(podNetworkConfig(tenantNamespace, 'old-ones', {}));
  await until('its network-status is taken back', async () => ((await networkStatusOf(admin, tenantNamespace, name)) === undefined ? true : undefined));
});
