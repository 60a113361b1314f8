import t from 'tap';
import { readFileSync } from 'node:fs';
import type { Network } from '../../protocol/validate.ts';
import { addressesGiven, attachmentRefusal, linkDigest, describeLink, bringsOwnAddresses, hostBridgeOf, kindOf, linkKindOf, makingOf, networkKinds, type Allocation, type LinkSpec, type NetworkKinds } from './index.ts';

const network = (name: string, spec: Network['spec']): Network => ({ apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'Network', metadata: { name }, spec });
const byName = (...list: Network[]): Map<string, Network> => new Map(list.map((n) => [n.metadata.name, n]));
const schema = (file: string) => JSON.parse(readFileSync(new URL(`../../../schemas/${file}.schema.json`, import.meta.url), 'utf8'));

const blue = network('blue', { type: 'bridge', bridge: { gateway: true }, ipam: { ranges: [{ subnet: '198.18.5.0/24' }, { subnet: '2001:db8:5::/64' }] } });
const mac = network('mac', { type: 'macvlan', macvlan: { parent: 'eth1' } });
const shared = network('shared', { type: 'ipvlan', ipvlan: { parent: 'eth1', mode: 'l3' } });
const tagged = network('tagged', { type: 'vlan', vlan: { parent: 'eth1', id: 100 } });
const tunnel = network('tunnel', { type: 'vxlan', vxlan: { vni: 42, remote: '198.18.100.2', device: 'eth1' } });
const gre = network('gre', { type: 'gre', gre: { remote: '2001:db8:100::2', device: 'eth1', key: 7, ttl: 64 } });
const geneve = network('geneve', { type: 'geneve', geneve: { vni: 0, remote: '198.18.100.2' } });
const plugins = network('plugins', { type: 'cni', cni: { config: { cniVersion: '1.0.0', plugins: [{ type: 'bridge' }, { type: 'tuning' }] } } });
const every = [blue, mac, shared, tagged, tunnel, gre, geneve, plugins];

t.test("one kind per type of the schema, each under its own type; every link kind is one an applied state may record", async (t) => {
  const api = schema('api');
  t.same(Object.keys(networkKinds).sort(), [...api.$defs.Network.properties.spec.properties.type.enum].sort());
  for (const [type, kind] of Object.entries(networkKinds)) t.equal(kind.type, type);
  const recorded = schema('state').$defs.AppliedAttachment.properties.kind.enum as string[];
  const links = Object.values(networkKinds).filter((k) => k.attachedBy === 'podnet').map((k) => k.type);
  t.same(links.filter((type) => !recorded.includes(type)), [], `state.schema.json records ${recorded.join(', ')}`);
  const { cni: _cni, ...withoutCni } = networkKinds;
  // @ts-expect-error: a table without an entry for each type does not compile
  const incomplete: NetworkKinds = withoutCni;
  t.notOk('cni' in incomplete);
});

