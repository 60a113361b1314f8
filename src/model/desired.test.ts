import t from 'tap';
import type { Network, PodNetworkConfig, PodNetworkPermission } from '../protocol/validate.ts';
import { parseNetworksAnnotation } from './annotation.ts';
import { defaultLimits, desiredFor, type DesiredSandbox } from './desired.ts';
import { identityOf, podNameLabel, requiredAttachments } from './identity.ts';
import { desiredWhole, generationOf, newGenerationsRefused } from './whole-configs.ts';
import { causeProblems } from './step.ts';
import { documentProblems } from './document-problems.ts';
import { resolveSandbox } from './resolve.ts';
import { selects } from './selector.ts';

const network = (name: string, namespaces?: string[]): Network => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'Network',
  metadata: { name },
  spec: {
    type: 'bridge',
    ...(namespaces ? { namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: namespaces }] } } : {}),
  },
});
const config = (name: string, spec: PodNetworkConfig['spec'], namespace = 'tenant-a'): PodNetworkConfig => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'PodNetworkConfig',
  metadata: { name, namespace },
  spec,
});
const networks = new Map([['blue', network('blue', ['tenant-a'])], ['red', network('red', ['tenant-b'])], ['open', network('open')]]);
const pod = identityOf({
  containerId: 'c1', ifname: 'eth0', network: 'k8s', netns: '/run/netns/x', cniVersion: '1.0.0', createdAt: '2026-01-01T00:00:00Z',
  pod: { namespace: 'tenant-a', name: 'cnf-0' },
});
const all = { matchLabels: { [podNameLabel]: 'cnf-0' } };

t.test('identity: labels from the CNI identity; namespace default when the runtime gives none', async (t) => {
  t.same(pod.labels, { 'podnetwork.opdev.io/pod-name': 'cnf-0', 'podnetwork.opdev.io/pod-namespace': 'tenant-a' });
  const podman = identityOf({ containerId: 'c2', ifname: 'eth0', network: 'p', netns: '/run/netns/y', cniVersion: '1.0.0', createdAt: '2026-01-01T00:00:00Z', pod: { name: 'web' } });
  t.equal(podman.namespace, 'default');
});

t.test('selectors: matchLabels and every operator', async (t) => {
  const labels = { a: '1', b: '2' };
  t.ok(selects({}, labels), 'empty selects all');
  t.ok(selects({ matchLabels: { a: '1' } }, labels));
  t.notOk(selects({ matchLabels: { a: '2' } }, labels));
  t.ok(selects({ matchExpressions: [{ key: 'a', operator: 'In', values: ['0', '1'] }] }, labels));
  t.notOk(selects({ matchExpressions: [{ key: 'c', operator: 'In', values: ['1'] }] }, labels));
  t.ok(selects({ matchExpressions: [{ key: 'c', operator: 'NotIn', values: ['1'] }] }, labels));
  t.notOk(selects({ matchExpressions: [{ key: 'b', operator: 'NotIn', values: ['2'] }] }, labels));
  t.ok(selects({ matchExpressions: [{ key: 'a', operator: 'Exists' }, { key: 'z', operator: 'DoesNotExist' }] }, labels));
  t.notOk(selects({ matchExpressions: [{ key: 'a', operator: 'DoesNotExist' }] }, labels));
});

t.test('only configs of the pod\'s namespace that select it count', async (t) => {
  const d = desiredFor(pod, networks, [
    config('mine', { podSelector: all, attachments: [{ network: 'blue', interface: 'net1' }] }),
    config('other-pod', { podSelector: { matchLabels: { [podNameLabel]: 'cnf-1' } }, attachments: [{ network: 'blue', interface: 'net2' }] }),
    config('other-ns', { podSelector: all, attachments: [{ network: 'red', interface: 'net3' }] }, 'tenant-b'),
  ]);
  t.same(d.attachments.map((a) => a.interface), ['net1']);
  t.same(d.problems, []);
});

t.test('a Network that does not admit the namespace, or none at all, is refused with a reason', async (t) => {
  const d = desiredFor(pod, networks, [
    config('c', { podSelector: all, attachments: [{ network: 'red', interface: 'net1' }, { network: 'open', interface: 'net2' }, { network: 'nope', interface: 'net3' }] }),
  ]);
  t.same(d.attachments, []);
  t.same(d.problems.map((p) => `${p.document} ${p.field}: ${p.reason}`), [
    'PodNetworkConfig tenant-a/c spec.attachments[0].network: Network red does not admit namespace tenant-a',
    'PodNetworkConfig tenant-a/c spec.attachments[1].network: Network open does not admit namespace tenant-a',
    'PodNetworkConfig tenant-a/c spec.attachments[2].network: no Network named nope',
  ]);
});

t.test("a Network is served only on the nodes its nodeSelector matches; without the node's labels (standalone), everywhere", async (t) => {
  const edge: Network = { ...network('edge', ['tenant-a']), spec: { ...network('edge', ['tenant-a']).spec, nodeSelector: { matchLabels: { 'example.com/edge': 'true' } } } };
  const withEdge = new Map([...networks, ['edge', edge]]);
  const asks = [config('c', { podSelector: all, attachments: [{ network: 'edge', interface: 'net1' }, { network: 'blue', interface: 'net2' }] })];
  const elsewhere = desiredFor({ ...pod, nodeLabels: { 'kubernetes.io/hostname': 'n1' } }, withEdge, asks);
  t.same(elsewhere.attachments.map((a) => a.interface), ['net2'], 'a Network without a nodeSelector is served on every node');
  t.same(elsewhere.problems.map((p) => `${p.field}: ${p.reason}`), ["spec.attachments[0].network: Network edge is not served on this node: its spec.nodeSelector does not match the node's labels"]);
  const there = desiredFor({ ...pod, nodeLabels: { 'example.com/edge': 'true' } }, withEdge, asks);
  t.same(there.attachments.map((a) => a.interface), ['net1', 'net2']);
  t.same(desiredFor(pod, withEdge, asks).attachments.map((a) => a.interface), ['net1', 'net2'], 'standalone');
});

