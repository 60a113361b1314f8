import t from 'tap';
import { configProblems } from '../model/document-problems.ts';
import { desiredFor, type Problem } from '../model/desired.ts';
import { identityOf } from '../model/identity.ts';
import { emptyApplied, type AppliedState, type ObservedLink } from '../model/state.ts';
import { standardNetworkStatus, type AnnotationRequest } from '../model/annotation.ts';
import type { AttachmentRecord, Condition, Network, NetworkStatus, PodNetworkConfig, PodNetworkConfigStatus } from '../protocol/validate.ts';
import {
  condition,
  configNodeEntry,
  configPodProblem,
  refusalMessage,
  configStatus,
  networkNodeEntry,
  networkStatus,
  networkStatusOf,
  podEventsBetween,
  sameStatus,
  toldEntries,
  unrecordedGraceMs,
  unrecordedNetworkStatus,
  unrecordedPod,
  unrecordedPods,
  unrecordedReason,
  unmetRequired,
  type SandboxFacts,
} from './status.ts';
import { requiredAttachments } from '../model/identity.ts';

const namespace = 'tenant-a';
const node = 'node-a';

const network = (name: string, namespaces: string[] = [namespace], spec: Partial<Network['spec']> = {}): Network => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'Network',
  metadata: { name },
  spec: { type: 'bridge', namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: namespaces }] }, ...spec },
});
const config = (name: string, spec: Omit<PodNetworkConfig['spec'], 'podSelector'> & { podSelector?: PodNetworkConfig['spec']['podSelector'] }, ns = namespace): PodNetworkConfig => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'PodNetworkConfig',
  metadata: { name, namespace: ns },
  spec: { podSelector: {}, ...spec },
});
const networks = new Map([
  ['blue', network('blue')],
  ['green', network('green')],
  ['red', network('red', ['tenant-b'])],
]);

/** The record of a kubelet's pod whose primary plugin gave eth0 10.0.0.5/24. */
const record = (pod = 'cnf-0', prevResult: object = primaryResult): AttachmentRecord => ({
  containerId: `c-${pod}`,
  ifname: 'eth0',
  network: 'k8s-pod-network',
  netns: '/var/run/netns/x',
  cniVersion: '1.0.0',
  createdAt: '2026-01-01T00:00:00Z',
  pod: { namespace, name: pod },
  prevResult,
});
const primaryResult = {
  cniVersion: '1.0.0',
  interfaces: [{ name: 'eth0', mac: '0a:58:0a:00:00:05', sandbox: '/var/run/netns/x' }],
  ips: [{ address: '10.0.0.5/24', interface: 0 }],
};

const applied = (pod: string, ...attachments: { interface: string; network: string; addresses: string[] }[]): AppliedState => ({
  ...emptyApplied(`c-${pod}`, '/var/run/netns/x'),
  attachments: attachments.map((a) => ({ kind: 'bridge' as const, ...a })),
});
const link = (name: string, mtu: number, mac?: string, addresses: string[] = []): ObservedLink => ({ name, mtu, up: true, addresses, ...(mac ? { mac } : {}) });
const links = (...list: ObservedLink[]): Map<string, ObservedLink> => new Map(list.map((l) => [l.name, l]));

/** One sandbox as a pass left it: what the documents want (desiredFor), plus what the pass applied and the problems it met. */
const facts = (opts: {
  pod?: string;
  configs?: PodNetworkConfig[];
  annotation?: AnnotationRequest;
  applied?: AppliedState;
  problems?: Problem[];
  lastError?: string;
  links?: Map<string, ObservedLink>;
  prevResult?: object;
  startedWithoutNetwork?: boolean;
  awaitedAtStart?: string[];
}): SandboxFacts => {
  const r = { ...record(opts.pod, opts.prevResult), ...(opts.startedWithoutNetwork ? { startedWithoutNetwork: true } : {}) };
  const identity = identityOf(r);
  const wanted = desiredFor({ ...identity, ...(opts.annotation ? { annotation: opts.annotation } : {}) }, networks, opts.configs ?? []);
  return {
    record: r,
    namespace: identity.namespace,
    name: identity.name,
    wanted,
    applied: opts.applied,
    problems: [...wanted.problems, ...(opts.problems ?? [])],
    ...(opts.lastError ? { lastError: opts.lastError } : {}),
    links: opts.links,
    ...(opts.awaitedAtStart ? { awaitedAtStart: new Set(opts.awaitedAtStart) } : {}),
  };
};

const fast = config('fast', { attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'eth0', mtu: 1400 }] });
const slow = config('slow', { attachments: [{ network: 'green', interface: 'net2' }] });
const fastName = 'PodNetworkConfig tenant-a/fast';

t.test('network-status: the primary interface comes first, marked default, its addresses without prefix length', async (t) => {
  const entries = networkStatusOf(facts({}));
  t.same(entries, [{ name: 'k8s-pod-network', interface: 'eth0', ips: ['10.0.0.5'], mac: '0a:58:0a:00:00:05', default: true }]);
});

