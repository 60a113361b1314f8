import t from 'tap';
import { readFileSync } from 'node:fs';
import type { Where } from '../model/step.ts';
import { linksOf, netnsObserver } from './observe.ts';
import type { NetnsRunner } from './runner.ts';

/**
 * What this machine's ip and tc printed (iproute2 6.1.0, Linux 6.18), captured by
 * fixtures/capture.sh in netns of its own: one JSON document a line, a line a command, as the
 * runner splits them.
 */
function printed(file: string): unknown[] {
  const text = readFileSync(new URL(`fixtures/${file}`, import.meta.url), 'utf8');
  return text.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as unknown);
}

/** Each read capture.sh made, as observe.ts asks it (where, tool, options: commands), and the file of its answers. */
const captured: Record<string, string> = {
  'host ip -d: addr show': 'host.ip-addr.out',
  'host tc: qdisc show': 'host.tc-qdisc.out',
  'pod ip -d: addr show': 'pod.ip-addr.out',
  'pod ip -4: route show table all; rule show': 'pod.ip-4-routing.out',
  'pod ip -6: route show table all; rule show': 'pod.ip-6-routing.out',
};

/** Answers the captured reads only: a read observe.ts made otherwise than capture.sh did fails here. */
const replaying: NetnsRunner = {
  async query(where, tool, options, commands) {
    const key = `${where === 'host' ? 'host' : 'pod'} ${[tool, ...options].join(' ')}: ${commands.join('; ')}`;
    const file = captured[key];
    if (file === undefined) throw new Error(`nothing captured for ${key}`);
    return printed(file);
  },
  batch: () => Promise.reject(new Error('reads only')),
  start: () => {
    throw new Error('reads only');
  },
  readSysctls: () => Promise.reject(new Error('reads only')),
  readNftTable: () => Promise.reject(new Error('reads only')),
  readWireguard: () => Promise.reject(new Error('reads only')),
};

const pod: Where = { netns: '/run/netns/pnobs-pod' };
const observer = netnsObserver(replaying);
const lo = { name: 'lo', mtu: 65536, up: true, promisc: false, txqueuelen: 1000, addresses: ['127.0.0.1/8', '::1/128'] };

t.test("a pod's links, one of each kind this kernel makes, read with ip -json -d addr show", async (t) => {
  const links = await observer.links(pod);
  t.same([...links.keys()], ['lo', 'eth0', 'net1', 'net2', 'vx0', 'ifb0', 'tun0', 'tap0', 'br1']);
  t.strictSame(links.get('lo'), lo, "the loopback: no kind, and its zero address is no MAC");
  t.strictSame(
    links.get('eth0'),
    { name: 'eth0', mtu: 1400, up: true, promisc: false, txqueuelen: 1000, mac: '02:00:00:00:00:05', kind: 'veth', addresses: ['10.88.0.5/24', '2001:db8:88::5/64'] },
    "a veth's end: both families, its link-local address (the kernel's) left out",
  );
  t.strictSame(
    links.get('net1'),
    { name: 'net1', mtu: 1300, up: false, promisc: false, txqueuelen: 1000, mac: '02:00:00:00:00:11', kind: 'macvlan', mode: 'bridge', alias: 'podnet:c1/net1', addresses: ['10.99.0.2/16'] },
    'a macvlan, down, with its alias and mode',
  );
  t.strictSame(links.get('net2'), { name: 'net2', mtu: 1400, up: false, promisc: false, txqueuelen: 500, mac: '02:00:00:00:00:12', kind: 'macvtap', mode: 'bridge', addresses: [] }, 'a macvtap');
  t.strictSame(
    links.get('vx0'),
    { name: 'vx0', mtu: 1340, up: true, promisc: false, txqueuelen: 1000, mac: '02:00:00:00:00:13', kind: 'vxlan', addresses: ['10.77.0.2/24', '2001:db8:77::2/64'] },
    'a vxlan',
  );
  t.strictSame(links.get('ifb0'), { name: 'ifb0', mtu: 1500, up: false, promisc: false, txqueuelen: 32, mac: '02:00:00:00:00:14', kind: 'ifb', addresses: [] }, 'an ifb');
  t.strictSame(links.get('tun0'), { name: 'tun0', mtu: 1500, up: false, promisc: false, txqueuelen: 500, kind: 'tun', addresses: [] }, 'a tun: no link-layer address');
  t.strictSame(
    links.get('tap0'),
    { name: 'tap0', mtu: 1500, up: true, promisc: true, txqueuelen: 1000, mac: '02:00:00:00:00:15', kind: 'tun', master: 'br1', addresses: [] },
    "a tap (a tun device in tap mode), promiscuous, a bridge's port",
  );
  t.strictSame(links.get('br1'), { name: 'br1', mtu: 1500, up: true, promisc: false, txqueuelen: 1000, mac: '02:00:00:00:00:16', kind: 'bridge', addresses: [] }, 'a bridge');
});

