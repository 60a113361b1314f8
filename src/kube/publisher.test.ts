import t, { type Test } from 'tap';
import { silentLogger } from '../log.ts';
import { emptyApplied } from '../model/state.ts';
import { networkStatusAnnotation } from '../model/annotation.ts';
import type { AttachmentRecord, Network, PodNetworkConfig, PodNetworkConfigStatus } from '../protocol/validate.ts';
import { desiredFor, type Problem } from '../model/desired.ts';
import { documentName, type SandboxIdentity } from '../model/identity.ts';
import { networksAnnotation, standardNetworkStatusAnnotation, parseNetworksAnnotation } from '../model/annotation.ts';
import type { ApiMetrics } from '../metrics.ts';
import { unrecordedGraceMs, unrecordedReason, type SandboxFacts } from '../status/status.ts';
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
  wanted: { configs: ['PodNetworkConfig tenant/fleet'], attachments: [], vrfs: [], tuning: [], routes: [], rules: [], sysctls: [], macs: [], problems: [] },
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

// ---------------------------------------------------------------------------------------------
// What a cluster user sees: a fake API server that keeps what each node wrote (the pods'
// annotations, the objects' status, the Events) and an informer cache the test moves on by hand
// (deliver: the watch brings the writes made so far).
// ---------------------------------------------------------------------------------------------

const group = 'podnetwork.opdev.io/v1alpha1';
const blue: Network = { apiVersion: group, kind: 'Network', metadata: { name: 'blue' }, spec: { type: 'bridge', namespaceSelector: {} } };
/** Selects the pods labelled app=cnf and gives each net1 on blue. */
const fleet: PodNetworkConfig = {
  apiVersion: group,
  kind: 'PodNetworkConfig',
  metadata: { name: 'fleet', namespace: 'tenant' },
  spec: { podSelector: { matchLabels: { app: 'cnf' } }, attachments: [{ network: 'blue', interface: 'net1' }] },
};
const fleetName = 'PodNetworkConfig tenant/fleet';
const podPath = (name: string) => `/api/v1/namespaces/tenant/pods/${name}`;
const fleetStatus = `/apis/${group}/namespaces/tenant/podnetworkconfigs/fleet/status`;
const blueStatus = `/apis/${group}/networks/blue/status`;
const eventsPath = '/api/v1/namespaces/tenant/events';
const primary = { name: 'k8s-pod-network', interface: 'eth0', ips: ['10.0.0.5'], mac: '0a:58:0a:00:00:05', default: true };
const net1 = { name: 'blue', interface: 'net1', ips: ['198.18.5.2'] };
const bridgeDown = 'the bridge pn-blue cannot be made: operation not permitted';

/** One sandbox as a pass left it: what the documents want for it (desiredFor), what the pass applied, the problems it met. */
function sandbox(pod: string, opts: { configs?: PodNetworkConfig[]; labels?: Record<string, string>; attached?: boolean; problems?: Problem[]; lastError?: string } = {}): SandboxFacts {
  const identity: SandboxIdentity = { namespace: 'tenant', name: pod, labels: opts.labels ?? { app: 'cnf' }, namespaceLabels: { 'kubernetes.io/metadata.name': 'tenant' } };
  const wanted = desiredFor(identity, new Map([['blue', blue]]), opts.configs ?? []);
  const prevResult = { cniVersion: '1.0.0', interfaces: [{ name: 'eth0', mac: '0a:58:0a:00:00:05', sandbox: '/run/netns/x' }], ips: [{ address: '10.0.0.5/24', interface: 0 }] };
  return {
    record: { containerId: `c-${pod}`, ifname: 'eth0', network: 'k8s-pod-network', netns: `/run/netns/${pod}`, cniVersion: '1.0.0', createdAt: '2026-11-24T00:00:00.000Z', pod: { namespace: 'tenant', name: pod, uid: `uid-${pod}` }, prevResult },
    namespace: 'tenant',
    name: pod,
    wanted,
    applied: { ...emptyApplied(`c-${pod}`, `/run/netns/${pod}`), attachments: opts.attached ? [{ kind: 'bridge', interface: 'net1', network: 'blue', addresses: ['198.18.5.2/24'] }] : [] },
    problems: [...wanted.problems, ...(opts.problems ?? [])],
    ...(opts.lastError ? { lastError: opts.lastError } : {}),
  };
}

/** A problem of fleet's attachment, as the pass meets it. */
const attachProblem = (reason = bridgeDown): Problem => ({ document: fleetName, field: 'spec.attachments[0]', reason });

interface Sent {
  node: string;
  verb: 'merge' | 'apply' | 'post';
  path: string;
  body: Record<string, unknown>;
  fieldManager?: string;
  ok: boolean;
}

interface PostedEvent {
  metadata: { name: string; namespace: string };
  involvedObject: { kind: string; apiVersion: string; name: string; namespace: string; uid?: string };
  reason: string;
  message: string;
  type: string;
  source: { component: string; host: string };
  reportingInstance: string;
}

/** What an Event says, for comparing: on what, which, and the words. */
const told = (e: PostedEvent) => `${e.involvedObject.kind} ${e.involvedObject.name}: ${e.type} ${e.reason}: ${e.message}`;
const eventsOf = (sent: readonly Sent[]) => sent.filter((s) => s.verb === 'post').map((s) => told(s.body as unknown as PostedEvent)).sort();
const writesOf = (sent: readonly Sent[]) => sent.filter((s) => s.verb !== 'post').map((s) => `${s.verb} ${s.path}`);