t.test('network-status: the primary interface shows only its own addresses, and the MAC and MTU the pod has now', async (t) => {
  const prevResult = {
    cniVersion: '1.0.0',
    interfaces: [{ name: 'veth1234', mac: 'aa:aa:aa:aa:aa:aa' }, { name: 'eth0', mac: '0a:58:0a:00:00:05', sandbox: '/var/run/netns/x' }],
    ips: [{ address: '10.0.0.5/24', interface: 1 }, { address: '169.254.1.1/32', interface: 0 }, { address: 'fd00::5/64', interface: 1 }],
  };
  const [primary] = networkStatusOf(facts({ prevResult, links: links(link('eth0', 1450, '02:00:00:00:00:99')) }));
  t.same(primary, { name: 'k8s-pod-network', interface: 'eth0', ips: ['10.0.0.5', 'fd00::5'], mac: '02:00:00:00:00:99', mtu: 1450, default: true });
});

t.test('network-status: an attachment podnet made lists its Network, interface, addresses, MAC and MTU', async (t) => {
  const entries = networkStatusOf(
    facts({
      configs: [fast],
      applied: applied('cnf-0', { interface: 'net1', network: 'blue', addresses: ['198.18.5.2/24', '2001:db8::2/64'] }),
      links: links(link('net1', 9000, '02:00:00:00:00:01')),
    }),
  );
  t.equal(entries.length, 2);
  t.same(entries[1], { name: 'blue', interface: 'net1', ips: ['198.18.5.2', '2001:db8::2'], mac: '02:00:00:00:00:01', mtu: 9000 });
  t.equal(entries[1]?.problem, undefined, 'an attachment made has no problem');
});

t.test('network-status: an attachment asked for but not made is listed with why', async (t) => {
  const missing = (f: SandboxFacts) => networkStatusOf(f).find((e) => e.interface === 'net1');

  const planner = facts({
    configs: [fast],
    problems: [{ document: 'pod interface net1', field: 'interface', reason: 'net1 already exists in the pod and podnet did not make it' }],
    lastError: 'the pass failed',
  });
  t.same(missing(planner), { name: 'blue', interface: 'net1', problem: 'net1 already exists in the pod and podnet did not make it' }, 'the planner\'s problem about the pod interface');

  const own = facts({ configs: [fast], problems: [{ document: fastName, field: 'spec.attachments[0]', reason: 'network blue: range 198.18.5.0/24 has no free address' }] });
  t.same(missing(own), { name: 'blue', interface: 'net1', problem: 'network blue: range 198.18.5.0/24 has no free address' }, 'a problem of its own document and field');

  const failed = facts({ configs: [fast], lastError: 'ip link add failed: RTNETLINK answers: File exists' });
  t.same(missing(failed), { name: 'blue', interface: 'net1', problem: 'ip link add failed: RTNETLINK answers: File exists' }, 'else the pass\'s error');

  t.same(missing(facts({ configs: [fast] })), { name: 'blue', interface: 'net1', problem: 'not attached yet' }, 'else not attached yet');
});

t.test('network-status: a problem of another attachment of the same config does not explain this one', async (t) => {
  const two = config('two', { attachments: [{ network: 'blue', interface: 'net1' }, { network: 'green', interface: 'net2' }] });
  const entries = networkStatusOf(facts({ configs: [two], problems: [{ document: 'PodNetworkConfig tenant-a/two', field: 'spec.attachments[1]', reason: 'no free address' }] }));
  t.same(entries.slice(1), [
    { name: 'blue', interface: 'net1', problem: 'not attached yet' },
    { name: 'green', interface: 'net2', problem: 'no free address' },
  ]);
});

t.test('network-status: an unreadable annotation is an entry of its own, without interface; the other attachments stay listed', async (t) => {
  const entries = networkStatusOf(
    facts({
      configs: [fast],
      annotation: { problem: 'podnetwork.opdev.io/networks is not valid JSON: Unexpected token' },
      applied: applied('cnf-0', { interface: 'net1', network: 'blue', addresses: ['198.18.5.2/24'] }),
    }),
  );
  t.same(entries.map((e) => e.name), ['k8s-pod-network', 'blue', 'podnetwork.opdev.io/networks']);
  const annotation = entries[2]!;
  t.same(annotation, {
    name: 'podnetwork.opdev.io/networks',
    problem: 'metadata.annotations["podnetwork.opdev.io/networks"]: podnetwork.opdev.io/networks is not valid JSON: Unexpected token',
  });
  t.notOk('interface' in annotation, 'no interface: it is the annotation that failed');
  t.same(entries[1], { name: 'blue', interface: 'net1', ips: ['198.18.5.2'] });
});

t.test('network-status: an annotation naming an unknown Network is told on the annotation\'s entry', async (t) => {
  const entries = networkStatusOf(facts({ annotation: { selections: [{ name: 'nope', interface: 'net3' }] } }));
  t.same(entries.slice(1), [{ name: 'podnetwork.opdev.io/networks', problem: 'metadata.annotations["podnetwork.opdev.io/networks"][0].name: no Network named nope' }]);
});

t.test("config pod problem: none when the pod has what this config asks, whatever another config's state", async (t) => {
  const f = facts({
    configs: [fast, slow],
    applied: applied('cnf-0', { interface: 'net1', network: 'blue', addresses: ['2001:0DB8:0:0::5/64'] }, { interface: 'net2', network: 'green', addresses: ['198.18.6.2/24'] }),
    links: links(link('eth0', 1400, '0a:58:0a:00:00:05', ['10.0.0.5/24']), link('net1', 9000, '02:00:00:00:00:01'), link('net2', 1500, '02:00:00:00:00:02')),
  });
  t.equal(configPodProblem(fast, f), undefined);
  t.equal(configPodProblem(slow, f), undefined);
  t.equal(configPodProblem(fast, facts({ configs: [fast] })), undefined, 'an attachment under way is no failure');
});

