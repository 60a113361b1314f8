// Port security on the real kernel, as a hostile tenant would try it: a pod holding NET_ADMIN in
// its own netns takes another pod's MAC, then its address (gratuitous ARP), on a Network whose
// ports podnet secures, and on one whose admin turned port security off, side by side. On the
// first it reaches no one and nobody learns the lie; on the second the same lie works, so the test
// can tell the difference. The same over IPv6 (unsolicited neighbor advertisements). And MACs a
// pod's config asks: only on a Network whose admin allows them, and never one another pod has.
import t, { type Test } from 'tap';
import { execa } from 'execa';
import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { rename, writeFile } from 'node:fs/promises';
import { daemonSandbox } from './lib/daemon.ts';
import { linkOf, podnetCli, startPod, until, type Pod } from './lib/engine.ts';
import { missingPrerequisite } from './lib/env.ts';
import { addressesIn, makeNetns, removeLinkAtTeardown, uniqueName } from './lib/netns.ts';
import { hostInterfaceName } from '../src/model/host-links.ts';
import { portSecurityTable, releasePortLine } from '../src/model/port-security.ts';

const skip = missingPrerequisite(['/bin/busybox', '/usr/sbin/nft']);

/** Runs a command inside a pod's netns, as root there: what a pod with NET_ADMIN may do. */
const inPod = (pod: Pod, ...args: string[]) => execa('ip', ['netns', 'exec', pod.ns.name, ...args], { reject: false });
const macOf = async (pod: Pod, dev: string) => (await linkOf(pod.ns.name, dev))!.address!;
const addressOf = async (pod: Pod, dev: string) => (await addressesIn(pod.ns.name)).find((l) => l.ifname === dev)!.addresses[0]!.split('/')[0]!;
const pings = async (from: Pod, to: string) => (await inPod(from, '/bin/busybox', 'ping', '-c', '2', '-W', '1', to)).exitCode === 0;
/** The MAC `pod`'s neighbor table gives `ip` (after it talked to it), or undefined. */
const neighborMac = async (pod: Pod, ip: string) => (JSON.parse((await inPod(pod, 'ip', '-j', 'neigh', 'show', ip)).stdout || '[]') as { lladdr?: string }[])[0]?.lladdr;
/** The ports the bridge has learned `mac` on. */
const learnedOn = async (bridge: string, mac: string) =>
  (JSON.parse((await execa('bridge', ['-j', 'fdb', 'show', 'br', bridge])).stdout) as { mac: string; ifname: string }[]).filter((e) => e.mac === mac).map((e) => e.ifname);

/**
 * A standalone daemon, three pods and two bridges of the test's own, one for a Network whose ports
 * podnet secures and one for a Network with port security off: what each spoof is tried on.
 */
async function securedAndOpen(t: Test) {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const [secured, open] = [uniqueName('pnbr'), uniqueName('pnbr')] as [string, string];
  for (const bridge of [secured, open]) removeLinkAtTeardown(t, bridge);
  const [a, b, c] = (await Promise.all(['pod-a', 'pod-b', 'pod-c'].map((name) => startPod(t, daemon, name)))) as [Pod, Pod, Pod];
  const network = (name: string, bridge: string, subnet: string, portSecurity: boolean) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: ${name} }
spec:
  type: bridge
  bridge: { name: ${bridge}, portSecurity: ${portSecurity} }
  ipam: { ranges: [{ subnet: "${subnet}" }] }
  namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: default } }
---
`;
  return { secured, open, a, b, c, cli: podnetCli(daemon), network };
}

t.test('a pod that takes another pod\'s MAC or address reaches no one on a secured Network, and does on one with port security off', { skip }, async (t) => {
  const { secured, open, a, b, c, cli, network } = await securedAndOpen(t);
  await cli.apply(
    'ps.yaml',
    `${network('secured', secured, '198.18.121.0/24', true)}${network('open', open, '198.18.122.0/24', false)}apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: both, namespace: default }