function fakeCluster(t: Test) {
  let version = 100;
  const next = () => String(++version);
  const pods = new Map<string, PodObject>();
  /** The Networks and PodNetworkConfigs as the API server holds them, by documentName. */
  const objects = new Map<string, ApiObject>();
  const documents = new Map<string, Network | PodNetworkConfig>();
  /** What the reconciler's judge finds wrong with the documents. */
  const problems: Problem[] = [];
  const clock = { now: Date.parse('2026-11-24T10:00:00.000Z') };
  /** The writes the API server took that the watch has not brought yet. */
  const undelivered: Sent[] = [];
  const events: PostedEvent[] = [];

  const cluster = {
    clock,
    problems,
    events,
    pod: (name: string) => pods.get(`tenant/${name}`),
    object: (doc: Network | PodNetworkConfig) => objects.get(documentName(doc)),
    addPod(name: string, opts: { labels?: Record<string, string>; annotations?: Record<string, string>; phase?: string; hostNetwork?: boolean; node?: string } = {}) {
      pods.set(`tenant/${name}`, {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name, namespace: 'tenant', uid: `uid-${name}`, resourceVersion: next(), labels: opts.labels ?? { app: 'cnf' }, ...(opts.annotations ? { annotations: opts.annotations } : {}) },
        spec: { nodeName: opts.node ?? 'node-a', ...(opts.hostNetwork ? { hostNetwork: true } : {}) },
        status: { phase: opts.phase ?? 'Running' },
      });
    },
    /** Someone (a user, the kubelet) changes a pod: the watch brings it at once. */
    editPod(name: string, edit: (pod: PodObject) => void) {
      const pod = structuredClone(pods.get(`tenant/${name}`)!);
      edit(pod);
      pod.metadata.resourceVersion = next();
      pods.set(`tenant/${name}`, pod);
    },
    add(doc: Network | PodNetworkConfig, status?: Record<string, unknown>) {
      documents.set(documentName(doc), doc);
      const metadata = { ...doc.metadata, uid: `uid-${doc.metadata.name}`, generation: 3, resourceVersion: next() };
      objects.set(documentName(doc), { apiVersion: group, kind: doc.kind, metadata, ...(status ? { status } : {}) });
    },
    /** The object back in the cache exactly as it was (a relist, say). */
    putBack(object: ApiObject, doc: Network | PodNetworkConfig) {
      documents.set(documentName(doc), doc);
      objects.set(documentName(doc), object);
    },
    remove(doc: Network | PodNetworkConfig) {
      documents.delete(documentName(doc));
      objects.delete(documentName(doc));
    },
    /** The watch brings every write the API server took so far, as the API server merged it. */
    deliver() {
      for (const sent of undelivered.splice(0)) {
        if (sent.verb === 'merge') {
          const name = sent.path.split('/').at(-1)!;
          const patched = (sent.body as { metadata: { annotations: Record<string, string | null> } }).metadata.annotations;
          cluster.editPod(name, (pod) => {
            const annotations = { ...pod.metadata.annotations };
            for (const [key, value] of Object.entries(patched)) {
              if (value === null) delete annotations[key];
              else annotations[key] = value;
            }
            pod.metadata.annotations = annotations;
          });
        } else if (sent.verb === 'apply') {
          // Server-side apply: the shared fields as the manager forces them, its node entry beside the others' (a list keyed by name).
          const key = [...objects].find(([, o]) => sent.path.includes(`/${o.kind === 'Network' ? 'networks' : 'podnetworkconfigs'}/${o.metadata.name}/`))?.[0];
          if (key === undefined) continue;
          const object = objects.get(key)!;
          const status = (sent.body as { status: { nodes: { name: string }[] } }).status;
          const before = (object.status ?? {}) as { nodes?: { name: string }[] };
          const nodes = [...(before.nodes ?? []).filter((n) => n.name !== sent.node), ...status.nodes].sort((a, b) => a.name.localeCompare(b.name));
          objects.set(key, { ...object, metadata: { ...object.metadata, resourceVersion: next() }, status: { ...before, ...status, nodes } });
        }
      }
    },
    /** A node's daemon: its sandboxes, its records, its publisher, and what it sends. */
    node(name = 'node-a', options: { standardNetworkStatus?: boolean } = {}) {
      const node = {
        /** The sandboxes the last pass left (the reconciler's facts). */
        sandboxes: [] as SandboxFacts[],
        /** Records of sandboxes besides those of `sandboxes` (a pass that could not look at them). */
        records: [] as AttachmentRecord[],
        /** Set: the API server refuses the writes it matches (503). */
        failing: undefined as ((sent: Sent) => boolean) | undefined,
        written: new Map<string, number>(),
        failed: new Map<string, number>(),
        publish: async (): Promise<Sent[]> => {
          sent.length = 0;
          void publisher.publish();
          await publisher.publish.idle();
          return [...sent];
        },
        /** The daemon restarted: nothing remembered. */
        restart: async () => {
          await publisher.close();
          publisher = make();
        },
      };
      const sent: Sent[] = [];
      const send = async (verb: Sent['verb'], path: string, body: Record<string, unknown>, fieldManager?: string) => {
        const request: Sent = { node: name, verb, path, body: structuredClone(body), ...(fieldManager ? { fieldManager } : {}), ok: true };
        request.ok = !node.failing?.(request);
        sent.push(request);
        if (!request.ok) throw new Error('503 the API server is unavailable');
        if (verb === 'post') events.push(request.body as unknown as PostedEvent);
        else undelivered.push(request);
        return {};
      };
      const api = {
        merge: (path: string, body: Record<string, unknown>) => send('merge', path, body),
        apply: (path: string, body: Record<string, unknown>, fieldManager: string) => send('apply', path, body, fieldManager),
        post: (path: string, body: Record<string, unknown>) => send('post', path, body),
      } as unknown as KubeApi;
      const mine = () => [...pods.values()].filter((p) => p.spec?.nodeName === name);
      const source = {
        nodeName: name,
        synced: true,
        pods: mine,
        pod: (namespace: string, pod: string) => mine().find((p) => p.metadata.namespace === namespace && p.metadata.name === pod),
        podIdentity: (pod: PodObject): SandboxIdentity => {
          const annotation = pod.metadata.annotations?.[networksAnnotation];
          return {
            namespace: pod.metadata.namespace,
            name: pod.metadata.name,
            labels: pod.metadata.labels ?? {},
            namespaceLabels: { 'kubernetes.io/metadata.name': pod.metadata.namespace },
            ...(annotation !== undefined ? { annotation: parseNetworksAnnotation(annotation) } : {}),
          };
        },
        objects: (kind: string) => [...objects.values()].filter((o) => o.kind === kind),
        documents: () => {
          const docs = [...documents.values()];
          return {
            networks: new Map(docs.filter((d): d is Network => d.kind === 'Network').map((d) => [d.metadata.name, d])),
            configs: docs.filter((d): d is PodNetworkConfig => d.kind === 'PodNetworkConfig'),
            problems: [],
          };
        },
      } as unknown as KubeSource;
      const count = (map: Map<string, number>) => (resource: string) => void map.set(resource, (map.get(resource) ?? 0) + 1);
      const metrics: ApiMetrics = { apiWritten: count(node.written), apiWriteFailed: count(node.failed), watchEventReceived: () => undefined };
      const make = () => {
        const made = new StatusPublisher({
          api,
          source,
          reconciler: { facts: () => node.sandboxes, judge: () => problems },
          records: { list: () => [...node.sandboxes.map((s) => s.record), ...node.records] },
          log: silentLogger,
          metrics,
          clock: () => clock.now,
          ...options,
        });
        t.teardown(() => made.close());
        return made;
      };
      let publisher = make();
      return node;
    },
  };
  return cluster;
}

