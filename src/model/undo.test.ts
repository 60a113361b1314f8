import t from 'tap';
import { renderUndo, wgSetLine, type UndoAction } from './undo.ts';
import { parseDocument } from '../protocol/validate.ts';

const pod = { netns: '/run/netns/p' };

t.test('each undo action renders into one command, by its tool, where it says', async (t) => {
  const cases: [UndoAction, string, string][] = [
    [{ where: 'host', action: 'link-del', dev: 'pn-blue' }, 'ip', 'link del dev pn-blue'],
    [{ where: pod, action: 'addr-del', dev: 'net1', address: '198.18.80.2/24' }, 'ip', 'addr del 198.18.80.2/24 dev net1'],
    [{ where: pod, action: 'link-set', dev: 'eth0', setting: 'mtu', value: 1500 }, 'ip', 'link set dev eth0 mtu 1500'],
    [{ where: pod, action: 'link-set', dev: 'eth0', setting: 'up', value: false }, 'ip', 'link set dev eth0 down'],
    [{ where: pod, action: 'link-set', dev: 'net1', setting: 'vrf', value: 'red' }, 'ip', 'link set dev net1 master red'],
    [{ where: pod, action: 'link-set', dev: 'net1', setting: 'vrf', value: '' }, 'ip', 'link set dev net1 nomaster'],
    [{ where: pod, action: 'addr-add', dev: 'net1', address: '2001:db8:80::2/64' }, 'ip', 'addr replace 2001:db8:80::2/64 dev net1'],
    [{ where: pod, action: 'wireguard', dev: 'wg0', listenPort: 51820, privateKeyFile: '/var/lib/podnet/wireguard/wg+c1+wg0.key', peers: [], removed: ['xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg='] }, 'wg', 'set wg0 listen-port 51820 private-key /var/lib/podnet/wireguard/wg+c1+wg0.key peer xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg= remove'],
    [{ where: pod, action: 'route', verb: 'add', route: { family: 4, to: '198.18.9.0/24', table: 100, via: '198.18.80.1', metric: 5 } }, 'ip', 'route add 198.18.9.0/24 via 198.18.80.1 table 100 metric 5'],
    [{ where: pod, action: 'route', verb: 'del', route: { family: 4, to: '198.18.9.0/24', table: 100, via: '198.18.80.1' } }, 'ip', 'route del 198.18.9.0/24 table 100'],
    [{ where: pod, action: 'rule', verb: 'del', rule: { family: 6, priority: 100, table: 100 } }, 'ip6', 'rule del priority 100 table 100'],
    [{ where: pod, action: 'rule', verb: 'add', rule: { family: 4, priority: 100, table: 100, from: '198.18.0.0/16' } }, 'ip', 'rule add priority 100 from 198.18.0.0/16 table 100'],
    [{ where: pod, action: 'sysctl', path: 'net/ipv4/ip_forward', value: '0' }, 'sysctl', 'net/ipv4/ip_forward=0'],
    [{ where: 'host', action: 'tbf', dev: 'pnv0123456789', rate: 1000000, burst: 100000 }, 'tc', 'qdisc replace dev pnv0123456789 root tbf rate 1000000bit burst 12500 latency 25ms'],
    [{ where: 'host', action: 'qdisc-del', dev: 'pnv0123456789', parent: 'root' }, 'tc', 'qdisc del dev pnv0123456789 root'],
  ];
  for (const [action, tool, line] of cases) t.same(renderUndo(action), { where: action.where, tool, line }, line);
});

t.test("a journal's link-set holds a value of its setting's kind: a VRF's name is no MAC, an MTU no VRF", async (t) => {
  const journal = (setting: string, value: unknown) => () => parseDocument('Journal', { version: 1, pass: 'p', undo: [{ where: pod, action: 'link-set', dev: 'net1', setting, value }] }, 'a journal');
  for (const [setting, value] of [['vrf', 'red'], ['vrf', ''], ['mac', '02:00:00:00:00:01'], ['mtu', 1400], ['up', true]] as const) t.doesNotThrow(journal(setting, value), `${setting} ${JSON.stringify(value)}`);
  for (const [setting, value] of [['vrf', 1400], ['mac', 'red'], ['mtu', 'red'], ['promisc', 1]] as const) t.throws(journal(setting, value), `${setting} ${JSON.stringify(value)} refused`);
});

t.test("wg's line: the port, the key by its file, each peer (an IPv6 endpoint in brackets), and the peers removed", async (t) => {
  const a = 'xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=';
  const b = 'TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0=';
  // A keepalive not asked is said as 0 (off): one asked before is turned off.
  t.equal(
    wgSetLine('wg0', '/var/lib/podnet/wireguard/c1+wg0.key', 51820, [{ publicKey: a, endpoint: { address: '2001:db8::2', port: 51821 }, allowedIPs: ['10.9.0.2/32', '2001:db8:9::2/128'], persistentKeepalive: 25 }, { publicKey: b, allowedIPs: ['10.9.0.3/32'] }], ['gN65BkIKy1eCE9pP1wdc8ROUtkHLF2PfAqYdyYBz6EA=']),
    `set wg0 listen-port 51820 private-key /var/lib/podnet/wireguard/c1+wg0.key peer ${a} endpoint [2001:db8::2]:51821 allowed-ips 10.9.0.2/32,2001:db8:9::2/128 persistent-keepalive 25 peer ${b} allowed-ips 10.9.0.3/32 persistent-keepalive 0 peer gN65BkIKy1eCE9pP1wdc8ROUtkHLF2PfAqYdyYBz6EA= remove`,
  );
});

t.test("a WireGuard attachment's guard on the node: written back with its port and ranges, or deleted", async (t) => {
  t.same(renderUndo({ where: 'host', action: 'wireguard-guard', table: 'inet pnw0123456789' }), { where: 'host', tool: 'nft', line: 'table inet pnw0123456789; delete table inet pnw0123456789' });
  t.match(renderUndo({ where: 'host', action: 'wireguard-guard', table: 'inet pnw0123456789', listenPort: 51871, remoteRanges: ['2001:db8::/64'] }).line, /meta nfproto ipv4 udp dport 51871 drop; udp dport 51871 ip6 saddr != \{ 2001:db8::\/64 \} drop;/);
});
