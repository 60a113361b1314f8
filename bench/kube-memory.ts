// bench/kube-memory: the daemon's memory in Kubernetes mode against the size of the cluster's
// podnet objects. On the real kube-apiserver of the e2e harness (e2e/cluster), the daemon runs as
// the DaemonSet's service account and follows its node's pods (none here), every Network and
// every PodNetworkConfig. Measured twice in the same run, each from the daemon's start until its
// informers have listed everything and 10 s of resyncs have passed: the anchor, an empty cluster;
// then one with NETWORKS Networks (default 1,000) and CONFIGS PodNetworkConfigs (default 10,000,
// in 100 namespaces), each config selecting by label and attaching one Network. Printed: VmHWM
// and the anonymous peak (heap, buffers) of each, and the difference per object.
// Run as root (the harness's cluster): npm run bench:kube-memory [-- NETWORKS CONFIGS]
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { group } from '../e2e/lib/kube.ts';
import { podnetCluster } from './lib/kube.ts';
import { countArgument, onCleanup, pool, runBenchmark, sleep, until } from './lib/harness.ts';
import { daemonLogFile, startDaemon } from './lib/podnet.ts';

const networks = countArgument(2, 1000, 'NETWORKS');
const configs = countArgument(3, 10_000, 'CONFIGS');
const namespaces = 100;
const node = 'bench-node';
const settleMs = 10_000;

await runBenchmark(async () => {
  const { admin, api, daemonKubeconfig: kubeconfig } = await podnetCluster();

  /** The daemon from its start until its lists are done and `settleMs` of resyncs have passed: its memory. */
  const measure = async (what: string) => {
    const work = mkdtempSync(join(tmpdir(), 'podnet-bench-kube-memory-'));
    onCleanup(`remove ${work}`, () => rmSync(work, { recursive: true, force: true }));
    const logFile = daemonLogFile(work, `daemon-${what}.log`);
    const daemon = startDaemon({ socketPath: join(work, 'podnet.sock'), stateDir: join(work, 'state') }, logFile, ['--node-name', node, '--kubeconfig', kubeconfig, '--resync-seconds', '2']);
    await daemon.ready(60_000);
    const listed = await until('the informers listed everything', () => {
      const line = readFileSync(logFile, 'utf8').split('\n').find((l) => l.includes('listed the API server'));
      return line ? (JSON.parse(line) as Record<string, unknown>) : undefined;
    }, 300_000, 200);
    await sleep(settleMs);
    const memory = daemon.memory();
    await daemon.stop();
    return { ...memory, listed };
  };

  const empty = await measure('empty');
  const started = performance.now();
  const indexes = (n: number) => Array.from({ length: n }, (_, i) => i);
  await pool(indexes(namespaces), 8, async (i) => void (await admin.core.createNamespace({ body: { metadata: { name: `tenant-${i}` } } })));
  await pool(indexes(networks), 8, async (i) => {
    await api.post(`/apis/${group}/networks`, {
      apiVersion: group,
      kind: 'Network',
      metadata: { name: `net-${i}` },
      spec: { type: 'bridge', ipam: { ranges: [{ subnet: `10.${i >> 8}.${i & 255}.0/24` }] }, namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': `tenant-${i % namespaces}` } } },
    });
  });
  await pool(indexes(configs), 8, async (i) => {
    await api.post(`/apis/${group}/namespaces/tenant-${i % namespaces}/podnetworkconfigs`, {
      apiVersion: group,
      kind: 'PodNetworkConfig',
      metadata: { name: `cfg-${i}` },
      spec: { podSelector: { matchLabels: { app: `app-${i}` } }, attachments: [{ network: `net-${i % networks}`, interface: 'net1' }], interfaces: [{ name: 'eth0', mtu: 1400 }] },
    });
  });
  const createdS = (performance.now() - started) / 1000;
  const full = await measure('full');

  const mib = (kib: number) => (kib / 1024).toFixed(1);
  const objects = networks + configs;
  console.log(`daemon in Kubernetes mode on the e2e kube-apiserver; ${networks} Networks and ${configs} PodNetworkConfigs in ${namespaces} namespaces (created in ${createdS.toFixed(0)} s)`);
  console.log(`                VmHWM        anonymous peak`);
  console.log(`empty cluster   ${mib(empty.hwmKiB).padStart(6)} MiB   ${mib(empty.anonPeakKiB).padStart(6)} MiB`);
  console.log(`${String(objects).padEnd(6)} objects  ${mib(full.hwmKiB).padStart(6)} MiB   ${mib(full.anonPeakKiB).padStart(6)} MiB   ${(full.hwmKiB / empty.hwmKiB).toFixed(2)} x the empty cluster`);
  console.log(`per object      ${(((full.hwmKiB - empty.hwmKiB) * 1024) / objects).toFixed(0)} bytes of VmHWM, ${(((full.anonPeakKiB - empty.anonPeakKiB) * 1024) / objects).toFixed(0)} bytes anonymous`);
  console.log(`listed          ${String(full.listed['networks'])} Networks, ${String(full.listed['configs'])} PodNetworkConfigs, ${String(full.listed['pods'])} pods of the node`);
  return 0;
});