t.test('the link spec each kind resolves to, how it is made, and how it is described', async (t) => {
  const allocations = [{ address: '198.18.5.2/24', gateway: '198.18.5.1' }, { address: '2001:db8:5::2/64', gateway: '2001:db8:5::1' }];
  const pod = { interface: 'net1', mtu: 1400, netns: '/run/netns/p' };
  const rows: { network: Network; link: LinkSpec; made: string | { bridge: string; addresses: string[]; portSecurity: boolean }; needs?: string; text: string }[] = [
    {
      network: blue,
      link: { kind: 'bridge', bridge: 'pn-blue', bridgeAddresses: ['198.18.5.1/24', '2001:db8:5::1/64'], portSecurity: true },
      made: { bridge: 'pn-blue', addresses: ['198.18.5.1/24', '2001:db8:5::1/64'], portSecurity: true },
      text: 'bridge pn-blue, port security on',
    },
    {
      network: mac,
      link: { kind: 'macvlan', parent: 'eth1', mode: 'bridge' },
      made: 'link add link eth1 name net1 netns /run/netns/p mtu 1400 type macvlan mode bridge',
      needs: 'eth1',
      text: 'macvlan on eth1, mode bridge',
    },
    {
      network: shared,
      link: { kind: 'ipvlan', parent: 'eth1', mode: 'l3' },
      made: 'link add link eth1 name net1 netns /run/netns/p mtu 1400 type ipvlan mode l3',
      needs: 'eth1',
      text: 'ipvlan on eth1, mode l3',
    },
    {
      network: tagged,
      link: { kind: 'vlan', parent: 'eth1', id: 100 },
      made: 'link add link eth1 name net1 netns /run/netns/p mtu 1400 type vlan id 100',
      needs: 'eth1',
      text: 'vlan 100 on eth1',
    },
    {
      network: tunnel,
      link: { kind: 'vxlan', vni: 42, port: 4789, remote: '198.18.100.2', device: 'eth1' },
      made: 'link add name net1 netns /run/netns/p mtu 1400 type vxlan id 42 remote 198.18.100.2 dstport 4789 dev eth1',
      needs: 'eth1',
      text: 'vxlan 42 to 198.18.100.2 port 4789 over eth1',
    },
    {
      network: gre,
      link: { kind: 'gre', remote: '2001:db8:100::2', device: 'eth1', key: 7, ttl: 64 },
      made: 'link add name pnt0 mtu 1400 type ip6gre remote 2001:db8:100::2 local 2001:db8:100::1 key 7 ttl 64 dev eth1',
      needs: 'eth1',
      text: 'gre to 2001:db8:100::2 key 7 over eth1',
    },
    {
      network: geneve,
      link: { kind: 'geneve', vni: 0, remote: '198.18.100.2', port: 6081 },
      made: 'link add name net1 netns /run/netns/p mtu 1400 type geneve id 0 remote 198.18.100.2 dstport 6081',
      text: 'geneve 0 to 198.18.100.2 port 6081',
    },
  ];
  for (const row of rows) {
    const kind = kindOf(row.network);
    if (kind.attachedBy !== 'podnet') return void t.fail(`${row.network.spec.type} makes no link`);
    const link = kind.linkSpec(row.network, allocations);
    t.same(link, row.link, `${link.kind}: its link`);
    const making = makingOf(link);
    if ('veth' in making) t.same({ bridge: making.veth.name, addresses: making.veth.addresses, portSecurity: making.veth.portSecurity }, row.made, `${link.kind}: a veth to its bridge`);
    else {
      if ('createInPod' in making) t.equal(making.createInPod(pod), row.made, `${link.kind}: made from the host into the pod`);
      else t.equal(making.createOnHost({ name: 'pnt0', mtu: pod.mtu, underlayAddresses: ['198.18.100.1/24', '2001:db8:100::1/64'] }), row.made, `${link.kind}: made on the host, to be moved into the pod`);
      t.equal(making.hostInterface, row.needs, `${link.kind}: what it needs on the host`);
    }
    t.equal(linkKindOf(link).describe(link), row.text, `${link.kind}: described`);
  }
  t.equal(kindOf(plugins).attachedBy, 'plugins', 'a cni Network has no link of podnet');
  const config = networkKinds.cni.delegatedConfig(plugins);
  if ('reason' in config) return void t.fail(config.reason);
  t.equal(networkKinds.cni.describe(config), 'plugins bridge, tuning');
});

