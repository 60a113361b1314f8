// ipvlan Networks on a kernel that has ipvlan (run in a VM of Debian's kernel by
// e2e/kernel.test.ts): pods on one parent, in l2 and in l3 mode, get addresses from the Network's
// IPAM and reach each other; their links share the parent's MAC; a link deleted by hand in the pod
// is made again at resync; a MAC of the pod's own is refused naming why; a bad mode is refused
// naming the field; undo leaves nothing on the pods or the host.
import t, { type Test } from 'tap';
import { execa } from 'execa';
import { daemonSandbox, type DaemonSandbox } from '../lib/daemon.ts';
import { attachConfig, hostLinkNames, linkOf, net1Address, networkDocument, pingFrom, podnetCli, startPod, until } from '../lib/engine.ts';
import { missingPrerequisite } from '../lib/env.ts';
import { removeLinkAtTeardown, uniqueName } from '../lib/netns.ts';

const skip = missingPrerequisite(['/bin/busybox']);

/** A standalone daemon, running, and a dummy parent of the test's own, up unless `down`, deleted at teardown. */
async function daemonAndParent(t: Test, down = false): Promise<{ daemon: DaemonSandbox; parent: string }> {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const parent = uniqueName('pniv');
  removeLinkAtTeardown(t, parent);
  await execa('ip', ['link', 'add', parent, 'type', 'dummy']);
  if (!down) await execa('ip', ['link', 'set', parent, 'up']);
  return { daemon, parent };
}

for (const [mode, subnet] of [['l2', '198.18.87'], ['l3', '198.18.88']] as const) {
  t.test(`ipvlan ${mode}: two pods on one parent reach each other`, { skip }, async (t) => {
    const { daemon, parent } = await daemonAndParent(t);
    const before = await hostLinkNames('');
    const parentMac = (await linkOf(undefined, parent))?.address;
    const pods = [await startPod(t, daemon, 'iv-a'), await startPod(t, daemon, 'iv-b')];
    const cli = podnetCli(daemon);
    t.equal((await cli.apply('iv.yaml', networkDocument('iv', `  type: ipvlan\n  ipvlan: { parent: ${parent}, mode: ${mode} }\n  mtu: 1400\n  ipam: { ranges: [{ subnet: ${subnet}.0/24 }] }`))).exitCode, 0, 'the Network applies');
    await cli.apply('attach.yaml', attachConfig('iv'));

    const addresses: string[] = [];
    for (const pod of pods) {
      addresses.push(await until(`net1 in ${pod.name}`, () => net1Address(pod.ns.name, `${subnet}.`)));
      t.match(await linkOf(pod.ns.name, 'net1'), { mtu: 1400, address: parentMac, linkinfo: { info_kind: 'ipvlan', info_data: { mode } } }, `${pod.name}: net1 is ipvlan ${mode} with the parent's MAC`);
    }
    t.not(addresses[0], addresses[1], 'each pod has its own address from the range');
    t.match((await cli.explain('default/iv-a')).stdout, new RegExp(`net1 on Network iv: ipvlan on ${parent}, mode ${mode}, addresses ${subnet}\\.`), 'podnet explain shows the link');
    t.equal(await pingFrom(pods[0]!.ns.name, addresses[1]!), 0, `iv-a reaches iv-b over ipvlan ${mode}`);

    // Drift: someone deletes the link in the pod; the next resync (every second here) makes it again.
    await execa('ip', ['-n', pods[0]!.ns.name, 'link', 'del', 'net1']);
    t.equal(await until('net1 made again', () => net1Address(pods[0]!.ns.name, `${subnet}.`), 30_000), addresses[0], 'the resync makes net1 again, with its address');

    await cli.delete('attach.yaml');
    for (const pod of pods) await until(`net1 gone from ${pod.name}`, async () => ((await linkOf(pod.ns.name, 'net1')) ? undefined : true));
    t.same((await hostLinkNames('')).sort(), before.sort(), "the host's links are as they were");
  });
}

