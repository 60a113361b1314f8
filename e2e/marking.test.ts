// DSCP marking on the real kernel, standalone: an attachment's dscp is put on what the pod sends
// out of it, IPv4 and IPv6, as a packet capture in the peer pod sees it on the wire; changed in
// place (the link is not made again); a table deleted by hand is written again at resync; taken
// back, the pod sends best effort again and podnet's table is gone. The same on an interface a cni
// Network's plugins made (the reference bridge and host-local).
import t from 'tap';
import { execa } from 'execa';
import { fileURLToPath } from 'node:url';
import { daemonSandbox } from './lib/daemon.ts';
import { linkOf, networkDocument, podnetCli, startPod, until, type Pod } from './lib/engine.ts';
import { missingPrerequisite, referencePluginDir } from './lib/env.ts';
import { dir } from 'tmp-promise';
import { addressesIn, removeLinkAtTeardown, uniqueName } from './lib/netns.ts';
import { markingTable } from '../src/model/marking.ts';

const skip = missingPrerequisite(['/bin/busybox', '/usr/bin/python3', '/usr/sbin/nft']);
const capture = fileURLToPath(new URL('./lib/capture-dscp.py', import.meta.url));

/** The DSCP on the wire of what `from` sends `to` over net1 (pinged, the capture in `to`), for an address of `from`'s. */
async function dscpSeen(from: Pod, to: Pod, source: string, destination: string): Promise<number | undefined> {
  const seen = execa('ip', ['netns', 'exec', to.ns.name, 'python3', capture, 'net1', source, '10'], { reject: false });
  await new Promise((r) => setTimeout(r, 300));
  const ping = destination.includes(':') ? 'ping6' : 'ping';
  // A few, spaced: the capture may start after the first.
  await execa('ip', ['netns', 'exec', from.ns.name, 'busybox', ping, '-c', '5', '-i', '1', '-W', '1', destination], { reject: false });
  const { exitCode, stdout } = await seen;
  return exitCode === 0 ? Number(stdout.trim()) : undefined;
}

const markingOf = async (pod: Pod) => (await execa('ip', ['netns', 'exec', pod.ns.name, 'nft', 'list', 'table', ...markingTable.split(' ')], { reject: false })).exitCode === 0;

t.test("an attachment's DSCP on the wire, IPv4 and IPv6: set, changed in place, repaired, taken back", { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);
  const pods = [await startPod(t, daemon, 'mark-a'), await startPod(t, daemon, 'mark-b')];
  const cli = podnetCli(daemon);
  await cli.apply('net.yaml', networkDocument('marked', `  type: bridge\n  bridge: { name: ${bridge}, portSecurity: false }\n  ipam: { ranges: [{ subnet: 198.18.90.0/24 }, { subnet: "2001:db8:90::/64" }] }`));
  const config = (dscp?: number) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: attach, namespace: default }
spec:
  podSelector: { matchLabels: { podnetwork.opdev.io/pod-name: mark-a } }
  attachments: [{ network: marked, interface: net1${dscp === undefined ? '' : `, dscp: ${dscp}`} }]
---
apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: peer, namespace: default }
spec:
  podSelector: { matchLabels: { podnetwork.opdev.io/pod-name: mark-b } }
  attachments: [{ network: marked, interface: net1 }]