spec: { podSelector: {}, attachments: [{ network: secured, interface: net1 }, { network: open, interface: net2 }] }
`,
  );
  for (const pod of [a, b, c]) {
    await until(`${pod.name} has net1 and net2 with addresses`, async () => {
      const links = await addressesIn(pod.ns.name);
      return ['net1', 'net2'].every((dev) => links.find((l) => l.ifname === dev)?.addresses.length) ? true : undefined;
    });
  }
  t.match((await cli.explain('default/pod-a')).stdout, /net1 on Network secured: .*port admits only/, 'explain says net1\'s port is secured');
  t.match((await cli.explain('default/pod-a')).stdout, /net2 on Network open: .*port security off/, 'and that net2\'s is not');

  for (const [dev, guarded] of [['net1', true], ['net2', false]] as const) {
    const bridge = guarded ? secured : open;
    const what = guarded ? 'secured' : 'open';
    const [bMac, aMac, bIp, cIp] = [await macOf(b, dev), await macOf(a, dev), await addressOf(b, dev), await addressOf(c, dev)];
    t.ok(await pings(c, bIp), `${what}: c reaches b, as it should`);
    t.ok(await pings(a, cIp), `${what}: a reaches c with its own MAC`);
    t.equal(await neighborMac(c, bIp), bMac, `${what}: c knows b's address at b's MAC`);

    // a takes b's MAC and talks.
    await inPod(a, 'ip', 'link', 'set', 'dev', dev, 'address', bMac);
    const reached = await pings(a, cIp);
    const aPort = hostInterfaceName(a.att.containerId, dev);
    const learned = await learnedOn(bridge, bMac);
    await inPod(a, 'ip', 'link', 'set', 'dev', dev, 'address', aMac);
    if (guarded) {
      t.notOk(reached, 'secured: with b\'s MAC, a reaches no one');
      t.notOk(learned.includes(aPort), 'secured: the bridge never learns b\'s MAC on a\'s port');
    } else {
      t.ok(reached, 'open: with b\'s MAC, a reaches c (the spoof works where port security is off)');
      t.ok(learned.includes(aPort), 'open: the bridge learned b\'s MAC on a\'s port');
    }

    // a claims b's address: takes it and announces it (gratuitous ARP and ARP replies).
    // Linux keeps a neighbor entry for a second after it was confirmed (locktime) whatever it
    // hears: a announces a few times, a second apart, and c is read after each.
    await inPod(a, 'ip', 'addr', 'add', `${bIp}/24`, 'dev', dev);
    let believed: string | undefined;
    for (let round = 0; round < 4 && believed !== aMac; round++) {
      await inPod(a, '/bin/busybox', 'arping', '-U', '-c', '1', '-I', dev, '-s', bIp, bIp);
      await inPod(a, '/bin/busybox', 'arping', '-A', '-c', '1', '-I', dev, '-s', bIp, bIp);
      believed = await neighborMac(c, bIp);
    }
    await inPod(a, 'ip', 'addr', 'del', `${bIp}/24`, 'dev', dev);
    if (guarded) t.equal(believed, bMac, 'secured: c still has b\'s address at b\'s MAC');
    else t.equal(believed, aMac, 'open: c now sends b\'s traffic to a');
  }
});

/** A standalone daemon, the named pods, and a bridge name of the test's own. */
async function onOneBridge<Names extends string[]>(t: Test, ...names: Names) {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);
  const pods = (await Promise.all(names.map((name) => startPod(t, daemon, name)))) as { [K in keyof Names]: Pod };
  return { daemon, bridge, pods, cli: podnetCli(daemon) };
}

t.test('on a Network without ipam, a pod cannot bring an address another pod on the node has', { skip }, async (t) => {
  const { bridge, pods: [a, b], cli } = await onOneBridge(t, 'pod-a', 'pod-b');
  const own = (pod: string, ip: string) => `---
apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: ${pod}, namespace: default }
spec: { podSelector: { matchLabels: { podnetwork.opdev.io/pod-name: ${pod} } }, attachments: [{ network: plain, interface: net1, ips: [${ip}] }] }
`;
  const plain = `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: plain }
