// Port security on the real kernel, as a hostile tenant would try it: a pod holding NET_ADMIN in
// its own netns takes another pod's MAC, then its address (gratuitous ARP), on a Network whose
// ports podnet secures, and on one whose admin turned port security off, side by side. On the
// first it reaches no one and nobody learns the lie; on the second the same lie works, so the test
// can tell the difference.
import t from 'tap';
import { execa } from 'execa';
import { daemonSandbox } from './lib/daemon.ts';
import { linkOf, podnetCli, startPod, until, type Pod } from './lib/engine.ts';
import { missingPrerequisite } from './lib/env.ts';
import { addressesIn, removeLinkAtTeardown, uniqueName } from './lib/netns.ts';
import { hostInterfaceName } from '../src/model/host-links.ts';

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

t.test('a pod that takes another pod\'s MAC or address reaches no one on a secured Network, and does on one with port security off', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const [secured, open] = [uniqueName('pnbr'), uniqueName('pnbr')] as [string, string];
  for (const bridge of [secured, open]) removeLinkAtTeardown(t, bridge);
  const [a, b, c] = (await Promise.all(['pod-a', 'pod-b', 'pod-c'].map((name) => startPod(t, daemon, name)))) as [Pod, Pod, Pod];
  const cli = podnetCli(daemon);
  const network = (name: string, bridge: string, subnet: string, portSecurity: boolean) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: ${name} }
spec:
  type: bridge
  bridge: { name: ${bridge}, portSecurity: ${portSecurity} }
  ipam: { ranges: [{ subnet: ${subnet} }] }
  namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: default } }
---
`;
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

t.test('on a Network without ipam, a pod cannot bring an address another pod on the node has', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);
  const [a, b] = (await Promise.all(['pod-a', 'pod-b'].map((name) => startPod(t, daemon, name)))) as [Pod, Pod];
  const cli = podnetCli(daemon);
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