t.test("the host's links: a Network's bridge, a pod's veth end on it, its ifb, a link not podnet's", async (t) => {
  const links = await observer.links('host');
  t.same([...links.keys()], ['lo', 'pn-blue', 'pnv0123456789', 'pnb0123456789', 'uplink0p', 'uplink0']);
  t.strictSame(links.get('lo'), lo);
  t.strictSame(
    links.get('pn-blue'),
    { name: 'pn-blue', mtu: 1400, up: true, promisc: false, txqueuelen: 1000, mac: '02:00:00:00:01:01', kind: 'bridge', alias: 'podnet:bridge', addresses: ['10.88.0.1/24', '2001:db8:88::1/64'] },
    'the bridge, its gateways, its mark',
  );
  t.strictSame(
    links.get('pnv0123456789'),
    { name: 'pnv0123456789', mtu: 1400, up: true, promisc: false, txqueuelen: 1000, mac: '02:00:00:00:01:02', kind: 'veth', master: 'pn-blue', alias: 'podnet:c1/eth0', addresses: [] },
    'the veth end: its bridge, its owner mark',
  );
  t.strictSame(
    links.get('pnb0123456789'),
    { name: 'pnb0123456789', mtu: 1500, up: true, promisc: false, txqueuelen: 32, mac: '02:00:00:00:01:03', kind: 'ifb', alias: 'podnet:c1/eth0', addresses: [] },
    'the ifb that shapes its egress',
  );
  t.strictSame(links.get('uplink0'), { name: 'uplink0', mtu: 1500, up: false, promisc: false, txqueuelen: 1000, mac: '02:00:00:00:01:04', kind: 'veth', addresses: [] });
});

t.test('links read at the end of a batch (ReadAfter): the one answer is the read, what the line changed is in it', async (t) => {
  const answers = printed('pod.ip-batch-read.out');
  t.equal(answers.length, 1, 'ip -json printed nothing for `link set net1 mtu 1280`');
  const after = linksOf(answers);
  t.equal(after.get('net1')?.mtu, 1280);
  const before = await observer.links(pod);
  t.strictSame(after, new Map([...before].map(([name, link]) => [name, name === 'net1' ? { ...link, mtu: 1280 } : link])), 'nothing else differs from a read of its own');
});

