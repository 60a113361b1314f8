// Network kinds besides bridge, on the real kernel: macvlan pods on one parent reach each other;
// a vxlan tunnel joins pods on two nodes (two netns, each with its own daemon, joined by an
// underlay veth). The kinds this machine's kernel lacks (vlan, ipvlan, VRF, tunnels) are tested in
// a VM of Debian's kernel: e2e/kernel/.
import t from 'tap';
import { execa } from 'execa';
import { daemonSandbox } from './lib/daemon.ts';
import { attachConfig, linkOf, net1Address, networkDocument, pingFrom, podnetCli, startPod, until } from './lib/engine.ts';
import { missingPrerequisite } from './lib/env.ts';
import { makeNetns, removeLinkAtTeardown, uniqueName } from './lib/netns.ts';

const skip = missingPrerequisite(['/bin/busybox']);

t.test('macvlan: two pods on one parent reach each other; undo leaves the parent as it was', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const parent = uniqueName('pnmv');
  removeLinkAtTeardown(t, parent);
  await execa('ip', ['link', 'add', parent, 'type', 'veth', 'peer', 'name', `${parent}p`]);
  for (const l of [parent, `${parent}p`]) await execa('ip', ['link', 'set', l, 'up']);
  const pods = [await startPod(t, daemon, 'mv-a'), await startPod(t, daemon, 'mv-b')];
  const cli = podnetCli(daemon);
  await cli.apply('mv.yaml', networkDocument('mv', `  type: macvlan\n  macvlan: { parent: ${parent}, mode: bridge }\n  mtu: 1400\n  ipam: { ranges: [{ subnet: 198.18.84.0/24 }] }`));
  await cli.apply('attach.yaml', attachConfig('mv'));

  const addresses: string[] = [];
  for (const pod of pods) {
    addresses.push(await until(`net1 in ${pod.name}`, () => net1Address(pod.ns.name, '198.18.84.')));
    t.match(await linkOf(pod.ns.name, 'net1'), { mtu: 1400, linkinfo: { info_kind: 'macvlan', info_data: { mode: 'bridge' } } }, `${pod.name} has a macvlan net1 in bridge mode`);
  }
  t.equal(await pingFrom(pods[0]!.ns.name, addresses[1]!), 0, 'mv-a reaches mv-b over the macvlan');

  await cli.delete('attach.yaml');
  for (const pod of pods) await until(`net1 gone from ${pod.name}`, async () => ((await linkOf(pod.ns.name, 'net1')) ? undefined : true));
  t.match(await linkOf(undefined, parent), { ifname: parent }, 'the parent is left in place');
});

