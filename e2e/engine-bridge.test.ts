// The engine on the real kernel, standalone: a bridge Network and a PodNetworkConfig attach an
// interface with an address to two running pods and tune eth0; the pods reach each other
// over the new network; deleting the config takes everything back, on the host too.
import t from 'tap';
import { execa } from 'execa';
import { readdir, stat, writeFile } from 'node:fs/promises';
import { hostLinkNames, linkOf, podnetCli, startPod, until, type Pod } from './lib/engine.ts';
import { daemonSandbox } from './lib/daemon.ts';
import { hostInterfaceName } from '../src/model/host-links.ts';
import { missingPrerequisite } from './lib/env.ts';
import { addressesIn, linkExists, removeLinkAtTeardown, uniqueName } from './lib/netns.ts';

const skip = missingPrerequisite(['/bin/busybox']);

async function mtuOf(netns: string, dev: string): Promise<number | undefined> {
  return (await linkOf(netns, dev))?.mtu;
}

t.test('bridge attachment, eth0 MTU, ping between pods, and a clean undo', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);

  const pods: Pod[] = [];
  for (const name of ['pod-a', 'pod-b']) pods.push(await startPod(t, daemon, name));

  const cli = podnetCli(daemon);
  const blue = `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: blue }
spec:
  type: bridge
  bridge: { name: ${bridge}, gateway: true }
  mtu: 1400
  ipam: { ranges: [{ subnet: 198.18.80.0/24 }] }
  namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: default } }
`;
  const podsConfig = `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: cnf, namespace: default }
spec:
  podSelector:
    matchExpressions: [{ key: podnetwork.opdev.io/pod-name, operator: In, values: [pod-a, pod-b] }]
  attachments: [{ network: blue, interface: net1 }]
  interfaces: [{ name: eth0, mtu: 1300, txqueuelen: 500, promisc: true }, { name: net1, txqueuelen: 100 }]
`;
  // A bad document is refused whole, naming the field; nothing of it is written.
  const refused = await cli.apply('bad.yaml', 'apiVersion: podnetwork.opdev.io/v1alpha1\nkind: PodNetworkConfig\nmetadata: { name: bad }\nspec: { podSelector: {}, attachments: [{ network: blue, interface: a/b }] }\n');
  t.not(refused.exitCode, 0, 'podnet apply refuses an invalid document');
  t.match(refused.stderr, /bad\.yaml document 1 PodNetworkConfig: .*at \/spec\/attachments\/0\/interface: must be /);
  t.equal((await cli.apply('blue.yaml', blue)).exitCode, 0, 'podnet apply -f blue.yaml');
  t.equal((await cli.apply('pods.yaml', podsConfig)).exitCode, 0, 'podnet apply -f pods.yaml');

  const addresses: string[] = [];
  for (const pod of pods) {
    const net1 = await until(`net1 in ${pod.name}`, async () => {
      const link = (await addressesIn(pod.ns.name)).find((l) => l.ifname === 'net1');
      return link && link.addresses.some((a) => a.startsWith('198.18.80.')) ? link : undefined;
    });
    const address = net1.addresses.find((a) => a.startsWith('198.18.80.'))!;
    t.match(address, /^198\.18\.80\.\d+\/24$/, `${pod.name} has net1 with an address from the Network's range`);
    t.equal(await mtuOf(pod.ns.name, 'net1'), 1400, `${pod.name} net1 has the Network's MTU`);
    const eth0 = await until(`eth0 tuned in ${pod.name}`, async () => {
      const l = await linkOf(pod.ns.name, 'eth0');
      return l?.mtu === 1300 && l.txqlen === 500 && l.flags.includes('PROMISC') ? l : undefined;
    });
    t.ok(eth0, `${pod.name} eth0 has MTU 1300, txqueuelen 500 and is promiscuous`);
    await until(`net1 tuned in ${pod.name}`, async () => ((await linkOf(pod.ns.name, 'net1'))?.txqlen === 100 ? true : undefined));
    t.pass(`${pod.name} net1, made in the same pass, got its txqueuelen`);
    addresses.push(address.split('/')[0]!);
  }
  t.not(addresses[0], addresses[1], 'each pod has its own address');
  const explained = await cli.explain('default/pod-a');
  t.match(explained.stdout, /net1 on Network blue: bridge pnbr\w+, port security on, host end pnv\w+, addresses 198\.18\.80\.\d+\/24, mtu 1400/, 'podnet explain shows what is desired');
  t.match(explained.stdout, /net1 on Network blue: 198\.18\.80\.\d+\/24, port admits only 02(:[0-9a-f]{2}){5} with its addresses/, 'and that its port is secured');
  t.match(explained.stdout, /problems: none\nlast error: none/);
  const { stdout: bridgeAddr } = await execa('ip', ['-json', 'addr', 'show', 'dev', bridge]);
  t.match(JSON.parse(bridgeAddr), [{ mtu: 1400, addr_info: [{ local: '198.18.80.1', prefixlen: 24 }] }], 'the bridge has the MTU and the gateway address');

  const ping = await execa('ip', ['netns', 'exec', pods[0]!.ns.name, 'busybox', 'ping', '-c', '2', '-W', '2', addresses[1]!], { reject: false });
  t.equal(ping.exitCode, 0, `pod-a reaches pod-b over the new network: ${ping.stdout.split('\n').at(-2) ?? ''}`);

  // Drift: an address removed by hand comes back with the next resync.
  await execa('ip', ['-n', pods[1]!.ns.name, 'addr', 'flush', 'dev', 'net1']);
  await until('the address put back', async () =>
    (await addressesIn(pods[1]!.ns.name)).find((l) => l.ifname === 'net1')?.addresses.includes(`${addresses[1]}/24`) ? true : undefined,
  );
  t.pass('a removed address is repaired');

  // Undo: deleting the config takes back the attachment, the MTU and, unused now, the bridge.
  t.equal((await cli.delete('pods.yaml')).exitCode, 0, 'podnet delete -f pods.yaml');
  for (const pod of pods) {
    await until(`net1 gone from ${pod.name}`, async () => ((await mtuOf(pod.ns.name, 'net1')) === undefined ? true : undefined));
    await until(`eth0 restored in ${pod.name}`, async () => {
      const l = await linkOf(pod.ns.name, 'eth0');
      return l?.mtu === 1500 && l.txqlen === 1000 && !l.flags.includes('PROMISC') ? true : undefined;
    });
  }
  t.pass('net1 is gone and eth0 has its MTU, txqueuelen and promisc back in both pods');
  await until('the bridge removed', async () => ((await linkExists(bridge)) ? undefined : true));
  t.pass('the host bridge is gone');
  const hostEnds = pods.map((p) => hostInterfaceName(p.att.containerId, 'net1'));
  t.same((await hostLinkNames('pnv')).filter((n) => hostEnds.includes(n)), [], 'no host end of a veth is left');
});