t.test("a pod's network-status: written once, by a merge patch of that one key, saying what the pod has", async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.add(fleet);
  c.addPod('app', { annotations: { 'example.com/owner': 'team-a' } });
  const a = c.node();
  a.sandboxes = [sandbox('app', { configs: [fleet], attached: true })];

  const first = await a.publish();
  const merges = first.filter((s) => s.verb === 'merge');
  t.same(merges.map((s) => s.path), [podPath('app')], 'one merge patch, of the pod');
  const value = JSON.stringify([primary, net1]);
  t.strictSame(merges[0]?.body, { metadata: { annotations: { [networkStatusAnnotation]: value } } }, 'the patch names network-status alone: the pod\'s other annotations are left as they are');
  t.strictSame(JSON.parse(value), [primary, net1], 'the primary interface, marked default, then net1 on blue with its address');

  t.same(await a.publish(), [], 'the next pass, the cache not caught up yet: nothing sent');
  c.deliver();
  t.equal(c.pod('app')?.metadata.annotations?.[networkStatusAnnotation], value, 'the pod shows it');
  t.equal(c.pod('app')?.metadata.annotations?.['example.com/owner'], 'team-a', "and kept the user's annotation");
  t.same(await a.publish(), [], 'the cache shows the same value: nothing sent');
  await a.restart();
  t.same(await a.publish(), [], 'a restarted daemon, remembering nothing, finds the same value on the pod: nothing sent, no Event told again');

  // The pod's attachment goes (its label changes, the config no longer selects it).
  c.editPod('app', (pod) => void (pod.metadata.labels = { app: 'web' }));
  a.sandboxes = [sandbox('app', { configs: [fleet], labels: { app: 'web' } })];
  const after = await a.publish();
  t.strictSame(
    after.filter((s) => s.verb === 'merge').map((s) => s.body),
    [{ metadata: { annotations: { [networkStatusAnnotation]: JSON.stringify([primary]) } } }],
    'what changed is written: the primary interface alone',
  );
  c.deliver();
  t.same(await a.publish(), [], 'and not again');
});

