// gre Networks on a kernel that has them (run in a VM of Debian's kernel by e2e/kernel.test.ts),
// over IPv4 and over IPv6 (ip6gre), between two nodes: e2e/kernel/tunnel.ts.
import t from 'tap';
import { testTunnel } from './tunnel.ts';

testTunnel(t, {
  name: 'gre over IPv4',
  kind: 'gre',
  spec: (remote) => `  type: gre\n  gre: { remote: 198.18.102.${remote}, device: underlay, key: 7 }\n  mtu: 1400`,
  info: { info_kind: 'gre', info_data: { remote: /198\.18\.102\./, ikey: '0.0.0.7' } },
  explained: /net1 on Network tun: gre to 198\.18\.102\.2 key 7 over underlay/,
  subnet: '198.18.103',
});
testTunnel(t, {
  name: 'gre over IPv6',
  kind: 'ip6gre',
  spec: (remote) => `  type: gre\n  gre: { remote: "2001:db8:102::${remote}", device: underlay }\n  mtu: 1400`,
  info: { info_kind: 'ip6gre', info_data: { remote: /2001:db8:102::/ } },
  explained: /net1 on Network tun: gre to 2001:db8:102::2 over underlay/,
  subnet: '198.18.104',
});
