// The Helm chart (charts/podnet, made by scripts/chart.ts) against the kustomize install it is made
// from: `helm lint` finds nothing, `helm template` with the default values renders the objects
// `kubectl kustomize daemonset/` renders, with metrics on those of daemonset-metrics/, and the
// values reach the DaemonSet where an admin expects them. helm and kubectl are the e2e cluster's
// (e2e/cluster/binaries.ts).
import t from 'tap';
import { execa } from 'execa';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { ensureHelm, ensureNodeBinaries, findGo } from './cluster/binaries.ts';
import { repoRoot } from './lib/env.ts';
import { keepAtUninstall } from '../scripts/chart.ts';

const skip = process.getuid?.() !== 0 ? 'needs root (helm and kubectl are cached in a system folder)' : findGo() ? undefined : 'needs Go to build helm';
const chart = join(repoRoot, 'charts/podnet');

type Obj = { kind: string; metadata: { name: string; namespace?: string } } & Record<string, unknown>;
const objects = (yaml: string) =>
  new Map(
    parseAllDocuments(yaml)
      .map((d) => d.toJS() as Obj | null)
      .filter((o): o is Obj => o !== null)
      .map((o) => [`${o.kind} ${o.metadata.namespace ?? ''}/${o.metadata.name}`, o]),
  );

t.test('the chart lints clean and renders what kustomize renders, with metrics off and on; its values reach the DaemonSet', { skip, timeout: 1_800_000 }, async (t) => {
  const helm = await ensureHelm();
  const { kubectl } = await ensureNodeBinaries();
  const lint = await execa(helm, ['lint', '--strict', chart], { reject: false, all: true });
  t.equal(lint.exitCode, 0, `helm lint --strict: ${lint.all}`);

  const render = async (...set: string[]) => objects((await execa(helm, ['template', 'podnet', chart, ...set.flatMap((s) => ['--set', s])])).stdout);
  const kustomize = async (dir: string) => objects((await execa(kubectl, ['kustomize', join(repoRoot, dir)])).stdout);
  for (const [dir, set] of [['daemonset', []], ['daemonset-metrics', ['metrics.enabled=true']]] as const) {
    const [fromHelm, fromKustomize] = [await render(...set), await kustomize(dir)];
    t.strictSame([...fromHelm.keys()].sort(), [...fromKustomize.keys()].sort(), `${dir}: the same objects`);
    for (const [key, object] of fromKustomize) {
      const rendered = structuredClone(fromHelm.get(key)) as Obj & { metadata: { annotations?: Record<string, string> } };
      if (object.kind === 'CustomResourceDefinition') {
        // The chart's one addition: helm uninstall keeps the CRDs, and with them the tenants' configs.
        t.equal(rendered.metadata.annotations?.[keepAtUninstall.key], keepAtUninstall.value, `${key} kept at uninstall`);
        delete rendered.metadata.annotations![keepAtUninstall.key];
        if (Object.keys(rendered.metadata.annotations!).length === 0) delete rendered.metadata.annotations;
      }
      t.strictSame(rendered, object, `${dir}: ${key} the same`);
    }
  }

  const custom = await render('image.repository=registry.example/podnet', 'image.tag=1.2.3', 'criSocket=/run/crio/crio.sock', 'limits.maxAttachmentsPerPod=4', 'firstPassTimeoutMs=0', 'standardNetworkStatus=true', 'tolerations=null');
  const ds = custom.get('DaemonSet podnet-system/podnet') as unknown as { spec: { template: { spec: { tolerations?: unknown; initContainers: Obj[]; containers: Obj[]; volumes: Obj[] } } } };
  const pod = ds.spec.template.spec;
  const [install, daemon] = [pod.initContainers[0]!, pod.containers[0]!];
  t.equal(daemon['image'], 'registry.example/podnet:1.2.3');
  t.equal(install['image'], 'registry.example/podnet:1.2.3');
  t.match(daemon['args'], ['daemon', '--node-name', '$(NODE_NAME)', '--cni-conf-dir', '/host/etc/cni/net.d', '--cni-cache-dir', '/var/lib/cni', '--cri-socket', '/run/crio/crio.sock', '--max-attachments-per-pod', '4', '--standard-network-status']);
  t.strictSame((install['args'] as string[]).slice(-2), ['--first-pass-timeout-ms', '0'], 'a wait of 0 is a value: it turns the wait off');
  t.match((daemon['volumeMounts'] as Obj[]).find((m) => m['name'] === 'cri-socket'), { mountPath: '/run/crio', readOnly: true });
  t.match(pod.volumes.find((v) => v['name'] === 'cri-socket'), { hostPath: { path: '/run/crio' } });
  t.equal(pod.tolerations, undefined, 'tolerations as the values say');

  // Without the DRA driver: no --dra, no DeviceClass nor the claims' policy, and none of the kubelet's folders mounted.
  const withoutDra = await render('dra.enabled=false');
  const plain = (withoutDra.get('DaemonSet podnet-system/podnet') as unknown as typeof ds).spec.template.spec;
  t.notOk((plain.containers[0]!['args'] as string[]).includes('--dra'), 'dra.enabled=false: the daemon is no DRA driver');
  t.notOk([...withoutDra.keys()].some((k) => k.startsWith('DeviceClass ') || k.includes('podnet-claims-networks')), 'no DeviceClass, no claims policy');
  t.notOk(plain.volumes.some((v) => String((v['hostPath'] as Obj | undefined)?.['path'] ?? '').startsWith('/var/lib/kubelet')), "none of the kubelet's folders mounted");
  t.ok([...(await render()).keys()].includes('DeviceClass /podnet'), 'by default: the DeviceClass');

  const monitored = await render('metrics.enabled=true', 'metrics.podMonitorLabels.release=kube-prometheus', 'metrics.alertsLabels.release=kube-prometheus');
  for (const key of ['PodMonitor podnet-system/podnet', 'PrometheusRule podnet-system/podnet']) {
    t.match((monitored.get(key) as Obj).metadata, { labels: { 'app.kubernetes.io/name': 'podnet', release: 'kube-prometheus' } }, `${key}: the label its Prometheus selects by`);
  }

  // The values' schema refuses, naming the value, what would render a wrong DaemonSet.
  for (const bad of ['limits.maxAttachmentsPerPod=', 'firstPassTimeoutMs=soon', 'criSocket=unix:///run/containerd/containerd.sock']) {
    const refused = await execa(helm, ['template', 'podnet', chart, '--set', bad], { reject: false, all: true });
    t.not(refused.exitCode, 0, `${bad} refused`);
    t.match(refused.all, new RegExp(bad.split('=')[0]!.split('.').at(-1)!), 'naming the value');
  }
});