t.test('links of the kinds this kernel cannot make, as iproute2 prints them', async (t) => {
  // Hand-written, not captured (this kernel has no vlan, ipvlan, vrf, dummy, gre, geneve or
  // wireguard): iproute2 6.1's JSON for each, trimmed of the counters and limits observe.ts does not read.
  const common = { qdisc: 'noqueue', group: 'default', promiscuity: 0, allmulti: 0, num_tx_queues: 1, num_rx_queues: 1 };
  const entries = [
    {
      ifindex: 2, ifname: 'eth0', flags: ['BROADCAST', 'MULTICAST', 'UP', 'LOWER_UP'], mtu: 1500, ...common, operstate: 'UP', txqlen: 1000,
      link_type: 'ether', address: '02:00:00:00:00:05', broadcast: 'ff:ff:ff:ff:ff:ff', linkinfo: { info_kind: 'dummy' }, addr_info: [],
    },
    {
      ifindex: 3, link: 'eth0', ifname: 'eth0.10', flags: ['BROADCAST', 'MULTICAST', 'UP', 'LOWER_UP'], mtu: 1500, ...common, operstate: 'UP', txqlen: 1000,
      link_type: 'ether', address: '02:00:00:00:00:05', broadcast: 'ff:ff:ff:ff:ff:ff',
      linkinfo: { info_kind: 'vlan', info_data: { protocol: '802.1Q', id: 10, flags: ['REORDER_HDR'] } },
      addr_info: [{ family: 'inet', local: '10.10.0.2', prefixlen: 24, scope: 'global', label: 'eth0.10', valid_life_time: 4294967295, preferred_life_time: 4294967295 }],
    },
    {
      ifindex: 4, link: 'eth0', ifname: 'ipvl0', flags: ['BROADCAST', 'MULTICAST', 'NOARP', 'UP', 'LOWER_UP'], mtu: 1500, ...common, operstate: 'UNKNOWN', txqlen: 1000,
      link_type: 'ether', address: '02:00:00:00:00:05', broadcast: 'ff:ff:ff:ff:ff:ff', linkinfo: { info_kind: 'ipvlan', info_data: { mode: 'l2' } },
      addr_info: [{ family: 'inet', local: '10.20.0.2', prefixlen: 24, scope: 'global', label: 'ipvl0', valid_life_time: 4294967295, preferred_life_time: 4294967295 }],
    },
    {
      ifindex: 5, ifname: 'vrf-blue', flags: ['NOARP', 'MASTER', 'UP', 'LOWER_UP'], mtu: 65575, ...common, operstate: 'UP', txqlen: 1000,
      link_type: 'ether', address: '02:00:00:00:00:21', broadcast: 'ff:ff:ff:ff:ff:ff', linkinfo: { info_kind: 'vrf', info_data: { table: 10 } }, addr_info: [],
    },
    {
      ifindex: 6, ifname: 'dummy0', flags: ['BROADCAST', 'NOARP', 'UP', 'LOWER_UP'], mtu: 1500, ...common, master: 'vrf-blue', operstate: 'UNKNOWN', txqlen: 1000,
      link_type: 'ether', address: '02:00:00:00:00:22', broadcast: 'ff:ff:ff:ff:ff:ff',
      linkinfo: { info_kind: 'dummy', info_slave_kind: 'vrf', info_slave_data: { table: 10 } },
      addr_info: [{ family: 'inet', local: '10.30.0.1', prefixlen: 32, scope: 'global', label: 'dummy0', valid_life_time: 4294967295, preferred_life_time: 4294967295 }],
    },
    {
      // A tunnel's link-layer address is its local IPv4 address, and its broadcast the remote's.
      ifindex: 7, link: null, ifname: 'gre1', flags: ['POINTOPOINT', 'NOARP', 'UP', 'LOWER_UP'], mtu: 1476, ...common, operstate: 'UNKNOWN', txqlen: 1000,
      link_type: 'gre', address: '192.0.2.2', link_pointtopoint: true, broadcast: '192.0.2.1',
      linkinfo: { info_kind: 'gre', info_data: { remote: '192.0.2.1', local: '192.0.2.2', ttl: 0, pmtudisc: true } },
      addr_info: [{ family: 'inet', local: '10.55.0.1', prefixlen: 30, scope: 'global', label: 'gre1', valid_life_time: 4294967295, preferred_life_time: 4294967295 }],
    },
    {
      ifindex: 8, ifname: 'gnv0', flags: ['BROADCAST', 'MULTICAST'], mtu: 1450, ...common, qdisc: 'noop', operstate: 'DOWN', txqlen: 1000,
      link_type: 'ether', address: '02:00:00:00:00:23', broadcast: 'ff:ff:ff:ff:ff:ff',
      linkinfo: { info_kind: 'geneve', info_data: { id: 5, remote: '192.0.2.1', ttl: 0, df: 'unset', port: 6081, udp_csum: false } }, addr_info: [],
    },
    {
      ifindex: 9, ifname: 'wg0', flags: ['POINTOPOINT', 'NOARP', 'UP', 'LOWER_UP'], mtu: 1420, ...common, operstate: 'UNKNOWN', txqlen: 1000,
      link_type: 'none', linkinfo: { info_kind: 'wireguard' },
      addr_info: [
        { family: 'inet', local: '10.44.0.1', prefixlen: 24, scope: 'global', label: 'wg0', valid_life_time: 4294967295, preferred_life_time: 4294967295 },
        { family: 'inet6', local: 'fd00:44::1', prefixlen: 64, scope: 'global', valid_life_time: 4294967295, preferred_life_time: 4294967295 },
      ],
    },
  ];
  const links = linksOf([entries]);
  const up = { up: true, promisc: false, txqueuelen: 1000 };
  t.strictSame(links.get('eth0.10'), { name: 'eth0.10', mtu: 1500, ...up, mac: '02:00:00:00:00:05', kind: 'vlan', addresses: ['10.10.0.2/24'] }, 'a vlan: its parent\'s MAC');
  t.strictSame(links.get('ipvl0'), { name: 'ipvl0', mtu: 1500, ...up, mac: '02:00:00:00:00:05', kind: 'ipvlan', mode: 'l2', addresses: ['10.20.0.2/24'] }, 'an ipvlan, with its mode');
  t.strictSame(links.get('vrf-blue'), { name: 'vrf-blue', mtu: 65575, ...up, mac: '02:00:00:00:00:21', kind: 'vrf', vrfTable: 10, addresses: [] }, 'a vrf, with its table');
  t.strictSame(links.get('dummy0'), { name: 'dummy0', mtu: 1500, ...up, mac: '02:00:00:00:00:22', kind: 'dummy', master: 'vrf-blue', addresses: ['10.30.0.1/32'] }, "a dummy, the vrf's port");
  t.strictSame(links.get('gre1'), { name: 'gre1', mtu: 1476, ...up, kind: 'gre', addresses: ['10.55.0.1/30'] }, 'a gre tunnel: its local IP is not its MAC');
  t.strictSame(links.get('gnv0'), { name: 'gnv0', mtu: 1450, up: false, promisc: false, txqueuelen: 1000, mac: '02:00:00:00:00:23', kind: 'geneve', addresses: [] }, 'a geneve');
  t.strictSame(links.get('wg0'), { name: 'wg0', mtu: 1420, ...up, kind: 'wireguard', addresses: ['10.44.0.1/24', 'fd00:44::1/64'] }, 'a wireguard: no link-layer address');
});

