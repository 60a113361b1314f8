import t from 'tap';
import type { IpRange, Network, PodNetworkConfig } from '../protocol/validate.ts';
import { defaultLimits } from './desired.ts';
import { configProblems, documentProblems, networkProblems } from './document-problems.ts';

const network = (name: string, spec: Partial<Network['spec']> = {}): Network => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'Network',
  metadata: { name },
  spec: { type: 'bridge', namespaceSelector: {}, ...spec },
});
const config = (name: string, spec: Omit<PodNetworkConfig['spec'], 'podSelector'> & { podSelector?: PodNetworkConfig['spec']['podSelector'] }): PodNetworkConfig => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'PodNetworkConfig',
  metadata: { name, namespace: 'tenant-a' },
  spec: { podSelector: {}, ...spec },
});
/** Admits the namespaces named. */
const offered = (name: string, ...namespaces: string[]): Network =>
  network(name, { namespaceSelector: { matchExpressions: [{ key: 'kubernetes.io/metadata.name', operator: 'In', values: namespaces }] } });
const withRanges = (name: string, ...ranges: [IpRange, ...IpRange[]]): Network => network(name, { ipam: { ranges } });
const byName = (...list: Network[]): Map<string, Network> => new Map(list.map((n) => [n.metadata.name, n]));
/** The problems of the Network alone (no other Network to share a bridge with). */
const alone = (n: Network) => networkProblems(n, byName(n));

t.test('ranges that overlap are refused at the later range', async (t) => {
  const blue = withRanges('blue', { subnet: '198.18.0.0/16' }, { subnet: '198.18.5.0/24' });
  t.same(alone(blue), [{ document: 'Network blue', field: 'spec.ipam.ranges[1]', reason: 'ranges 198.18.0.0/16 and 198.18.5.0/24 overlap' }]);
  const same = withRanges('same', { subnet: '2001:db8::/64' }, { subnet: '198.18.5.0/24' }, { subnet: '2001:db8::/64' });
  t.same(alone(same).map((p) => p.field), ['spec.ipam.ranges[2]']);
  t.match(alone(same)[0]?.reason, /overlap/);
});

t.test('an IPv4 and an IPv6 range do not overlap', async (t) => {
  t.same(alone(withRanges('dual', { subnet: '198.18.5.0/24' }, { subnet: '2001:db8::/64' })), []);
});

t.test('a subnet with host bits set is refused, naming the subnet meant', async (t) => {
  const problems = alone(withRanges('blue', { subnet: '198.18.5.1/24' }));
  t.same(problems.map((p) => p.field), ['spec.ipam.ranges[0]']);
  t.match(problems[0]?.reason, /198\.18\.5\.1\/24 has host bits set; the subnet is 198\.18\.5\.0\/24$/);
});

t.test('a subnet too small to allocate from is refused', async (t) => {
  const problems = alone(withRanges('p2p', { subnet: '198.18.5.0/24' }, { subnet: '198.18.6.0/31' }));
  t.same(problems.map((p) => p.field), ['spec.ipam.ranges[1]']);
  t.match(problems[0]?.reason, /subnet 198\.18\.6\.0\/31 is too small to allocate from/);
  t.same(alone(withRanges('thirty', { subnet: '198.18.6.0/30' })), [], 'a /30 is small enough');
});

t.test('a rangeStart outside its subnet is refused', async (t) => {
  const problems = alone(withRanges('blue', { subnet: '198.18.5.0/24', rangeStart: '198.18.6.10' }));
  t.same(problems.map((p) => p.field), ['spec.ipam.ranges[0]']);
  t.match(problems[0]?.reason, /rangeStart 198\.18\.6\.10 is outside subnet 198\.18\.5\.0\/24/);
});

t.test('two bridge Networks naming the same bridge: each is told of the other', async (t) => {
  const blue = network('blue', { bridge: { name: 'br-lab' } });
  const red = network('red', { bridge: { name: 'br-lab' } });
  const all = byName(blue, red);
  const forBlue = networkProblems(blue, all);
  t.same(forBlue.map((p) => `${p.document} ${p.field}`), ['Network blue spec.bridge.name']);
  t.match(forBlue[0]?.reason, /^its host bridge br-lab is also the bridge of Network red:/);
  const forRed = networkProblems(red, all);
  t.same(forRed.map((p) => `${p.document} ${p.field}`), ['Network red spec.bridge.name']);
  t.match(forRed[0]?.reason, /also the bridge of Network blue:/);
});

t.test('a default bridge name clashing with one named outright: the default one is told at metadata.name', async (t) => {
  const blue = network('blue');
  const red = network('red', { bridge: { name: 'pn-blue' } });
  const all = byName(blue, red);
  const forBlue = networkProblems(blue, all);
  t.same(forBlue.map((p) => p.field), ['metadata.name']);
  t.match(forBlue[0]?.reason, /^its host bridge pn-blue is also the bridge of Network red:/);
  t.same(networkProblems(red, all).map((p) => p.field), ['spec.bridge.name']);
});

t.test('two long names cut to the same default bridge clash', async (t) => {
  const one = network('tenant-alpha-1');
  const two = network('tenant-alpha-2');
  const problems = networkProblems(one, byName(one, two));
  t.same(problems.map((p) => p.field), ['metadata.name']);
  t.match(problems[0]?.reason, /^its host bridge pn-tenant-alpha is also the bridge of Network tenant-alpha-2:/);
});