t.test('details of the links: defaults, no MTU, a multicast group, no gateway, port security off', async (t) => {
  const bridgeOf = (n: Network, allocations: Allocation[] = [{ address: '198.18.5.2/24', gateway: '198.18.5.1' }]) => networkKinds.bridge.linkSpec(n, allocations);
  t.same(bridgeOf(network('plain', { type: 'bridge', ipam: blue.spec.ipam! })), { kind: 'bridge', bridge: 'pn-plain', bridgeAddresses: [], portSecurity: true }, 'gateways only when asked');
  t.same(bridgeOf(network('open', { type: 'bridge', bridge: { name: 'br-lab', gateway: true, portSecurity: false } }), [{ address: '198.18.5.2/24' }]), { kind: 'bridge', bridge: 'br-lab', bridgeAddresses: [], portSecurity: false });
  t.equal(hostBridgeOf(bridgeOf(blue))?.name, 'pn-blue');
  t.equal(hostBridgeOf({ kind: 'vlan', parent: 'eth1', id: 7 }), undefined, 'only a veth kind has a host bridge');
  const group = networkKinds.vxlan.linkSpec(network('g', { type: 'vxlan', vxlan: { vni: 7, group: '239.1.1.1', port: 8472 } }), []);
  t.same(group, { kind: 'vxlan', vni: 7, port: 8472, group: '239.1.1.1' });
  const making = makingOf(group);
  t.same('createInPod' in making && [making.createInPod({ interface: 'v', netns: '/n' }), making.hostInterface], ['link add name v netns /n type vxlan id 7 group 239.1.1.1 dstport 8472', undefined], 'no underlay named: none needed');
  t.equal(networkKinds.vxlan.describe(group), 'vxlan 7 group 239.1.1.1 port 8472');
  t.same(networkKinds.macvlan.linkSpec(network('m', { type: 'macvlan', macvlan: { parent: 'eth2', mode: 'vepa' } }), []), { kind: 'macvlan', parent: 'eth2', mode: 'vepa' });
  const v4gre = networkKinds.gre.linkSpec(network('g4', { type: 'gre', gre: { remote: '198.18.100.2' } }), []);
  const v4making = makingOf(v4gre);
  t.same([v4gre, 'createOnHost' in v4making && v4making.createOnHost({ name: 'pnt0', underlayAddresses: [] })], [{ kind: 'gre', remote: '198.18.100.2' }, 'link add name pnt0 type gre remote 198.18.100.2'], 'gre over IPv4, no key, no MTU, no underlay named: the kernel picks its source');
  const v6making = makingOf(networkKinds.gre.linkSpec(gre, []));
  t.same('createOnHost' in v6making && v6making.createOnHost({ name: 'pnt0', underlayAddresses: ['198.18.100.1/24'] }), { problem: "the host's interface eth1 has no IPv6 address for the local end of a gre tunnel to 2001:db8:100::2" }, 'over IPv6, an underlay without an IPv6 address is a problem, not a tunnel that cannot send');
  t.same(networkKinds.geneve.linkSpec(network('gv', { type: 'geneve', geneve: { vni: 9, remote: '2001:db8::2', port: 7000, ttl: 9 } }), []), { kind: 'geneve', vni: 9, remote: '2001:db8::2', port: 7000, ttl: 9 });
  t.same(networkKinds.ipvlan.linkSpec(network('i', { type: 'ipvlan', ipvlan: { parent: 'eth2' } }), []), { kind: 'ipvlan', parent: 'eth2', mode: 'l2' }, 'ipvlan is l2 unless said, as the reference plugin');
  t.equal(networkKinds.bridge.describe({ kind: 'bridge', bridge: 'br-lab', bridgeAddresses: [], portSecurity: false }), 'bridge br-lab, port security off');
});

t.test('what an attachment may bring, per kind: rate limits, addresses, a MAC', async (t) => {
  const bandwidth = { ingressRate: 1_000_000, ingressBurst: 100_000 };
  const noHostEnd = (type: string) => `rate limits need a bridge Network: podnet shapes on its host end of a veth, and a ${type} link has none`;
  const rows: [Network, string | undefined][] = [
    [blue, undefined],
    [mac, noHostEnd('macvlan')],
    [shared, noHostEnd('ipvlan')],
    [tagged, noHostEnd('vlan')],
    [tunnel, noHostEnd('vxlan')],
    [gre, noHostEnd('gre')],
    [geneve, noHostEnd('geneve')],
    [plugins, "rate limits need a bridge Network: Network plugins's plugins make its link (a bandwidth plugin in its list can shape it)"],
  ];
  for (const [n, reason] of rows) t.same(attachmentRefusal(n, { bandwidth }), reason && { field: 'bandwidth', reason }, `${n.spec.type}: bandwidth`);
  t.same(attachmentRefusal(plugins, { ips: ['198.18.5.9/24'] }), { field: 'ips', reason: "Network plugins's plugins choose its addresses (their ipam config); podnet does not pass static ones to them" });
  t.equal(attachmentRefusal(blue, { ips: ['198.18.5.9/24'] }), undefined, 'with ipam: from its ranges');
  const without = (n: Network, staticAddresses?: boolean): Network => network(n.metadata.name, { ...n.spec, ipam: undefined, ...(staticAddresses === undefined ? {} : { staticAddresses }) });
  for (const n of [blue, mac, shared, tagged, tunnel, gre, geneve]) {
    t.same(attachmentRefusal(without(n), { ips: ['198.18.5.9/24'] }), { field: 'ips', reason: `Network ${n.metadata.name} has no ipam and does not let attachments bring their own addresses (its spec.staticAddresses is not true)` }, `${n.spec.type}: no ipam`);
    t.equal(attachmentRefusal(without(n, true), { ips: ['198.18.5.9/24'] }), undefined, `${n.spec.type}: staticAddresses`);
  }
  t.same(attachmentRefusal(without(mac), { ips: ['198.18.5.9/24'], bandwidth }), { field: 'bandwidth', reason: noHostEnd('macvlan') }, 'rate limits are told first');
  for (const n of every.filter((n) => n !== shared && n !== gre)) t.equal(attachmentRefusal(n, { mac: '02:00:00:00:00:01' }), undefined, `${n.spec.type}: a MAC is the Network's to allow (staticMacs)`);
  t.same(attachmentRefusal(shared, { mac: '02:00:00:00:00:01' }), { field: 'mac', reason: "an ipvlan link has its parent's MAC; it takes no MAC of its own" }, 'ipvlan: never a MAC of its own');
  t.same(attachmentRefusal(gre, { mac: '02:00:00:00:00:01' }), { field: 'mac', reason: 'a gre link carries IP packets and has no MAC' }, 'gre: no MAC at all');
  for (const n of every) t.equal(attachmentRefusal(n, {}), undefined, `${n.spec.type}: nothing asked`);
});