spec: { type: bridge, bridge: { name: ${bridge} }, staticAddresses: true, namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: default } } }
`;
  await cli.apply('a.yaml', plain + own('pod-a', '198.18.130.7/24'));
  await until('pod-a has its address', async () => ((await addressesIn(a.ns.name)).find((l) => l.ifname === 'net1')?.addresses.includes('198.18.130.7/24') ? true : undefined));
  await cli.apply('b.yaml', own('pod-b', '198.18.130.7/24'));
  const told = await until('pod-b is told', async () => {
    const out = (await cli.explain('default/pod-b')).stdout;
    return out.includes('address 198.18.130.7 is in use') ? out : undefined;
  });
  t.match(told, /PodNetworkConfig default\/pod-b spec\.attachments\[0\]\.ips: address 198\.18\.130\.7 is in use by another pod's interface on this node/);
  t.equal(await linkOf(b.ns.name, 'net1'), undefined, 'pod-b gets no net1 with it');
  await cli.apply('b.yaml', own('pod-b', '198.18.130.8/24'));
  await until('pod-b has an address of its own', async () => ((await addressesIn(b.ns.name)).find((l) => l.ifname === 'net1')?.addresses.includes('198.18.130.8/24') ? true : undefined));
  t.pass('with an address nobody has, it attaches');
});

/** The IPv6 addresses of a pod's interface, once none is tentative (duplicate address detection over): global and link-local. */
const settledV6 = async (pod: Pod, dev: string) => {
  const r = await execa('ip', ['-n', pod.ns.name, '-j', '-6', 'addr', 'show', 'dev', dev], { reject: false });
  const info = r.exitCode === 0 ? ((JSON.parse(r.stdout) as { addr_info: { local: string; scope: string; tentative?: boolean }[] }[])[0]?.addr_info ?? []) : [];
  const global = info.find((a) => a.scope === 'global');
  const link = info.find((a) => a.scope === 'link');
  return global && link && info.every((a) => !a.tentative) ? { global: global.local, link: link.local } : undefined;
};
/** A counter of one interface's IPv6 stack in the pod (/proc/net/dev_snmp6), e.g. Icmp6InEchos. */
const v6Counter = async (pod: Pod, dev: string, name: string) => {
  const line = (await inPod(pod, 'cat', `/proc/net/dev_snmp6/${dev}`)).stdout.split('\n').find((l) => l.split(/\s+/)[0] === name);
  return Number(line?.split(/\s+/)[1] ?? NaN);
};
const pings6 = async (from: Pod, to: string, source?: string) =>
  (await inPod(from, '/bin/busybox', 'ping', '-6', '-c', '2', '-W', '1', ...(source ? ['-I', source] : []), to)).exitCode === 0;
/** What `probe` gives within `ms`, or undefined: for what may rightly never come. */
const within = <T>(ms: number, probe: () => Promise<T | undefined>) => until('', probe, ms).catch(() => undefined);
/** The elements of one set of podnet's port security table whose first key is `port`, the rest of their keys joined by spaces. */
const entriesOf = async (set: string, port: string) => {
  const r = await execa('nft', ['-j', 'list', 'set', ...portSecurityTable.split(' '), set], { reject: false });
  if (r.exitCode !== 0) return [];
  const found = (JSON.parse(r.stdout) as { nftables: { set?: { elem?: unknown[] } }[] }).nftables.find((o) => o.set)?.set?.elem ?? [];
  const keys = found.map((e) => {
    const value = (e as { elem?: { val?: unknown } }).elem?.val ?? e;
    return typeof value === 'object' && value !== null && 'concat' in value ? (value as { concat: string[] }).concat : [String(value)];
  });
  return keys.filter((k) => k[0] === port).map((k) => k.slice(1).join(' '));
};

t.test('over IPv6, a pod that takes another pod\'s address fools no neighbor and reaches no one on a secured Network, and does on one with port security off', { skip }, async (t) => {
  const { secured, open, a, b, c, cli, network } = await securedAndOpen(t);
  // A ULA prefix of the test's own (RFC 4193: fd and 40 random bits).
  const ula = `fd${randomBytes(5).toString('hex').replace(/^(..)(....)(....)$/, '$1:$2:$3')}`;
  await cli.apply(
    'ps6.yaml',
    `${network('secured6', secured, `${ula}:1::/64`, true)}${network('open6', open, `${ula}:2::/64`, false)}apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: both, namespace: default }
