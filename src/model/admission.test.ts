import t from 'tap';
import type { Network, PodNetworkConfig } from '../protocol/validate.ts';
import { admit, withoutRefusedMacs, type AdmissionFacts, type AdmissionSandbox } from './admission.ts';
import { generationOf } from './whole-configs.ts';
import { parseNetworksAnnotation } from './annotation.ts';
import { defaultLimits } from './desired.ts';
import { podNameLabel, type SandboxIdentity } from './identity.ts';
import type { AppliedState, Resolved } from './state.ts';

const bridge = (name: string, spec: Partial<Network['spec']> = {}): Network => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'Network',
  metadata: { name },
  spec: { type: 'bridge', namespaceSelector: {}, ...spec },
});
const ipam = { ranges: [{ subnet: '198.18.20.0/24' }] };
const config = (name: string, pod: string, spec: Omit<PodNetworkConfig['spec'], 'podSelector'>, namespace = 'tenant-a'): PodNetworkConfig => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'PodNetworkConfig',
  metadata: { name, namespace },
  spec: { podSelector: { matchLabels: { [podNameLabel]: pod } }, ...spec },
});
const pod = (name: string, namespace = 'tenant-a', annotation?: string): SandboxIdentity => ({
  namespace,
  name,
  labels: { [podNameLabel]: name },
  primaryInterface: 'eth0',
  ...(annotation !== undefined ? { annotation: parseNetworksAnnotation(annotation) } : {}),
});
const sandbox = (containerId: string, identity: SandboxIdentity | undefined, has: Partial<Pick<AdmissionSandbox, 'applied' | 'delegated' | 'seenMacs'>> = {}): AdmissionSandbox => ({
  containerId,
  pod: identity,
  applied: has.applied,
  delegated: has.delegated ?? [],
  seenMacs: has.seenMacs ?? [],
});
const applied = (containerId: string, attachments: AppliedState['attachments'], configs?: AppliedState['configs']): AppliedState => ({
  containerId,
  netns: `/run/netns/${containerId}`,
  attachments,
  tuning: [],
  routes: [],
  rules: [],
  sysctls: [],
  ...(configs ? { configs } : {}),
});
const facts = (networks: Network[], configs: PodNetworkConfig[], hostLinks: AdmissionFacts['hostLinks'] = []): AdmissionFacts => ({
  networks: new Map(networks.map((n) => [n.metadata.name, n])),
  configs,
  permissions: [],
  limits: defaultLimits,
  hostLinks,
});
const interfaces = (a: ReturnType<typeof admit>, i: number) => a.wanted[i]!.attachments.map((x) => `${x.network.metadata.name}/${x.interface}`);
const reasons = (a: ReturnType<typeof admit>, i: number) => a.wanted[i]!.problems.map((p) => `${p.document} ${p.field}: ${p.reason}`);

t.test('a sandbox whose pod the source does not know wants nothing, whatever selects its name', async (t) => {
  const a = admit([sandbox('c1', undefined)], facts([bridge('blue', { ipam })], [config('cfg', 'web', { attachments: [{ network: 'blue', interface: 'net1' }] })]));
  t.same(a.wanted[0], { configs: [], attachments: [], vrfs: [], tuning: [], routes: [], rules: [], sysctls: [], macs: [], problems: [] });
  t.equal(a.unsettled, undefined);
});

t.test("a Network's quota: the config it refuses a part of gives its pod nothing; the pod first by name keeps the place", async (t) => {
  const limited = bridge('blue', { ipam, limits: { attachmentsPerNamespace: 1 } });
  const a = admit(
    [sandbox('c1', pod('a')), sandbox('c2', pod('b'))],
    facts([limited], [config('for-a', 'a', { attachments: [{ network: 'blue', interface: 'net1' }] }), config('for-b', 'b', { attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'eth0', mtu: 1300 }] })]),
  );
  t.same(interfaces(a, 0), ['blue/net1']);
  t.same(interfaces(a, 1), []);
  t.same(a.wanted[1]!.tuning, [], 'not even the MTU the quota does not count (ADR 17)');
  t.match(reasons(a, 1), [/^PodNetworkConfig tenant-a\/for-b spec.attachments\[0\]: Network blue allows 1 attachment per namespace/, 'PodNetworkConfig tenant-a/for-b spec: nothing of it applies to the pod until all of it can']);
});

t.test('a quota place a pod already has stays its own against a pod first by name', async (t) => {
  const limited = bridge('blue', { ipam, limits: { attachmentsPerNamespace: 1 } });
  const configs = [config('for-a', 'a', { attachments: [{ network: 'blue', interface: 'net1' }] }), config('for-b', 'b', { attachments: [{ network: 'blue', interface: 'net1' }] })];
  const had = applied('c2', [{ interface: 'net1', network: 'blue', kind: 'bridge', addresses: ['198.18.20.2/24'] }], [{ name: 'PodNetworkConfig tenant-a/for-b', spec: configs[1]!.spec }]);
  const a = admit([sandbox('c1', pod('a')), sandbox('c2', pod('b'), { applied: had })], facts([limited], configs));
  t.same(interfaces(a, 0), []);
  t.same(interfaces(a, 1), ['blue/net1']);
});