t.test('ipvlan: a MAC of the pod\'s own and a bad mode are refused, naming why and where', { skip }, async (t) => {
  const { daemon, parent } = await daemonAndParent(t, true);
  const cli = podnetCli(daemon);
  const bad = await cli.apply('bad.yaml', networkDocument('iv', `  type: ipvlan\n  ipvlan: { parent: ${parent}, mode: l4 }`));
  t.not(bad.exitCode, 0, 'podnet apply refuses mode l4');
  t.match(bad.stderr, /bad\.yaml document 1 Network: .*\/spec\/ipvlan\/mode: must be equal to one of the allowed values/);

  await startPod(t, daemon, 'iv-m');
  await cli.apply('iv.yaml', networkDocument('iv', `  type: ipvlan\n  ipvlan: { parent: ${parent} }\n  staticAddresses: true\n  staticMacs: true`));
  const mac = await cli.apply(
    'mac.yaml',
    `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: mac, namespace: default }
spec:
  podSelector: {}
  attachments: [{ network: iv, interface: net1, ips: [198.18.89.1/24] }]
  interfaces: [{ name: net1, mac: "02:00:00:00:00:01" }]
`,
  );
  t.not(mac.exitCode, 0, 'podnet apply refuses a MAC on an ipvlan attachment');
  t.match(mac.stderr, /PodNetworkConfig default\/mac spec\.interfaces\[0\]\.mac: an ipvlan link has its parent's MAC; it takes no MAC of its own/, 'naming the field and why');
});

t.test("a Network's mode changed: its pods' links are made again in the new mode, with their MTU and routes", { skip }, async (t) => {
  const { daemon, parent } = await daemonAndParent(t);
  const pods = [await startPod(t, daemon, 'ivm-a'), await startPod(t, daemon, 'ivm-b')];
  const cli = podnetCli(daemon);
  const network = (mode: string) => networkDocument('ivm', `  type: ipvlan\n  ipvlan: { parent: ${parent}, mode: ${mode} }\n  ipam: { ranges: [{ subnet: 198.18.86.0/24 }] }`);
  await cli.apply('ivm.yaml', network('l2'));
  await cli.apply(
    'attach.yaml',
    `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: attach, namespace: default }
spec:
  podSelector: {}
  attachments: [{ network: ivm, interface: net1 }]
  interfaces: [{ name: net1, mtu: 1300 }]
  routes: [{ to: 198.18.97.0/24, dev: net1, table: 100 }]
`,
  );
  const peer = await until('net1 in ivm-b', () => net1Address(pods[1]!.ns.name, '198.18.86.'));
  await until('ivm-a in l2', async () => ((await linkOf(pods[0]!.ns.name, 'net1'))?.linkinfo?.info_data?.['mode'] === 'l2' ? true : undefined), 30_000);

  // The kernel keeps one mode a parent: each pod's link is told made again by its ifindex, not its mode alone.
  const before = await Promise.all(pods.map(async (pod) => (await linkOf(pod.ns.name, 'net1'))?.ifindex));
  t.equal((await cli.apply('ivm.yaml', network('l3'))).exitCode, 0, 'podnet apply: the Network goes to l3');
  for (const [i, pod] of pods.entries()) {
    await until(`${pod.name}'s net1 made again in l3`, async () => {
      const net1 = await linkOf(pod.ns.name, 'net1');
      return net1 && net1.ifindex !== before[i] && net1.linkinfo?.info_data?.['mode'] === 'l3' ? true : undefined;
    }, 30_000);
    await until(`${pod.name}'s net1 tuned and routed again`, async () => {
      const net1 = await linkOf(pod.ns.name, 'net1');
      const routes = (await execa('ip', ['-n', pod.ns.name, 'route', 'show', 'table', '100'])).stdout;
      return net1?.mtu === 1300 && routes.includes('198.18.97.0/24 dev net1') ? true : undefined;
    }, 30_000);
  }
  t.pass('both pods have net1 in l3, with MTU 1300 and the route in table 100');
  t.equal(await pingFrom(pods[0]!.ns.name, peer), 0, 'ivm-a reaches ivm-b over the new links');
  await cli.delete('attach.yaml');
  for (const pod of pods) await until(`net1 gone from ${pod.name}`, async () => ((await linkOf(pod.ns.name, 'net1')) ? undefined : true));
});