t.test('the addresses each kind gives, and when an attachment brings its own', async (t) => {
  t.same(every.map(addressesGiven), [2, 0, 0, 0, 0, 0, 0, 0], "one from each range; none without ranges; none from a cni Network's plugins");
  const ips = ['198.18.5.9/24'];
  t.same(every.map((n) => bringsOwnAddresses({ network: n, ips })), [false, true, true, true, true, true, true, false], 'brought: on a Network without ipam that podnet addresses');
  t.same(every.map((n) => bringsOwnAddresses({ network: n })), [false, false, false, false, false, false, false, false], 'none asked');
});

t.test("each kind's problems of a Network's spec", async (t) => {
  for (const n of every) t.same(kindOf(n).specProblems(n, byName(...every)), [], `${n.spec.type}: none`);
  const twin = network('twin', { type: 'bridge', bridge: { name: 'pn-blue' } });
  const reason = (other: string) => `its host bridge pn-blue is also the bridge of Network ${other}: a bridge carries one Network; give each its own spec.bridge.name`;
  t.same(kindOf(blue).specProblems(blue, byName(blue, twin)), [{ field: 'metadata.name', reason: reason('twin') }]);
  t.same(kindOf(twin).specProblems(twin, byName(blue, twin)), [{ field: 'spec.bridge.name', reason: reason('blue') }]);
  const macOnBridgeName = network('pn-blue', { type: 'macvlan', macvlan: { parent: 'eth1' } });
  t.same(kindOf(blue).specProblems(blue, byName(blue, macOnBridgeName)), [], 'only bridge Networks share a bridge');
  for (const [type, remote, reason] of [
    ['gre', '198.18.0.999', '198.18.0.999 is not an IPv4 or IPv6 address'],
    ['gre', '239.1.1.1', '239.1.1.1 is not a unicast address: a gre tunnel goes to one endpoint'],
    ['geneve', 'ff02::1', 'ff02::1 is not a unicast address: a geneve tunnel goes to one endpoint'],
    ['geneve', '::', ':: is not a unicast address: a geneve tunnel goes to one endpoint'],
  ] as const) {
    const n = type === 'gre' ? network('t', { type, gre: { remote } }) : network('t', { type, geneve: { vni: 1, remote } });
    t.same(kindOf(n).specProblems(n, byName(n)), [{ field: `spec.${type}.remote`, reason }], `${type} to ${remote}`);
  }
  const v6 = network('v6', { type: 'gre', gre: { remote: '2001:db8:100::2' } });
  t.same(kindOf(v6).specProblems(v6, byName(v6)), [{ field: 'spec.gre.device', reason: "a gre tunnel over IPv6 needs its underlay named: its local end is that interface's IPv6 address (a tunnel moved into a pod has none of its own to choose)" }]);
  const broken = network('broken', { type: 'cni', cni: { config: { cniVersion: '1.0.0', plugins: [{ type: 'a/b' }] } } });
  t.same(kindOf(broken).specProblems(broken, byName(broken)), [{ field: 'spec.cni.config.plugins[0].type', reason: 'type "a/b" is not a plugin binary\'s name (letters, digits, _ . + -; no path)' }]);
});