t.test("a pod's prepared claims are attachments as its annotation's entries are: named or given the next free name, refused where the Network refuses", async (t) => {
  const claimed = {
    ...pod,
    claims: [
      { document: 'ResourceClaim tenant-a/fast', attachments: [{ network: 'blue', field: 'spec.devices.requests[blue]', interface: 'net5' }, { network: 'open', field: 'spec.devices.requests[open]' }] },
      { document: 'ResourceClaim tenant-a/plain', attachments: [{ network: 'blue', field: 'spec.devices.requests[net]' }] },
    ],
  };
  const d = desiredFor(claimed, networks, [config('c', { podSelector: all, attachments: [{ network: 'blue', interface: 'net1' }] })]);
  t.strictSame(d.attachments.map((a) => `${a.interface} ${a.network.metadata.name} ${a.from} ${a.field}`), [
    'net5 blue ResourceClaim tenant-a/fast spec.devices.requests[blue]',
    'net1 blue PodNetworkConfig tenant-a/c spec.attachments[0]',
    'net2 blue ResourceClaim tenant-a/plain spec.devices.requests[net]',
  ]);
  t.strictSame(d.problems.map((p) => `${p.document} ${p.field}: ${p.reason}`), ['ResourceClaim tenant-a/fast spec.devices.requests[open].network: Network open does not admit namespace tenant-a']);
  t.strictSame(requiredAttachments(claimed, []).map((r) => `${r.document} ${r.network} ${r.interface ?? '-'}`), [
    'ResourceClaim tenant-a/fast blue net5',
    'ResourceClaim tenant-a/fast open -',
    'ResourceClaim tenant-a/plain blue -',
  ], 'every attachment of a claim is required: the pod does not start without it');
  const shared = desiredFor({ ...pod, claims: [{ document: 'ResourceClaim tenant-a/shared', attachments: [{ network: 'blue', field: 'spec.devices.requests[net]' }], refused: 'podnet prepared this claim for another pod' }] }, networks, []);
  t.strictSame([shared.attachments, shared.problems.map((p) => `${p.document} ${p.field}: ${p.reason}`)], [[], ['ResourceClaim tenant-a/shared spec.devices.requests[net]: podnet prepared this claim for another pod']], "a claim prepared for another pod gives this one nothing, and says why");
});

t.test('two configs setting one thing differently: neither applies, both are told', async (t) => {
  const d = desiredFor(pod, networks, [
    config('b-second', { podSelector: all, interfaces: [{ name: 'eth0', mtu: 9000 }], attachments: [{ network: 'blue', interface: 'net1' }] }),
    config('a-first', { podSelector: all, interfaces: [{ name: 'eth0', mtu: 1300 }], attachments: [{ network: 'blue', interface: 'net1' }] }),
  ]);
  t.same(d.tuning, [], 'the conflicting setting is left out (the interface had no other)');
  t.same(d.attachments, []);
  t.same(new Set(d.problems.map((p) => p.document)), new Set(['PodNetworkConfig tenant-a/a-first', 'PodNetworkConfig tenant-a/b-second']));
  t.match(d.problems, [{ reason: /is also set, differently, by PodNetworkConfig tenant-a\/a-first/ }]);

  const same = desiredFor(pod, networks, [
    config('x', { podSelector: all, interfaces: [{ name: 'eth0', mtu: 1300 }] }),
    config('y', { podSelector: all, interfaces: [{ name: 'eth0', mtu: 1300 }] }),
  ]);
  t.same(same.tuning.map((x) => x.settings), [{ mtu: 1300 }], 'the same value twice is no conflict');
  t.same(same.problems, []);
});

t.test('routes and rules: canonical addresses, "main" said outright, families checked', async (t) => {
  const d = desiredFor(pod, networks, [
    config('r', {
      podSelector: all,
      routes: [
        { to: '2001:DB8:0:90::/64', via: '2001:db8:0:80::1', table: 100 },
        { to: '198.18.90.0/24', dev: 'eth0', table: 'main', metric: 5 },
        { to: '198.18.91.5/24', dev: 'eth0', table: 100 },
        { to: '198.18.92.0/24', via: '2001:db8::1', table: 100 },
        { to: '198.18.93.0/24', dev: 'eth0', table: 100, seg6: { mode: 'inline', segments: ['2001:db8::1'] } },
      ],
      rules: [
        { priority: 100, from: '198.18.80.0/24', table: 100 },
        { priority: 101, fwmark: 7, family: 'ipv6', table: 100 },
        { priority: 102, from: '198.18.80.0/24', to: '2001:db8::/64', table: 100 },
      ],
    }),
  ]);
  t.same(d.routes, [
    { family: 6, to: '2001:db8:0:90::/64', table: 100, via: '2001:db8:0:80::1' },
    { family: 4, to: '198.18.90.0/24', table: 254, metric: 5, dev: 'eth0' },
  ]);
  t.same(d.rules, [
    { priority: 100, table: 100, from: '198.18.80.0/24', family: 4 },
    { priority: 101, table: 100, fwmark: 7, family: 6 },
  ]);
  t.same(d.problems.map((p) => `${p.field}: ${p.reason}`), [
    'spec.routes[2].to: 198.18.91.5/24 has host bits set; the subnet is 198.18.91.0/24',
    'spec.routes[3].via: 2001:db8::1 is IPv6, the route is IPv4',
    'spec.routes[4].seg6.mode: inline SRv6 applies to IPv6 routes only; use encap',
    'spec.rules[2].family: from, to and family name different address families',
  ]);
});

t.test('routes, rules and sysctls set differently by two configs: neither applies', async (t) => {
  const d = desiredFor(pod, networks, [
    config('a', { podSelector: all, routes: [{ to: '198.18.90.0/24', dev: 'eth0', table: 100 }], rules: [{ priority: 100, table: 100 }], sysctls: [{ name: 'net.ipv4.ip_forward', value: '1' }] }),
    config('b', { podSelector: all, routes: [{ to: '198.18.90.0/24', dev: 'eth0', table: 200 }], rules: [{ priority: 100, table: 200 }], sysctls: [{ name: 'net.ipv4.ip_forward', value: '0' }] }),
  ]);
  t.same(d.routes.map((r) => r.table), [100, 200], 'different tables are different routes');
  t.same(d.rules, []);
  t.same(d.sysctls, []);
  t.equal(d.problems.length, 4, 'the rule and the sysctl, each told to both documents');
});

t.test('sysctls: only the allowlist, per-interface keys only for eth0 and attached interfaces', async (t) => {
  const d = desiredFor(pod, networks, [
    config('s', {
      podSelector: all,
      attachments: [{ network: 'blue', interface: 'net1.100' }],
      sysctls: [
        { name: 'net.ipv4.ip_forward', value: '1' },
        { name: 'net.ipv4.ping_group_range', value: '0   2147483647' },
        { name: 'net.ipv4.conf.net1.100.rp_filter', value: '2' },
        { name: 'net.ipv6.conf.eth0.seg6_enabled', value: '1' },
        { name: 'net.ipv4.conf.lo9.rp_filter', value: '0' },
        { name: 'net.core.rmem_max', value: '1' },
        { name: 'net.ipv4.conf.eth0.bootp_relay', value: '1' },
      ],
    }),
  ]);
  t.same(d.sysctls, [
    { name: 'net.ipv4.ip_forward', path: 'net/ipv4/conf/all/forwarding', value: '1' },
    { name: 'net.ipv4.ping_group_range', path: 'net/ipv4/ping_group_range', value: '0 2147483647' },
    { name: 'net.ipv4.conf.net1.100.rp_filter', path: 'net/ipv4/conf/net1.100/rp_filter', value: '2' },
    { name: 'net.ipv6.conf.eth0.seg6_enabled', path: 'net/ipv6/conf/eth0/seg6_enabled', value: '1' },
  ]);
  t.same(d.problems.map((p) => `${p.field}: ${p.reason}`), [
    'spec.sysctls[4].name: net.ipv4.conf.lo9.rp_filter: lo9 is not eth0 nor an interface this request attaches',
    "spec.sysctls[5].name: net.core.rmem_max is not on podnet's sysctl allowlist",
    "spec.sysctls[6].name: net.ipv4.conf.eth0.bootp_relay: bootp_relay is not on podnet's allowlist of per-interface ipv4 sysctls",
  ]);
});