t.test('a pass cut short by a crash is taken back at the next start', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  // What a SIGKILL between two steps leaves: the first step's bridge, and the journal of the pass.
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);
  await execa('ip', ['link', 'add', 'name', bridge, 'type', 'bridge']);
  await execa('mkdir', ['-p', `${daemon.stateDir}/journal`]);
  await writeFile(
    `${daemon.stateDir}/journal/crashed.json`,
    JSON.stringify({ version: 1, pass: 'cut-short', undo: [{ where: 'host', action: 'link-del', dev: bridge }] }),
  );
  await daemon.start();
  t.notOk(await linkExists(bridge), 'the half-made bridge is gone');
  t.same((await readdir(`${daemon.stateDir}/journal`)).filter((n) => !n.startsWith('.')), [], 'and the journal with it');
});

t.test('a journal holding command lines, as an older podnet or a local user wrote it, is set aside, never run', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  // A link podnet did not make, and a journal that would delete it and run a command as root.
  const bystander = uniqueName('e2eby');
  removeLinkAtTeardown(t, bystander);
  await execa('ip', ['link', 'add', 'name', bystander, 'type', 'bridge']);
  const marker = `${daemon.root}/ran`;
  await execa('mkdir', ['-p', `${daemon.stateDir}/journal`]);
  await writeFile(
    `${daemon.stateDir}/journal/planted.json`,
    JSON.stringify({
      pass: 'planted',
      steps: [
        { where: 'host', tool: 'ip', line: `link add name x type dummy`, undo: { where: 'host', tool: 'ip', line: `link del ${bystander}` } },
        { where: 'host', tool: 'ip', line: 'x', undo: { where: 'host', tool: 'ip', line: `netns exec 1 touch ${marker}` } },
      ],
    }),
  );
  await daemon.start();
  t.ok(await linkExists(bystander), 'the link it named is still there');
  t.notOk(await stat(marker).catch(() => undefined), 'the command it held did not run');
  t.same((await readdir(`${daemon.stateDir}/journal`)).filter((n) => !n.startsWith('.')), [], 'it is out of journal/');
  t.match(await readdir(`${daemon.stateDir}/quarantine`), [/-planted\.json$/], 'and kept for a human in quarantine/');
  const { stdout } = await podnetCli(daemon).podnet('status', '--socket', daemon.socketPath);
  t.match(stdout, /quarantined: +1\n +\d+-\d+-planted\.json: invalid journal planted\.json: .*required property 'version'/, 'podnet status names it and why');
});