t.test('podnet explain shows a link of a kind this build does not know (from a newer daemon) by its kind alone', async (t) => {
  t.same(describeLink({ kind: 'bridge', bridge: 'pn-blue', bridgeAddresses: [], portSecurity: true }), { text: 'bridge pn-blue, port security on', hostEnd: true });
  t.same(describeLink({ kind: 'macvlan', parent: 'eth1', mode: 'bridge' }), { text: 'macvlan on eth1, mode bridge', hostEnd: false });
  t.same(describeLink({ kind: 'bareudp', port: 6635 } as unknown as LinkSpec), { text: 'bareudp', hostEnd: false });
});

t.test("a tunnel's remote chosen by the attachment: only within its Network's remoteRanges, and then required", async (t) => {
  const ranged = network('ranged', { type: 'geneve', geneve: { vni: 5, remoteRanges: ['198.18.102.0/24', '2001:db8:102::/64'] } });
  const fixed = network('fixed', { type: 'gre', gre: { remote: '198.18.100.2' } });
  t.same(kindOf(ranged).specProblems(ranged, byName(ranged)), []);
  t.equal(attachmentRefusal(ranged, { remote: '198.18.102.2' }), undefined, 'inside the IPv4 range');
  t.equal(attachmentRefusal(ranged, { remote: '2001:db8:102::2' }), undefined, 'inside the IPv6 range');
  t.same(attachmentRefusal(ranged, { remote: '198.18.103.2' }), { field: 'remote', reason: "198.18.103.2 is outside Network ranged's spec.geneve.remoteRanges (198.18.102.0/24, 2001:db8:102::/64)" });
  t.same(attachmentRefusal(ranged, { remote: '198.18.102.255' }), undefined, 'a range is a subnet of endpoints, not of hosts');
  t.same(attachmentRefusal(ranged, { remote: 'ff02::1' }), { field: 'remote', reason: 'ff02::1 is not a unicast address: a geneve tunnel goes to one endpoint' });
  t.same(attachmentRefusal(ranged, {}), { field: 'remote', reason: "Network ranged lets each attachment choose its tunnel's remote within spec.geneve.remoteRanges (198.18.102.0/24, 2001:db8:102::/64); this one gives none" });
  t.same(attachmentRefusal(fixed, { remote: '198.18.100.3' }), { field: 'remote', reason: "Network fixed fixes its tunnel's remote (spec.gre.remote); an attachment chooses none" });
  t.same(attachmentRefusal(blue, { remote: '198.18.100.3' }), { field: 'remote', reason: 'a bridge link has no remote endpoint to choose' });
  t.same(networkKinds.geneve.linkSpec(ranged, [], { remote: '198.18.102.2' }), { kind: 'geneve', vni: 5, remote: '198.18.102.2', port: 6081 }, "the link goes to the attachment's remote");
  const v6ranges = network('v6r', { type: 'gre', gre: { remoteRanges: ['2001:db8:102::/64'] } });
  t.match(kindOf(v6ranges).specProblems(v6ranges, byName(v6ranges)), [{ field: 'spec.gre.device' }], 'IPv6 ranges need the underlay named, as an IPv6 remote does');
  const bad = network('bad', { type: 'gre', gre: { remoteRanges: ['198.18.0.999/24'] } });
  t.same(kindOf(bad).specProblems(bad, byName(bad)), [{ field: 'spec.gre.remoteRanges[0]', reason: '198.18.0.999/24 is not an address with a prefix length' }]);
});

