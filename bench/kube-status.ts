// bench/kube-status: what one PodNetworkConfig's status costs at cluster scale, on the real
// kube-apiserver of the e2e harness (e2e/cluster). NODES nodes (default 100) with PODS pods each
// (default 100: 10,000 pods) that the config selects, one in a hundred failing: each node's entry
// is computed by the daemon's own status code (configNodeEntry, configStatus, sameStatus in
// src/status/status.ts) from synthetic pod reports, and written by server-side apply as that
// node's field manager, one node after the other, each from the object as the API server then
// holds it, as the publisher does. Printed: the status's size and the whole object's (managedFields
// included, what etcd stores), each as a ratio to its anchor (the 64 KiB target; etcd's 1.5 MiB
// request limit), the writes per node; then a second round in which nothing changed, which must
// write nothing.
// Targets (issue 20): status under 64 KiB at 10,000 pods; at most one write per node per change.
// Run as root (the harness's cluster): npm run bench:kube-status [-- NODES PODS]
import { startCluster } from '../e2e/cluster/cluster.ts';
import { clientsAs, createManifest, group } from '../e2e/lib/kube.ts';
import { KubeApi } from '../src/kube/api.ts';
import { emptyApplied } from '../src/model/state.ts';
import type { PodNetworkConfig, PodNetworkConfigStatus } from '../src/protocol/validate.ts';
import { configNodeEntry, configStatus, sameStatus, type SandboxFacts } from '../src/status/status.ts';
import { countArgument, runBenchmark, until } from './lib/harness.ts';
import { benchOwner } from './lib/kube.ts';

const nodes = countArgument(2, 100, 'NODES');
const podsPerNode = countArgument(3, 100, 'PODS');
const targetBytes = 64 * 1024;
const etcdRequestLimit = 1.5 * 1024 * 1024;
const namespace = 'bench';

const config: PodNetworkConfig = {
  apiVersion: group,
  kind: 'PodNetworkConfig',
  metadata: { name: 'fleet', namespace },
  spec: { podSelector: {}, attachments: [{ network: 'blue', interface: 'net1' }] },
};
const configName = `PodNetworkConfig ${namespace}/fleet`;

/** One pod as a pass leaves it: ready, or one in a hundred without its address. */
function podFacts(node: number, pod: number): SandboxFacts {
  const name = `app-${node}-${pod}`;
  const failing = pod % 100 === 7;
  return {
    record: { containerId: `c${node}x${pod}`, ifname: 'eth0', network: 'primary', netns: `/run/netns/${name}`, cniVersion: '1.0.0', createdAt: '2026-11-24T00:00:00.000Z', pod: { namespace, name } },
    namespace,
    name,
    wanted: { configs: [configName], attachments: [], vrfs: [], tuning: [], routes: [], rules: [], sysctls: [], macs: [], problems: [] },
    applied: emptyApplied(`c${node}x${pod}`, `/run/netns/${name}`),
    problems: failing ? [{ document: configName, field: 'spec.attachments[0]', reason: 'network blue: range 198.18.5.0/24 has no free address' }] : [],
  };
}

await runBenchmark(async () => {
  const cluster = await startCluster(benchOwner);
  const admin = clientsAs(cluster, 'admin');
  await createManifest(admin, 'crds.yaml');
  await admin.core.createNamespace({ body: { metadata: { name: namespace } } });
  await until('the CRDs serve', () => admin.objects.list(group, 'PodNetworkConfig').then(() => true, () => undefined), 30_000);
  await admin.objects.create(config as never);
  const api = KubeApi.load(cluster.kubeconfig('admin'));
  const path = `/apis/${group}/namespaces/${namespace}/podnetworkconfigs/fleet`;

  const facts = Array.from({ length: nodes }, (_, n) => Array.from({ length: podsPerNode }, (_, p) => podFacts(n, p)));
  /** One round: each node reads the object, computes its status and writes it when it changed. */
  const round = async (): Promise<{ writes: number; ms: number }> => {
    let writes = 0;
    const started = performance.now();
    for (let n = 0; n < nodes; n++) {
      const node = `node-${String(n).padStart(3, '0')}`;
      const object = await api.get<{ metadata: { generation: number }; status?: PodNetworkConfigStatus }>(path);
      const status = configStatus(object.metadata.generation, configNodeEntry(config, facts[n]!, node), object.status, [], node, new Date().toISOString());
      if (sameStatus(status, object.status, node)) continue;
      await api.apply(`${path}/status`, { apiVersion: group, kind: 'PodNetworkConfig', metadata: { name: 'fleet', namespace }, status }, `podnet/${node}`);
      writes++;
    }
    return { writes, ms: performance.now() - started };
  };

  const first = await round();
  const object = await api.get<{ status: PodNetworkConfigStatus }>(path);
  const statusBytes = Buffer.byteLength(JSON.stringify(object.status));
  const objectBytes = Buffer.byteLength(JSON.stringify(object));
  const second = await round();

  console.log(`${nodes} nodes x ${podsPerNode} pods = ${nodes * podsPerNode} pods selected by one PodNetworkConfig, 1 in 100 failing; kube-apiserver of e2e/cluster`);
  console.log(`status            ${statusBytes} bytes   ${(statusBytes / targetBytes).toFixed(2)} x the target (${targetBytes} bytes)   ready ${object.status.ready}`);
  console.log(`whole object      ${objectBytes} bytes   ${(objectBytes / etcdRequestLimit).toFixed(3)} x etcd's request limit (${etcdRequestLimit} bytes; managedFields of ${nodes} node managers included)`);
  console.log(`first round       ${first.writes} writes from ${nodes} nodes (${(first.writes / nodes).toFixed(2)} per node) in ${(first.ms / 1000).toFixed(1)} s`);
  console.log(`nothing changed   ${second.writes} writes`);
  const pass = statusBytes < targetBytes && first.writes <= nodes && second.writes === 0;
  console.log(pass ? 'PASS' : 'FAIL');
  return pass ? 0 : 1;
});