t.test('what the kernel shows differently is resolved as it shows it: a /0 rule selector, a sysctl "01"', async (t) => {
  const d = desiredFor(pod, networks, [
    config('k', { podSelector: all, rules: [{ priority: 100, from: '::/0', fwmark: 3, table: 100 }], sysctls: [{ name: 'net.ipv4.ip_forward', value: '01' }] }),
  ]);
  t.same(d.rules, [{ priority: 100, table: 100, fwmark: 3, family: 6 }], 'from ::/0 is "from all": no selector, the family kept');
  t.same(d.sysctls.map((s) => s.value), ['1']);
});

const admitting = (name: string, namespaceSelector: Network['spec']['namespaceSelector']): Network => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'Network',
  metadata: { name },
  // No ipam here: addresses and MACs an attachment brings are allowed (see the staticAddresses and staticMacs tests).
  spec: { type: 'bridge', staticAddresses: true, staticMacs: true, ...(namespaceSelector ? { namespaceSelector } : {}) },
});
const ofTenantA = { matchLabels: { 'kubernetes.io/metadata.name': 'tenant-a' } };
const shared = new Map([
  ['blue', admitting('blue', ofTenantA)],
  ['red', admitting('red', ofTenantA)],
  ['green', admitting('green', ofTenantA)],
  ['elsewhere', admitting('elsewhere', { matchLabels: { 'kubernetes.io/metadata.name': 'tenant-b' } })],
  ['tenants', admitting('tenants', { matchLabels: { tenant: 'a' } })],
]);
const asking = (text: string, namespaceLabels?: Record<string, string>) => ({ ...pod, annotation: parseNetworksAnnotation(text), ...(namespaceLabels ? { namespaceLabels } : {}) });
const byInterface = (d: DesiredSandbox) => Object.fromEntries(d.attachments.map((a) => [a.interface, a.network.metadata.name]));
const annotationField = 'metadata.annotations["podnetwork.opdev.io/networks"]';

t.test('annotation: a selection with an interface attaches that Network there, from the pod', async (t) => {
  const d = desiredFor(asking('[{"name":"blue","interface":"net9","ips":["198.18.5.7/24"]}]'), shared, []);
  t.same(d.problems, []);
  t.equal(d.attachments.length, 1);
  t.match(d.attachments[0], { interface: 'net9', ips: ['198.18.5.7/24'], from: 'Pod tenant-a/cnf-0', network: { metadata: { name: 'blue' } } });
  t.same(d.configs, [], 'the pod is not a PodNetworkConfig');
});

t.test('annotation: selections without an interface get net1, net2, ... in order, around names already taken', async (t) => {
  t.same(byInterface(desiredFor(asking('blue, red, green'), shared, [])), { net1: 'blue', net2: 'red', net3: 'green' });
  t.same(byInterface(desiredFor(asking('blue, red@net1, green'), shared, [])), { net1: 'red', net2: 'blue', net3: 'green' }, 'named by the annotation');
  const d = desiredFor(asking('blue, red'), shared, [config('c', { podSelector: all, attachments: [{ network: 'green', interface: 'net1' }, { network: 'green', interface: 'net3' }] })]);
  t.same(byInterface(d), { net1: 'green', net2: 'blue', net3: 'green', net4: 'red' }, 'named by a PodNetworkConfig');
  t.same(d.problems, []);
});

t.test('annotation: an unnamed selection keeps the interface it had, the others fill around it', async (t) => {
  const earlier = [{ network: 'red', interface: 'net2' }];
  t.same(byInterface(desiredFor(asking('blue, red'), shared, [], earlier)), { net1: 'blue', net2: 'red' });
  t.same(byInterface(desiredFor(asking('red'), shared, [], earlier)), { net2: 'red' }, 'blue removed: red stays net2');
  t.same(byInterface(desiredFor(asking('red, blue'), shared, [], earlier)), { net1: 'blue', net2: 'red' }, 'the order in the annotation does not move it');
  const taken = desiredFor(asking('red, blue@net2'), shared, [], earlier);
  t.same(byInterface(taken), { net1: 'red', net2: 'blue' }, 'a name another selection now asks for is not kept');
});

t.test('annotation: a selection\'s MAC is a tuning of its interface, from the pod', async (t) => {
  const d = desiredFor(asking('[{"name":"blue","interface":"net9","mac":"02:00:00:00:00:01"},{"name":"red","mac":"02:00:00:00:00:02"}]'), shared, []);
  t.same(d.problems, []);
  t.same(d.tuning, [
    { interface: 'net9', settings: { mac: '02:00:00:00:00:01' }, from: { mac: 'Pod tenant-a/cnf-0' } },
    { interface: 'net1', settings: { mac: '02:00:00:00:00:02' }, from: { mac: 'Pod tenant-a/cnf-0' } },
  ]);
});

t.test('annotation: a MAC set differently by a PodNetworkConfig: neither applies, both are told', async (t) => {
  const d = desiredFor(asking('[{"name":"blue","interface":"net9","mac":"02:00:00:00:00:01"}]'), shared, [
    config('c', { podSelector: all, interfaces: [{ name: 'net9', mac: '02:00:00:00:00:02', mtu: 1400 }] }),
  ]);
  t.same(byInterface(d), { net9: 'blue' });
  t.same(d.tuning.map((x) => x.settings), [{ mtu: 1400 }]);
  t.same(d.problems.map((p) => `${p.document} ${p.field}`).sort(), [
    `Pod tenant-a/cnf-0 ${annotationField}[0].mac`,
    'PodNetworkConfig tenant-a/c spec.interfaces[0].mac',
  ]);
});

t.test('annotation: the same interface asked by the pod and by a PodNetworkConfig: neither applies, both are told', async (t) => {
  const d = desiredFor(asking('red@net1'), shared, [config('c', { podSelector: all, attachments: [{ network: 'blue', interface: 'net1' }, { network: 'green', interface: 'net2' }] })]);
  t.same(byInterface(d), { net2: 'green' });
  t.same(d.problems.map((p) => `${p.document} ${p.field}`).sort(), [
    `Pod tenant-a/cnf-0 ${annotationField}[0]`,
    'PodNetworkConfig tenant-a/c spec.attachments[0]',
  ]);
  t.match(d.problems, [{ reason: /interface net1 is also set, differently, by/ }, { reason: /interface net1 is also set, differently, by/ }]);
});