spec: { podSelector: {}, attachments: [{ network: secured6, interface: net1 }, { network: open6, interface: net2 }] }
`,
  );
  type V6 = { global: string; link: string };
  const addresses = new Map<string, V6>();
  for (const pod of [a, b, c]) {
    for (const dev of ['net1', 'net2']) addresses.set(`${pod.name} ${dev}`, await until(`${pod.name} has ${dev} with settled IPv6 addresses`, () => settledV6(pod, dev)));
  }
  t.match((await cli.explain('default/pod-a')).stdout, /net1 on Network secured6: .*port admits only/, 'explain says net1\'s port is secured');

  for (const [dev, guarded] of [['net1', true], ['net2', false]] as const) {
    const what = guarded ? 'secured' : 'open';
    const [bMac, aMac] = [await macOf(b, dev), await macOf(a, dev)];
    const [aIp, bIp, cIp] = [a, b, c].map((p) => addresses.get(`${p.name} ${dev}`)!) as [V6, V6, V6];
    const aPort = hostInterfaceName(a.att.containerId, dev);
    if (guarded) {
      t.same((await entriesOf('addr6', aPort)).sort(), [`${aMac} ${aIp.global}`, `${aMac} ${aIp.link}`].sort(), 'secured: a\'s port admits IPv6 only from a\'s MAC with a\'s own address and link-local address');
    } else {
      t.same(await entriesOf('ports', aPort), [], 'open: a\'s port is not in the table');
    }
    t.ok(await pings6(c, bIp.global), `${what}: c reaches b over IPv6, as it should`);
    t.ok(await pings6(a, cIp.global), `${what}: a reaches c with its own address`);
    t.equal(await neighborMac(c, bIp.global), bMac, `${what}: c knows b's address at b's MAC`);

    // a takes b's address, and has its kernel announce it: without duplicate address detection
    // and with ndisc_notify, adding an address sends an unsolicited neighbor advertisement of it
    // (override set, a's MAC as the target's link-layer address) to all nodes. c has an entry for
    // b's address (it pinged b), which such an advertisement overrides where it gets through.
    await inPod(a, '/bin/busybox', 'sysctl', '-w', 'net.ipv6.conf.all.accept_dad=0', `net.ipv6.conf.${dev}.accept_dad=0`, `net.ipv6.conf.${dev}.ndisc_notify=1`);
    let believed: string | undefined;
    for (let round = 0; round < 3 && believed !== aMac; round++) {
      await inPod(a, 'ip', '-6', 'addr', 'del', `${bIp.global}/64`, 'dev', dev);
      await inPod(a, 'ip', '-6', 'addr', 'add', `${bIp.global}/64`, 'dev', dev);
      believed = (await within(1000, async () => ((await neighborMac(c, bIp.global)) === aMac ? aMac : undefined))) ?? (await neighborMac(c, bIp.global));
    }
    // With b's address on a: c pings b's address (who answers?), and a pings c as b.
    const [repliesBefore, echoesBefore] = [await v6Counter(a, dev, 'Icmp6OutEchoReplies'), await v6Counter(c, dev, 'Icmp6InEchos')];
    await pings6(c, bIp.global);
    await pings6(a, cIp.global, bIp.global);
    const [aAnswered, cHeard] = [(await v6Counter(a, dev, 'Icmp6OutEchoReplies')) - repliesBefore, (await v6Counter(c, dev, 'Icmp6InEchos')) - echoesBefore];
    await inPod(a, 'ip', '-6', 'addr', 'del', `${bIp.global}/64`, 'dev', dev);
    t.ok(Number.isFinite(aAnswered) && Number.isFinite(cHeard), `${what}: the pods' ICMPv6 counters are read`);
    if (guarded) {
      t.equal(believed, bMac, 'secured: after a\'s advertisements, c still has b\'s address at b\'s MAC');
      t.equal(aAnswered, 0, 'secured: a answers none of c\'s pings of b\'s address');
      t.equal(cHeard, 0, 'secured: a\'s pings from b\'s address never reach c');
      t.equal(await neighborMac(c, bIp.global), bMac, 'secured: and c still has b\'s address at b\'s MAC');
    } else {
      t.equal(believed, aMac, 'open: c now sends b\'s traffic to a (the spoof works where port security is off)');
      t.ok(aAnswered > 0, 'open: a answers c\'s pings of b\'s address');
      t.ok(cHeard > 0, 'open: a\'s pings from b\'s address reach c');
    }
  }
});