t.test("config pod problem: a missing attachment's names its field, each reason once", async (t) => {
  t.equal(
    configPodProblem(fast, facts({ configs: [fast], problems: [{ document: fastName, field: 'spec.attachments[0]', reason: 'network blue: range 198.18.5.0/24 has no free address' }] })),
    'spec.attachments[0]: network blue: range 198.18.5.0/24 has no free address',
  );
  const planner = configPodProblem(fast, facts({ configs: [fast], problems: [{ document: 'pod interface net1', field: 'interface', reason: 'net1 already exists in the pod and podnet did not make it' }] }));
  t.equal(planner, 'spec.attachments[0]: net1 already exists in the pod and podnet did not make it');

  const unknown = config('lost', { attachments: [{ network: 'nope', interface: 'net1' }, { network: 'red', interface: 'net2' }] });
  t.equal(
    configPodProblem(unknown, facts({ configs: [unknown] })),
    'spec.attachments[0].network: no Network named nope; spec.attachments[1].network: Network red does not admit namespace tenant-a',
  );
});

t.test("config pod problem: the pass's error only when nothing else explains", async (t) => {
  t.equal(configPodProblem(fast, facts({ configs: [fast], problems: [{ document: fastName, field: 'spec.attachments[0]', reason: 'no free address' }], lastError: 'the pass failed' })), 'spec.attachments[0]: no free address');
  t.equal(configPodProblem(fast, facts({ configs: [fast], lastError: 'the pass failed' })), 'spec.attachments[0]: the pass failed', 'the missing attachment is told, with the error as why');
  const applyFailed = configPodProblem(fast, facts({ configs: [fast], applied: applied('cnf-0', { interface: 'net1', network: 'blue', addresses: ['198.18.5.2/24'] }), lastError: 'sysctl write failed' }));
  t.equal(applyFailed, 'sysctl write failed', 'everything attached, yet the pass failed');
});

t.test('config node entry: counts, and the first five failing pods by name, whatever the pod count', async (t) => {
  const ok = (pod: string) => facts({ pod, configs: [fast], applied: applied(pod, { interface: 'net1', network: 'blue', addresses: ['198.18.5.2/24'] }) });
  const failing = (pod: string) => facts({ pod, configs: [fast], problems: [{ document: fastName, field: 'spec.attachments[0]', reason: 'no free address' }] });
  t.equal(configNodeEntry(fast, [], node), undefined, 'nothing selected here: no entry');
  t.same(configNodeEntry(fast, [ok('cnf-0'), ok('cnf-1')], node), { name: node, selected: 2, ready: 2 });
  const many = [...Array.from({ length: 300 }, (_, i) => ok(`ok-${i}`)), ...Array.from({ length: 200 }, (_, i) => failing(`cnf-${String(i).padStart(3, '0')}`))];
  const entry = configNodeEntry(fast, many, node)!;
  t.same({ ...entry, failingPods: entry.failingPods?.map((p) => p.name) }, { name: node, selected: 500, ready: 300, failingPods: ['cnf-000', 'cnf-001', 'cnf-002', 'cnf-003', 'cnf-004'] });
  t.same(entry.failingPods?.[0], { name: 'cnf-000', reason: 'spec.attachments[0]: no free address' });
  t.ok(JSON.stringify(entry).length < 1024, `500 pods: ${JSON.stringify(entry).length} bytes`);
  const long = facts({ pod: 'cnf-0', configs: [fast], problems: [{ document: fastName, field: 'spec.attachments[0]', reason: 'x'.repeat(5000) }] });
  t.equal(configNodeEntry(fast, [long], node)!.failingPods![0]!.reason.length, 1024, 'a reason is cut to what the schema allows');
});