t.test('wireguard: made from the node into the pod; its peers only on a wireguard Network, their endpoints inside its remoteRanges, each named once', async (t) => {
  const wg = network('wg', { type: 'wireguard', wireguard: { listenPort: 51820, remoteRanges: ['198.18.102.0/24'] }, mtu: 1420 });
  const link = networkKinds.wireguard.linkSpec(wg, []);
  t.same(link, { kind: 'wireguard', listenPort: 51820 });
  const making = makingOf(link);
  t.equal('createInPod' in making && making.createInPod({ interface: 'wg0', netns: '/run/netns/p', mtu: 1420 }), 'link add name wg0 netns /run/netns/p mtu 1420 type wireguard');
  t.equal(networkKinds.wireguard.describe(link), 'wireguard, port 51820');
  t.ok(kindOf(wg).onePerNode, "one attachment a node: the port is the node's");
  const key = 'xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=';
  const peer = { publicKey: key, endpoint: { address: '198.18.102.2', port: 51820 }, allowedIPs: ['10.9.0.2/32'] };
  t.equal(attachmentRefusal(wg, { peers: [peer] }), undefined);
  t.equal(attachmentRefusal(wg, { peers: [{ publicKey: key, allowedIPs: ['10.9.0.0/24'] }] }), undefined, 'a peer without an endpoint waits for it to send first');
  t.same(attachmentRefusal(wg, { peers: [{ ...peer, endpoint: { address: '198.18.9.2', port: 51820 } }] }), { field: 'peers[0].endpoint.address', reason: "198.18.9.2 is outside Network wg's spec.wireguard.remoteRanges (198.18.102.0/24)" });
  t.same(attachmentRefusal(wg, { peers: [peer, { ...peer, allowedIPs: ['10.9.0.3/32'] }] }), { field: 'peers[1].publicKey', reason: `the peer ${key} is named twice` });
  const other = 'TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0=';
  t.same(attachmentRefusal(wg, { peers: [{ ...peer, allowedIPs: ['10.9.0.0/24'] }, { publicKey: other, allowedIPs: ['10.9.1.0/24', '10.9.0.7/24'] }] }), { field: 'peers[1].allowedIPs[1]', reason: 'peers[0] allows 10.9.0.0/24 too: WireGuard sends a subnet to one peer' }, 'a subnet two peers allow, however written');
  t.equal(attachmentRefusal(wg, { peers: [{ ...peer, allowedIPs: ['10.9.0.0/24'] }, { publicKey: other, allowedIPs: ['10.9.0.0/25'] }] }), undefined, 'a longer prefix within it is another subnet');
  t.same(attachmentRefusal(blue, { peers: [peer] }), { field: 'peers', reason: 'a bridge link has no WireGuard peers' });
  t.same(attachmentRefusal(wg, { mac: '02:00:00:00:00:01' }), { field: 'mac', reason: 'a wireguard interface carries IP packets and has no MAC' });
  const bad = network('bad', { type: 'wireguard', wireguard: { listenPort: 1, remoteRanges: ['198.18.0.999/24'] } });
  t.same(kindOf(bad).specProblems(bad, byName(bad)), [{ field: 'spec.wireguard.remoteRanges[0]', reason: '198.18.0.999/24 is not an address with a prefix length' }]);
});

t.test("a tunnel's remote: one spelling whatever it was written in; the node's loopback and IPv4 written as IPv6 refused", async (t) => {
  const open = network('open', { type: 'geneve', geneve: { vni: 5, remoteRanges: ['::/0', '0.0.0.0/0'] } });
  t.equal(linkDigest(networkKinds.geneve.linkSpec(open, [], { remote: '2001:DB8::0:1' })), linkDigest(networkKinds.geneve.linkSpec(open, [], { remote: '2001:db8::1' })), 'the same link, not made again');
  for (const [remote, reason] of [
    ['127.0.0.1', '127.0.0.1 is a loopback address: a geneve tunnel goes to another host'],
    ['::1', '::1 is a loopback address: a geneve tunnel goes to another host'],
    ['::ffff:198.18.0.1', '::ffff:198.18.0.1 is an IPv4 address written as IPv6: write it as IPv4'],
  ] as const) t.same(attachmentRefusal(open, { remote }), { field: 'remote', reason }, remote);
});

t.test("wireguard: two Networks on one port are told on both; an allowed IP that is no subnet is refused naming it", async (t) => {
  const a = network('wg-a', { type: 'wireguard', wireguard: { listenPort: 51871, remoteRanges: ['198.18.102.0/24'] } });
  const b = network('wg-b', { type: 'wireguard', wireguard: { listenPort: 51871, remoteRanges: ['198.18.103.0/24'] } });
  t.match(kindOf(a).specProblems(a, byName(a, b)), [{ field: 'spec.wireguard.listenPort', reason: 'Network wg-b listens on port 51871 too: a node\'s port is one socket; give each Network its own' }]);
  t.match(kindOf(b).specProblems(b, byName(a, b)), [{ field: 'spec.wireguard.listenPort', reason: /Network wg-a listens on port 51871 too/ }]);
  const peer = { publicKey: 'xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=', allowedIPs: ['10.9.0.0/24', '300.1.1.1/8'] };
  t.same(attachmentRefusal(a, { peers: [peer] }), { field: 'peers[0].allowedIPs[1]', reason: '300.1.1.1/8 is not an address with a prefix length' });
});
