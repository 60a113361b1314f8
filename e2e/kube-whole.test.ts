// A config the node cannot make whole, through Kubernetes (issue 38): its status says which field
// the pass could not make and that nothing of it applies, while a working config of the same
// pod stays Ready and applied. Against a real kube-apiserver (e2e/cluster), the daemon as its
// service account, the tenant with the built-in edit role.
import t from 'tap';
import { prepareClusterTest } from './cluster/cluster.ts';
import { linkOf, until } from './lib/engine.ts';
import { CniRuntime } from './lib/cni-runtime.ts';
import { missingPrerequisite, referencePluginDir } from './lib/env.ts';
import { configStatusOf, podnetCluster, podNetworkConfig, primaryConflist, runPod, tenantNamespace } from './lib/kube.ts';

const skip = (await prepareClusterTest(t)) ?? missingPrerequisite([`${referencePluginDir}/bridge`, `${referencePluginDir}/host-local`]);

t.test("a config a pass cannot make whole is Degraded naming the field, nothing of it applied; the pod's other config stays Ready", { skip, timeout: 180_000 }, async (t) => {
  const { admin, tenant, daemon } = await podnetCluster(t);
  const runtime = new CniRuntime([referencePluginDir, daemon.binDir]);
  const list = await primaryConflist(t, daemon, '198.18.166.0/24');
  const pod = await runPod(t, admin, runtime, list, tenantNamespace, 'cnf-w', { labels: { app: 'cnf' } });
  const selector = { matchLabels: { app: 'cnf' } };
  await tenant.objects.create(podNetworkConfig(tenantNamespace, 'good', { podSelector: selector, interfaces: [{ name: 'eth0', mtu: 1400 }] }));
  await until('eth0 at 1400', async () => ((await linkOf(pod.netns, 'eth0'))?.mtu === 1400 ? true : undefined));
  await tenant.objects.create(podNetworkConfig(tenantNamespace, 'nodev', { podSelector: selector, interfaces: [{ name: 'lo', mtu: 64000 }], routes: [{ to: '198.18.167.0/24', dev: 'eth9', table: 100 }] }));
  const degraded = await until('nodev Degraded, naming the field the pass could not make', async () => {
    const condition = (await configStatusOf(admin, tenantNamespace, 'nodev'))?.conditions?.find((c) => c.type === 'Degraded' && c.status === 'True');
    return condition?.message.includes('eth9') ? condition : undefined;
  });
  t.match(degraded.message, /spec\.routes\[0\]: the pod has no interface eth9/);
  t.not((await linkOf(pod.netns, 'lo'))?.mtu, 64000, "lo's MTU, nodev's other part, is not applied alone");
  const good = await until('good Ready 1/1', async () => {
    const s = await configStatusOf(admin, tenantNamespace, 'good');
    return s?.ready === '1/1' ? s : undefined;
  });
  t.equal(good.conditions?.find((c) => c.type === 'Degraded')?.status, 'False', 'the working config is not held back');
  t.equal((await linkOf(pod.netns, 'eth0'))?.mtu, 1400);
});
