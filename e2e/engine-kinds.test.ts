// Network kinds besides bridge, on the real kernel: macvlan pods on one parent reach each other;
// a vxlan tunnel joins pods on two nodes (two netns, each with its own daemon, joined by an
// underlay veth); vlan needs 8021q, which a kernel may lack: then the test says so and skips.
import t from 'tap';
import { execa } from 'execa';
import { daemonSandbox } from './lib/daemon.ts';
import { linkOf, podnetCli, startPod, until } from './lib/engine.ts';
import { missingPrerequisite } from './lib/env.ts';
import { addressesIn, makeNetns, removeLinkAtTeardown, uniqueName } from './lib/netns.ts';

const skip = missingPrerequisite(['/bin/busybox']);

const network = (name: string, spec: string) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: ${name} }
spec:
${spec}
  namespaceSelector: {}
`;

const config = (network: string, ips?: string) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: attach, namespace: default }
spec:
  podSelector: {}
  attachments: [{ network: ${network}, interface: net1${ips ? `, ips: [${ips}]` : ''} }]
`;

async function addressOf(ns: string, prefix: string): Promise<string | undefined> {
  return (await addressesIn(ns)).find((l) => l.ifname === 'net1')?.addresses.find((a) => a.startsWith(prefix));
}

async function ping(fromNs: string, address: string): Promise<number | undefined> {
  return (await execa('ip', ['netns', 'exec', fromNs, 'busybox', 'ping', '-c', '2', '-W', '2', address.split('/')[0]!], { reject: false })).exitCode;
}

t.test('macvlan: two pods on one parent reach each other; undo leaves the parent as it was', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const parent = uniqueName('pnmv');
  removeLinkAtTeardown(t, parent);
  await execa('ip', ['link', 'add', parent, 'type', 'veth', 'peer', 'name', `${parent}p`]);
  for (const l of [parent, `${parent}p`]) await execa('ip', ['link', 'set', l, 'up']);
  const pods = [await startPod(t, daemon, 'mv-a'), await startPod(t, daemon, 'mv-b')];
  const cli = podnetCli(daemon);
  await cli.apply('mv.yaml', network('mv', `  type: macvlan\n  macvlan: { parent: ${parent}, mode: bridge }\n  mtu: 1400\n  ipam: { ranges: [{ subnet: 198.18.84.0/24 }] }`));
  await cli.apply('attach.yaml', config('mv'));

  const addresses: string[] = [];
  for (const pod of pods) {
    addresses.push(await until(`net1 in ${pod.name}`, () => addressOf(pod.ns.name, '198.18.84.')));
    t.match(await linkOf(pod.ns.name, 'net1'), { mtu: 1400, linkinfo: { info_kind: 'macvlan', info_data: { mode: 'bridge' } } }, `${pod.name} has a macvlan net1 in bridge mode`);
  }
  t.equal(await ping(pods[0]!.ns.name, addresses[1]!), 0, 'mv-a reaches mv-b over the macvlan');

  await cli.delete('attach.yaml');
  for (const pod of pods) await until(`net1 gone from ${pod.name}`, async () => ((await linkOf(pod.ns.name, 'net1')) ? undefined : true));
  t.match(await linkOf(undefined, parent), { ifname: parent }, 'the parent is left in place');
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
    await cli.apply('tun.yaml', network('tun', `  type: vxlan\n  vxlan: { vni: 42, remote: ${remote}, device: underlay }\n  mtu: 1400\n  staticAddresses: true`));
    await cli.apply('attach.yaml', config('tun', `198.18.101.${i + 1}/24`));
    pods.push({ pod: await startPod(t, daemon, `tun-${i}`), cli });
  }
  for (const { pod } of pods) {
    await until(`net1 in ${pod.name}`, () => addressOf(pod.ns.name, '198.18.101.'));
    t.match(await linkOf(pod.ns.name, 'net1'), { mtu: 1400, linkinfo: { info_kind: 'vxlan', info_data: { id: 42, port: 4789 } } }, `${pod.name} has a vxlan net1, VNI 42`);
  }
  t.equal(await ping(pods[0]!.pod.ns.name, '198.18.101.2'), 0, 'a pod on node 1 reaches a pod on node 2 through the tunnel');
  for (const { pod, cli } of pods) {
    await cli.delete('attach.yaml');
    await until(`net1 gone from ${pod.name}`, async () => ((await linkOf(pod.ns.name, 'net1')) ? undefined : true));
  }
  t.pass('both ends of the tunnel are taken back');
});

/** Whether this kernel makes 802.1q links; the reason when not. */
async function vlanMissing(): Promise<string | undefined> {
  const name = uniqueName('pnvlt');
  await execa('ip', ['link', 'add', name, 'type', 'veth', 'peer', 'name', `${name}p`]);
  try {
    const r = await execa('ip', ['link', 'add', 'link', name, 'name', `${name}.5`, 'type', 'vlan', 'id', '5'], { reject: false });
    return r.exitCode === 0 ? undefined : `this kernel makes no 802.1q vlan links (8021q): ${r.stderr.trim()}`;
  } finally {
    await execa('ip', ['link', 'del', name], { reject: false });
  }
}

t.test('vlan: a sub-interface of a host parent, made inside the pod', { skip: skip ?? (await vlanMissing()) }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const parent = uniqueName('pnvl');
  removeLinkAtTeardown(t, parent);
  await execa('ip', ['link', 'add', parent, 'type', 'veth', 'peer', 'name', `${parent}p`]);
  await execa('ip', ['link', 'set', parent, 'up']);
  const pod = await startPod(t, daemon, 'vl-a');
  const cli = podnetCli(daemon);
  await cli.apply('vl.yaml', network('vl', `  type: vlan\n  vlan: { parent: ${parent}, id: 5 }\n  staticAddresses: true`));
  await cli.apply('attach.yaml', config('vl', '198.18.86.1/24'));
  await until('net1', () => addressOf(pod.ns.name, '198.18.86.'));
  t.match(await linkOf(pod.ns.name, 'net1'), { linkinfo: { info_kind: 'vlan', info_data: { id: 5 } } }, 'net1 is vlan 5');
  await cli.delete('attach.yaml');
  await until('net1 gone', async () => ((await linkOf(pod.ns.name, 'net1')) ? undefined : true));
});
