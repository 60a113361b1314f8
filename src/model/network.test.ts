import t from 'tap';
import type { IpRange, Network } from '../protocol/validate.ts';
import { bridgeNameOf, networkSpecProblems } from './network.ts';

const network = (name: string, spec: Partial<Network['spec']> = {}): Network => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'Network',
  metadata: { name },
  spec: { type: 'bridge', namespaceSelector: {}, ...spec },
});
const withRanges = (name: string, ...ranges: [IpRange, ...IpRange[]]): Network => network(name, { ipam: { ranges } });
const byName = (...list: Network[]): Map<string, Network> => new Map(list.map((n) => [n.metadata.name, n]));
/** The problems of the Network alone (no other Network to share a bridge with). */
const alone = (n: Network) => networkSpecProblems(n, byName(n));

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
  const forBlue = networkSpecProblems(blue, all);
  t.same(forBlue.map((p) => `${p.document} ${p.field}`), ['Network blue spec.bridge.name']);
  t.match(forBlue[0]?.reason, /^its host bridge br-lab is also the bridge of Network red:/);
  const forRed = networkSpecProblems(red, all);
  t.same(forRed.map((p) => `${p.document} ${p.field}`), ['Network red spec.bridge.name']);
  t.match(forRed[0]?.reason, /also the bridge of Network blue:/);
});

t.test('a default bridge name clashing with one named outright: the default one is told at metadata.name', async (t) => {
  const blue = network('blue');
  const red = network('red', { bridge: { name: 'pn-blue' } });
  const all = byName(blue, red);
  const forBlue = networkSpecProblems(blue, all);
  t.same(forBlue.map((p) => p.field), ['metadata.name']);
  t.match(forBlue[0]?.reason, /^its host bridge pn-blue is also the bridge of Network red:/);
  t.same(networkSpecProblems(red, all).map((p) => p.field), ['spec.bridge.name']);
});

t.test('two long names cut to the same default bridge clash', async (t) => {
  const one = network('tenant-alpha-1');
  const two = network('tenant-alpha-2');
  const problems = networkSpecProblems(one, byName(one, two));
  t.same(problems.map((p) => p.field), ['metadata.name']);
  t.match(problems[0]?.reason, /^its host bridge pn-tenant-alpha is also the bridge of Network tenant-alpha-2:/);
});

t.test('only bridge Networks share a bridge', async (t) => {
  const blue = network('blue', { bridge: { name: 'br-lab' } });
  const mac = network('mac', { type: 'macvlan', macvlan: { parent: 'eth1' }, bridge: { name: 'br-lab' } });
  t.same(networkSpecProblems(blue, byName(blue, mac)), []);
  t.same(networkSpecProblems(mac, byName(blue, mac)), []);
});

t.test('a sound Network has no problems', async (t) => {
  const blue = network('blue', {
    bridge: { name: 'br-blue', gateway: true },
    ipam: { ranges: [{ subnet: '198.18.5.0/24', rangeStart: '198.18.5.10', rangeEnd: '198.18.5.99', gateway: '198.18.5.1' }, { subnet: '2001:db8:5::/64' }] },
  });
  t.same(networkSpecProblems(blue, byName(blue, network('red'))), []);
});

t.test('bridge name: the one named, else pn- and the Network\'s name cut to 15 characters', async (t) => {
  t.equal(bridgeNameOf(network('blue', { bridge: { name: 'br-lab' } })), 'br-lab');
  t.equal(bridgeNameOf(network('blue')), 'pn-blue');
  t.equal(bridgeNameOf(network('blue', { bridge: { gateway: true } })), 'pn-blue', 'a bridge object without a name');
  const long = bridgeNameOf(network('a-very-long-network-name'));
  t.equal(long, 'pn-a-very-long-');
  t.equal(Buffer.byteLength(long), 15);
});
