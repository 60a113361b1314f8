import t from 'tap';
import { silentLogger } from '../log.ts';
import { emptyApplied } from '../model/state.ts';
import { networkStatusAnnotation } from '../model/annotation.ts';
import type { PodNetworkConfig } from '../protocol/validate.ts';
import type { Problem } from '../model/desired.ts';
import type { SandboxFacts } from '../status/status.ts';
import type { KubeSource } from './informers.ts';
import type { ApiObject, PodObject } from './resources.ts';
import type { KubeApi } from './api.ts';
import { StatusPublisher } from './publisher.ts';

const config: PodNetworkConfig = {
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'PodNetworkConfig',
  metadata: { name: 'fleet', namespace: 'tenant' },
  spec: { podSelector: {}, attachments: [] },
};

const facts: SandboxFacts = {
  record: { containerId: 'c1', ifname: 'eth0', network: 'primary', netns: '/run/netns/app', cniVersion: '1.0.0', createdAt: '2026-11-24T00:00:00.000Z', pod: { namespace: 'tenant', name: 'app' } },
  namespace: 'tenant',
  name: 'app',
  wanted: { configs: ['PodNetworkConfig tenant/fleet'], attachments: [], tuning: [], routes: [], rules: [], sysctls: [], macs: [], problems: [] },
  applied: emptyApplied('c1', '/run/netns/app'),
  problems: [],
};

/**
 * A publisher over an informer cache the test moves by hand (what the API server's watch would
 * deliver, late or not at all), and the writes it makes.
 */
function publisherOverCache(opts: { node?: string; cache?: Cache; problems?: Problem[]; pods?: boolean } = {}) {
  const cache: Cache = opts.cache ?? {
    pod: { metadata: { name: 'app', namespace: 'tenant', uid: 'u1', resourceVersion: '10' }, status: { phase: 'Running' } } as PodObject,
    config: { apiVersion: config.apiVersion, kind: 'PodNetworkConfig', metadata: { ...config.metadata, uid: 'u2', generation: 1, resourceVersion: '20' } } as ApiObject,
  };
  const withPods = opts.pods ?? true;
  const applied: object[] = [];
  const writes: string[] = [];
  const annotations: (string | null)[] = [];
  /** Set: every write fails, as an API server that is down. */
  const down = { now: false };
  const api = {
    merge: async (path: string, body: { metadata: { annotations: Record<string, string | null> } }) => {
      writes.push(`merge ${path}`);
      if (down.now) throw new Error('503 the API server is down');
      annotations.push(body.metadata.annotations[networkStatusAnnotation]!);
    },
    apply: async (path: string, body: { status: object }) => {
      writes.push(`apply ${path.split('?')[0]}`);
      applied.push(body.status);
      if (down.now) throw new Error('503 the API server is down');
    },
    post: async (path: string) => void writes.push(`post ${path}`),
  } as unknown as KubeApi;
  const source = {
    nodeName: opts.node ?? 'node-a',
    synced: true,
    pods: () => (withPods ? [cache.pod] : []),
    pod: () => cache.pod,
    podIdentity: () => ({ namespace: 'tenant', name: 'app', labels: {}, namespaceLabels: {} }),
    objects: (kind: string) => (kind === 'PodNetworkConfig' ? [cache.config] : []),
    documents: () => ({ networks: new Map(), configs: [config] }),
  } as unknown as KubeSource;
  const publisher = new StatusPublisher({
    api,
    source,
    reconciler: { facts: () => (withPods ? [facts] : []), judge: () => opts.problems ?? [] },
    records: { list: () => (withPods ? [facts.record] : []) },
    log: silentLogger,
  });
  const publish = async () => {
    writes.length = 0;
    publisher.publish();
    await publisher.publish.idle();
    return [...writes];
  };
  return { cache, publish, down, lastAnnotation: () => annotations.at(-1), lastStatus: () => applied.at(-1) };
}

interface Cache {
  pod: PodObject;
  config: ApiObject;
}

t.test('a write the informer has not shown yet is not made again', async (t) => {
  const { cache, publish, lastAnnotation } = publisherOverCache();
  const first = await publish();
  t.same(first, ['merge /api/v1/namespaces/tenant/pods/app', 'apply /apis/podnetwork.opdev.io/v1alpha1/namespaces/tenant/podnetworkconfigs/fleet/status'], "the pod's network-status and the config's status");
  t.same(await publish(), [], 'another pass while the cache still shows the objects from before the writes: nothing');

  // The watch delivers the pod's write; the config's is still on its way.
  cache.pod = { ...cache.pod, metadata: { ...cache.pod.metadata, resourceVersion: '11', annotations: { [networkStatusAnnotation]: lastAnnotation()! } } };
  t.same(await publish(), [], 'the pod shows what was written, the config is at the version it was written over: nothing');
});

t.test('what someone else changed after the write is written again', async (t) => {
  const { cache, publish } = publisherOverCache();
  await publish();
  cache.pod = { ...cache.pod, metadata: { ...cache.pod.metadata, resourceVersion: '12', annotations: { [networkStatusAnnotation]: '[]' } } };
  cache.config = { ...cache.config, metadata: { ...cache.config.metadata, resourceVersion: '21' }, status: { nodes: [] } };
  t.same(await publish(), ['merge /api/v1/namespaces/tenant/pods/app', 'apply /apis/podnetwork.opdev.io/v1alpha1/namespaces/tenant/podnetworkconfigs/fleet/status'], 'a newer version that says otherwise is corrected');
});

t.test('a write that failed is made again at the next pass, the cache unchanged', async (t) => {
  const { publish, down } = publisherOverCache();
  down.now = true;
  t.equal((await publish()).length, 2, 'both tried, both failed');
  down.now = false;
  t.same(await publish(), ['merge /api/v1/namespaces/tenant/pods/app', 'apply /apis/podnetwork.opdev.io/v1alpha1/namespaces/tenant/podnetworkconfigs/fleet/status'], 'nothing of a failed write is taken for written');
});

t.test("a config's Degraded Event is posted by the node whose write changed the message, not by every node", async (t) => {
  const problems: Problem[] = [];
  const a = publisherOverCache({ problems });
  const b = publisherOverCache({ node: 'node-b', cache: a.cache, problems });
  /** The API server merges a node's status entries with the others' (server-side apply), and the watch brings it. */
  let version = 20;
  const delivered = (from: typeof a) => {
    const status = from.lastStatus() as { nodes: { name: string }[] };
    const others = ((a.cache.config.status?.['nodes'] ?? []) as { name: string }[]).filter((n) => !status.nodes.some((m) => m.name === n.name));
    a.cache.config = { ...a.cache.config, metadata: { ...a.cache.config.metadata, resourceVersion: String(++version) }, status: { ...status, nodes: [...others, ...status.nodes] } };
  };
  await a.publish();
  delivered(a);
  await b.publish();
  delivered(b);
  problems.push({ document: 'PodNetworkConfig tenant/fleet', field: 'spec.attachments[0].network', reason: 'no Network red' });
  t.ok((await a.publish()).includes('post /api/v1/namespaces/tenant/events'), 'node-a writes the new problem and tells it');
  delivered(a);
  t.same(await b.publish(), [], 'node-b finds the status saying it already: no write, and no second Event');
  t.same(await a.publish(), [], 'nor node-a again');
});
