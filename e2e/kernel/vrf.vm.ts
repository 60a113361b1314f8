// VRFs in the pod on a kernel that has them (run in a VM of Debian's kernel by e2e/kernel.test.ts):
// a config makes a VRF with its table and places net1 in it; a route that exists only in the VRF's
// table is reached from the VRF and not from the main table, over IPv4 and IPv6 (podnet put back
// the IPv6 address the move drops); a VRF deleted by hand is made again with net1 in it; eth0,
// where the node allows it, leaves its primary's routes behind, which podnet puts back as it takes
// eth0 out; a table the kernel keeps for itself is refused naming the field; nothing is left.
import t from 'tap';
import { execa } from 'execa';
import { daemonSandbox } from '../lib/daemon.ts';
import { linkOf, networkDocument, podnetCli, startPod, until, type Pod } from '../lib/engine.ts';
import { missingPrerequisite } from '../lib/env.ts';
import { addressesIn, removeLinkAtTeardown, uniqueName } from '../lib/netns.ts';

const skip = missingPrerequisite(['/bin/busybox']);

/** ping's exit code from the pod to `address`, bound to `device` (a VRF routes what is bound to it) when given. */
async function ping(pod: Pod, address: string, device?: string): Promise<number | undefined> {
  const tool = address.includes(':') ? 'ping6' : 'ping';
  const bound = device ? ['-I', device] : [];
  return (await execa('ip', ['netns', 'exec', pod.ns.name, 'busybox', tool, '-c', '2', '-W', '2', ...bound, address], { reject: false })).exitCode;
}

/** The pod's routes of one family in one table, as `ip route show` prints them. */
async function routesIn(pod: Pod, table: string, family: '-4' | '-6' = '-4'): Promise<string> {
  return (await execa('ip', ['-n', pod.ns.name, family, 'route', 'show', 'table', table])).stdout;
}

const bySelector = (name: string, pod: string, spec: string) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: ${name}, namespace: default }
spec:
  podSelector: { matchLabels: { podnetwork.opdev.io/pod-name: ${pod} } }
${spec}`;

t.test("a VRF in the pod: net1 routes by the VRF's table alone, IPv4 and IPv6; made again after drift; taken back", { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const bridge = uniqueName('pnvr');
  removeLinkAtTeardown(t, bridge);
  const [a, b] = [await startPod(t, daemon, 'vrf-a'), await startPod(t, daemon, 'vrf-b')];
  const cli = podnetCli(daemon);
  await cli.apply('net.yaml', networkDocument('vv', `  type: bridge\n  bridge: { name: ${bridge}, portSecurity: false }\n  ipam: { ranges: [{ subnet: 198.18.91.0/24 }, { subnet: "2001:db8:91::/64" }] }`));
  await cli.apply('peer.yaml', bySelector('peer', 'vrf-b', '  attachments: [{ network: vv, interface: net1 }]\n'));
  const net1Of = (pod: Pod) =>
    until(`net1's addresses in ${pod.name}`, async () => {
      const net1 = (await addressesIn(pod.ns.name)).find((l) => l.ifname === 'net1');
      const v4 = net1?.addresses.find((x) => x.startsWith('198.18.91.'));
      const v6 = net1?.addresses.find((x) => x.startsWith('2001:db8:91:'));
      return v4 && v6 ? { v4: v4.split('/')[0]!, v6: v6.split('/')[0]! } : undefined;
    });
  const peer = await net1Of(b);
  // Reached only through the VRF: an address of b's that a's main table has no route to.
  await execa('ip', ['-n', b.ns.name, 'addr', 'add', '198.18.99.1/32', 'dev', 'lo']);

  const vrfConfig = bySelector(
    'vrf',
    'vrf-a',
    `  attachments: [{ network: vv, interface: net1 }]
  vrfs: [{ name: red, table: 100 }]
  interfaces: [{ name: net1, vrf: red }]
  routes: [{ to: 198.18.99.1/32, via: ${peer.v4}, vrf: red }]
`,
  );
  t.equal((await cli.apply('vrf.yaml', vrfConfig)).exitCode, 0, 'podnet apply: vrf-a gets VRF red, net1 in it, a route in its table');
  await until('net1 in red', async () => ((await linkOf(a.ns.name, 'net1'))?.master === 'red' ? true : undefined), 30_000);
  t.match(await linkOf(a.ns.name, 'red'), { linkinfo: { info_kind: 'vrf', info_data: { table: 100 } }, operstate: 'UP' }, 'red is a VRF of table 100, up');
  const mine = await net1Of(a);
  t.pass(`net1 keeps ${mine.v4} and, put back after the move, ${mine.v6}`);
  await until('the route in table 100', async () => ((await routesIn(a, '100')).includes(`198.18.99.1 via ${peer.v4} dev net1`) ? true : undefined));
  t.notMatch(await routesIn(a, 'main'), /198\.18\.9[19]\./, "the main table has neither net1's subnet nor the route");
  t.equal(await ping(a, '198.18.99.1', 'red'), 0, 'from the VRF, the address only its table routes to answers');
  t.not(await ping(a, '198.18.99.1'), 0, 'from the main table, it is unreachable');
  // The IPv6 address put back is tentative until its duplicate address detection ends.
  t.ok(await until('IPv6 through the VRF', async () => ((await ping(a, peer.v6, 'red')) === 0 ? true : undefined)), "b's IPv6 address answers through the VRF");
  t.match((await cli.explain('default/vrf-a')).stdout, /desired:[\s\S]*vrf red, table 100[\s\S]*net1: vrf red[\s\S]*route 198\.18\.99\.1\/32 via [\d.]+ table 100/, 'podnet explain shows the VRF, net1 in it and the route in its table');

  // Drift: someone deletes the VRF; the kernel lets net1 go. The next resync makes both again.
  await execa('ip', ['-n', a.ns.name, 'link', 'del', 'red']);
  await until('red made again, net1 in it', async () => ((await linkOf(a.ns.name, 'net1'))?.master === 'red' ? true : undefined), 30_000);
  await until('the route made again', async () => ((await routesIn(a, '100')).includes('198.18.99.1 via') ? true : undefined));
  t.equal(await ping(a, '198.18.99.1', 'red'), 0, 'through the VRF made again');

  // Taken back: the VRF is gone, net1 is back in the main table; with the config, net1 goes too.
  t.equal((await cli.apply('vrf.yaml', bySelector('vrf', 'vrf-a', '  attachments: [{ network: vv, interface: net1 }]\n'))).exitCode, 0, 'podnet apply: the VRF no longer asked');
  await until('red gone', async () => ((await linkOf(a.ns.name, 'red')) ? undefined : true), 30_000);
  t.equal((await linkOf(a.ns.name, 'net1'))?.master, undefined, 'net1 is in no VRF');
  t.equal((await net1Of(a)).v6, mine.v6, 'with its IPv6 address');
  t.match(await routesIn(a, 'main'), /198\.18\.91\.0\/24 dev net1/, "its subnet is the main table's again");
  t.equal(await ping(a, peer.v4), 0, 'and reaches b from it');
  t.equal((await routesIn(a, '100')).trim(), '', 'table 100 is empty');
  await cli.delete('vrf.yaml');
  await until('net1 gone', async () => ((await linkOf(a.ns.name, 'net1')) ? undefined : true), 30_000);
});