t.test('with --standard-network-status the same patch writes k8s.v1.cni.cncf.io/network-status too: the interfaces the pod has, in the standard fields alone', async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.add(fleet);
  c.addPod('app');
  const a = c.node('node-a', { standardNetworkStatus: true });
  const late = { ...sandbox('app', { configs: [fleet], attached: true }), awaitedAtStart: new Set(['blue net1']) };
  late.record = { ...late.record, startedWithoutNetwork: true };
  a.sandboxes = [late];
  const [merge] = (await a.publish()).filter((s) => s.verb === 'merge');
  const annotations = (merge?.body as { metadata: { annotations: Record<string, string> } }).metadata.annotations;
  t.strictSame(Object.keys(annotations), [networkStatusAnnotation, standardNetworkStatusAnnotation], 'both, in one patch');
  t.strictSame(JSON.parse(annotations[standardNetworkStatusAnnotation]!), [primary, net1], "podnet's madeAfterStart left out");
  t.equal(JSON.parse(annotations[networkStatusAnnotation]!)[1].madeAfterStart, true, "podnet's own keeps it");
  c.deliver();
  t.same(await a.publish(), [], 'both shown: nothing sent');

  // Someone removes the standard one: written again, podnet's unchanged.
  c.editPod('app', (pod) => void delete pod.metadata.annotations![standardNetworkStatusAnnotation]);
  const again = (await a.publish()).filter((s) => s.verb === 'merge');
  t.equal(again.length, 1, 'the standard one missing: written again');

  // An attachment that cannot be made is no interface of the pod's in the standard annotation.
  c.deliver();
  a.sandboxes = [sandbox('app', { configs: [fleet] , problems: [{ document: 'Network blue', field: 'spec', reason: 'bridge is gone' }] })];
  const failing = (await a.publish()).filter((s) => s.verb === 'merge');
  const told = (failing[0]?.body as { metadata: { annotations: Record<string, string> } }).metadata.annotations;
  t.ok(JSON.parse(told[networkStatusAnnotation]!).some((e: { problem?: string }) => e.problem !== undefined), "podnet's tells the problem");
  t.strictSame(JSON.parse(told[standardNetworkStatusAnnotation]!), [primary], 'the standard one lists what the pod has');

  const plain = fakeCluster(t);
  plain.add(blue);
  plain.add(fleet);
  plain.addPod('app');
  const b = plain.node();
  b.sandboxes = [sandbox('app', { configs: [fleet], attached: true })];
  const [only] = (await b.publish()).filter((s) => s.verb === 'merge');
  t.strictSame(Object.keys((only?.body as { metadata: { annotations: object } }).metadata.annotations), [networkStatusAnnotation], 'without the flag: podnet\'s alone');
});

t.test('Events: Attached, Detached and AttachFailed told once each, on the pod and on the config that asked', async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.add(fleet);
  c.addPod('app');
  const a = c.node();

  // The attachment under way: no Event (a Warning for it would cry wolf on every busy node).
  a.sandboxes = [sandbox('app', { configs: [fleet] })];
  t.same(eventsOf(await a.publish()), [], 'net1 not attached yet: nothing told');
  c.deliver();

  a.sandboxes = [sandbox('app', { configs: [fleet], attached: true })];
  const attached = (await a.publish()).filter((s) => s.verb === 'post');
  t.same(attached.map((s) => s.path), [eventsPath, eventsPath], "two Events, in the pod's namespace");
  t.same(eventsOf(attached), [
    'Pod app: Normal Attached: attached net1 to Network blue with 198.18.5.2 (asked by PodNetworkConfig tenant/fleet)',
    'PodNetworkConfig fleet: Normal Attached: pod app: attached net1 to Network blue with 198.18.5.2',
  ]);
  const onPod = attached.map((s) => s.body as unknown as PostedEvent).find((e) => e.involvedObject.kind === 'Pod')!;
  t.strictSame(onPod.involvedObject, { kind: 'Pod', apiVersion: 'v1', name: 'app', namespace: 'tenant', uid: 'uid-app' }, 'the Event names the pod by its uid');
  t.same({ source: onPod.source, reportingInstance: onPod.reportingInstance }, { source: { component: 'podnet', host: 'node-a' }, reportingInstance: 'node-a' }, 'and the node that tells it');
  const onConfig = attached.map((s) => s.body as unknown as PostedEvent).find((e) => e.involvedObject.kind === 'PodNetworkConfig')!;
  t.strictSame(onConfig.involvedObject, { kind: 'PodNetworkConfig', apiVersion: group, name: 'fleet', namespace: 'tenant', uid: 'uid-fleet' });
  t.not(onPod.metadata.name, onConfig.metadata.name, 'each Event has a name of its own');
  t.same(eventsOf(await a.publish()), [], 'the next round, nothing new: nothing told');
  c.deliver();
  t.same(eventsOf(await a.publish()), [], 'nor once the cache caught up');

  a.sandboxes = [sandbox('app', { configs: [fleet], attached: false, problems: [attachProblem()] })];
  t.same(eventsOf(await a.publish()), [
    `Pod app: Normal Detached: detached net1 from Network blue`,
    `Pod app: Warning AttachFailed: net1 (Network blue): ${bridgeDown}`,
    `PodNetworkConfig fleet: Normal Detached: pod app: detached net1 from Network blue`,
    `PodNetworkConfig fleet: Warning AttachFailed: pod app: net1 (Network blue): ${bridgeDown}`,
    `PodNetworkConfig fleet: Warning Degraded: pod app: spec.attachments[0]: ${bridgeDown}`,
  ], "net1 lost and failing: Detached and AttachFailed, each on the pod and the config; and the config's Degraded message, changed by this node's write");
  t.same(eventsOf(await a.publish()), [], 'the same failure the next round: not told again');
  c.deliver();
  t.same(eventsOf(await a.publish()), [], 'nor after the cache caught up');

  a.sandboxes = [sandbox('app', { configs: [fleet], attached: false, problems: [attachProblem('no address left in 198.18.5.0/24')] })];
  t.same(eventsOf(await a.publish()), [
    'Pod app: Warning AttachFailed: net1 (Network blue): no address left in 198.18.5.0/24',
    'PodNetworkConfig fleet: Warning AttachFailed: pod app: net1 (Network blue): no address left in 198.18.5.0/24',
    'PodNetworkConfig fleet: Warning Degraded: pod app: spec.attachments[0]: no address left in 198.18.5.0/24',
  ], 'a different failure is told');
});