`;
  t.equal((await cli.apply('attach.yaml', config(46))).exitCode, 0, 'podnet apply: mark-a asks DSCP 46 on net1');
  const addresses = [];
  for (const pod of pods) {
    addresses.push(await until(`net1's addresses in ${pod.name}`, async () => {
      const net1 = (await addressesIn(pod.ns.name)).find((l) => l.ifname === 'net1');
      const v4 = net1?.addresses.find((a) => a.startsWith('198.18.90.'));
      const v6 = net1?.addresses.find((a) => a.startsWith('2001:db8:90:'));
      return v4 && v6 ? { v4: v4.split('/')[0]!, v6: v6.split('/')[0]! } : undefined;
    }));
  }
  const [a, b] = [addresses[0]!, addresses[1]!];
  await until("mark-a's table", async () => ((await markingOf(pods[0]!)) ? true : undefined));
  t.equal(await dscpSeen(pods[0]!, pods[1]!, a.v4, b.v4), 46, 'mark-b sees DSCP 46 on what mark-a sends over IPv4');
  t.equal(await until('IPv6 past DAD', () => dscpSeen(pods[0]!, pods[1]!, a.v6, b.v6), 30_000), 46, 'and over IPv6');
  t.equal(await dscpSeen(pods[1]!, pods[0]!, b.v4, a.v4), 0, 'mark-b, which asked none, sends best effort');
  t.match((await cli.explain('default/mark-a')).stdout, /net1 on Network marked: .*, dscp 46/, 'podnet explain shows it');

  const ifindex = (await linkOf(pods[0]!.ns.name, 'net1'))?.ifindex;
  await cli.apply('attach.yaml', config(10));
  t.equal(await until('DSCP 10 on the wire', async () => ((await dscpSeen(pods[0]!, pods[1]!, a.v4, b.v4)) === 10 ? 10 : undefined), 60_000), 10, 'changed to 10');
  t.equal((await linkOf(pods[0]!.ns.name, 'net1'))?.ifindex, ifindex, 'in place: net1 is the same link');

  await execa('ip', ['netns', 'exec', pods[0]!.ns.name, 'nft', 'delete', 'table', ...markingTable.split(' ')]);
  await until('the table written again at resync', async () => ((await markingOf(pods[0]!)) ? true : undefined), 30_000);
  t.equal(await dscpSeen(pods[0]!, pods[1]!, a.v4, b.v4), 10, 'a table deleted by hand is written again');

  await cli.apply('attach.yaml', config());
  await until('the table gone', async () => ((await markingOf(pods[0]!)) ? undefined : true), 30_000);
  t.equal(await dscpSeen(pods[0]!, pods[1]!, a.v4, b.v4), 0, 'taken back: best effort again, net1 kept');
});

t.test("a cni Network's interface: its plugins make it, podnet marks what the pod sends out of it", { skip: skip ?? missingPrerequisite([`${referencePluginDir}/bridge`, `${referencePluginDir}/host-local`]) }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true, args: ['--cni-bin-dir', referencePluginDir] });
  await daemon.start();
  const bridge = uniqueName('pncb');
  removeLinkAtTeardown(t, bridge);
  const ipam = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-ipam-' });
  t.teardown(() => ipam.cleanup());
  const pods = [await startPod(t, daemon, 'plug-a'), await startPod(t, daemon, 'plug-b')];
  const cli = podnetCli(daemon);
  await cli.apply('net.yaml', networkDocument('plugged', `  type: cni\n  cni: { config: { cniVersion: 1.0.0, plugins: [{ type: bridge, bridge: ${bridge}, ipam: { type: host-local, ranges: [[{ subnet: 198.18.91.0/24 }]], dataDir: ${ipam.path} } }] } }`));
  const config = (pod: string, name: string, dscp?: number) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: ${name}, namespace: default }
spec:
  podSelector: { matchLabels: { podnetwork.opdev.io/pod-name: ${pod} } }
  attachments: [{ network: plugged, interface: net1${dscp === undefined ? '' : `, dscp: ${dscp}`} }]
`;
  t.equal((await cli.apply('peer.yaml', config('plug-b', 'peer'))).exitCode, 0);
  t.equal((await cli.apply('attach.yaml', config('plug-a', 'attach', 34))).exitCode, 0, 'podnet apply: plug-a asks DSCP 34 on a cni Network');
  const [a, b] = await Promise.all(pods.map((pod) => until(`net1 in ${pod.name}`, async () => (await addressesIn(pod.ns.name)).find((l) => l.ifname === 'net1')?.addresses.find((x) => x.startsWith('198.18.91.'))?.split('/')[0])));
  await until("plug-a's table", async () => ((await markingOf(pods[0]!)) ? true : undefined));
  t.equal(await dscpSeen(pods[0]!, pods[1]!, a!, b!), 34, 'plug-b sees DSCP 34 on what plug-a sends');
  t.equal(await dscpSeen(pods[1]!, pods[0]!, b!, a!), 0, 'plug-b, which asked none, sends best effort');
  t.match((await cli.explain('default/plug-a')).stdout, /net1 on Network plugged: plugins bridge, dscp 34/, 'podnet explain shows it');

  const ifindex = (await linkOf(pods[0]!.ns.name, 'net1'))?.ifindex;
  await cli.apply('attach.yaml', config('plug-a', 'attach'));
  await until('the table gone', async () => ((await markingOf(pods[0]!)) ? undefined : true), 30_000);
  t.equal(await dscpSeen(pods[0]!, pods[1]!, a!, b!), 0, 'taken back: best effort again');
  t.equal((await linkOf(pods[0]!.ns.name, 'net1'))?.ifindex, ifindex, 'net1 is the same link: its plugins were not run again for a DSCP');
});