t.test('macvlan: a Network moved to a parent the kernel refuses leaves the pod its link; once the parent can, the link is made again beside the old one', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const [first, second] = [uniqueName('pnmv'), uniqueName('pnmv')];
  for (const parent of [first, second]) {
    removeLinkAtTeardown(t, parent);
    await execa('ip', ['link', 'add', parent, 'type', 'veth', 'peer', 'name', `${parent}p`]);
    for (const l of [parent, `${parent}p`]) await execa('ip', ['link', 'set', l, 'up']);
  }
  // The second parent's MTU is below the Network's: the kernel refuses a macvlan above it.
  await execa('ip', ['link', 'set', second, 'mtu', '1300']);
  const pod = await startPod(t, daemon, 'mv-move');
  const cli = podnetCli(daemon);
  const network = (parent: string) => networkDocument('mvmove', `  type: macvlan\n  macvlan: { parent: ${parent}, mode: bridge }\n  mtu: 1400\n  ipam: { ranges: [{ subnet: 198.18.85.0/24 }] }`);
  await cli.apply('mv.yaml', network(first));
  await cli.apply('attach.yaml', attachConfig('mvmove'));
  const address = await until('net1 in the pod', () => net1Address(pod.ns.name, '198.18.85.'));
  const before = (await linkOf(pod.ns.name, 'net1'))!;

  t.equal((await cli.apply('mv.yaml', network(second))).exitCode, 0, 'podnet apply: the Network moves to the second parent');
  const told = await until('the refusal told', async () => {
    const { stdout } = await cli.explain('mv-move');
    return /last error: .*name pnt\w+ .*type macvlan/.test(stdout) ? stdout : undefined;
  }, 30_000);
  t.match(told, `last error: PodNetworkConfig default/attach spec.attachments[0]: ip link add link ${second} name`, "podnet explain: the kernel's refusal, named by the attachment that asked it");
  const kept = await linkOf(pod.ns.name, 'net1');
  t.equal(kept?.ifindex, before.ifindex, 'the pod keeps its net1');
  t.equal(await net1Address(pod.ns.name, '198.18.85.'), address, 'with its address');

  await execa('ip', ['link', 'set', second, 'mtu', '1500']);
  const remade = await until('net1 made again on the second parent', async () => {
    const net1 = await linkOf(pod.ns.name, 'net1');
    return net1 && net1.ifindex !== before.ifindex && (await net1Address(pod.ns.name, '198.18.85.')) === address ? net1 : undefined;
  }, 60_000);
  t.match(remade, { mtu: 1400, linkinfo: { info_kind: 'macvlan' } }, 'a macvlan with the MTU of the Network and the same address');
  t.same((await execa('ip', ['-n', pod.ns.name, '-o', 'link', 'show'])).stdout.match(/pnt\w+/g), null, 'no link of podnet\'s temporary name is left in the pod');
});

t.test('vxlan: pods on two nodes reach each other through the tunnel', { skip }, async (t) => {
  // Two nodes, each a netns with its own daemon, joined by an underlay veth.
  const nodes = [await makeNetns(t, 'pne2e-node-'), await makeNetns(t, 'pne2e-node-')];
  await execa('ip', ['-n', nodes[0]!.name, 'link', 'add', 'underlay', 'type', 'veth', 'peer', 'name', 'underlay', 'netns', nodes[1]!.name]);
  for (const [i, node] of nodes.entries()) {
    await execa('ip', ['-n', node.name, 'addr', 'add', `198.18.100.${i + 1}/24`, 'dev', 'underlay']);
    await execa('ip', ['-n', node.name, 'link', 'set', 'underlay', 'up']);
  }
  const pods = [];
  for (const [i, node] of nodes.entries()) {
    const daemon = await daemonSandbox(t, { standalone: true, netns: node.path });
    await daemon.start();
    const cli = podnetCli(daemon);
    const remote = `198.18.100.${2 - i}`;
    await cli.apply('tun.yaml', networkDocument('tun', `  type: vxlan\n  vxlan: { vni: 42, remote: ${remote}, device: underlay }\n  mtu: 1400\n  staticAddresses: true`));
    await cli.apply('attach.yaml', attachConfig('tun', `198.18.101.${i + 1}/24`));
    pods.push({ pod: await startPod(t, daemon, `tun-${i}`), cli });
  }
  for (const { pod } of pods) {
    await until(`net1 in ${pod.name}`, () => net1Address(pod.ns.name, '198.18.101.'));
    t.match(await linkOf(pod.ns.name, 'net1'), { mtu: 1400, linkinfo: { info_kind: 'vxlan', info_data: { id: 42, port: 4789 } } }, `${pod.name} has a vxlan net1, VNI 42`);
  }
  t.equal(await pingFrom(pods[0]!.pod.ns.name, '198.18.101.2'), 0, 'a pod on node 1 reaches a pod on node 2 through the tunnel');
  for (const { pod, cli } of pods) {
    await cli.delete('attach.yaml');
    await until(`net1 gone from ${pod.name}`, async () => ((await linkOf(pod.ns.name, 'net1')) ? undefined : true));
  }
  t.pass('both ends of the tunnel are taken back');
});