t.test('Events: a Detached whose config is gone is told on the pod alone', async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.add(fleet);
  c.addPod('app');
  const a = c.node();
  a.sandboxes = [sandbox('app', { configs: [fleet], attached: true })];
  await a.publish();
  c.deliver();
  c.remove(fleet);
  a.sandboxes = [sandbox('app')];
  t.same(eventsOf(await a.publish()), ['Pod app: Normal Detached: detached net1 from Network blue']);
});

t.test("a config's status: this node's entry, by server-side apply as podnet/<node>", async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.add(fleet);
  /** Selects no pod of this node. */
  const idle: PodNetworkConfig = { ...fleet, metadata: { name: 'idle', namespace: 'tenant' }, spec: { ...fleet.spec, podSelector: { matchLabels: { app: 'none' } } } };
  c.add(idle);
  c.addPod('app');
  c.addPod('db');
  const a = c.node();
  a.sandboxes = [sandbox('app', { configs: [fleet, idle], attached: true }), sandbox('db', { configs: [fleet, idle], problems: [attachProblem()] })];

  const sent = await a.publish();
  const applies = sent.filter((s) => s.verb === 'apply' && s.path.includes('podnetworkconfigs'));
  t.same(applies.map((s) => s.path), [fleetStatus], 'fleet\'s status subresource alone: idle selects no pod here and had nothing of this node');
  t.equal(applies[0]?.fieldManager, 'podnet/node-a', 'as the field manager podnet/<node>');
  const at = new Date(c.clock.now).toISOString();
  const reason = `spec.attachments[0]: ${bridgeDown}`;
  t.strictSame(applies[0]?.body, {
    apiVersion: group,
    kind: 'PodNetworkConfig',
    metadata: { name: 'fleet', namespace: 'tenant' },
    status: {
      observedGeneration: 3,
      ready: '1/2',
      conditions: [
        { type: 'Ready', status: 'False', reason: 'NotApplied', message: '1 of 2 selected pods lack part of the config', lastTransitionTime: at, observedGeneration: 3 },
        { type: 'Degraded', status: 'True', reason: 'ApplyFailed', message: `pod db: ${reason}`, lastTransitionTime: at, observedGeneration: 3 },
      ],
      nodes: [{ name: 'node-a', selected: 2, ready: 1, failingPods: [{ name: 'db', reason }] }],
    },
  }, 'two selected here, one ready, db failing with why; the conditions on the injected clock');
  c.deliver();
  t.same(writesOf(await a.publish()).filter((w) => w.includes('podnetworkconfigs')), [], 'once shown, not written again');
  t.equal(c.object(idle)?.status, undefined, 'idle\'s status untouched');

  // db is fixed an hour later: Ready, with the time it became so.
  c.clock.now += 3_600_000;
  a.sandboxes = [sandbox('app', { configs: [fleet, idle], attached: true }), sandbox('db', { configs: [fleet, idle], attached: true })];
  await a.publish();
  c.deliver();
  const status = c.object(fleet)?.status as PodNetworkConfigStatus;
  t.same(status.nodes, [{ name: 'node-a', selected: 2, ready: 2 }]);
  t.same(status.ready, '2/2');
  t.match(status.conditions, [{ type: 'Ready', status: 'True', reason: 'Applied', lastTransitionTime: new Date(c.clock.now).toISOString() }, { type: 'Degraded', status: 'False', reason: 'AsExpected', message: '' }]);
});

t.test('a node with nothing to say of a config writes nothing to it; one that had an entry takes it out', async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.add(fleet, { ready: '1/1', nodes: [{ name: 'node-b', selected: 1, ready: 1 }], conditions: [] });
  c.addPod('web', { labels: { app: 'web' } });
  const a = c.node();
  a.sandboxes = [sandbox('web', { labels: { app: 'web' }, configs: [fleet] })];
  t.same(writesOf(await a.publish()).filter((w) => w.includes('podnetworkconfigs')), [], "fleet selects no pod here, node-a had no entry, no spec problem: nothing written, though node-b's entry is there");

  // node-a had an entry (its pods went since): it takes it out.
  c.add(fleet, { ready: '2/2', nodes: [{ name: 'node-a', selected: 1, ready: 1 }, { name: 'node-b', selected: 1, ready: 1 }], conditions: [] });
  const sent = await a.publish();
  const apply = sent.find((s) => s.path === fleetStatus);
  t.match(apply?.body, { status: { ready: '1/1', nodes: [] } }, "its entry, empty: the API server drops it; the count is node-b's alone");
  c.deliver();
  t.same((c.object(fleet)?.status as PodNetworkConfigStatus).nodes, [{ name: 'node-b', selected: 1, ready: 1 }]);
  t.same(writesOf(await a.publish()), [], 'and then nothing');
});

