import t from 'tap';
import type { Network, PodNetworkConfig } from '../protocol/validate.ts';
import { desiredFor, identityOf, podNameLabel } from './desired.ts';
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