t.test('only bridge Networks share a bridge', async (t) => {
  const blue = network('blue', { bridge: { name: 'br-lab' } });
  const mac = network('mac', { type: 'macvlan', macvlan: { parent: 'eth1' }, bridge: { name: 'br-lab' } });
  t.same(networkProblems(blue, byName(blue, mac)), []);
  t.same(networkProblems(mac, byName(blue, mac)), []);
});

t.test('a sound Network has no problems', async (t) => {
  const blue = network('blue', {
    bridge: { name: 'br-blue', gateway: true },
    ipam: { ranges: [{ subnet: '198.18.5.0/24', rangeStart: '198.18.5.10', rangeEnd: '198.18.5.99', gateway: '198.18.5.1' }, { subnet: '2001:db8:5::/64' }] },
  });
  t.same(networkProblems(blue, byName(blue, network('red'))), []);
});

// ---- PodNetworkConfig ---------------------------------------------------------------------------

const tenantA = { 'kubernetes.io/metadata.name': 'tenant-a' };
const offers = byName(offered('blue', 'tenant-a'), offered('red', 'tenant-b'));

t.test('a config that names a Network that does not exist or does not admit its namespace: told even when it selects no pod', async (t) => {
  const bad = config('bad', { podSelector: { matchLabels: { app: 'no-such-pod' } }, attachments: [{ network: 'nope', interface: 'net1' }, { network: 'red', interface: 'net2' }] });
  t.same(configProblems(bad, offers, tenantA), [
    { document: 'PodNetworkConfig tenant-a/bad', field: 'spec.attachments[0].network', reason: 'no Network named nope' },
    { document: 'PodNetworkConfig tenant-a/bad', field: 'spec.attachments[1].network', reason: 'Network red does not admit namespace tenant-a' },
  ]);
  t.same(configProblems(config('fine', { attachments: [{ network: 'blue', interface: 'net1' }] }), offers, tenantA), [], 'a sound config has none');
});

t.test('a Network admits a config by the labels of its namespace', async (t) => {
  const team = network('team', { namespaceSelector: { matchLabels: { team: 'alpha' } } });
  const c = config('t', { attachments: [{ network: 'team', interface: 'net1' }] });
  t.same(configProblems(c, byName(team), { ...tenantA, team: 'alpha' }), []);
  t.same(configProblems(c, byName(team), tenantA).map((p) => `${p.field}: ${p.reason}`), ['spec.attachments[0].network: Network team does not admit namespace tenant-a']);
});

t.test('a config attaching at the primary interface is refused on its own: a kubelet names it eth0', async (t) => {
  t.same(configProblems(config('p', { attachments: [{ network: 'blue', interface: 'eth0' }] }), offers, tenantA).map((p) => p.field), ['spec.attachments[0].interface']);
});

t.test('two configs that conflict are not problems of either alone: which pods both select is a pod\'s question', async (t) => {
  const one = config('one', { interfaces: [{ name: 'eth0', mtu: 1400 }] });
  const two = config('two', { interfaces: [{ name: 'eth0', mtu: 1300 }] });
  t.same(documentProblems({ networks: offers, configs: [one, two], permissions: [], problems: [] }), []);
});

// ---- all documents --------------------------------------------------------------------------------

t.test('every document\'s problems at once: those the source told, then each spec\'s', async (t) => {
  const overlapping = withRanges('blue', { subnet: '198.18.0.0/16' }, { subnet: '198.18.5.0/24' });
  const networks = byName(overlapping);
  const unread = { document: 'x.yaml document 2', field: '(syntax)', reason: 'bad indentation' };
  const problems = documentProblems({ networks, configs: [config('c', { attachments: [{ network: 'nope', interface: 'net1' }] })], permissions: [], problems: [unread] });
  t.same(problems.map((p) => `${p.document} ${p.field}`), ['x.yaml document 2 (syntax)', 'Network blue spec.ipam.ranges[1]', 'PodNetworkConfig tenant-a/c spec.attachments[0].network']);
});

t.test('a field the source told of is not told again by the spec check', async (t) => {
  const nad = network('nad', { type: 'cni' });
  const told = { document: 'Network nad', field: 'spec.cni.config', reason: 'its NetworkAttachmentDefinition tenant-a/nad is not found' };
  const problems = documentProblems({ networks: byName(nad), configs: [], permissions: [], problems: [told] });
  t.same(problems.filter((p) => p.field === told.field), [told]);
});

t.test('namespace labels come from the source where it knows them', async (t) => {
  const team = network('team', { namespaceSelector: { matchLabels: { team: 'alpha' } } });
  const docs = { networks: byName(team), configs: [config('t', { attachments: [{ network: 'team', interface: 'net1' }] })], permissions: [], problems: [] };
  t.equal(documentProblems(docs).length, 1, 'a namespace known only by its name is not admitted');
  t.same(documentProblems(docs, (ns) => (ns === 'tenant-a' ? { ...tenantA, team: 'alpha' } : undefined)), []);
});

t.test('a config asking more attachments than the node allows a pod is told so on its own', async (t) => {
  const many = config('many', { attachments: Array.from({ length: 3 }, (_, i) => ({ network: 'blue', interface: `net${i + 1}` })) });
  t.same(configProblems(many, offers, tenantA, { ...defaultLimits, attachmentsPerPod: 2 }).map((p) => `${p.field}: ${p.reason}`), [
    "spec.attachments[2]: the pod would have more attachments than the 2 this node's admin allows per pod (podnet daemon --max-attachments-per-pod)",
  ]);
  t.same(documentProblems({ networks: offers, configs: [many], permissions: [], problems: [] }, () => undefined, { ...defaultLimits, attachmentsPerPod: 3 }), []);
});
