// Routes in a table of the request's own (IPv4, IPv6 and an SRv6 encapsulation), policy rules,
// allowlisted sysctls and rate limits, on the real kernel: applied, visible with ip and tc,
// repaired after drift, changed in place, and taken back whole.
import t from 'tap';
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { unlink, writeFile } from 'node:fs/promises';
import { daemonSandbox } from './lib/daemon.ts';
import { hostLinkNames, podnetCli, startPod, until } from './lib/engine.ts';
import { missingPrerequisite } from './lib/env.ts';
import { linkExists, removeLinkAtTeardown, uniqueName } from './lib/netns.ts';
import { hostInterfaceName } from '../src/model/host-links.ts';

const skip = missingPrerequisite();

async function json<T>(args: string[]): Promise<T> {
  return JSON.parse((await execa('ip', ['-json', ...args])).stdout) as T;
}

interface RouteView {
  dst: string;
  gateway?: string;
  dev: string;
  encap?: string;
  segs?: string[];
}

/** The routes of a table; a table with none does not exist for the kernel, which ip reports as an error. */
async function routesOf(ns: string, family: '-4' | '-6', table: string): Promise<RouteView[]> {
  const r = await execa('ip', ['-json', '-n', ns, family, 'route', 'show', 'table', table], { reject: false });
  if (r.exitCode !== 0 && r.stderr.includes('FIB table does not exist')) return [];
  if (r.exitCode !== 0) throw new Error(r.stderr);
  return JSON.parse(r.stdout) as RouteView[];
}

const sysctl = async (ns: string, path: string) => (await execa('ip', ['netns', 'exec', ns, 'cat', `/proc/sys/${path}`])).stdout.trim();

interface Qdisc {
  kind: string;
  root?: boolean;
  options?: { rate?: number; burst?: number };
}

const qdiscs = async (dev: string) => JSON.parse((await execa('tc', ['-json', 'qdisc', 'show', 'dev', dev])).stdout) as Qdisc[];

t.test('routes, rules, seg6, sysctls and bandwidth: applied, repaired, changed, taken back', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);
  const pod = await startPod(t, daemon, 'cnf-0');
  const ns = pod.ns.name;
  const hostEnd = hostInterfaceName(pod.att.containerId, 'net1');
  const ifb = hostInterfaceName(pod.att.containerId, 'net1', 'pnb');
  // An ifb outlives the pod's netns: if the test fails before the daemon takes it back, remove it here.
  removeLinkAtTeardown(t, ifb);
  const cli = podnetCli(daemon);
  const forwardBefore = await sysctl(ns, 'net/ipv4/ip_forward');
  const mainBefore = await json<unknown[]>(['-n', ns, 'route', 'show', 'table', 'main']);

  t.equal((await cli.apply('net.yaml', `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: fast }
spec:
  type: bridge
  bridge: { name: ${bridge}, gateway: true }
  ipam: { ranges: [{ subnet: 198.18.82.0/24 }, { subnet: "2001:db8:82::/64" }] }
  namespaceSelector: {}
`)).exitCode, 0);
  const config = (ingressRate: number) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: routing, namespace: default }
spec:
  podSelector: {}
  attachments:
    - network: fast
      interface: net1
      bandwidth: { ingressRate: ${ingressRate}, ingressBurst: 80000, egressRate: 2000000, egressBurst: 160000 }
  routes:
    - { to: 198.18.90.0/24, via: 198.18.82.1, table: 100 }
    - { to: "2001:db8:90::/64", dev: net1, table: 100, seg6: { segments: ["2001:db8:82::1", "2001:db8:83::1"] } }
    - { to: "2001:db8:91::/64", dev: net1, table: 100, seg6: { mode: inline, segments: ["2001:db8:82::1"] } }
  rules:
    - { priority: 100, from: 198.18.82.0/24, table: 100 }
    - { priority: 101, fwmark: 7, family: ipv6, table: 100 }
  sysctls:
    - { name: net.ipv4.ip_forward, value: "1" }
    - { name: net.ipv4.conf.net1.rp_filter, value: "2" }