t.test('a spec problem: Degraded with the field and reason, and one Warning Event, by the node whose write changed the message', async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.add(fleet);
  const a = c.node('node-a');
  const b = c.node('node-b');
  c.problems.push({ document: fleetName, field: 'spec.attachments[1].network', reason: 'no Network red' });

  const sent = await a.publish();
  t.same(writesOf(sent), [`apply ${fleetStatus}`], 'no pod of node-a is selected, yet the spec problem is told');
  t.match(sent.find((s) => s.verb === 'apply')?.body, { status: {
    ready: '0/0',
    conditions: [
      { type: 'Ready', status: 'False', reason: 'NotApplied', message: 'the spec cannot be applied as it is (see Degraded)' },
      { type: 'Degraded', status: 'True', reason: 'InvalidSpec', message: 'spec.attachments[1].network: no Network red' },
    ],
    nodes: [],
  } });
  t.same(eventsOf(sent), ['PodNetworkConfig fleet: Warning Degraded: spec.attachments[1].network: no Network red'], 'one Warning Event on the config');
  t.same(await a.publish(), [], 'the next round: no write, no second Event');
  c.deliver();
  t.same(await a.publish(), [], 'nor once shown');
  t.same(await b.publish(), [], 'node-b finds the status saying it: no write, no Event');

  // A second problem: node-b's round comes first this time.
  c.problems.push({ document: fleetName, field: 'spec.podSelector', reason: 'invalid label value' });
  const byB = await b.publish();
  t.same(eventsOf(byB), ['PodNetworkConfig fleet: Warning Degraded: spec.attachments[1].network: no Network red; spec.podSelector: invalid label value'], 'node-b changed the message: node-b tells it');
  c.deliver();
  t.same(await a.publish(), [], 'node-a sees it said: nothing');

  // Fixed: Degraded goes False, and nobody tells an Event of that.
  c.problems.length = 0;
  const fixed = await a.publish();
  t.same(writesOf(fixed), [`apply ${fleetStatus}`], 'the node that sees it fixed first writes it');
  t.match(fixed.find((s) => s.verb === 'apply')?.body, { status: { conditions: [{ type: 'Ready', status: 'True' }, { type: 'Degraded', status: 'False', reason: 'AsExpected', message: '' }] } });
  t.same(eventsOf(fixed), [], 'no Event');
  c.deliver();
  t.same(await b.publish(), [], 'node-b: nothing');
});

t.test("a Network's status: this node's entry; a Network that is gone is neither written nor remembered", async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.add(fleet);
  c.addPod('app');
  c.addPod('db');
  const a = c.node();
  a.sandboxes = [sandbox('app', { configs: [fleet], attached: true }), sandbox('db', { configs: [fleet], problems: [attachProblem()] })];

  const sent = (await a.publish()).filter((s) => s.path === blueStatus);
  t.equal(sent.length, 1, "blue's status subresource, once");
  t.equal(sent[0]?.fieldManager, 'podnet/node-a');
  const at = new Date(c.clock.now).toISOString();
  t.strictSame(sent[0]?.body, {
    apiVersion: group,
    kind: 'Network',
    metadata: { name: 'blue' },
    status: {
      ready: '0/1',
      conditions: [{ type: 'Degraded', status: 'True', reason: 'NodesNotReady', message: `node-a: tenant/db net1: ${bridgeDown}`, lastTransitionTime: at }],
      nodes: [{ name: 'node-a', ready: false, attachedPods: 1, message: `tenant/db net1: ${bridgeDown}` }],
    },
  }, 'one pod attached, one that cannot be: not ready, saying which and why; cluster-scoped, no namespace');
  t.same(await a.publish(), [], 'not written again before the cache shows it');
  c.deliver();
  t.same(await a.publish(), [], 'nor after');

  a.sandboxes = [sandbox('app', { configs: [fleet], attached: true }), sandbox('db', { configs: [fleet], attached: true })];
  const ready = (await a.publish()).filter((s) => s.path === blueStatus);
  t.match(ready[0]?.body, { status: { ready: '1/1', conditions: [{ type: 'Degraded', status: 'False', reason: 'AsExpected' }], nodes: [{ name: 'node-a', ready: true, attachedPods: 2 }] } });
  const written = c.object(blue)!;
  t.same(ready.length, 1);

  // blue is deleted before the watch brings the write.
  c.remove(blue);
  t.same((await a.publish()).filter((s) => s.path === blueStatus), [], 'a Network that is gone: nothing written to it');
  // ... and comes back (a relist) at the very version the write was made over: what was written of the one that went is not taken for written.
  c.putBack(written, blue);
  t.same((await a.publish()).filter((s) => s.path === blueStatus).length, 1, 'its entry is written again');
});

