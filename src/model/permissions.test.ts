import t from 'tap';
import type { Network, PodNetworkConfig, PodNetworkPermission } from '../protocol/validate.ts';
import { admit, type AdmissionSandbox } from './admission.ts';
import { parseNetworksAnnotation } from './annotation.ts';
import { defaultLimits } from './desired.ts';
import { documentProblems } from './document-problems.ts';
import { identityOf, podNameLabel, type SandboxIdentity } from './identity.ts';
import { allowingNothing, permissionProblems } from './permissions.ts';

const blue: Network = {
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'Network',
  metadata: { name: 'blue' },
  spec: { type: 'bridge', namespaceSelector: {} },
};
const networks = new Map([['blue', blue]]);
const permission = (name: string, spec: PodNetworkPermission['spec'], namespace = 'tenant-a'): PodNetworkPermission => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'PodNetworkPermission',
  metadata: { name, namespace },
  spec,
});
const all = { matchLabels: { [podNameLabel]: 'cnf-0' } };
const config = (name: string, spec: Omit<PodNetworkConfig['spec'], 'podSelector'>, namespace = 'tenant-a'): PodNetworkConfig => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'PodNetworkConfig',
  metadata: { name, namespace },
  spec: { podSelector: all, ...spec },
});
const pod = (namespace = 'tenant-a', annotation?: string): SandboxIdentity => ({
  ...identityOf({ containerId: 'c1', ifname: 'eth0', network: 'k8s', netns: '/run/netns/x', cniVersion: '1.0.0', createdAt: '2026-01-01T00:00:00Z', pod: { namespace, name: 'cnf-0' } }),
  ...(annotation !== undefined ? { annotation: parseNetworksAnnotation(annotation) } : {}),
});
const sandbox = (identity: SandboxIdentity): AdmissionSandbox => ({ containerId: 'c1', pod: identity, applied: undefined, delegated: [], seenMacs: [] });
const wanted = (identity: SandboxIdentity, configs: PodNetworkConfig[], permissions: PodNetworkPermission[]) =>
  admit([sandbox(identity)], { networks, configs, permissions, limits: defaultLimits, hostLinks: [] }).wanted[0]!;
const told = (problems: readonly { document: string; field: string; reason: string }[]) => problems.map((p) => `${p.document} ${p.field}: ${p.reason}`);

const everything = config('everything', {
  attachments: [{ network: 'blue', interface: 'net1', bandwidth: { ingressRate: 1000000, ingressBurst: 100000 } }],
  interfaces: [{ name: 'eth0', mtu: 1400 }],
  routes: [{ to: '198.18.0.0/24', table: 100, dev: 'net1' }],
  rules: [{ priority: 100, from: '198.18.1.0/24', table: 100 }],
  sysctls: [{ name: 'net.ipv4.conf.eth0.rp_filter', value: '2' }],
});

t.test('a namespace without a permission asks every part', async (t) => {
  const w = wanted(pod(), [everything], [permission('other', { allow: [] }, 'tenant-b')]);
  t.same(told(w.problems), []);
  t.equal(w.attachments.length, 1);
  t.equal(w.routes.length, 1);
});

t.test('a part its permission does not list refuses the config whole, naming the field and the permission', async (t) => {
  const w = wanted(pod(), [everything], [permission('attach-only', { allow: ['attachments', 'bandwidth'] })]);
  t.same(told(w.problems), [
    'PodNetworkConfig tenant-a/everything spec.interfaces[0]: PodNetworkPermission tenant-a/attach-only does not let namespace tenant-a ask interfaces',
    'PodNetworkConfig tenant-a/everything spec.routes[0]: PodNetworkPermission tenant-a/attach-only does not let namespace tenant-a ask routes',
    'PodNetworkConfig tenant-a/everything spec.rules[0]: PodNetworkPermission tenant-a/attach-only does not let namespace tenant-a ask rules',
    'PodNetworkConfig tenant-a/everything spec.sysctls[0]: PodNetworkPermission tenant-a/attach-only does not let namespace tenant-a ask sysctls',
    'PodNetworkConfig tenant-a/everything spec: nothing of it applies to the pod until all of it can',
  ]);
  t.same(w.attachments, [], 'the allowed attachment goes too: a config applies whole');
});

t.test('bandwidth is a part of its own: an attachment with a rate limit needs it', async (t) => {
  const w = wanted(pod(), [config('capped', { attachments: [{ network: 'blue', interface: 'net1', bandwidth: { ingressRate: 1000000, ingressBurst: 100000 } }] })], [permission('p', { allow: ['attachments'] })]);
  t.same(told(w.problems).slice(0, 1), ['PodNetworkConfig tenant-a/capped spec.attachments[0].bandwidth: PodNetworkPermission tenant-a/p does not let namespace tenant-a ask bandwidth']);
  t.same(wanted(pod(), [config('plain', { attachments: [{ network: 'blue', interface: 'net1' }] })], [permission('p', { allow: ['attachments'] })]).attachments.length, 1);
});