t.test('an attachment at the pod\'s primary interface is refused, naming the interface field', async (t) => {
  const primary = config('primary', { attachments: [{ network: 'blue', interface: 'eth0' }] });
  const wanted = desiredFor(identityOf(record()), networks, [primary]);
  t.same(wanted.attachments, []);
  t.equal(wanted.problems.length, 1);
  t.has(wanted.problems[0], { document: 'PodNetworkConfig tenant-a/primary', field: 'spec.attachments[0].interface' });
  t.match(wanted.problems[0]?.reason, /^eth0 is the pod's primary interface/);

  const spec = configProblems(primary, networks, { 'kubernetes.io/metadata.name': namespace });
  t.same(spec.map((p) => p.field), ['spec.attachments[0].interface'], 'the config alone is refused: a kubelet names the primary eth0');

  t.match(configPodProblem(primary, facts({ configs: [primary] })), /^spec\.attachments\[0\]\.interface: eth0 is the pod's primary interface/);
});

t.test('network node entry: nothing when no pod here wants or has the Network', async (t) => {
  const sandboxes = [facts({ configs: [fast], applied: applied('cnf-0', { interface: 'net1', network: 'blue', addresses: ['198.18.5.2/24'] }) })];
  t.equal(networkNodeEntry(networks.get('green')!, sandboxes, node), undefined);
  t.equal(networkNodeEntry(networks.get('blue')!, [], node), undefined);
});

t.test('network node entry: counts the pods attached; ready when each pod that asks has it', async (t) => {
  const blue = networks.get('blue')!;
  const a = facts({ pod: 'cnf-0', configs: [fast], applied: applied('cnf-0', { interface: 'net1', network: 'blue', addresses: ['198.18.5.2/24'] }) });
  const b = facts({ pod: 'cnf-1', configs: [fast], applied: applied('cnf-1', { interface: 'net1', network: 'blue', addresses: ['198.18.5.3/24'] }) });
  t.same(networkNodeEntry(blue, [a, b], node), { name: 'node-a', ready: true, attachedPods: 2 });

  const missing = facts({ pod: 'cnf-2', configs: [fast], problems: [{ document: 'Network blue', field: 'spec.bridge', reason: 'the host has no bridge br-lab' }] });
  t.same(networkNodeEntry(blue, [a, missing, b], node), { name: 'node-a', ready: false, attachedPods: 2, message: 'tenant-a/cnf-2 net1: the host has no bridge br-lab' });

  const leaving = facts({ pod: 'cnf-3', applied: applied('cnf-3', { interface: 'net1', network: 'blue', addresses: ['198.18.5.4/24'] }) });
  t.same(networkNodeEntry(blue, [leaving], node), { name: 'node-a', ready: true, attachedPods: 1 }, 'a pod that has it but no longer asks still counts');

  const notYet = facts({ pod: 'cnf-4', configs: [fast] });
  t.same(networkNodeEntry(blue, [notYet], node), { name: 'node-a', ready: false, attachedPods: 0, message: 'tenant-a/cnf-4 net1: not attached yet' });
  t.same(networkNodeEntry(blue, [a, missing, notYet], node)?.message, 'tenant-a/cnf-2 net1: the host has no bridge br-lab', 'one pod is named: the first missing it');
});

t.test('condition: keeps its transition time while its status holds, takes a new one when it flips', async (t) => {
  const before: Condition[] = [{ type: 'Ready', status: 'True', reason: 'Applied', message: '1 selected pods', lastTransitionTime: '2026-01-01T00:00:00Z' }];
  const held = condition('Ready', true, 'Applied', '2 selected pods', before, '2026-02-02T00:00:00Z', 3);
  t.same(held, { type: 'Ready', status: 'True', reason: 'Applied', message: '2 selected pods', lastTransitionTime: '2026-01-01T00:00:00Z', observedGeneration: 3 });
  const flipped = condition('Ready', false, 'NotApplied', 'x', before, '2026-02-02T00:00:00Z');
  t.equal(flipped.lastTransitionTime, '2026-02-02T00:00:00Z');
  t.equal(flipped.status, 'False');
  t.notOk('observedGeneration' in flipped);
  t.equal(condition('Degraded', false, 'AsExpected', '', before, '2026-02-02T00:00:00Z').lastTransitionTime, '2026-02-02T00:00:00Z', 'another type\'s time is not kept');
  t.equal(condition('Ready', true, 'Applied', '', undefined, '2026-02-02T00:00:00Z').lastTransitionTime, '2026-02-02T00:00:00Z', 'no previous: now');
});

const now = '2026-03-03T00:00:00Z';
const byType = (status: { conditions?: Condition[] }, type: Condition['type']) => status.conditions?.find((c) => c.type === type);

t.test("config status: ready sums every node's counts, but writes only this node's entry", async (t) => {
  const mine = { name: node, selected: 2, ready: 1, failingPods: [{ name: 'cnf-1', reason: 'spec.attachments[0]: no free address' }] };
  const current: PodNetworkConfigStatus = {
    nodes: [
      { name: 'node-b', selected: 2, ready: 1, failingPods: [{ name: 'cnf-3', reason: 'spec.attachments[0]: the host has no bridge br-lab' }] },
      { name: node, selected: 9, ready: 0 },
    ],
  };
  const status = configStatus(7, mine, current, [], node, now);
  t.equal(status.ready, '2/4', "this node's old entry no longer counts");
  t.equal(status.observedGeneration, 7);
  t.same(status.nodes, [mine], "this node's entry alone");
  t.has(byType(status, 'Ready'), { status: 'False', reason: 'NotApplied', message: '2 of 4 selected pods lack part of the config', observedGeneration: 7 });
  const degraded = byType(status, 'Degraded')!;
  t.has(degraded, { status: 'True', reason: 'ApplyFailed', observedGeneration: 7 });
  t.equal(degraded.message, 'pod cnf-1: spec.attachments[0]: no free address; pod cnf-3: spec.attachments[0]: the host has no bridge br-lab', 'in the order of the nodes');
  // node-b, computing from the same entries, words the shared fields the same: neither writes again.
  const served = { ...status, nodes: [mine, current.nodes![0]!] };
  const fromB = configStatus(7, current.nodes![0], served, [], 'node-b', now);
  t.ok(sameStatus(fromB, served, 'node-b'), 'whichever node computes the shared fields, they are the same');
  const unnamed = configStatus(7, { name: node, selected: 9, ready: 3 }, undefined, [], node, now);
  t.has(byType(unnamed, 'Degraded'), { status: 'True', reason: 'ApplyFailed' }, 'failing pods count even when none is named');
});

t.test("config status: a node that selects no pod any more drops its entry", async (t) => {
  const current: PodNetworkConfigStatus = { nodes: [{ name: node, selected: 1, ready: 0, failingPods: [{ name: 'cnf-0', reason: 'old' }] }, { name: 'node-b', selected: 1, ready: 1 }] };
  const status = configStatus(1, undefined, current, [], node, now);
  t.equal(status.ready, '1/1');
  t.same(status.nodes, []);
  t.has(byType(status, 'Degraded'), { status: 'False', reason: 'AsExpected', message: '' });
  t.has(byType(status, 'Ready'), { status: 'True', reason: 'Applied', message: '1 selected pods have what the config asks' });
});

t.test('config status: problems of the document itself make it Degraded with InvalidSpec', async (t) => {
  const status = configStatus(2, { name: node, selected: 1, ready: 0, failingPods: [{ name: 'cnf-0', reason: 'x' }] }, undefined, ['spec.attachments[0].network: no Network named nope'], node, now);
  t.has(byType(status, 'Degraded'), { status: 'True', reason: 'InvalidSpec', message: 'spec.attachments[0].network: no Network named nope; pod cnf-0: x' });
  const noPods = configStatus(undefined, undefined, undefined, ['spec.attachments[0].network: no Network named nope'], node, now);
  t.equal(noPods.ready, '0/0');
  t.has(byType(noPods, 'Degraded'), { status: 'True', reason: 'InvalidSpec' });
  t.notOk('observedGeneration' in noPods, 'no generation given: none set');
});

t.test('network status: ready counts nodes; a node not ready makes it Degraded, NodesNotReady', async (t) => {
  const current: NetworkStatus = {
    nodes: [
      { name: 'node-b', ready: false, attachedPods: 1, message: 'tenant-a/cnf-2 net1: the host has no bridge br-lab' },
      { name: 'node-c', ready: true, attachedPods: 4 },
      { name: node, ready: false, attachedPods: 0, message: 'stale' },
    ],
  };
  const entry = { name: node, ready: true, attachedPods: 2 };
  const status = networkStatus(entry, current, [], node, now);
  t.equal(status.ready, '2/3');
  t.same(status.nodes, [entry], 'only this node\'s entry is written');
  t.has(byType(status, 'Degraded'), { status: 'True', reason: 'NodesNotReady', message: 'node-b: tenant-a/cnf-2 net1: the host has no bridge br-lab' });

  const fine = networkStatus(entry, { nodes: [{ name: 'node-c', ready: true, attachedPods: 4 }] }, [], node, now);
  t.equal(fine.ready, '2/2');
  t.has(byType(fine, 'Degraded'), { status: 'False', reason: 'AsExpected', message: '' });

  const gone = networkStatus(undefined, current, [], node, now);
  t.equal(gone.ready, '1/2', 'this node\'s old entry no longer counts');
  t.same(gone.nodes, []);
});

t.test('network status: spec problems make it Degraded with InvalidSpec, naming the field', async (t) => {
  const status = networkStatus({ name: node, ready: false, attachedPods: 0, message: 'm' }, undefined, ['spec.ipam.ranges[1]: network blue: ranges 198.18.0.0/16 and 198.18.5.0/24 overlap'], node, now);
  const degraded = byType(status, 'Degraded')!;
  t.equal(degraded.status, 'True');
  t.equal(degraded.reason, 'InvalidSpec');
  t.match(degraded.message, /^spec\.ipam\.ranges\[1\]: network blue: ranges 198\.18\.0\.0\/16 and 198\.18\.5\.0\/24 overlap; node-a: m$/);
});

t.test('same status: key order and transition times do not count', async (t) => {
  const mine = { name: node, selected: 1, ready: 1 };
  const current = configStatus(4, mine, undefined, [], node, '2026-01-01T00:00:00Z');
  // As the API server gives it back: keys in another order, an earlier transition time.
  const reorder = (v: unknown): unknown =>
    Array.isArray(v) ? v.map(reorder) : typeof v === 'object' && v !== null ? Object.fromEntries(Object.entries(v).reverse().map(([k, x]) => [k, reorder(x)])) : v;
  const served = reorder(current) as PodNetworkConfigStatus;
  t.not(JSON.stringify(served), JSON.stringify(current), 'the keys are in another order');
  const next = configStatus(4, mine, served, [], node, now);
  t.ok(sameStatus(next, served, node));
  const later = { ...next, conditions: next.conditions?.map((c) => ({ ...c, lastTransitionTime: '2027-01-01T00:00:00Z' })) };
  t.ok(sameStatus(later, served, node), 'a transition time alone is no change');
});

t.test("same status: other nodes' entries do not count, this node's do", async (t) => {
  const entry = { name: node, selected: 2, ready: 2 };
  const current: PodNetworkConfigStatus = { ready: '3/3', nodes: [entry, { name: 'node-b', selected: 1, ready: 1 }] };
  t.ok(sameStatus({ ready: '3/3', nodes: [entry] }, current, node), "another node's entry is not this node's to write");
  t.notOk(sameStatus({ ready: '3/3', nodes: [{ ...entry, ready: 1 }] }, current, node), "this node's entry changed");
  t.notOk(sameStatus({ ready: '2/3', nodes: [entry] }, current, node), 'a shared field changed');

  const network: NetworkStatus = { ready: '1/2', nodes: [{ name: node, ready: true, attachedPods: 1 }, { name: 'node-b', ready: false, attachedPods: 0 }] };
  t.ok(sameStatus({ ready: '1/2', nodes: [{ name: node, ready: true, attachedPods: 1 }] }, network, node));
  t.notOk(sameStatus({ ready: '1/2', nodes: [{ name: node, ready: true, attachedPods: 2 }] }, network, node));
  t.notOk(sameStatus({ ready: '1/2', nodes: [] }, network, node), "dropping this node's entry is a change");
});

t.test('same status: nothing on the server is never the same', async (t) => {
  t.notOk(sameStatus({}, undefined, node));
  t.notOk(sameStatus({ ready: '0/0' }, undefined, node));
});

t.test('an attachment the annotation asked that failed is one entry, not a second one for the annotation', async (t) => {
  const field = 'metadata.annotations["podnetwork.opdev.io/networks"][0]';
  const f = facts({ annotation: { selections: [{ name: 'blue', interface: 'net1' }] }, problems: [{ document: 'Pod tenant-a/cnf-0', field, reason: 'network blue: range 198.18.5.0/24 has no free address' }] });
  t.same(networkStatusOf(f).slice(1), [{ name: 'blue', interface: 'net1', problem: 'network blue: range 198.18.5.0/24 has no free address' }]);
});

t.test('a config counts an interface as its own only when it is on the Network the config now asks', async (t) => {
  const fast = config('fast', { attachments: [{ network: 'green', interface: 'net1' }] });
  t.equal(configPodProblem(fast, facts({ configs: [fast], applied: applied('cnf-0', { interface: 'net1', network: 'blue', addresses: ['198.18.5.2/24'] }), lastError: 'net1 is being moved' })), 'spec.attachments[0]: net1 is being moved');
});

t.test('a config that tunes an interface the pod does not have says so for that pod', async (t) => {
  const fast = config('fast', { interfaces: [{ name: 'net5', mtu: 1400 }] });
  t.equal(configPodProblem(fast, facts({ configs: [fast], problems: [{ document: 'pod interface net5', field: 'interfaces', reason: 'the pod has no interface net5' }], links: links(link('eth0', 1500)) })), 'pod interface net5: the pod has no interface net5');
});

t.test('a config whose spec alone is wrong, selecting no pod, is not Ready and says why', async (t) => {
  const status = configStatus(1, undefined, undefined, ['spec.attachments[0].network: no Network named nosuch'], node, now);
  const ready = status.conditions!.find((c) => c.type === 'Ready')!;
  t.same([ready.status, ready.message], ['False', 'the spec cannot be applied as it is (see Degraded)']);
  t.equal(status.ready, '0/0');
});

t.test('the Degraded message tells a spec problem once, also when a pod entry repeats it', async (t) => {
  const spec = "spec.attachments[1].interface: eth0 is the pod's primary interface; attach under another name";
  const status = configStatus(1, { name: node, selected: 2, ready: 0, failingPods: [{ name: 'cnf-0', reason: `${spec}; spec.attachments[2]: no free address` }, { name: 'cnf-1', reason: spec }] }, undefined, [spec], node, now);
  const degraded = status.conditions!.find((c) => c.type === 'Degraded')!;
  t.equal(degraded.message, `${spec}; pod cnf-0: spec.attachments[2]: no free address`);
  t.equal(status.ready, '0/2', 'both pods still lack part of the config');
});

const pod = { namespace, name: 'cnf-0' };
const primary = { entry: { name: 'k8s-pod-network', interface: 'eth0', ips: ['10.0.0.5'], default: true } };

t.test('events: an attach asked by a config is told on the pod and on the config, with who asked', async (t) => {
  const after = toldEntries(facts({ configs: [fast], applied: applied('cnf-0', { interface: 'net1', network: 'blue', addresses: ['198.18.5.2/24'] }) }));
  t.same(podEventsBetween(pod, [primary], after), [
    { type: 'Normal', reason: 'Attached', message: `attached net1 to Network blue with 198.18.5.2 (asked by ${fastName})` },
    { config: fastName, type: 'Normal', reason: 'Attached', message: 'pod cnf-0: attached net1 to Network blue with 198.18.5.2' },
  ]);
  t.same(podEventsBetween(pod, after, after), [], 'nothing new, nothing told');
});

t.test('events: an attach the annotation asked is told on the pod alone', async (t) => {
  const after = toldEntries(facts({ annotation: { selections: [{ name: 'blue', interface: 'net1' }] }, applied: applied('cnf-0', { interface: 'net1', network: 'blue', addresses: ['198.18.5.2/24'] }) }));
  t.same(podEventsBetween(pod, [primary], after), [{ type: 'Normal', reason: 'Attached', message: 'attached net1 to Network blue with 198.18.5.2 (asked by the pod annotation)' }]);
});

t.test('events: a detach is told on the pod and on the config that had asked; after a restart (no `from`) on the pod', async (t) => {
  const before = toldEntries(facts({ configs: [fast], applied: applied('cnf-0', { interface: 'net1', network: 'blue', addresses: ['198.18.5.2/24'] }) }));
  const after = toldEntries(facts({}));
  t.same(podEventsBetween(pod, before, after), [
    { type: 'Normal', reason: 'Detached', message: 'detached net1 from Network blue' },
    { config: fastName, type: 'Normal', reason: 'Detached', message: 'pod cnf-0: detached net1 from Network blue' },
  ]);
  const read = before.map(({ entry }) => ({ entry }));
  t.same(podEventsBetween(pod, read, after), [{ type: 'Normal', reason: 'Detached', message: 'detached net1 from Network blue' }]);
});

t.test('events: a failure is told once, on the pod and its config; an unreadable annotation is InvalidAnnotation', async (t) => {
  const failing = toldEntries(facts({ configs: [fast], lastError: 'the host has no bridge pn-blue' }));
  const events = podEventsBetween(pod, [primary], failing);
  t.same(events, [
    { type: 'Warning', reason: 'AttachFailed', message: 'net1 (Network blue): the host has no bridge pn-blue' },
    { config: fastName, type: 'Warning', reason: 'AttachFailed', message: 'pod cnf-0: net1 (Network blue): the host has no bridge pn-blue' },
  ]);
  t.same(podEventsBetween(pod, failing, failing), [], 'the same failure next pass is not told again');
  const unreadable = toldEntries(facts({ annotation: { problem: 'not JSON' } }));
  t.same(podEventsBetween(pod, [primary], unreadable), [{ type: 'Warning', reason: 'InvalidAnnotation', message: 'metadata.annotations["podnetwork.opdev.io/networks"]: not JSON' }]);
});

t.test('an attachment under way is no failure: no Warning for it', async (t) => {
  const pending = { entry: { name: 'blue', interface: 'net1', problem: 'not attached yet' }, from: 'PodNetworkConfig ns/c' };
  t.same(podEventsBetween({ namespace: 'ns', name: 'p' }, [], [pending]), []);
});

t.test('a running pod that asks for something and that podnet has no record of is told, after a grace', async (t) => {
  const identity = { namespace, name: 'old-0', labels: { app: 'cnf' } };
  const selecting = config('cnf', { podSelector: { matchLabels: { app: 'cnf' } }, attachments: [{ network: 'blue', interface: 'net1' }] });
  const pod = { namespace, name: 'old-0', running: true, hostNetwork: false, unrecordedSince: 0 };
  const later = unrecordedGraceMs + 1;
  t.same(unrecordedPod(pod, identity, [selecting], false, later), { namespace, name: 'old-0', askedBy: ['PodNetworkConfig tenant-a/cnf'], reason: unrecordedReason.notRecorded });
  t.equal(unrecordedPod(pod, identity, [selecting], true, later), undefined, 'recorded: the passes tell what it lacks');
  t.equal(unrecordedPod(pod, identity, [selecting], false, unrecordedGraceMs - 1), undefined, 'its ADD may be on its way');
  t.equal(unrecordedPod({ ...pod, running: false }, identity, [selecting], false, later), undefined, 'not running');
  t.equal(unrecordedPod(pod, identity, [], false, later), undefined, 'nothing asked, nothing to tell');
  const annotated = unrecordedPod({ ...pod, hostNetwork: true }, { ...identity, labels: {}, annotation: { selections: [{ name: 'blue' }] } }, [selecting], false, later);
  t.same(annotated, { namespace, name: 'old-0', askedBy: ['Pod tenant-a/old-0'], reason: unrecordedReason.hostNetwork }, 'asked by its annotation; a hostNetwork pod is told why');
  t.same(unrecordedNetworkStatus(annotated!), [{ name: 'Pod tenant-a/old-0', problem: unrecordedReason.hostNetwork }]);

  const entry = configNodeEntry(selecting, [], node, [unrecordedPod(pod, identity, [selecting], false, later)!]);
  t.same(entry, { name: node, selected: 1, ready: 0, failingPods: [{ name: 'old-0', reason: unrecordedReason.notRecorded }] }, "counted failing in the config's status");
});

t.test("which of a node's pods lack a record is counted on the clock given: a pod is told once it was seen running without one for the grace, from when first seen", async (t) => {
  const selecting = config('cnf', { podSelector: { matchLabels: { app: 'cnf' } }, attachments: [{ network: 'blue', interface: 'net1' }] });
  const asked = (name: string, running = true) => ({ namespace, name, running, hostNetwork: false, identity: () => ({ namespace, name, labels: { app: 'cnf' } }) });
  let identities = 0;
  const counted = (name: string) => ({ ...asked(name), identity: () => (identities++, { namespace, name, labels: {} }) });
  const first = unrecordedPods([asked('old-0'), asked('rec-0'), asked('down-0', false)], new Set([`${namespace}/rec-0`]), [selecting], new Map(), 1_000);
  t.same(first.lacking, [], 'not yet: its ADD may be on its way');
  t.same([...first.since], [[`${namespace}/old-0`, 1_000]], 'first seen now; a recorded or stopped pod is not counted');
  const later = unrecordedPods([asked('old-0'), asked('new-0')], new Set(), [selecting], first.since, 1_000 + unrecordedGraceMs);
  t.same(later.lacking.map((p) => p.name), ['old-0'], 'the one seen a grace ago is told; the new one waits its own');
  t.same([...later.since], [[`${namespace}/old-0`, 1_000], [`${namespace}/new-0`, 1_000 + unrecordedGraceMs]]);
  const gone = unrecordedPods([counted('rec-0')], new Set([`${namespace}/rec-0`]), [selecting], later.since, 2_000 + unrecordedGraceMs);
  t.same([...gone.since], [], 'a pod recorded since, or gone, is forgotten');
  t.equal(identities, 0, 'who a recorded pod is is never asked');
});

t.test('network-status and events: what the pod asked at start and got after its containers started is marked, and told as a Warning; what it asked later is not', async (t) => {
  const both = config('fast', { attachments: [{ network: 'blue', interface: 'net1' }, { network: 'green', interface: 'net2' }] });
  const made = applied('cnf-0', { interface: 'net1', network: 'blue', addresses: ['198.18.5.2/24'] }, { interface: 'net2', network: 'green', addresses: ['198.18.6.2/24'] });
  const late = facts({ configs: [both], applied: made, startedWithoutNetwork: true, awaitedAtStart: ['blue net1'] });
  const entries = networkStatusOf(late);
  t.equal(entries.find((e) => e.interface === 'net1')?.madeAfterStart, true);
  t.equal(entries.find((e) => e.interface === 'net2')?.madeAfterStart, undefined, 'asked after the daemon first took the sandbox: a change at run time');
  t.same(podEventsBetween(pod, [primary], toldEntries(late)).filter((e) => e.config === undefined), [
    { type: 'Warning', reason: 'AttachedAfterStart', message: `attached net1 to Network blue with 198.18.5.2 after the pod's containers had started: podnet's daemon did not make it within the pod's ADD (asked by ${fastName})` },
    { type: 'Normal', reason: 'Attached', message: `attached net2 to Network green with 198.18.6.2 (asked by ${fastName})` },
  ]);
  const inTime = facts({ configs: [both], applied: made, awaitedAtStart: ['blue net1'] });
  t.notOk(networkStatusOf(inTime).some((e) => e.madeAfterStart), 'an ADD that waited for it: nothing marked');
  t.same(
    podEventsBetween(pod, toldEntries(inTime), toldEntries(late)).filter((e) => e.config === undefined),
    [{ type: 'Warning', reason: 'AttachedAfterStart', message: "net1 on Network blue was attached after the pod's containers had started: podnet's daemon did not make it within the pod's ADD" }],
    "told Attached before the plugin's mark came in: the Warning once the mark is known",
  );
  t.same(podEventsBetween(pod, toldEntries(late), toldEntries(late)), [], 'and once');
});

t.test('required attachments: each unmet one is named with its document and field and why; one attached is met', async (t) => {
  const annotation: AnnotationRequest = { selections: [{ name: 'red', interface: 'net1', required: true }, { name: 'blue', interface: 'net2', required: true }, { name: 'green', interface: 'net3' }] };
  const needs = config('needs', { attachments: [{ network: 'nowhere', required: true }] });
  const f = facts({ annotation, configs: [needs], applied: applied('cnf-0', { interface: 'net2', network: 'blue', addresses: ['198.18.5.2/24'] }) });
  const required = requiredAttachments({ ...identityOf(f.record), annotation }, [needs]);
  t.equal(required.length, 3, 'the annotation entries and the config attachment marked required, not the others');
  t.same(unmetRequired(f, required), [
    { document: 'Pod tenant-a/cnf-0', field: 'metadata.annotations["podnetwork.opdev.io/networks"][0]', network: 'red', interface: 'net1', reason: 'Network red does not admit namespace tenant-a', own: true },
    { document: 'PodNetworkConfig tenant-a/needs', field: 'spec.attachments[0]', network: 'nowhere', reason: 'no Network named nowhere', own: true },
  ]);
  const failing = facts({ annotation: { selections: [{ name: 'blue', interface: 'net2', required: true }] }, lastError: 'ip link add failed: File exists' });
  t.match(unmetRequired(failing, requiredAttachments({ ...identityOf(failing.record), annotation: { selections: [{ name: 'blue', interface: 'net2', required: true }] } }, [])), [{ interface: 'net2', reason: 'ip link add failed: File exists', own: false }], "the pass's error when nothing else tells: another part's, as it names no origin of this one");
  const ownStep = { ...failing, lastError: 'Pod tenant-a/cnf-0 metadata.annotations["podnetwork.opdev.io/networks"][0]: ip link add failed: File exists' };
  t.match(unmetRequired(ownStep, requiredAttachments({ ...identityOf(failing.record), annotation: { selections: [{ name: 'blue', interface: 'net2', required: true }] } }, [])), [{ own: true }], 'its own step failing, named by its origin');
});

t.test("config pod problem: a pass that failed only for another config's generation refused whole is not this config's failure", async (t) => {
  const refused = [{ document: 'PodNetworkConfig tenant-a/other', field: 'spec.routes[0]', reason: 'the pod has no interface eth9' }];
  const only = { ...facts({ configs: [fast] }), refusedByPass: refused, lastError: refusalMessage(refused) };
  t.equal(configPodProblem(fast, only), undefined, 'an attachment of this config under way is no failure either');
  const more = { ...only, lastError: 'the port security table is not whole' };
  t.equal(configPodProblem(fast, more), 'spec.attachments[0]: the port security table is not whole', 'another failure of the pass still is');
});

t.test("network-status: a wireguard interface's public key, podnet's own field, which the standard annotation leaves out", async (t) => {
  const publicKey = 'xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=';
  const applied: AppliedState = { ...emptyApplied('c1', '/run/netns/x'), attachments: [{ interface: 'wg0', network: 'wg', kind: 'wireguard', addresses: ['10.99.0.1/24'], wireguard: { publicKey, listenPort: 51820, peers: [] } }] };
  const entries = networkStatusOf(facts({ applied }));
  t.match(entries.find((e) => e.interface === 'wg0'), { name: 'wg', ips: ['10.99.0.1'], publicKey });
  t.notOk(JSON.parse(standardNetworkStatus(JSON.stringify(entries))!).some((e: { publicKey?: string }) => e.publicKey), 'not in k8s.v1.cni.cncf.io/network-status');
});