t.test("eth0 in a VRF where the node allows it: its primary's routes leave the main table and come back as it leaves", { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true, args: ['--allow-primary-vrf'] });
  await daemon.start();
  const pod = await startPod(t, daemon, 'vrf-e');
  const ip = (...args: string[]) => execa('ip', ['-n', pod.ns.name, ...args]);
  // The primary's doing, as Calico's: an address, a gateway reached by a link route, and an IPv6 default.
  await ip('link', 'set', 'peer0', 'up');
  await ip('addr', 'add', '198.18.92.2/24', 'dev', 'eth0');
  await ip('-6', 'addr', 'add', '2001:db8:92::2/64', 'dev', 'eth0', 'nodad');
  await ip('route', 'add', '169.254.1.1', 'dev', 'eth0', 'scope', 'link');
  await ip('route', 'add', 'default', 'via', '169.254.1.1', 'dev', 'eth0');
  await ip('-6', 'route', 'add', 'default', 'via', '2001:db8:92::1', 'dev', 'eth0');
  const before = { v4: await routesIn(pod, 'main'), v6: (await routesIn(pod, 'main', '-6')).split('\n').filter((l) => !l.startsWith('fe80')).join('\n') };

  const cli = podnetCli(daemon);
  t.equal((await cli.apply('mgmt.yaml', bySelector('mgmt', 'vrf-e', '  vrfs: [{ name: mgmt, table: 10 }]\n  interfaces: [{ name: eth0, vrf: mgmt }]\n'))).exitCode, 0, 'podnet apply: eth0 in VRF mgmt');
  await until('eth0 in mgmt', async () => ((await linkOf(pod.ns.name, 'eth0'))?.master === 'mgmt' ? true : undefined), 30_000);
  t.notMatch(await routesIn(pod, 'main'), /default|198\.18\.92/, "the main table has none of eth0's routes");
  t.match(await routesIn(pod, '10'), /198\.18\.92\.0\/24 dev eth0/, "its subnet is the VRF's");
  t.ok((await addressesIn(pod.ns.name)).find((l) => l.ifname === 'eth0')?.addresses.includes('2001:db8:92::2/64'), 'eth0 keeps its IPv6 address');
  t.match((await cli.explain('default/vrf-e')).stdout, /eth0: tuned; originally vrf none; 3 route\(s\) of the main table to put back/, 'podnet explain: three routes of the primary kept to put back');

  await cli.delete('mgmt.yaml');
  await until('mgmt gone', async () => ((await linkOf(pod.ns.name, 'mgmt')) ? undefined : true), 30_000);
  t.equal((await linkOf(pod.ns.name, 'eth0'))?.master, undefined, 'eth0 is in no VRF');
  t.equal(await routesIn(pod, 'main'), before.v4, "the main table's IPv4 routes are as the primary left them");
  t.equal((await routesIn(pod, 'main', '-6')).split('\n').filter((l) => !l.startsWith('fe80')).join('\n'), before.v6, 'and its IPv6 routes');
});

t.test('a VRF on a table the kernel keeps, or a route naming a table and a VRF, is refused naming the field', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  const cli = podnetCli(daemon);
  const main = await cli.apply('bad.yaml', bySelector('bad', 'any', '  vrfs: [{ name: red, table: 254 }]\n'));
  t.not(main.exitCode, 0, 'table 254 refused');
  t.match(main.stderr, /bad\.yaml document 1 PodNetworkConfig: .*\/spec\/vrfs\/0\/table/);
  const both = await cli.apply('both.yaml', bySelector('both', 'any', '  vrfs: [{ name: red, table: 100 }]\n  routes: [{ to: 198.18.99.0/24, via: 198.18.91.1, table: 100, vrf: red }]\n'));
  t.not(both.exitCode, 0, 'a route with both table and vrf refused');
  t.match(both.stderr, /\/spec\/routes\/0/);
});