t.test('annotation: an unreadable value asks for nothing, is told on the pod, and the configs still apply', async (t) => {
  const d = desiredFor({ ...pod, annotation: { problem: 'podnetwork.opdev.io/networks is not valid JSON: oops' } }, shared, [
    config('c', { podSelector: all, attachments: [{ network: 'green', interface: 'net5' }] }),
  ]);
  t.same(byInterface(d), { net5: 'green' });
  t.same(d.problems, [{ document: 'Pod tenant-a/cnf-0', field: annotationField, reason: 'podnetwork.opdev.io/networks is not valid JSON: oops' }]);
});

t.test('annotation: a Network that is missing or does not admit the namespace is refused, naming the entry', async (t) => {
  const d = desiredFor(asking('nope, elsewhere@net7, blue'), shared, []);
  t.same(byInterface(d), { net1: 'blue' }, 'a refused selection takes no name');
  t.same(d.problems.map((p) => `${p.document} ${p.field}: ${p.reason}`), [
    `Pod tenant-a/cnf-0 ${annotationField}[0].name: no Network named nope`,
    `Pod tenant-a/cnf-0 ${annotationField}[1].name: Network elsewhere does not admit namespace tenant-a`,
  ]);
});

t.test('annotation: a Network admits the namespace by any of its labels', async (t) => {
  const labelled = desiredFor(asking('tenants, blue', { tenant: 'a', 'kubernetes.io/metadata.name': 'tenant-a' }), shared, []);
  t.same(byInterface(labelled), { net1: 'tenants', net2: 'blue' });
  t.same(labelled.problems, []);
  const other = desiredFor(asking('tenants', { tenant: 'b', 'kubernetes.io/metadata.name': 'tenant-a' }), shared, []);
  t.same(other.attachments, []);
  t.match(other.problems, [{ field: `${annotationField}[0].name`, reason: 'Network tenants does not admit namespace tenant-a' }]);
  const unlabelled = desiredFor(asking('tenants'), shared, []);
  t.same(unlabelled.attachments, [], 'without namespace labels only the name label counts');
});

t.test('annotation: a per-interface sysctl may name an interface the annotation attaches', async (t) => {
  const d = desiredFor(asking('blue'), shared, [config('s', { podSelector: all, sysctls: [{ name: 'net.ipv4.conf.net1.rp_filter', value: '2' }] })]);
  t.same(d.sysctls, [{ name: 'net.ipv4.conf.net1.rp_filter', path: 'net/ipv4/conf/net1/rp_filter', value: '2' }]);
  t.same(d.problems, []);
});

t.test('annotation: a selection refused for its interface does not set that interface\'s MAC either', async (t) => {
  const d = desiredFor(asking('[{"name":"blue","interface":"net1","mac":"02:00:00:00:00:01"}]'), shared, [config('c', { podSelector: all, attachments: [{ network: 'red', interface: 'net1' }] })]);
  t.same(d.attachments, []);
  t.equal(d.problems.length, 2);
  t.same(d.tuning, [], 'nor is the MAC it asked for set');
});

t.test('a config attachment without an interface gets the first free name, after the annotation\'s, and keeps it', async (t) => {
  const unnamed = config('k', { podSelector: all, attachments: [{ network: 'green' }, { network: 'red', interface: 'net1' }] });
  const d = desiredFor(asking('blue'), shared, [unnamed]);
  t.same(d.problems, []);
  t.same(byInterface(d), { net1: 'red', net2: 'blue', net3: 'green' }, 'named ones first; then the annotation\'s, then the config\'s, around them');
  t.equal(d.attachments.find((a) => a.interface === 'net3')?.field, 'spec.attachments[0]', 'the name is told with the field that asked');
  const kept = desiredFor(pod, shared, [unnamed], [{ network: 'green', interface: 'net3' }]);
  t.same(byInterface(kept), { net1: 'red', net3: 'green' }, 'the annotation gone, green keeps net3');
});

t.test('an attachment at the pod\'s primary interface is refused naming its field; an unnamed one never gets that name', async (t) => {
  const primaryNet1 = { ...pod, primaryInterface: 'net1' };
  const d = desiredFor(primaryNet1, shared, [config('k', { podSelector: all, attachments: [{ network: 'blue', interface: 'net1' }, { network: 'green' }] })]);
  t.same(d.problems.map((p) => `${p.field}: ${p.reason}`), ["spec.attachments[0].interface: net1 is the pod's primary interface, made by its primary CNI plugin; attach under another name"]);
  t.same(byInterface(d), { net2: 'green' });
});

t.test("what a Network's type cannot give is refused naming the field, and nothing of that attachment applies", async (t) => {
  const open = { matchLabels: {} };
  const typed = (name: string, spec: Partial<Network['spec']>): Network => ({ ...network(name), spec: { ...network(name).spec, namespaceSelector: open, ...spec } as Network['spec'] });
  const kinds = new Map([
    ['mac', typed('mac', { type: 'macvlan', macvlan: { parent: 'eth9' } })],
    ['plugins', typed('plugins', { type: 'cni', cni: { config: { cniVersion: '1.0.0', plugins: [{ type: 'bridge' }] } } })],
    ['blue', typed('blue', {})],
  ]);
  const bandwidth = { ingressRate: 1_000_000, ingressBurst: 100_000 };
  const d = desiredFor(pod, kinds, [
    config('shaped', {
      podSelector: all,
      attachments: [
        { network: 'mac', interface: 'net1', bandwidth },
        { network: 'plugins', interface: 'net2', bandwidth },
        { network: 'plugins', interface: 'net3', ips: ['198.18.7.2/24'] },
        { network: 'blue', interface: 'net4', bandwidth },
      ],
    }),
  ]);
  t.same(d.attachments.map((a) => a.interface), ['net4'], 'only the bridge attachment with its rate limit is wanted');
  t.same(d.problems.map((p) => `${p.field}: ${p.reason}`), [
    'spec.attachments[0].bandwidth: rate limits need a bridge Network: podnet shapes on its host end of a veth, and a macvlan link has none',
    "spec.attachments[1].bandwidth: rate limits need a bridge Network: Network plugins's plugins make its link (a bandwidth plugin in its list can shape it)",
    "spec.attachments[2].ips: Network plugins's plugins choose its addresses (their ipam config); podnet does not pass static ones to them",
  ]);
});