/** A PodNetworkConfig of one pod's own: net1 on `network`, with the MAC `mac` if given. */
const ownConfig = (pod: string, network: string, mac?: string) => `---
apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: ${pod}, namespace: default }
spec:
  podSelector: { matchLabels: { podnetwork.opdev.io/pod-name: ${pod} } }
  attachments: [{ network: ${network}, interface: net1 }]
${mac ? `  interfaces: [{ name: net1, mac: "${mac}" }]\n` : ''}`;
const bridgeNetwork = (name: string, bridge: string, subnet: string, staticMacs?: boolean) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: ${name} }
spec:
  type: bridge
  bridge: { name: ${bridge} }
  ipam: { ranges: [{ subnet: ${subnet} }] }
${staticMacs === undefined ? '' : `  staticMacs: ${staticMacs}\n`}  namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: default } }
`;
/** A locally administered unicast MAC of the test's own. */
const randomMac = () => ['02', ...[...randomBytes(5)].map((x) => x.toString(16).padStart(2, '0'))].join(':');
/** What explain says of `pod` once it includes `text`. */
const explained = async (cli: ReturnType<typeof podnetCli>, pod: string, text: string) => {
  let out = '';
  return until(`explain of ${pod} says ${text}`, async () => {
    out = (await cli.explain(`default/${pod}`)).stdout;
    return out.includes(text) ? out : undefined;
  }).catch((e: Error) => Promise.reject(new Error(`${e.message}; it says:\n${out}`)));
};
const hasNet1 = (pod: Pod, mac?: string) =>
  until(`${pod.name} has net1${mac ? ` with MAC ${mac}` : ''} and an address`, async () => {
    const link = await linkOf(pod.ns.name, 'net1');
    const addressed = (await addressesIn(pod.ns.name)).find((l) => l.ifname === 'net1')?.addresses.length;
    return link && addressed && (mac === undefined || link.address === mac) ? link : undefined;
  });

t.test('a pod cannot give its attachment a MAC of its own on a Network without staticMacs, and gets nothing of that config', { skip }, async (t) => {
  const { daemon, bridge, pods: [a], cli } = await onOneBridge(t, 'pod-a');
  const mac = randomMac();
  await cli.apply('net.yaml', bridgeNetwork('nomacs', bridge, '198.18.124.0/24'));
  const configFile = `${daemon.configDir}/podnetworkconfig.default.pod-a.yaml`;
  // apply -f judges the config as the daemon does, and writes nothing the daemon would refuse.
  const refused = await cli.apply('a.yaml', ownConfig('pod-a', 'nomacs', mac));
  t.not(refused.exitCode, 0, 'apply -f refuses the config');
  t.match(refused.stderr, /PodNetworkConfig default\/pod-a spec\.interfaces\[0\]\.mac: .*staticMacs/, 'naming the field and staticMacs');
  t.notOk(existsSync(configFile), 'and writes nothing');
  // Put in the folder past apply's check (whole, by a rename): the daemon refuses it the same way.
  await writeFile(`${daemon.configDir}/.pod-a.tmp`, ownConfig('pod-a', 'nomacs', mac));
  await rename(`${daemon.configDir}/.pod-a.tmp`, configFile);
  const told = await explained(cli, 'pod-a', 'spec.interfaces[0].mac');
  t.match(told, /PodNetworkConfig default\/pod-a spec\.interfaces\[0\]\.mac: .*staticMacs/, 'explain names the field and says staticMacs');
  t.match(told, /nothing of it applies to the pod until all of it can/, 'and that nothing of the config applies');
  t.equal(await linkOf(a.ns.name, 'net1'), undefined, 'pod-a gets no net1 from that config');
  await cli.apply('a.yaml', ownConfig('pod-a', 'nomacs'));
  const link = await hasNet1(a);
  t.not(link.address, mac, 'without the MAC, the same config attaches net1, with a MAC podnet gives');
});

t.test('on a Network with staticMacs, a pod gets the MAC it asks, and another pod asking the same one is refused and gets nothing of that config', { skip }, async (t) => {
  const { bridge, pods: [a, b], cli } = await onOneBridge(t, 'pod-a', 'pod-b');
  const mac = randomMac();
  await cli.apply('a.yaml', bridgeNetwork('macs', bridge, '198.18.125.0/24', true) + ownConfig('pod-a', 'macs', mac));
  await hasNet1(a, mac);
  t.pass('pod-a\'s net1 has the MAC its config asks');

  await cli.apply('b.yaml', ownConfig('pod-b', 'macs', mac));
  const told = await explained(cli, 'pod-b', `MAC ${mac}`);
  t.match(told, new RegExp(`PodNetworkConfig default/pod-b spec\\.interfaces\\[0\\]\\.mac: MAC ${mac} is in use by another pod's interface on this node`), 'explain names the field and says the MAC is in use');
  t.equal(await linkOf(b.ns.name, 'net1'), undefined, 'pod-b gets no net1 from that config');
  t.equal((await linkOf(a.ns.name, 'net1'))?.address, mac, 'pod-a keeps its MAC');
  // a talks (an ARP request from its own address): the bridge learns its MAC, on a's port only.
  const aIp = await addressOf(a, 'net1');
  await inPod(a, '/bin/busybox', 'arping', '-c', '1', '-w', '1', '-I', 'net1', '-s', aIp, '198.18.125.254');
  const learned = await until(`${bridge} learns ${mac}`, async () => {
    const on = await learnedOn(bridge, mac);
    return on.length > 0 ? on : undefined;
  });
  t.same(learned, [hostInterfaceName(a.att.containerId, 'net1')], 'the bridge has the MAC on a\'s port only');

  const other = randomMac();
  await cli.apply('b.yaml', ownConfig('pod-b', 'macs', other));
  await hasNet1(b, other);
  t.pass('with a MAC nobody has, pod-b attaches with it');
});