/** A bridge Network blue on `bridge`, and a config `name` attaching every pod of default to it at `interfaces`. */
function blueFor(bridge: string, name: string, interfaces: string[]): string {
  return `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: blue }
spec: { type: bridge, bridge: { name: ${bridge} }, namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: default } } }
---
apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: ${name}, namespace: default }
spec: { podSelector: {}, attachments: [${interfaces.map((i) => `{ network: blue, interface: ${i} }`).join(', ')}] }
`;
}

t.test('a host link that happens to have the name of a pod\'s host end, not made by podnet, is left alone and told', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);
  const pod = await startPod(t, daemon, 'pod-c');
  // Another pod's, or a hand-made one: here a bridge under the name podnet would give net1's host end.
  const squatter = hostInterfaceName(pod.att.containerId, 'net1');
  removeLinkAtTeardown(t, squatter);
  await execa('ip', ['link', 'add', 'name', squatter, 'type', 'bridge']);
  const cli = podnetCli(daemon);
  await cli.apply('c.yaml', blueFor(bridge, 'c', ['net1']));
  const explained = await until('told', async () => {
    const out = (await cli.explain('default/pod-c')).stdout;
    return out.includes(`the host already has an interface ${squatter}`) ? out : undefined;
  });
  t.match(explained, /which podnet did not make for this attachment; it is left alone/);
  t.ok(await linkExists(squatter), 'the link is still there');
  t.equal(await linkOf(pod.ns.name, 'net1'), undefined, 'and the pod got no net1 through it');
});

t.test('attachments past the node\'s limit per pod are refused and told; the config within it is made', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true, args: ['--max-attachments-per-pod', '1'] });
  await daemon.start();
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);
  const pod = await startPod(t, daemon, 'pod-l');
  const cli = podnetCli(daemon);
  // Two configs, one interface each: the first by name fits; the second, past the limit, is refused whole.
  await cli.apply('l.yaml', blueFor(bridge, 'l1', ['net1']));
  await cli.apply('l2.yaml', blueFor(bridge, 'l2', ['net2']).split('---\n')[1]!);
  await until('net1 made', async () => ((await linkOf(pod.ns.name, 'net1')) ? true : undefined));
  const explained = await until('l2 told', async () => {
    const out = (await cli.explain('default/pod-l')).stdout;
    return out.includes('PodNetworkConfig default/l2 spec.attachments[0]') ? out : undefined;
  });
  t.match(explained, /PodNetworkConfig default\/l2 spec\.attachments\[0\]: the pod would have more attachments than the 1 this node's admin allows per pod/);
  t.equal(await linkOf(pod.ns.name, 'net2'), undefined, 'net2 is not made');
});