t.test('attachments past the node\'s limit per pod are refused, each at its field; the same ones win every time', async (t) => {
  const limits = { ...defaultLimits, attachmentsPerPod: 2 };
  const configs = [
    config('b-second', { podSelector: all, attachments: [{ network: 'blue', interface: 'net3' }] }),
    config('a-first', { podSelector: all, attachments: [{ network: 'blue', interface: 'net1' }, { network: 'blue', interface: 'net2' }] }),
  ];
  for (const order of [configs, [...configs].reverse()]) {
    const d = desiredFor(pod, networks, order, [], limits);
    t.same(d.attachments.map((a) => a.interface), ['net1', 'net2'], 'the first configs by name keep theirs');
    t.same(d.problems, [{ document: 'PodNetworkConfig tenant-a/b-second', field: 'spec.attachments[0]', reason: 'the pod would have more attachments than the 2 this node\'s admin allows per pod (podnet daemon --max-attachments-per-pod)' }]);
  }
  t.equal(desiredFor(pod, networks, configs).attachments.length, 3, 'the default limit is higher');
});

t.test('addresses past the node\'s limit per pod are refused with the attachment that would hold them', async (t) => {
  const dual: Network = { ...network('dual', ['tenant-a']), spec: { ...network('dual', ['tenant-a']).spec, ipam: { ranges: [{ subnet: '198.18.5.0/24' }, { subnet: '2001:db8:5::/64' }] } } };
  const plugins: Network = { ...network('plugins', ['tenant-a']), spec: { type: 'cni', namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'tenant-a' } }, cni: { config: { cniVersion: '1.0.0', type: 'bridge' } } } };
  const own: Network = { ...network('own', ['tenant-a']), spec: { ...network('own', ['tenant-a']).spec, staticAddresses: true } };
  const offered = new Map([...networks, ['dual', dual], ['plugins', plugins], ['own', own]]);
  const limits = { ...defaultLimits, addressesPerPod: 3 };
  const c = config('many', {
    podSelector: all,
    attachments: [
      { network: 'dual', interface: 'net1' },
      { network: 'blue', interface: 'net2' },
      { network: 'dual', interface: 'net3' },
      { network: 'plugins', interface: 'net4' },
      { network: 'own', interface: 'net5', ips: ['198.18.6.7/24'] },
      { network: 'own', interface: 'net6', ips: ['198.18.6.8/24'] },
    ],
  });
  const d = desiredFor(pod, offered, [c], [], limits);
  t.same(d.attachments.map((a) => a.interface), ['net1', 'net2', 'net4', 'net5'], 'two from dual, none without ipam, none from a cni Network\'s plugins, one brought');
  t.same(d.problems, [
    { document: 'PodNetworkConfig tenant-a/many', field: 'spec.attachments[2]', reason: 'the pod would hold more addresses than the 3 this node\'s admin allows per pod (podnet daemon --max-addresses-per-pod)' },
    { document: 'PodNetworkConfig tenant-a/many', field: 'spec.attachments[5]', reason: 'the pod would hold more addresses than the 3 this node\'s admin allows per pod (podnet daemon --max-addresses-per-pod)' },
  ]);
});

t.test('the primary interface\'s MAC is not a tenant\'s to change unless the node\'s admin allows it; its other settings are', async (t) => {
  const c = config('mac', { podSelector: all, attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'eth0', mac: '02:00:00:00:00:0a', mtu: 1400 }, { name: 'net1', mac: '02:00:00:00:00:0b' }] });
  const d = desiredFor(pod, shared, [c]);
  t.same(d.tuning, [{ interface: 'eth0', settings: { mtu: 1400 }, from: { mtu: 'PodNetworkConfig tenant-a/mac' } }, { interface: 'net1', settings: { mac: '02:00:00:00:00:0b' }, from: { mac: 'PodNetworkConfig tenant-a/mac' } }]);
  t.match(d.problems, [{ document: 'PodNetworkConfig tenant-a/mac', field: 'spec.interfaces[0].mac', reason: /changing the MAC of the pod's primary interface eth0 is off on this node/ }]);
  const allowed = desiredFor(pod, shared, [c], [], { ...defaultLimits, primaryMac: true });
  t.same(allowed.tuning[0]?.settings, { mac: '02:00:00:00:00:0a', mtu: 1400 });
  t.same(allowed.problems, []);
});

t.test('a pod gives its attachment a MAC of its own only on a Network whose admin allows it, and never an interface podnet did not attach', async (t) => {
  const c = config('mac', { podSelector: all, attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'net1', mac: '02:00:00:00:00:0b', mtu: 1400 }, { name: 'net7', mac: '02:00:00:00:00:0c' }] });
  const d = desiredFor(pod, networks, [c]);
  t.same(d.tuning, [{ interface: 'net1', settings: { mtu: 1400 }, from: { mtu: 'PodNetworkConfig tenant-a/mac' } }], 'the MTU stands, no MAC');
  t.same(d.problems, [
    { document: 'PodNetworkConfig tenant-a/mac', field: 'spec.interfaces[0].mac', reason: 'Network blue does not let pods give their attachments a MAC of their own (its spec.staticMacs is not true)' },
    { document: 'PodNetworkConfig tenant-a/mac', field: 'spec.interfaces[1].mac', reason: 'podnet sets a MAC only on an interface it attaches from a Network whose spec.staticMacs is true, and it attaches no net7 to this pod' },
  ]);
  const annotated = desiredFor({ ...pod, annotation: parseNetworksAnnotation('[{"name":"blue","interface":"net2","mac":"02:00:00:00:00:0d"}]') }, networks, []);
  t.same(annotated.problems, [{ document: 'Pod tenant-a/cnf-0', field: `${annotationField}[0].mac`, reason: 'Network blue does not let pods give their attachments a MAC of their own (its spec.staticMacs is not true)' }], 'the annotation\'s mac alike');
  t.same(annotated.attachments.map((a) => a.interface), ['net2'], 'the attachment itself stands');
  const open = new Map([['blue', { ...network('blue', ['tenant-a']), spec: { ...network('blue', ['tenant-a']).spec, staticMacs: true } }]]);
  t.same(desiredFor(pod, open, [c]).tuning[0]?.settings, { mac: '02:00:00:00:00:0b', mtu: 1400 }, 'allowed by the Network');
});

t.test('a Network without ipam takes an attachment\'s own addresses only when its admin says so', async (t) => {
  const plain = { ...admitting('plain', ofTenantA), spec: { type: 'bridge' as const, namespaceSelector: ofTenantA } };
  const c = config('own', { podSelector: all, attachments: [{ network: 'plain', interface: 'net1', ips: ['198.18.5.7/24'] }, { network: 'plain', interface: 'net2' }] });
  const d = desiredFor(pod, new Map([['plain', plain]]), [c]);
  t.same(d.attachments.map((a) => a.interface), ['net2'], 'one without addresses of its own is attached');
  t.same(d.problems, [{ document: 'PodNetworkConfig tenant-a/own', field: 'spec.attachments[0].ips', reason: 'Network plain has no ipam and does not let attachments bring their own addresses (its spec.staticAddresses is not true)' }]);
  const open = { ...plain, spec: { ...plain.spec, staticAddresses: true } };
  t.same(desiredFor(pod, new Map([['plain', open]]), [c]).attachments.map((a) => a.interface), ['net1', 'net2']);
});