/**
 * A node of the test's own (a netns with its own daemon, whose port security table is no other
 * podnet's), with pods a and c on a secured Network, each with net1 and its address.
 */
async function securedNode(t: Test, subnet: string) {
  const node = await makeNetns(t, 'pne2e-node-');
  const daemon = await daemonSandbox(t, { standalone: true, netns: node.path });
  await daemon.start();
  const bridge = uniqueName('pnbr');
  const [a, c] = (await Promise.all(['pod-a', 'pod-c'].map((name) => startPod(t, daemon, name)))) as [Pod, Pod];
  const cli = podnetCli(daemon);
  await cli.apply('ps.yaml', `${bridgeNetwork('secured', bridge, subnet)}---
apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: secured, namespace: default }
spec: { podSelector: {}, attachments: [{ network: secured, interface: net1 }] }
`);
  for (const pod of [a, c]) await hasAddressOn(pod);
  const onNode = (...args: string[]) => execa('ip', ['netns', 'exec', node.name, ...args], { reject: false });
  return { daemon, bridge, a, c, cli, onNode };
}

const hasAddressOn = (pod: Pod, timeoutMs?: number) => until(`${pod.name} has net1 with an address`, async () => ((await addressesIn(pod.ns.name)).find((l) => l.ifname === 'net1')?.addresses.length ? true : undefined), timeoutMs);