t.test('a place lost with a whole config is given back: the pod it was refused for gets it, told nothing of the quota', async (t) => {
  const limited = bridge('blue', { ipam, staticMacs: true, limits: { attachmentsPerNamespace: 1 } });
  const mac = '02:00:00:00:00:0d';
  const configs = [config('for-a', 'a', { attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'net1', mac }] }), config('for-b', 'b', { attachments: [{ network: 'blue', interface: 'net1' }] })];
  // pod-z holds the MAC pod-a asks: pod-a loses its config, and with it the quota place it took first.
  const z = applied('c3', [{ interface: 'net2', network: 'gone', kind: 'bridge', addresses: [], mac }]);
  const a = admit([sandbox('c1', pod('a')), sandbox('c2', pod('b')), sandbox('c3', pod('z', 'other'), { applied: z })], facts([limited], configs));
  t.same(interfaces(a, 0), []);
  t.match(reasons(a, 0), [/spec.interfaces\[0\].mac: MAC 02:00:00:00:00:0d is in use by another pod's interface on this node/, /spec: nothing of it applies/]);
  t.same(interfaces(a, 1), ['blue/net1']);
  t.same(reasons(a, 1), []);
});

t.test("addresses brought on a Network without ipam: never the node's own, another pod's, or asked by two pods at once", async (t) => {
  const plain = bridge('plain', { staticAddresses: true });
  const configs = [
    config('host-ip', 'a', { attachments: [{ network: 'plain', interface: 'net1', ips: ['198.18.0.1/24'] }] }),
    config('held', 'b', { attachments: [{ network: 'plain', interface: 'net1', ips: ['198.18.0.7/24'] }] }),
    config('twice', 'c', { attachments: [{ network: 'plain', interface: 'net1', ips: ['198.18.0.9/24'] }] }),
    config('twice-too', 'd', { attachments: [{ network: 'plain', interface: 'net1', ips: ['198.18.0.9/24'] }] }),
    config('free', 'e', { attachments: [{ network: 'plain', interface: 'net1', ips: ['198.18.0.10/24'] }] }),
  ];
  const holder = applied('c6', [{ interface: 'net1', network: 'plain', kind: 'bridge', addresses: ['198.18.0.7/24'] }]);
  const a = admit(
    [sandbox('c1', pod('a')), sandbox('c2', pod('b')), sandbox('c3', pod('c')), sandbox('c4', pod('d')), sandbox('c5', pod('e')), sandbox('c6', pod('f', 'other'), { applied: holder })],
    facts([plain], configs, [{ addresses: ['198.18.0.1/24'] }]),
  );
  t.match(reasons(a, 0)[0], /spec.attachments\[0\].ips: address 198.18.0.1 is an address of one of the node's own interfaces/);
  t.match(reasons(a, 1)[0], /address 198.18.0.7 is in use by another pod's interface on this node/);
  t.match(reasons(a, 2)[0], /address 198.18.0.9 is asked for another pod on this node too; neither gets it/);
  t.match(reasons(a, 3)[0], /address 198.18.0.9 is asked for another pod on this node too/);
  t.same([0, 1, 2, 3].map((i) => interfaces(a, i)), [[], [], [], []], 'each refused config gives its pod nothing');
  t.same(interfaces(a, 4), ['plain/net1']);
});

t.test("an annotation's refused part alone is left out: the rest of what the pod asks stands", async (t) => {
  const plain = bridge('plain', { staticAddresses: true });
  const a = admit(
    [sandbox('c1', pod('a', 'tenant-a', JSON.stringify([{ name: 'plain', interface: 'net1', ips: ['198.18.0.1/24'] }, { name: 'plain', interface: 'net2', ips: ['198.18.0.2/24'] }])))],
    facts([plain], [], [{ addresses: ['198.18.0.1/24'] }]),
  );
  t.same(interfaces(a, 0), ['plain/net2']);
  t.match(reasons(a, 0), [/^Pod tenant-a\/a metadata.annotations\["podnetwork.opdev.io\/networks"\]\[0\].ips: address 198.18.0.1 is an address of one of the node's own interfaces/]);
});

t.test("static MACs: the node's own, one another pod's interface was last seen with, and one two pods ask are refused; the MAC alone, after names and addresses", async (t) => {
  const blue = bridge('blue', { ipam, staticMacs: true });
  const ask = (name: string, p: string, mac: string) => config(name, p, { attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'net1', mac, mtu: 1300 }] });
  const a = admit(
    [sandbox('c1', pod('a')), sandbox('c2', pod('b')), sandbox('c3', pod('other', 'tenant-b'), { seenMacs: ['02:00:00:00:00:02'] })],
    facts([blue], [ask('host', 'a', '0A:58:00:00:00:01'), ask('seen', 'b', '02:00:00:00:00:02')], [{ mac: '0a:58:00:00:00:01', addresses: [] }]),
  );
  // A config asking a MAC the node refuses gives its pod nothing (ADR 17): the MAC refusal comes
  // before names and addresses only for an annotation, whose parts stand alone.
  t.same(interfaces(a, 0), []);
  t.match(reasons(a, 0)[0], /MAC 0A:58:00:00:00:01 is the MAC of one of the node's own interfaces/);
  t.match(reasons(a, 1)[0], /MAC 02:00:00:00:00:02 is in use by another pod's interface on this node/);
  t.same(a.macs.size, 0, 'nothing left to take out after the configs went');
});

t.test("an annotation's static MAC the node refuses is taken out of the tuning alone, once the interface is named", async (t) => {
  const blue = bridge('blue', { ipam, staticMacs: true });
  const a = admit([sandbox('c1', pod('a', 'tenant-a', JSON.stringify([{ name: 'blue', mac: '0a:58:00:00:00:01' }])))], facts([blue], [], [{ mac: '0a:58:00:00:00:01', addresses: [] }]));
  t.same(interfaces(a, 0), ['blue/net1'], 'the attachment stands');
  const refused = a.macs.get('c1');
  t.match(refused, [{ interface: 'net1', problem: { field: /\[0\]\.mac$/, reason: /the MAC of one of the node's own interfaces/ } }]);
  const desired: Resolved = { attachments: [], delegated: [], vrfs: [], tuning: [{ interface: 'net1', settings: { mac: '0a:58:00:00:00:01', mtu: 1400 } }, { interface: 'net2', settings: { mac: '02:00:00:00:00:09' } }], routes: [], rules: [], sysctls: [] };
  const out = withoutRefusedMacs(desired, [], refused);
  t.same(out.desired.tuning, [{ interface: 'net1', settings: { mtu: 1400 } }, { interface: 'net2', settings: { mac: '02:00:00:00:00:09' } }]);
  t.equal(out.problems.length, 1);
  t.same(withoutRefusedMacs({ ...desired, tuning: [{ interface: 'net1', settings: { mac: '0a:58:00:00:00:01' } }] }, [], refused).desired.tuning, [], 'a tuning of the MAC alone goes');
});

t.test('a state an older podnet wrote names no configs: the pod has those that select it now', async (t) => {
  const blue = bridge('blue', { ipam, limits: { attachmentsPerNamespace: 1 } });
  const configs = [config('for-a', 'a', { attachments: [{ network: 'blue', interface: 'net1' }] }), config('for-b', 'b', { attachments: [{ network: 'blue', interface: 'net1' }] })];
  const older = applied('c2', [{ interface: 'net1', network: 'blue', kind: 'bridge', addresses: ['198.18.20.9/24'] }]);
  const a = admit([sandbox('c1', pod('a')), sandbox('c2', pod('b'), { applied: older })], facts([blue], configs));
  t.same(a.wanted[1]!.whole?.map((c) => c.name), ['PodNetworkConfig tenant-a/for-b'], 'it has the config whole');
  t.same(interfaces(a, 1), ['blue/net1'], 'and keeps the place it holds');
});

t.test('again: one sandbox made anew with a generation refused too, keeping what the node refused it', async (t) => {
  const limited = bridge('blue', { ipam, limits: { attachmentsPerNamespace: 1 } });
  const a = admit(
    [sandbox('c1', pod('a')), sandbox('c2', pod('b'))],
    facts([limited], [config('for-a', 'a', { attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'eth0', mtu: 1400 }] }), config('for-b', 'b', { attachments: [{ network: 'blue', interface: 'net1' }] })]),
  );
  const whole = a.wanted[0]!.whole!;
  t.same(whole.map((c) => c.name), ['PodNetworkConfig tenant-a/for-a']);
  const problem = { document: whole[0]!.name, field: 'spec.interfaces[0]', reason: 'the pod has no interface eth0' };
  const again = a.again(0, [{ config: whole[0]!.name, generation: generationOf(whole[0]!.spec), problem }]);
  t.same(again.attachments, [], 'nothing of the refused generation');
  t.same(again.tuning, []);
  t.match(again.problems.map((p) => `${p.document} ${p.field}: ${p.reason}`), ['PodNetworkConfig tenant-a/for-a spec.interfaces[0]: the pod has no interface eth0', 'PodNetworkConfig tenant-a/for-a spec: nothing of it applies to the pod until all of it can']);
  t.strictSame(a.again(1, []), a.wanted[1], 'again with nothing more refused is what admission gave');
  t.same(a.again(1, []).attachments, [], 'so it keeps what the node refused the sandbox (the quota)');
});