t.test('an answer that is not a list of links is refused, not read as none', async (t) => {
  t.throws(() => linksOf(printed('pod.ip-4-routing.out')), { code: 'IO_FAILURE', message: /other than a list of links/ }, 'routes');
  t.throws(() => linksOf([]), { code: 'IO_FAILURE' }, 'no answer');
  t.throws(() => linksOf([{ ifname: 'eth0' }]), { code: 'IO_FAILURE' }, 'one link, not a list');
});

t.test("a pod's IPv4 routes (unicast, every table) and rules, read with ip -json -4", async (t) => {
  const { routes, rules } = await observer.routing(pod, 4);
  t.strictSame(routes, [
    { family: 4, to: '10.200.0.0/16', table: 100, metric: 5, via: '10.88.0.1', dev: 'eth0' },
    { family: 4, to: '0.0.0.0/0', table: 254, metric: 0, via: '10.88.0.1', dev: 'eth0' },
    { family: 4, to: '10.77.0.0/24', table: 254, metric: 0, dev: 'vx0', src: '10.77.0.2', kernel: true },
    { family: 4, to: '10.88.0.0/24', table: 254, metric: 0, dev: 'eth0', src: '10.88.0.5', kernel: true },
    { family: 4, to: '10.201.0.1/32', table: 254, metric: 0, dev: 'eth0', src: '10.88.0.5' },
    // Multipath: ip puts its gateways under nexthops, so it names no single one.
    { family: 4, to: '10.210.0.0/16', table: 254, metric: 0 },
  ], 'the default route as 0.0.0.0/0, a host route with its /32, an address\'s connected route marked the kernel\'s; blackhole, unreachable, local and broadcast left out');
  t.strictSame(rules, [
    { family: 4, priority: 0, table: 255 },
    { family: 4, priority: 100, table: 100, from: '10.88.0.5/32' },
    { family: 4, priority: 101, table: 100, to: '10.200.0.0/16' },
    { family: 4, priority: 102, table: 100, fwmark: 16 },
    // ObservedRule has no mask: fwmark 0x20/0xff reads as the mark alone.
    { family: 4, priority: 103, table: 100, fwmark: 32 },
    { family: 4, priority: 104, table: 0, from: '10.1.0.0/16' },
    { family: 4, priority: 108, table: 254, from: '10.5.0.0/16' },
    { family: 4, priority: 32766, table: 254 },
    { family: 4, priority: 32767, table: 253 },
  ], 'tables by number; a prohibit rule looks up no table (0), not main');
});