t.test('a port security table flushed away, then given back its sets alone by a port\'s release, is made whole again: a spoof is dropped again', { skip }, async (t) => {
  // The test may flush its node's table as an operator's `nft flush ruleset` (a firewall service restarting) would.
  const { daemon, bridge, a, c, onNode } = await securedNode(t, '198.18.126.0/24');
  const aPort = hostInterfaceName(a.att.containerId, 'net1');
  const [aMac, cIp] = [await macOf(a, 'net1'), await addressOf(c, 'net1')];
  // A MAC no pod has: what a spoofing pod sends with.
  const spoofed = '02:00:5e:10:20:30';
  /** Whether a, sending with the spoofed MAC, reaches c, and whether the bridge learned that MAC on a's port. */
  const spoof = async () => {
    await inPod(a, 'ip', 'link', 'set', 'dev', 'net1', 'address', spoofed);
    const reached = await pings(a, cIp);
    const fdb = JSON.parse((await onNode('bridge', '-j', 'fdb', 'show', 'br', bridge)).stdout || '[]') as { mac: string; ifname: string }[];
    await inPod(a, 'ip', 'link', 'set', 'dev', 'net1', 'address', aMac);
    await onNode('bridge', 'fdb', 'del', spoofed, 'dev', aPort, 'master');
    return { reached, learned: fdb.some((e) => e.mac === spoofed && e.ifname === aPort) };
  };
  t.ok(await pings(a, cIp), 'a reaches c with its own MAC');
  t.same(await spoof(), { reached: false, learned: false }, 'with another MAC, a reaches no one and the bridge learns nothing');

  // The operator's flush, then the state a port's release left behind it: table and sets, no
  // chains. With the daemon stopped, so that no resync repairs the table before it is seen broken;
  // the first pass after its start is a resync, which reads the host.
  await daemon.stop();
  t.equal((await onNode('nft', 'flush', 'ruleset')).exitCode, 0, 'the node\'s ruleset flushed');
  const released = await onNode('nft', releasePortLine('pnvgone0000000', { mac: '02:00:5e:00:00:01', addresses: [] }));
  t.equal(released.exitCode, 0, released.stderr);
  t.equal((await onNode('nft', 'list', 'chain', ...portSecurityTable.split(' '), 'prerouting')).exitCode, 1, 'the table is there without its chains');
  await daemon.start();

  await until('the table has its chains again, and a\'s port its entries', async () => {
    const listed = await onNode('nft', 'list', 'table', ...portSecurityTable.split(' '));
    return listed.stdout.includes('chain prerouting') && listed.stdout.includes(aPort) ? true : undefined;
  });
  t.ok(await pings(a, cIp), 'a still reaches c with its own MAC');
  t.same(await spoof(), { reached: false, learned: false }, 'and with another MAC reaches no one again, nor teaches the bridge');
});

t.test('a chain of someone else\'s in podnet\'s table, hooked nowhere, is never counted as filtering: no secured port is made, the pods and podnet status say why; once it is gone, all is made and a spoof is dropped', { skip }, async (t) => {
  // The test takes its node's table over, as root on a node could.
  const { daemon, c, cli, onNode } = await securedNode(t, '198.18.127.0/24');
  const table = portSecurityTable.split(' ');
  const status = async () => JSON.parse((await cli.podnet('status', '-o', 'json', '--socket', daemon.socketPath)).stdout) as { ports?: { secured: number; unverified?: number } };

  // Taken over while the daemon is down: a table of the name with a prerouting chain hooked
  // nowhere, which sees no frame, and which podnet's ruleset cannot be put over.
  await daemon.stop();
  t.equal((await onNode('nft', 'delete', 'table', ...table)).exitCode, 0);
  t.equal((await onNode('nft', 'add', 'table', ...table)).exitCode, 0);
  t.equal((await onNode('nft', 'add', 'chain', ...table, 'prerouting')).exitCode, 0);
  await daemon.start();
  const b = await startPod(t, daemon, 'pod-b');

  const said = await until('pod-b says why it has no net1', async () => {
    const out = (await cli.explain('pod-b')).stdout;
    return /port security cannot secure the port of net1 on this node: nft could not put bridge podnet/.test(out) ? out : undefined;
  });
  t.match(said, /spec\.bridge\.portSecurity/, 'at the Network\'s field');
  t.notOk(await linkOf(b.ns.name, 'net1'), 'and gets no interface whose port would filter nothing');
  await until('podnet status counts a\'s and c\'s ports as not verified', async () => ((await status()).ports?.unverified === 2 ? true : undefined));
  t.match((await cli.podnet('status', '--socket', daemon.socketPath)).stdout, /2 of the secured not filtered as far as podnet can tell/, 'and says so in words');

  // The chain gone: the next try puts podnet's table whole, and every pod gets its port.
  t.equal((await onNode('nft', 'delete', 'table', ...table)).exitCode, 0);
  await hasAddressOn(b, 20_000);
  await until('podnet status counts every port verified again', async () => ((await status()).ports?.unverified === 0 ? true : undefined));
  const cIp = await addressOf(c, 'net1');
  const bMac = await macOf(b, 'net1');
  t.ok(await pings(b, cIp), 'b reaches c with its own MAC');
  await inPod(b, 'ip', 'link', 'set', 'dev', 'net1', 'address', '02:00:5e:10:20:31');
  t.notOk(await pings(b, cIp), 'and with another MAC reaches no one');
  await inPod(b, 'ip', 'link', 'set', 'dev', 'net1', 'address', bMac);
});