t.test('two spellings of one kernel knob are one setting: one path, one conflict', async (t) => {
  const forwarding = (name: string, value: string, cfg: string) => config(cfg, { podSelector: all, sysctls: [{ name, value }] });
  const one = desiredFor(pod, networks, [forwarding('net.ipv4.ip_forward', '1', 'a')]);
  const other = desiredFor(pod, networks, [forwarding('net.ipv4.conf.all.forwarding', '1', 'a')]);
  t.same(one.sysctls.map((s) => s.path), other.sysctls.map((s) => s.path), 'the same knob, whichever spelling: a config rewritten from one to the other changes nothing');
  const both = desiredFor(pod, networks, [forwarding('net.ipv4.ip_forward', '1', 'a'), forwarding('net.ipv4.conf.all.forwarding', '0', 'b')]);
  t.same(both.sysctls, [], 'two configs asking the knob different values: neither applies');
  t.match(both.problems, [{ reason: /sysctl net\.ipv4\.conf\.all\.forwarding/ }, { reason: /sysctl net\.ipv4\.conf\.all\.forwarding/ }]);
});

t.test('desiredWhole: a config applies whole or not at all; an edit that cannot keeps the generation the pod had', async (t) => {
  const good = config('tune', { podSelector: all, interfaces: [{ name: 'eth0', mtu: 1400 }], sysctls: [{ name: 'net.ipv4.ip_forward', value: '1' }] });
  const other = config('other', { podSelector: all, interfaces: [{ name: 'eth0', txqueuelen: 500 }] });
  const first = desiredWhole(pod, networks, [good, other]);
  t.same(first.problems, []);
  t.same(first.whole?.map((c) => c.name), ['PodNetworkConfig tenant-a/other', 'PodNetworkConfig tenant-a/tune']);

  const broken = config('tune', { ...good.spec, interfaces: [{ name: 'eth0', mtu: 1300 }], sysctls: [{ name: 'net.core.rmem_max', value: '1' }] });
  const fresh = desiredWhole(pod, networks, [broken, other]);
  t.same(fresh.tuning, [{ interface: 'eth0', settings: { txqueuelen: 500 }, from: { txqueuelen: 'PodNetworkConfig tenant-a/other' } }], 'nothing of the broken config, all of the other');
  t.same(fresh.sysctls, []);
  t.match(fresh.problems, [
    { document: 'PodNetworkConfig tenant-a/tune', field: 'spec.sysctls[0].name', reason: /not on podnet's sysctl allowlist/ },
    { document: 'PodNetworkConfig tenant-a/tune', field: 'spec', reason: 'nothing of it applies to the pod until all of it can' },
  ]);

  const kept = desiredWhole(pod, networks, [broken, other], [], defaultLimits, first.whole);
  t.same(kept.tuning.find((x) => x.interface === 'eth0')?.settings, { mtu: 1400, txqueuelen: 500 }, 'the pod keeps the generation it had: MTU 1400, not the edit\'s 1300');
  t.same(kept.sysctls.map((s) => s.value), ['1']);
  t.match(kept.problems, [{ field: 'spec.sysctls[0].name' }, { field: 'spec', reason: 'this generation cannot be applied whole to the pod: the one it had before stays' }]);
  t.same(kept.whole?.find((c) => c.name === 'PodNetworkConfig tenant-a/tune')?.spec, good.spec, 'and keeps it on record');
});

t.test('desiredWhole: a config that conflicts with one the pod has is refused, naming it; the one it has keeps its settings', async (t) => {
  const first = config('b-first', { podSelector: all, interfaces: [{ name: 'eth0', mtu: 1400 }] });
  const later = config('a-later', { podSelector: all, interfaces: [{ name: 'eth0', mtu: 1300 }], routes: [{ to: '198.18.9.0/24', dev: 'eth0', table: 100 }] });
  const had = desiredWhole(pod, networks, [first]).whole;
  const both = desiredWhole(pod, networks, [first, later], [], defaultLimits, had);
  t.same(both.tuning[0]?.settings, { mtu: 1400 }, 'the MTU the pod had stays');
  t.same(both.routes, [], 'and nothing else of the later config applies');
  t.match(both.problems, [
    { document: 'PodNetworkConfig tenant-a/a-later', field: 'spec.interfaces[0].mtu', reason: 'the mtu of eth0 is set, differently, by PodNetworkConfig tenant-a/b-first (spec.interfaces[0].mtu), which the pod has already; this one does not apply' },
    { document: 'PodNetworkConfig tenant-a/a-later', field: 'spec', reason: 'nothing of it applies to the pod until all of it can' },
  ]);
  t.notOk(both.problems.some((p) => p.document === 'PodNetworkConfig tenant-a/b-first'), 'the config the pod has is told nothing');
  const fresh = desiredWhole(pod, networks, [first, later]);
  t.same(fresh.tuning, [], 'two new configs at once: no fair order, neither applies');
});

t.test('origins: who asked each thing, by the keys the planner looks up', async (t) => {
  const d = desiredFor(pod, networks, [
    config('r', { podSelector: all, routes: [{ to: '198.18.9.0/24', dev: 'eth0', table: 100 }], sysctls: [{ name: 'net.ipv4.ip_forward', value: '1' }] }),
    config('t', { podSelector: all, interfaces: [{ name: 'eth0', mtu: 1400 }], attachments: [{ network: 'blue', interface: 'net1' }] }),
  ]);
  t.same(Object.fromEntries(d.origins ?? []), {
    'attach net1': 'PodNetworkConfig tenant-a/t spec.attachments[0]',
    'tune eth0': 'PodNetworkConfig tenant-a/t spec.interfaces[0].mtu',
    'route 4 100 198.18.9.0/24 0': 'PodNetworkConfig tenant-a/r spec.routes[0]',
    'sysctl net/ipv4/conf/all/forwarding': 'PodNetworkConfig tenant-a/r spec.sysctls[0]',
  });
});

t.test('desiredWhole: an edit of one config the pod has never costs it another; a conflict with a config dropped for its own problems is no conflict', async (t) => {
  const a = config('a', { podSelector: all, interfaces: [{ name: 'eth0', txqueuelen: 500 }] });
  const b = config('b', { podSelector: all, interfaces: [{ name: 'eth0', mtu: 1400 }], routes: [{ to: '198.18.9.0/24', dev: 'eth0', table: 100 }] });
  const had = desiredWhole(pod, networks, [a, b]).whole;
  const edited = config('a', { podSelector: all, interfaces: [{ name: 'eth0', txqueuelen: 500, mtu: 1300 }] });
  const d = desiredWhole(pod, networks, [edited, b], [], defaultLimits, had);
  t.same(d.tuning[0]?.settings, { mtu: 1400, txqueuelen: 500 }, "b keeps its MTU, a its generation's txqueuelen");
  t.equal(d.routes.length, 1, "and b's route stays");
  t.match(d.problems, [{ document: 'PodNetworkConfig tenant-a/a', reason: /which the pod has already/ }, { document: 'PodNetworkConfig tenant-a/a', field: 'spec', reason: /the one it had before stays/ }]);

  const c = config('c', { podSelector: all, interfaces: [{ name: 'eth0', mtu: 1400 }] });
  const broken = config('d', { podSelector: all, interfaces: [{ name: 'eth0', mtu: 1300 }], sysctls: [{ name: 'net.core.rmem_max', value: '1' }] });
  const two = desiredWhole(pod, networks, [c, broken]);
  t.same(two.tuning[0]?.settings, { mtu: 1400 }, 'd goes for its own problem; then c conflicts with nothing and applies');
  t.notOk(two.problems.some((p) => p.document === 'PodNetworkConfig tenant-a/c'), 'c is told nothing');
});

t.test('a pod is given at most 64 configs, the first by name; the others are told', async (t) => {
  const many = Array.from({ length: 66 }, (_, i) => config(`c${String(i).padStart(2, '0')}`, { podSelector: all, interfaces: [{ name: 'eth0', txqueuelen: 500 }] }));
  const d = desiredWhole(pod, networks, many);
  t.equal(d.whole?.length, 64);
  t.same(d.problems.filter((p) => p.field === 'spec.podSelector').map((p) => p.document), ['PodNetworkConfig tenant-a/c64', 'PodNetworkConfig tenant-a/c65']);
});

t.test("the node's limits per pod count the configs the pod has first: a new config never takes their place", async (t) => {
  const limits = { ...defaultLimits, attachmentsPerPod: 1 };
  const kept = config('z-kept', { podSelector: all, attachments: [{ network: 'blue', interface: 'net2' }], interfaces: [{ name: 'eth0', mtu: 1400 }] });
  const newer = config('a-new', { podSelector: all, attachments: [{ network: 'blue', interface: 'net1' }] });
  const had = desiredWhole(pod, networks, [kept], [], limits).whole;
  const d = desiredWhole(pod, networks, [kept, newer], [], limits, had);
  t.same(d.attachments.map((a) => a.interface), ['net2'], 'the attachment the pod has stays');
  t.same(d.tuning[0]?.settings, { mtu: 1400 }, 'and so does the rest of its config');
  t.match(d.problems, [{ document: 'PodNetworkConfig tenant-a/a-new', reason: /more attachments than the 1/ }, { document: 'PodNetworkConfig tenant-a/a-new', field: 'spec' }]);
});

t.test('desiredWhole: a generation the node refused (a quota, an address or MAC another pod has) fails as one with a problem of its own', async (t) => {
  const tune = config('tune', { podSelector: all, interfaces: [{ name: 'eth0', mtu: 1400 }] });
  const had = desiredWhole(pod, networks, [tune]).whole;
  const edited = config('tune', { podSelector: all, interfaces: [{ name: 'eth0', mtu: 1300 }], attachments: [{ network: 'blue', interface: 'net1' }] });
  const problem = { document: 'PodNetworkConfig tenant-a/tune', field: 'spec.attachments[0]', reason: 'over the quota' };
  const refused = [{ config: 'PodNetworkConfig tenant-a/tune', generation: generationOf(edited.spec), problem }];
  const kept = desiredWhole(pod, networks, [edited], [], defaultLimits, had, refused);
  t.same(kept.tuning.map((x) => x.settings), [{ mtu: 1400 }], 'the pod keeps the generation it had');
  t.match(kept.problems, [problem, { field: 'spec', reason: 'this generation cannot be applied whole to the pod: the one it had before stays' }]);
  const fresh = desiredWhole(pod, networks, [edited], [], defaultLimits, [], refused);
  t.same(fresh.tuning, [], 'a pod that had none gets nothing of it');
  const other = desiredWhole(pod, networks, [tune], [], defaultLimits, [], refused);
  t.same(other.tuning.map((x) => x.settings), [{ mtu: 1400 }], 'a refusal is of one generation: another of the same config applies');
});

t.test('a pass refuses only new generations its problems name; who a cause names, as problems', async (t) => {
  const spec = (mtu: number): PodNetworkConfig['spec'] => ({ podSelector: all, interfaces: [{ name: 'eth0', mtu }] });
  const whole = [{ name: 'PodNetworkConfig tenant-a/kept', spec: spec(1400) }, { name: 'PodNetworkConfig tenant-a/edited', spec: spec(1300) }];
  const had = [{ name: 'PodNetworkConfig tenant-a/kept', spec: spec(1400) }, { name: 'PodNetworkConfig tenant-a/edited', spec: spec(1500) }];
  const problems = causeProblems('PodNetworkConfig tenant-a/kept spec.routes[0], PodNetworkConfig tenant-a/edited spec.routes[0]', 'the pod has no interface eth9');
  t.same(problems.map((p) => `${p.document}|${p.field}`), ['PodNetworkConfig tenant-a/kept|spec.routes[0]', 'PodNetworkConfig tenant-a/edited|spec.routes[0]']);
  const refused = newGenerationsRefused(whole, had, problems);
  t.same(refused.map((r) => r.config), ['PodNetworkConfig tenant-a/edited'], 'the generation the pod has already is not refused: its part is retried');
  t.equal(refused[0]!.generation, generationOf(spec(1300)));
  t.same(newGenerationsRefused(whole, undefined, problems).length, 2, 'a pod that has none of them: both are new');
  t.same(causeProblems('garbled', 'x'), [], 'a cause that names no document and field names none');
});

t.test('VRFs: a config makes one with its table; interfaces are placed in it, and routes and rules name it for its table, across configs', async (t) => {
  const d = desiredFor(pod, shared, [
    config('a-vrf', { podSelector: all, vrfs: [{ name: 'red', table: 100 }], attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'net1', vrf: 'red' }] }),
    config('b-routes', { podSelector: all, routes: [{ to: '198.18.99.0/24', via: '198.18.80.1', vrf: 'red' }], rules: [{ priority: 100, from: '198.18.80.0/24', vrf: 'red' }] }),
  ]);
  t.same(d.problems, []);
  t.same(d.vrfs, [{ name: 'red', table: 100, from: 'PodNetworkConfig tenant-a/a-vrf', field: 'spec.vrfs[0]' }]);
  t.same(d.tuning.map((x) => [x.interface, x.settings]), [['net1', { vrf: 'red' }]]);
  t.same(d.routes.map((r) => [r.to, r.table]), [['198.18.99.0/24', 100]], "the route is in the VRF's table");
  t.same(d.rules.map((r) => [r.priority, r.table]), [[100, 100]], "the rule looks up the VRF's table");
  t.equal(d.origins?.get('vrf red'), 'PodNetworkConfig tenant-a/a-vrf spec.vrfs[0]');
});