`;
  const preview = await cli.diff('routing.yaml', config(1000000));
  t.equal(preview.exitCode, 0, 'podnet diff -f routing.yaml');
  t.match(preview.stdout, /pod default\/cnf-0 .*\n(.*\n)*  pod   ip route add 198\.18\.90\.0\/24 via 198\.18\.82\.1 table 100\n/, 'diff prints the steps');
  t.match(preview.stdout, /  host  tc qdisc replace dev pnv\w+ root tbf rate 1000000bit/);
  t.notOk(await linkExists(ifb), 'and takes none of them');
  t.equal((await cli.apply('routing.yaml', config(1000000))).exitCode, 0, 'podnet apply -f routing.yaml');

  const table100 = (family: '-4' | '-6') => routesOf(ns, family, '100');
  const [v4] = await until('the IPv4 route in table 100', async () => ((await table100('-4')).length > 0 ? table100('-4') : undefined));
  t.match(v4, { dst: '198.18.90.0/24', gateway: '198.18.82.1', dev: 'net1' }, 'the IPv4 route is in table 100, via the gateway on net1');
  const [encap, inline] = await until('both SRv6 routes', async () => ((await table100('-6')).length === 2 ? table100('-6') : undefined));
  t.match(encap, { dst: '2001:db8:90::/64', encap: 'seg6', mode: 'encap', segs: ['2001:db8:82::1', '2001:db8:83::1'], dev: 'net1' }, 'the SRv6 encap route is in table 100');
  t.match(inline, { dst: '2001:db8:91::/64', encap: 'seg6', mode: 'inline', dev: 'net1' }, 'and the inline one (which "no changes" below shows is not replaced every pass)');
  t.same(await json<unknown[]>(['-n', ns, 'route', 'show', 'table', 'main']).then((r) => r.filter((x) => !JSON.stringify(x).includes('net1'))), mainBefore, "the pod's main table is as it was, but for net1's own subnet");
  await until('the rules', async () => ((await json<unknown[]>(['-n', ns, '-6', 'rule', 'show'])).length === 3 ? true : undefined));
  t.match(await json(['-n', ns, 'rule', 'show']), [{}, { priority: 100, src: '198.18.82.0', srclen: 24, table: '100' }, {}, {}], 'the IPv4 rule selects table 100');
  t.match(await json(['-n', ns, '-6', 'rule', 'show']), [{}, { priority: 101, fwmark: '0x7', table: '100' }, {}], 'the IPv6 fwmark rule selects table 100');
  await until('the sysctls', async () => ((await sysctl(ns, 'net/ipv4/conf/net1/rp_filter')) === '2' ? true : undefined));
  t.equal(await sysctl(ns, 'net/ipv4/ip_forward'), '1', 'ip_forward is on in the pod');
  t.match(await qdiscs(hostEnd), [{ kind: 'tbf', root: true, options: { rate: 125000, burst: 10000 } }, { kind: 'ingress' }], "the pod's ingress is shaped on the host end; its egress is redirected");
  t.match(await qdiscs(ifb), [{ kind: 'tbf', root: true, options: { rate: 250000, burst: 20000 } }], "the pod's egress is shaped on the ifb");

  await until('no changes left', async () => ((await cli.diff('routing.yaml', config(1000000))).stdout === 'no changes' ? true : undefined));
  t.pass('once applied, diff of the same documents has no changes');

  // Drift: a route and a rule deleted by hand come back.
  await execa('ip', ['-n', ns, 'route', 'del', '198.18.90.0/24', 'table', '100']);
  await execa('ip', ['-n', ns, 'rule', 'del', 'priority', '100']);
  await until('the route and rule repaired', async () =>
    (await table100('-4')).length === 1 && (await json<unknown[]>(['-n', ns, 'rule', 'show'])).length === 4 ? true : undefined,
  );
  t.pass('a route and a rule removed by hand are repaired');

  // A changed rate is changed in place.
  await cli.apply('routing.yaml', config(4000000));
  await until('the new ingress rate', async () => ((await qdiscs(hostEnd))[0]?.options?.rate === 500000 ? true : undefined));
  t.pass('a new ingress rate replaces the old one in place');

  const explained = await cli.explain('default/cnf-0');
  t.match(explained.stdout, /route 198\.18\.90\.0\/24 via 198\.18\.82\.1 table 100/);
  t.match(explained.stdout, /problems: none\nlast error: none/);

  t.equal((await cli.delete('routing.yaml')).exitCode, 0, 'podnet delete -f routing.yaml');
  await until('net1 gone', async () => ((await linkExists(hostEnd)) ? undefined : true));
  await until('table 100 empty', async () => ((await table100('-4')).length + (await table100('-6')).length === 0 ? true : undefined));
  t.equal(await sysctl(ns, 'net/ipv4/ip_forward'), forwardBefore, 'ip_forward is back');
  t.equal((await json<unknown[]>(['-n', ns, 'rule', 'show'])).length, 3, 'only the kernel rules are left (IPv4)');
  t.equal((await json<unknown[]>(['-n', ns, '-6', 'rule', 'show'])).length, 2, 'only the kernel rules are left (IPv6)');
  t.notOk(await linkExists(ifb), 'the ifb is gone');
  await until('the bridge removed', async () => ((await linkExists(bridge)) ? undefined : true));
  t.pass('the bridge is gone');
});

t.test('bad input: refused with the document, the field and the reason; nothing of a config applies until all of it can', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const pod = await startPod(t, daemon, 'cnf-1');
  const cli = podnetCli(daemon);
  const before = await sysctl(pod.ns.name, 'net/ipv4/ip_forward');
  const bad = `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: bad, namespace: default }