t.test('marking is a part of its own: an attachment with a DSCP needs it; a DSCP of 0 is asked too', async (t) => {
  for (const dscp of [46, 0]) {
    const w = wanted(pod(), [config('marked', { attachments: [{ network: 'blue', interface: 'net1', dscp }] })], [permission('p', { allow: ['attachments'] })]);
    t.same(told(w.problems).slice(0, 1), ['PodNetworkConfig tenant-a/marked spec.attachments[0].dscp: PodNetworkPermission tenant-a/p does not let namespace tenant-a ask marking'], `dscp ${dscp}`);
  }
  const allowed = wanted(pod(), [config('marked', { attachments: [{ network: 'blue', interface: 'net1', dscp: 46 }] })], [permission('p', { allow: ['attachments', 'marking'] })]);
  t.same(allowed.attachments.map((a) => [a.interface, a.dscp]), [['net1', 46]], 'allowed: the attachment carries its DSCP');
});

t.test('several permissions in a namespace: each must allow the part', async (t) => {
  const routes = config('routes', { routes: [{ to: '198.18.0.0/24', table: 100, dev: 'eth0' }] });
  t.same(wanted(pod(), [routes], [permission('a', { allow: ['routes'] }), permission('b', { allow: ['routes', 'rules'] })]).problems, []);
  const w = wanted(pod(), [routes], [permission('a', { allow: ['routes'] }), permission('b', { allow: ['rules'] })]);
  t.match(told(w.problems)[0], /spec\.routes\[0\]: PodNetworkPermission tenant-a\/b does not let/);
});

t.test('MTU bounds: below the lowest or above the highest is refused at the MTU field', async (t) => {
  const mtu = (n: number) => config('mtu', { interfaces: [{ name: 'eth0', mtu: n }] });
  const bounds = [permission('p', { allow: ['interfaces'], mtu: { min: 1280, max: 9000 } })];
  t.same(wanted(pod(), [mtu(1400)], bounds).tuning.map((x) => x.settings.mtu), [1400]);
  t.same(told(wanted(pod(), [mtu(1200)], bounds).problems)[0], 'PodNetworkConfig tenant-a/mtu spec.interfaces[0].mtu: PodNetworkPermission tenant-a/p lets namespace tenant-a set no MTU below 1280; this asks 1200');
  t.same(told(wanted(pod(), [mtu(9100)], bounds).problems)[0], 'PodNetworkConfig tenant-a/mtu spec.interfaces[0].mtu: PodNetworkPermission tenant-a/p lets namespace tenant-a set no MTU above 9000; this asks 9100');
});

t.test('an IPv6 MTU set by sysctl is held to the MTU bounds too', async (t) => {
  const bounds = [permission('p', { allow: ['sysctls'], mtu: { min: 1400 } })];
  const low = wanted(pod(), [config('v6', { sysctls: [{ name: 'net.ipv6.conf.eth0.mtu', value: '1280' }] })], bounds);
  t.same(told(low.problems)[0], 'PodNetworkConfig tenant-a/v6 spec.sysctls[0].value: PodNetworkPermission tenant-a/p lets namespace tenant-a set no MTU below 1400; this asks 1280');
  t.same(wanted(pod(), [config('v6', { sysctls: [{ name: 'net.ipv6.conf.eth0.mtu', value: '1450' }] })], bounds).sysctls.length, 1);
});

t.test('an annotation entry its namespace may not ask is left out and told, while what a config asks and it allows applies', async (t) => {
  const w = wanted(pod('tenant-a', '[{"name":"blue","interface":"net1"}]'), [config('mtu', { interfaces: [{ name: 'eth0', mtu: 1400 }] })], [permission('tuning-only', { allow: ['interfaces'] })]);
  t.same(told(w.problems), ['Pod tenant-a/cnf-0 metadata.annotations["podnetwork.opdev.io/networks"][0]: PodNetworkPermission tenant-a/tuning-only does not let namespace tenant-a ask attachments']);
  t.same(w.attachments, []);
  t.same(w.tuning.map((x) => x.settings.mtu), [1400], 'the config, which it allows, still applies');
});

t.test('the config\'s own problems tell the permission too (its status), and a permission with bounds no MTU meets is told', async (t) => {
  const p = permission('p', { allow: ['attachments'] });
  const problems = documentProblems({ networks, configs: [everything], permissions: [p], problems: [] });
  t.ok(problems.some((x) => x.field === 'spec.routes[0]' && /PodNetworkPermission tenant-a\/p/.test(x.reason)));
  t.same(told(permissionProblems(permission('q', { allow: ['interfaces'], mtu: { min: 9000, max: 1500 } }))), ['PodNetworkPermission tenant-a/q spec.mtu: min 9000 is above max 1500: no MTU can be set in namespace tenant-a']);
});

t.test('a permission that cannot be read allows nothing', async (t) => {
  const w = wanted(pod(), [config('plain', { attachments: [{ network: 'blue', interface: 'net1' }] })], [allowingNothing({ metadata: { name: 'typo', namespace: 'tenant-a' } })!]);
  t.same(w.attachments, []);
  t.match(told(w.problems)[0], /PodNetworkPermission tenant-a\/typo does not let namespace tenant-a ask attachments/);
  t.equal(allowingNothing({ metadata: { name: 'x', namespace: 'Not A Name' } }), undefined, 'one whose namespace cannot be read binds no namespace');
  t.equal(allowingNothing({ metadata: { name: 'Lab', namespace: 'tenant-a' } })?.metadata.name, 'unreadable', 'one whose name cannot be read still binds its namespace');
  t.equal(allowingNothing({})?.metadata.namespace, 'default', 'one without metadata holds default, where a document without a namespace is');
});