t.test('VRFs: one name with two tables, or one table under two names, is a conflict told on both; what names the VRF is refused', async (t) => {
  const byName = desiredFor(pod, shared, [
    config('one', { podSelector: all, vrfs: [{ name: 'red', table: 100 }] }),
    config('two', { podSelector: all, vrfs: [{ name: 'red', table: 200 }], routes: [{ to: '198.18.99.0/24', via: '198.18.80.1', vrf: 'red' }] }),
  ]);
  t.same(byName.vrfs, [], 'neither applies');
  t.match(byName.problems, [
    { document: 'PodNetworkConfig tenant-a/two', field: 'spec.vrfs[0]', reason: /VRF red is also set, differently, by PodNetworkConfig tenant-a\/one \(spec.vrfs\[0\]\); neither applies/ },
    { document: 'PodNetworkConfig tenant-a/one', field: 'spec.vrfs[0]', reason: /neither applies/ },
    { document: 'PodNetworkConfig tenant-a/two', field: 'spec.routes[0].vrf', reason: /the pod gets no VRF named red/ },
  ]);
  const byTable = desiredFor(pod, shared, [
    config('one', { podSelector: all, vrfs: [{ name: 'red', table: 100 }] }),
    config('two', { podSelector: all, vrfs: [{ name: 'blue', table: 100 }] }),
  ]);
  t.same(byTable.vrfs, [], 'two VRFs on one table: neither');
  t.match(byTable.problems, [{ document: 'PodNetworkConfig tenant-a/two', field: 'spec.vrfs[0].table', reason: /table 100 as a VRF's is also set, differently, by PodNetworkConfig tenant-a\/one/ }, { document: 'PodNetworkConfig tenant-a/one' }]);
  const same = desiredFor(pod, shared, [config('one', { podSelector: all, vrfs: [{ name: 'red', table: 100 }] }), config('two', { podSelector: all, vrfs: [{ name: 'red', table: 100 }] })]);
  t.same([same.vrfs.length, same.problems], [1, []], 'the same VRF asked twice is one');
});

t.test("VRFs: the primary interface goes in one only where the node's admin allows it; a VRF takes no attachment's or the primary's name; the namespace must be allowed vrfs", async (t) => {
  const c = config('vrf', { podSelector: all, vrfs: [{ name: 'red', table: 100 }, { name: 'eth0', table: 101 }, { name: 'net1', table: 102 }], attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'eth0', vrf: 'red', mtu: 1400 }] });
  const d = desiredFor(pod, shared, [c]);
  t.same(d.tuning.map((x) => [x.interface, x.settings]), [['eth0', { mtu: 1400 }]], 'eth0 keeps its other settings');
  t.match(d.problems, [
    { field: 'spec.vrfs[1].name', reason: /eth0 is the pod's primary interface/ },
    { field: 'spec.interfaces[0].vrf', reason: /placing the pod's primary interface eth0 in a VRF is off on this node/ },
    { field: 'spec.vrfs[2].name', reason: /interface net1 is also set, differently, by PodNetworkConfig tenant-a\/vrf \(spec.attachments\[0\]\); neither applies/ },
    { field: 'spec.attachments[0]', reason: /interface net1 is also set, differently, by PodNetworkConfig tenant-a\/vrf \(spec.vrfs\[2\].name\); neither applies/ },
  ]);
  t.same(d.attachments, [], 'a VRF and an attachment of one name: neither');
  t.same(d.vrfs.map((v) => v.name), ['red']);
  const allowed = desiredFor(pod, shared, [c], [], { ...defaultLimits, primaryVrf: true });
  t.same(allowed.tuning[0]?.settings, { vrf: 'red', mtu: 1400 });

  const permission: PodNetworkPermission = { apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'PodNetworkPermission', metadata: { name: 'p', namespace: 'tenant-a' }, spec: { allow: ['attachments', 'interfaces', 'routes'] } };
  const held = desiredFor({ ...pod, permissions: [permission] }, shared, [config('vrf', { podSelector: all, vrfs: [{ name: 'red', table: 100 }], interfaces: [{ name: 'eth0', vrf: 'red', mtu: 1400 }] })], [], { ...defaultLimits, primaryVrf: true });
  t.same([held.vrfs, held.tuning.map((x) => x.settings)], [[], [{ mtu: 1400 }]]);
  t.match(held.problems, [{ field: 'spec.vrfs[0]', reason: /PodNetworkPermission tenant-a\/p does not let namespace tenant-a ask vrfs/ }, { field: 'spec.interfaces[0].vrf', reason: /ask vrfs/ }]);
});

t.test("VRFs: a config judged alone may name another config's VRF; an unnamed attachment never takes a VRF's name", async (t) => {
  const vrf = config('a-vrf', { podSelector: all, vrfs: [{ name: 'net1', table: 100 }] });
  const user = config('b-user', { podSelector: all, routes: [{ to: '198.18.99.0/24', via: '198.18.80.1', vrf: 'net1' }], interfaces: [{ name: 'eth0', vrf: 'gone' }] });
  const problems = documentProblems({ networks: shared, configs: [vrf, user, config('other-ns', { podSelector: all, vrfs: [{ name: 'gone', table: 101 }] }, 'tenant-b')], permissions: [], problems: [] }).filter((p) => p.document === 'PodNetworkConfig tenant-a/b-user');
  t.match(problems, [{ field: 'spec.interfaces[0].vrf' }], "only the VRF no config of its namespace has is told, not the other config's");
  t.equal(problems.length, 1);
  const d = desiredFor(pod, shared, [vrf, config('c-attach', { podSelector: all, attachments: [{ network: 'blue' }] })]);
  t.same(d.attachments.map((a) => a.interface), ['net2'], 'net1 is the VRF\'s');
});

t.test("a tunnel's remote an attachment chooses within its Network's ranges reaches its link; one outside is refused naming the field", async (t) => {
  const ranged: Network = { ...network('tun'), spec: { type: 'geneve', geneve: { vni: 5, remoteRanges: ['198.18.102.0/24'] }, namespaceSelector: {} } };
  const nets = new Map([['tun', ranged]]);
  const d = desiredFor(pod, nets, [config('tun', { podSelector: all, attachments: [{ network: 'tun', interface: 'net1', remote: '198.18.102.2' }] })]);
  t.same([d.problems, d.attachments[0]?.remote], [[], '198.18.102.2']);
  const { desired } = resolveSandbox('c1', d, nets, () => []);
  t.match(desired.attachments[0], { link: { kind: 'geneve', remote: '198.18.102.2' }, remote: '198.18.102.2' });
  const outside = desiredFor(pod, nets, [config('tun', { podSelector: all, attachments: [{ network: 'tun', interface: 'net1', remote: '198.18.9.2' }] })]);
  t.same(outside.attachments, []);
  t.match(outside.problems, [{ document: 'PodNetworkConfig tenant-a/tun', field: 'spec.attachments[0].remote', reason: /198\.18\.9\.2 is outside Network tun's spec\.geneve\.remoteRanges/ }]);
});