spec:
  podSelector: {}
  interfaces: [{ name: eth0, mtu: 1280 }]
  routes: [{ to: 198.18.90.7/24, dev: eth0, table: 100 }, { to: 198.18.91.0/24, dev: eth9, table: 100 }]
  sysctls: [{ name: net.core.rmem_max, value: "1" }, { name: net.ipv4.ip_forward, value: "1" }]
`;
  // apply -f judges the document as the daemon does, and writes nothing the daemon would refuse.
  const refused = await cli.apply('bad.yaml', bad);
  t.not(refused.exitCode, 0, 'apply -f refuses it');
  t.match(refused.stderr, /nothing applied; the daemon would refuse these in .*bad\.yaml:\n {2}PodNetworkConfig default\/bad spec\.routes\[0\]\.to: 198\.18\.90\.7\/24 has host bits set/);
  t.match(refused.stderr, /PodNetworkConfig default\/bad spec\.sysctls\[0\]\.name: net\.core\.rmem_max is not on podnet's sysctl allowlist/);
  t.notOk(existsSync(`${daemon.configDir}/podnetworkconfig.default.bad.yaml`), 'and wrote nothing');
  // Dropped into the folder by hand, past apply's check: the daemon refuses the same parts.
  const dropped = (name: string, text: string) => writeFile(`${daemon.configDir}/${name}`, text);
  await dropped('bad.yaml', bad);
  // A config applies whole or not at all (ADR 17): nothing of this one does, its good parts neither.
  const explained = await until('the pass reported', async () => {
    const out = (await cli.explain('default/cnf-1')).stdout;
    return out.includes('nothing of it applies to the pod until all of it can') ? out : undefined;
  });
  t.match(explained, /PodNetworkConfig default\/bad spec\.routes\[0\]\.to: 198\.18\.90\.7\/24 has host bits set/);
  t.match(explained, /PodNetworkConfig default\/bad spec\.sysctls\[0\]\.name: net\.core\.rmem_max is not on podnet's sysctl allowlist/);
  t.equal(JSON.parse((await execa('ip', ['-n', pod.ns.name, '-json', 'link', 'show', 'eth0'])).stdout)[0].mtu, 1500, 'eth0 keeps its MTU: the config\'s good part is not applied alone');
  t.equal(await sysctl(pod.ns.name, 'net/ipv4/ip_forward'), before, 'ip_forward is untouched');
  t.same(await routesOf(pod.ns.name, '-4', '100'), [], 'nothing of a refused route is there');

  // Two Networks on one host bridge: the attachments of each are refused, and no bridge is made.
  const bridge = `pn-sh${process.pid % 100000}`;
  removeLinkAtTeardown(t, bridge); // were it made wrongly
  const sharing = (name: string) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: ${name} }
spec: { type: bridge, bridge: { name: ${bridge} }, namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: default } } }
`;
  await cli.apply('shared-a.yaml', sharing('shared-a'));
  t.match((await cli.apply('shared-b.yaml', sharing('shared-b'))).stderr, /Network shared-b spec\.bridge\.name: .*pn-sh\d+/, 'apply -f refuses a second Network on the bridge');
  await dropped('shared-b.yaml', sharing('shared-b'));
  await dropped('shared.yaml', `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: shared, namespace: default }
spec: { podSelector: {}, attachments: [{ network: shared-a, interface: net3 }] }
`);
  const sharedExplained = await until('the shared bridge refused', async () => {
    const text = (await cli.explain('default/cnf-1')).stdout;
    return /also the bridge of Network shared-b/.test(text) ? text : undefined;
  });
  t.match(sharedExplained, /PodNetworkConfig default\/shared spec.attachments\[\d\]: .*host bridge pn-sh\d+ is also the bridge of Network shared-b/);
  t.same(await hostLinkNames(bridge), [], 'no bridge was made for either');
  await cli.delete('shared-a.yaml');
  for (const file of ['shared.yaml', 'shared-b.yaml', 'bad.yaml']) await unlink(`${daemon.configDir}/${file}`);
  t.equal(await sysctl(pod.ns.name, 'net/ipv4/ip_forward'), before, 'nothing to take back');
});