t.test('a pod with no record: nothing during the grace, then its network-status says why and one NotRecorded Event', async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.add(fleet);
  c.addPod('legacy');
  const a = c.node();

  t.same(await a.publish(), [], 'first seen running without a record: nothing');
  c.clock.now += unrecordedGraceMs - 1;
  t.same(await a.publish(), [], 'nothing while the grace lasts: its ADD may be on its way');
  c.clock.now += 1;
  const sent = await a.publish();
  const status = JSON.stringify([{ name: fleetName, problem: unrecordedReason.notRecorded }]);
  t.strictSame(sent.filter((s) => s.verb === 'merge').map((s) => [s.path, s.body]), [[podPath('legacy'), { metadata: { annotations: { [networkStatusAnnotation]: status } } }]], 'its network-status names who asked, and why podnet cannot');
  t.same(eventsOf(sent).filter((e) => e.includes('NotRecorded')), [`Pod legacy: Warning NotRecorded: ${fleetName}: ${unrecordedReason.notRecorded}`], 'one NotRecorded Warning on the pod');
  t.match(sent.find((s) => s.path === fleetStatus)?.body, { status: { ready: '0/1', nodes: [{ name: 'node-a', selected: 1, ready: 0, failingPods: [{ name: 'legacy', reason: unrecordedReason.notRecorded }] }] } }, 'and fleet counts it, failing');

  t.same(await a.publish(), [], 'the next round: nothing again');
  c.deliver();
  c.clock.now += 600_000;
  t.same(await a.publish(), [], 'nor later, once shown');

  // The pod no longer asks: its label changed.
  c.editPod('legacy', (pod) => void (pod.metadata.labels = { app: 'web' }));
  const back = await a.publish();
  t.strictSame(back.filter((s) => s.verb === 'merge').map((s) => [s.path, s.body]), [[podPath('legacy'), { metadata: { annotations: { [networkStatusAnnotation]: null } } }]], 'the network-status written is taken back: a merge patch with null');
  t.match(back.find((s) => s.path === fleetStatus)?.body, { status: { ready: '0/0', nodes: [] } }, "and fleet's entry of it");
  t.same(eventsOf(back), [], 'no Event of that');
  c.deliver();
  t.equal(c.pod('legacy')?.metadata.annotations?.[networkStatusAnnotation], undefined, 'the pod has no network-status');
  t.same(await a.publish(), [], 'and then nothing');
});

t.test("with --standard-network-status, a pod with no record has no interface of podnet's to list: another writer's standard annotation is left alone", async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.add(fleet);
  const foreign = JSON.stringify([{ name: 'other', interface: 'eth0', ips: ['10.0.0.9'], default: true }]);
  c.addPod('legacy', { annotations: { [standardNetworkStatusAnnotation]: foreign } });
  const a = c.node('node-a', { standardNetworkStatus: true });
  await a.publish();
  c.clock.now += unrecordedGraceMs;
  const told = (await a.publish()).filter((s) => s.verb === 'merge');
  t.strictSame(Object.keys((told[0]?.body as { metadata: { annotations: object } }).metadata.annotations), [networkStatusAnnotation], "podnet's alone: the standard one is someone else's");
  c.deliver();
  t.same((await a.publish()).filter((s) => s.verb === 'merge'), [], 'shown: nothing more, however the other writer keeps its own');
  t.equal(c.pod('legacy')?.metadata.annotations?.[standardNetworkStatusAnnotation], foreign);

  // The pod no longer asks: podnet's own is taken back, the other writer's stays.
  c.editPod('legacy', (pod) => void (pod.metadata.labels = { app: 'web' }));
  const back = (await a.publish()).filter((s) => s.verb === 'merge');
  t.strictSame(back.map((s) => s.body), [{ metadata: { annotations: { [networkStatusAnnotation]: null } } }]);
});

t.test("a pod with no record that asks by its annotation, in the node's network namespace: its reason", async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.addPod('agent', { labels: {}, hostNetwork: true, annotations: { [networksAnnotation]: 'blue' } });
  const a = c.node();
  await a.publish();
  c.clock.now += unrecordedGraceMs;
  const sent = await a.publish();
  t.strictSame(sent.map((s) => s.verb === 'merge' ? s.body : told(s.body as unknown as PostedEvent)), [
    { metadata: { annotations: { [networkStatusAnnotation]: JSON.stringify([{ name: 'Pod tenant/agent', problem: unrecordedReason.hostNetwork }]) } } },
    `Pod agent: Warning NotRecorded: Pod tenant/agent: ${unrecordedReason.hostNetwork}`,
  ]);
});

t.test('a pod with no record is counted from when it is first seen running, and one that asks nothing is never told', async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.add(fleet);
  c.addPod('starting', { phase: 'Pending' });
  c.addPod('plain', { labels: { app: 'web' } });
  const a = c.node();
  await a.publish();
  c.clock.now += 10 * unrecordedGraceMs;
  t.same(await a.publish(), [], 'a pending pod is not told, nor a running one that asks for nothing');
  c.editPod('starting', (pod) => void (pod.status = { phase: 'Running' }));
  t.same(await a.publish(), [], 'now running: its grace starts');
  c.clock.now += unrecordedGraceMs - 1;
  t.same(await a.publish(), [], 'not over yet');
  // Its record arrives: it is a pod podnet serves after all.
  a.records = [sandbox('starting').record];
  c.clock.now += 1;
  t.same(await a.publish(), [], 'a pod with a record is not told, whatever its time');
});

t.test("a pod with no record: its network-status is taken back only while it is still the one podnet wrote", async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.add(fleet);
  c.addPod('legacy');
  const a = c.node();
  await a.publish();
  c.clock.now += unrecordedGraceMs;
  await a.publish();
  c.deliver();
  c.editPod('legacy', (pod) => {
    pod.metadata.labels = { app: 'web' };
    pod.metadata.annotations = { ...pod.metadata.annotations, [networkStatusAnnotation]: '[{"name":"other"}]' };
  });
  t.same((await a.publish()).filter((s) => s.verb === 'merge'), [], 'another value is there: left alone');
});