t.test("a Network's quota per namespace and the node's addresses per pod: a tenant cannot starve another, and is told only of its own", { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true, args: ['--max-addresses-per-pod', '1'] });
  await daemon.start();
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);
  const hungry = await Promise.all(['a-1', 'a-2', 'a-3'].map((name) => startPod(t, daemon, name, 'tenant-a')));
  const other = await startPod(t, daemon, 'b-1', 'tenant-b');
  const cli = podnetCli(daemon);
  const shared = `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: shared }
spec:
  type: bridge
  bridge: { name: ${bridge} }
  ipam: { ranges: [{ subnet: 198.18.120.0/28 }] }
  limits: { attachmentsPerNamespace: 2 }
  namespaceSelector: { matchExpressions: [{ key: kubernetes.io/metadata.name, operator: In, values: [tenant-a, tenant-b] }] }
`;
  const takeAll = (namespace: string, interfaces: string[]) => `---
apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: take-all, namespace: ${namespace} }
spec: { podSelector: {}, attachments: [${interfaces.map((i) => `{ network: shared, interface: ${i} }`).join(', ')}] }
`;
  // tenant-b's second config asks a second address its pod may not have: refused whole, the first stands.
  const takeMore = `---
apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: take-more, namespace: tenant-b }
spec: { podSelector: {}, attachments: [{ network: shared, interface: net2 }] }
`;
  await cli.apply('quota.yaml', shared + takeAll('tenant-a', ['net1']) + takeAll('tenant-b', ['net1']) + takeMore);

  const hasNet1 = async (pod: Pod) => (await addressesIn(pod.ns.name)).find((l) => l.ifname === 'net1')?.addresses.some((a) => a.startsWith('198.18.120.')) ?? false;
  await until("tenant-b's pod has net1 with an address", async () => ((await hasNet1(other)) ? true : undefined));
  const attached = await until('two of tenant-a\'s three pods have net1', async () => {
    const have = await Promise.all(hungry.map(hasNet1));
    return have.filter(Boolean).length === 2 ? have : undefined;
  });
  const refused = hungry[attached.indexOf(false)]!;
  // The pod's own report: what reaches its tenant (its status, its Events). What explain lists
  // after it, the documents no pod can use, is the node admin's view.
  const told = await until('the third is told', async () => {
    const out = (await cli.explain(`tenant-a/${refused.name}`)).stdout.split('\ndocuments podnet cannot use')[0]!;
    return out.includes('attachmentsPerNamespace') ? out : undefined;
  });
  t.match(told, /PodNetworkConfig tenant-a\/take-all spec\.attachments\[0\]: Network shared allows 2 attachments per namespace on a node \(its spec\.limits\.attachmentsPerNamespace\), and namespace tenant-a has 2 here already/);
  for (const pod of [...hungry.filter((p) => p !== refused), other]) {
    t.notMatch(told, new RegExp(`${pod.name}|${pod.att.containerId}`), `no word of ${pod.name}`);
  }
  t.notMatch(told, /tenant-b/, 'nor of the other tenant');
  t.equal(await linkOf(refused.ns.name, 'net1'), undefined, 'and it got no net1');

  const b = (await cli.explain('tenant-b/b-1')).stdout;
  t.match(b, /PodNetworkConfig tenant-b\/take-more spec\.attachments\[0\]: the pod would hold more addresses than the 1 this node's admin allows per pod/);
  t.equal(await linkOf(other.ns.name, 'net2'), undefined, "tenant-b's second address is refused by the node's limit per pod");
});

t.test("podnet marks the host links it makes with their owner, and never deletes one of its names that someone else marked", { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);
  const pod = await startPod(t, daemon, 'pod-m');
  const cli = podnetCli(daemon);
  await cli.apply('m.yaml', blueFor(bridge, 'm', ['net1']));
  const hostEnd = hostInterfaceName(pod.att.containerId, 'net1');
  await until('net1 made', async () => ((await linkOf(pod.ns.name, 'net1')) ? true : undefined));
  const aliasOf = async (name: string) => (JSON.parse((await execa('ip', ['-json', 'link', 'show', 'dev', name])).stdout) as { ifalias?: string }[])[0]?.ifalias;
  t.equal(await aliasOf(hostEnd), `podnet:${pod.att.containerId}/net1`, 'the host end names its owner, as an operator sees it in ip link');
  t.equal(await aliasOf(bridge), 'podnet:bridge', 'so does the bridge podnet made');

  // Someone replaces the host end with a link of their own under its name, while the daemon is
  // down: a pass between the delete and the add would make the veth again under that name first.
  removeLinkAtTeardown(t, hostEnd);
  await daemon.stop();
  await execa('ip', ['link', 'del', 'dev', hostEnd]);
  await execa('ip', ['link', 'add', 'name', hostEnd, 'type', 'bridge']);
  await execa('ip', ['link', 'set', 'dev', hostEnd, 'alias', 'uplink-of-someone']);
  await daemon.start();
  // A resync every second; under a loaded machine a pass takes longer.
  const told = await until('told at the next resync', async () => {
    const out = (await cli.explain('default/pod-m')).stdout;
    return out.includes(`the host already has an interface ${hostEnd}`) ? out : undefined;
  }, 90_000);
  t.match(told, /which podnet did not make for this attachment; it is left alone/);
  await cli.delete('m.yaml');
  await until('the attachment taken back', async () => ((await cli.explain('default/pod-m')).stdout.includes('net1') ? undefined : true), 30_000);
  t.ok(await linkExists(hostEnd), 'their link is still there');
  t.equal(await aliasOf(hostEnd), 'uplink-of-someone');
});