t.test("a pod's IPv6 routes and rules, SRv6 included, read with ip -json -6", async (t) => {
  const { routes, rules } = await observer.routing(pod, 6);
  t.strictSame(routes, [
    { family: 6, to: '2001:db8:200::/48', table: 100, metric: 5, via: '2001:db8:88::1', dev: 'eth0' },
    { family: 6, to: '2001:db8:77::/64', table: 254, metric: 256, dev: 'vx0', kernel: true },
    { family: 6, to: '2001:db8:88::/64', table: 254, metric: 256, dev: 'eth0', kernel: true },
    { family: 6, to: '2001:db8:300::/48', table: 254, metric: 1024, dev: 'eth0', seg6Mode: 'encap', segments: ['2001:db8::1', '2001:db8::2'] },
    { family: 6, to: '2001:db8:301::/48', table: 254, metric: 1024, dev: 'eth0', seg6Mode: 'inline', segments: ['2001:db8::1'] },
    { family: 6, to: 'fe80::/64', table: 254, metric: 256, dev: 'eth0', kernel: true },
    { family: 6, to: 'fe80::/64', table: 254, metric: 256, dev: 'vx0', kernel: true },
    { family: 6, to: '::/0', table: 254, metric: 1024, via: '2001:db8:88::1', dev: 'eth0' },
  ], "inline SRv6 without the kernel's trailing :: slot; unreachable, local and multicast left out");
  t.strictSame(rules, [
    { family: 6, priority: 0, table: 255 },
    { family: 6, priority: 100, table: 100, from: '2001:db8:88::5/128' },
    { family: 6, priority: 101, table: 100, to: '2001:db8:200::/48' },
    { family: 6, priority: 102, table: 100, fwmark: 16 },
    { family: 6, priority: 104, table: 0, from: '2001:db8:1::/48' },
    { family: 6, priority: 32766, table: 254 },
  ]);
});

t.test("the host's qdiscs, read with tc -json qdisc show: podnet's links only", async (t) => {
  t.strictSame(
    await observer.qdiscs(),
    new Map([
      ['pn-blue', { root: 'noqueue', ingress: false }],
      ['pnv0123456789', { root: 'tbf', ingress: true }],
      ['pnb0123456789', { root: 'tbf', ingress: false }],
    ]),
    'the veth end shaped (tbf) with its ingress redirected, the ifb shaped; lo and uplink0 (tbf too) left out',
  );
});

t.test("the kernel's own VRF rule is no one's request: left out of a netns's rules", async (t) => {
  // As Debian's 6.1 kernel and iproute2 6.1 print them once a VRF was made in the netns (the test VM's).
  const rules = [{ priority: 0, src: 'all', table: 'local' }, { priority: 1000, src: 'all', l3mdev: null }, { priority: 32766, src: 'all', table: 'main' }];
  const vrfNetns: NetnsRunner = { ...replaying, query: async () => [[], rules] };
  const { rules: seen } = await netnsObserver(vrfNetns).routing(pod, 4);
  t.same(seen, [{ family: 4, priority: 0, table: 255 }, { family: 4, priority: 32766, table: 254 }]);
});