t.test('a pod with no record that gets one: its own network-status replaces the one that said why', async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.add(fleet);
  c.addPod('legacy');
  const a = c.node();
  await a.publish();
  c.clock.now += unrecordedGraceMs;
  await a.publish();
  c.deliver();
  a.sandboxes = [sandbox('legacy', { configs: [fleet], attached: true })];
  const merges = (await a.publish()).filter((s) => s.verb === 'merge');
  t.strictSame(merges.map((s) => s.body), [{ metadata: { annotations: { [networkStatusAnnotation]: JSON.stringify([primary, net1]) } } }], 'one write, its own: not a null first');
});

t.test('a pod with no record that stops asking before the watch brought the write: its network-status is taken back all the same', async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.add(fleet);
  c.addPod('legacy');
  const a = c.node();
  await a.publish();
  c.clock.now += unrecordedGraceMs;
  t.equal((await a.publish()).filter((s) => s.verb === 'merge').length, 1, 'written');
  // The config's change reaches the cache before the pod's watch brings the write.
  const narrowed: PodNetworkConfig = { ...fleet, spec: { ...fleet.spec, podSelector: { matchLabels: { app: 'db' } } } };
  c.add(narrowed);
  t.same((await a.publish()).filter((s) => s.verb === 'merge').map((s) => s.body), [{ metadata: { annotations: { [networkStatusAnnotation]: null } } }], 'taken back');
  c.deliver();
  t.same((await a.publish()).filter((s) => s.verb === 'merge'), [], 'and nothing more of the pod once the watch shows the write and its taking back');
  t.equal(c.pod('legacy')?.metadata.annotations?.[networkStatusAnnotation], undefined);
});

t.test('a failed write: tried again at the next publish, counted as failed, then as written', async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.add(fleet);
  c.addPod('app');
  const a = c.node();
  a.sandboxes = [sandbox('app', { configs: [fleet], attached: true })];
  const everything = [`merge ${podPath('app')}`, `apply ${fleetStatus}`, `apply ${blueStatus}`].sort();

  a.failing = () => true;
  const down = await a.publish();
  t.same(writesOf(down).sort(), everything, 'every write tried');
  t.same(eventsOf(down), [], "no Event: the pod's Events wait for its network-status");
  t.same(Object.fromEntries(a.failed), { pods: 1, podnetworkconfigs: 1, networks: 1 }, 'each failure counted by resource');
  t.same(a.written.size, 0, 'nothing counted as written');

  a.failing = undefined;
  const up = await a.publish();
  t.same(writesOf(up).sort(), everything, 'the next publish, the cache unchanged: each tried again');
  t.same(eventsOf(up).length, 2, 'and the Attached Events told now (on the pod and on the config)');
  t.same(Object.fromEntries(a.written), { pods: 1, podnetworkconfigs: 1, networks: 1, events: 2 }, 'each success counted by resource');
  t.same(Object.fromEntries(a.failed), { pods: 1, podnetworkconfigs: 1, networks: 1 }, 'the failures not counted again');
  t.same(await a.publish(), [], 'then nothing');
  t.same(Object.fromEntries(a.written), { pods: 1, podnetworkconfigs: 1, networks: 1, events: 2 }, 'and nothing counted');
});

t.test('a failed write: only it is tried again', async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.add(fleet);
  c.addPod('app');
  const a = c.node();
  a.sandboxes = [sandbox('app', { configs: [fleet], attached: true })];
  a.failing = (s) => s.path === fleetStatus;
  await a.publish();
  t.same(Object.fromEntries(a.failed), { podnetworkconfigs: 1 });
  t.same(Object.fromEntries(a.written), { pods: 1, networks: 1, events: 2 });
  const again = await a.publish();
  t.same(writesOf(again), [`apply ${fleetStatus}`], "the config's status, tried again; what was written is not");
  t.same(eventsOf(again), [], 'no Event told twice');
  t.same(Object.fromEntries(a.failed), { podnetworkconfigs: 2 }, 'failing still: counted again');
  a.failing = undefined;
  t.same(writesOf(await a.publish()), [`apply ${fleetStatus}`]);
  t.same(Object.fromEntries(a.written), { pods: 1, networks: 1, events: 2, podnetworkconfigs: 1 });
});

t.test('a failed write of an Event is counted as failed', async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.add(fleet);
  c.addPod('app');
  const a = c.node();
  a.sandboxes = [sandbox('app', { configs: [fleet], attached: true })];
  a.failing = (s) => s.verb === 'post';
  await a.publish();
  t.same(Object.fromEntries(a.failed), { events: 2 });
});

t.test("a pod with no record whose network-status could not be taken back: tried again at the next publish", async (t) => {
  const c = fakeCluster(t);
  c.add(blue);
  c.add(fleet);
  c.addPod('legacy');
  const a = c.node();
  await a.publish();
  c.clock.now += unrecordedGraceMs;
  await a.publish();
  c.deliver();
  c.editPod('legacy', (pod) => void (pod.metadata.labels = { app: 'web' }));
  a.failing = (s) => s.verb === 'merge';
  t.same(writesOf(await a.publish()).filter((w) => w.startsWith('merge')), [`merge ${podPath('legacy')}`], 'tried, and failed');
  t.same(Object.fromEntries(a.failed), { pods: 1 });
  a.failing = undefined;
  const again = await a.publish();
  t.same(again.filter((s) => s.verb === 'merge').map((s) => s.body), [{ metadata: { annotations: { [networkStatusAnnotation]: null } } }], 'tried again');
});
