// A config applies whole also when the pass finds it cannot make a part (ADR 17), on the real
// kernel, beside a working config the pod keeps throughout: a route by an interface the pod lacks
// (found in the plan), a route the kernel refuses (found when its step fails, the pass's steps
// taken back), an address outside the Network's ranges (the document's own problem, as apply -f
// would say), a macvlan parent the host lacks (found in the plan, then made: the config applies,
// whole), and an address another pod holds (found when addresses are given).
import t from 'tap';
import { execa } from 'execa';
import { writeFile } from 'node:fs/promises';
import { daemonSandbox } from './lib/daemon.ts';
import { podnetCli, startPod, until } from './lib/engine.ts';
import { missingPrerequisite } from './lib/env.ts';
import { addressesIn, linkExists, removeLinkAtTeardown, uniqueName } from './lib/netns.ts';

const skip = missingPrerequisite();

interface LinkView {
  ifname: string;
  mtu: number;
  txqlen?: number;
}

const links = async (ns: string) => JSON.parse((await execa('ip', ['-n', ns, '-json', 'link', 'show'])).stdout) as LinkView[];
const link = async (ns: string, name: string) => (await links(ns)).find((l) => l.ifname === name);
const config = (name: string, spec: string) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: ${name}, namespace: default }
spec:
  podSelector: {}
${spec}`;

t.test('a config whose part the pass cannot make gives the pod nothing of that generation; the one it had stays; another config is not held back', { skip, timeout: 180_000 }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const pod = await startPod(t, daemon, 'cnf-w');
  const ns = pod.ns.name;
  const cli = podnetCli(daemon);
  const explainHas = (what: string, pattern: RegExp) =>
    until(what, async () => {
      const text = (await cli.explain('default/cnf-w')).stdout;
      return pattern.test(text) ? text : undefined;
    });
  const dropped = (name: string, text: string) => writeFile(`${daemon.configDir}/${name}`, text);

  // The working config, which every case below leaves alone.
  await dropped('mtu.yaml', config('mtu', '  interfaces: [{ name: eth0, mtu: 1400 }]\n'));
  await until('eth0 has MTU 1400', async () => ((await link(ns, 'eth0'))?.mtu === 1400 ? true : undefined));
  const txqlen = (await link(ns, 'eth0'))?.txqlen;

  // In the plan: a route by an interface the pod lacks. Its txqueuelen is not applied alone.
  await dropped('nodev.yaml', config('nodev', '  interfaces: [{ name: lo, txqueuelen: 77 }]\n  routes: [{ to: 198.18.161.0/24, dev: eth9, table: 100 }]\n'));
  const nodev = await explainHas('nodev refused whole', /PodNetworkConfig default\/nodev spec\.routes\[0\]: the pod has no interface eth9/);
  t.match(nodev, /PodNetworkConfig default\/nodev spec: nothing of it applies to the pod until all of it can/);
  t.not((await link(ns, 'lo'))?.txqlen, 77, "lo's txqueuelen, the config's other part, is not applied");
  t.equal((await link(ns, 'eth0'))?.mtu, 1400, 'the working config stays');

  // At apply: an edit of the working config that adds a route the kernel refuses. The pass's steps
  // are taken back and the generation the pod had stays.
  await dropped('mtu.yaml', config('mtu', '  interfaces: [{ name: eth0, mtu: 1300, txqueuelen: 900 }]\n  routes: [{ to: 198.18.162.0/24, via: 198.18.250.1, table: 100 }]\n'));
  const edited = await explainHas('the edit refused whole', /PodNetworkConfig default\/mtu spec\.routes\[0\]: the node could not make it: /);
  t.match(edited, /PodNetworkConfig default\/mtu spec: this generation cannot be applied whole to the pod: the one it had before stays/);
  const eth0 = await link(ns, 'eth0');
  t.equal(eth0?.mtu, 1400, 'eth0 keeps the MTU of the generation it had');
  t.equal(eth0?.txqlen, txqlen, 'and its txqueuelen: nothing of the new generation stays');
  const table = await execa('ip', ['-n', ns, 'route', 'show', 'table', '100'], { reject: false });
  t.notMatch(table.stdout, /198\.18\.162/, 'no route of it');

  // In the document: an address outside the Network's ranges, in a file dropped past apply -f.
  const bridge = uniqueName('pnwb');
  removeLinkAtTeardown(t, bridge);
  await dropped('net.yaml', `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: whole-net }
spec: { type: bridge, bridge: { name: ${bridge} }, ipam: { ranges: [{ subnet: 198.18.163.0/24 }] }, namespaceSelector: {} }
`);
  await dropped('outside.yaml', config('outside', '  attachments: [{ network: whole-net, interface: net5, ips: [198.18.200.5/24] }]\n  sysctls: [{ name: net.ipv4.conf.eth0.rp_filter, value: "2" }]\n'));
  const outside = await explainHas('outside refused whole', /PodNetworkConfig default\/outside spec\.attachments\[0\]\.ips\[0\]: network whole-net: 198\.18\.200\.5 is outside every range/);
  t.match(outside, /PodNetworkConfig default\/outside spec: nothing of it applies to the pod until all of it can/);
  t.equal(await link(ns, 'net5'), undefined, 'no net5');
  t.not((await execa('ip', ['netns', 'exec', ns, 'cat', '/proc/sys/net/ipv4/conf/eth0/rp_filter'])).stdout.trim(), '2', 'its sysctl is not set alone');

  // In the plan, then fixed: a macvlan parent the host lacks; once it is made, the config applies whole.
  const parent = uniqueName('pnwp');
  removeLinkAtTeardown(t, parent);
  await dropped('mv-net.yaml', `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: whole-mv }
spec: { type: macvlan, macvlan: { parent: ${parent} }, namespaceSelector: {} }
`);
  await dropped('mv.yaml', config('mv', '  attachments: [{ network: whole-mv, interface: net6 }]\n  interfaces: [{ name: lo, mtu: 65000 }]\n'));
  await explainHas('mv refused whole', new RegExp(`PodNetworkConfig default/mv spec\\.attachments\\[0\\]: the host has no interface ${parent}`));
  t.not((await link(ns, 'lo'))?.mtu, 65000, "lo's MTU waits for the whole config");
  await execa('ip', ['link', 'add', parent, 'type', 'bridge']);
  await until("net6 and lo's MTU, together, once the parent is there", async () => ((await link(ns, 'net6')) && (await link(ns, 'lo'))?.mtu === 65000 ? true : undefined), 60_000);
  t.pass('the config applies whole once what it lacked is there');
  t.equal((await link(ns, 'eth0'))?.mtu, 1400, 'the working config stayed throughout');

  for (const file of ['mv.yaml', 'mv-net.yaml', 'outside.yaml', 'net.yaml', 'nodev.yaml', 'mtu.yaml']) await execa('rm', ['-f', `${daemon.configDir}/${file}`]);
  await until('net6 gone', async () => ((await link(ns, 'net6')) ? undefined : true));
  await until('eth0 back to 1500', async () => ((await link(ns, 'eth0'))?.mtu === 1500 ? true : undefined));
  t.notOk(await linkExists(bridge), 'no bridge was left');
});

t.test('an address another pod holds, found when addresses are given: the config asking it gets nothing, and the address is not taken from its holder', { skip, timeout: 120_000 }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const [holder, asker] = [await startPod(t, daemon, 'cnf-h'), await startPod(t, daemon, 'cnf-a')];
  const cli = podnetCli(daemon);
  const bridge = uniqueName('pnwh');
  removeLinkAtTeardown(t, bridge);
  const forPod = (name: string, pod: string, spec: string) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: ${name}, namespace: default }
spec:
  podSelector: { matchLabels: { podnetwork.opdev.io/pod-name: ${pod} } }
${spec}`;
  await writeFile(`${daemon.configDir}/net.yaml`, `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: held-net }
spec: { type: bridge, bridge: { name: ${bridge} }, ipam: { ranges: [{ subnet: 198.18.164.0/24 }] }, namespaceSelector: {} }
`);
  await writeFile(`${daemon.configDir}/holder.yaml`, forPod('holder', 'cnf-h', '  attachments: [{ network: held-net, interface: net1, ips: [198.18.164.10/24] }]\n'));
  await until('the holder has 198.18.164.10', async () => ((await addressesIn(holder.ns.name)).find((l) => l.ifname === 'net1')?.addresses.includes('198.18.164.10/24') ? true : undefined));
  await writeFile(`${daemon.configDir}/asker.yaml`, forPod('asker', 'cnf-a', '  attachments: [{ network: held-net, interface: net1, ips: [198.18.164.10/24] }]\n  interfaces: [{ name: lo, mtu: 64000 }]\n'));
  const told = await until('the asker refused whole', async () => {
    const text = (await cli.explain('default/cnf-a')).stdout;
    return /PodNetworkConfig default\/asker spec\.attachments\[0\]: network held-net: 198\.18\.164\.10 is held by another attachment on this node/.test(text) ? text : undefined;
  });
  t.match(told, /PodNetworkConfig default\/asker spec: nothing of it applies to the pod until all of it can/);
  t.notMatch(told, /cnf-h/, 'the holder is not named to the asker');
  t.not((await link(asker.ns.name, 'lo'))?.mtu, 64000, "lo's MTU, the config's other part, is not applied alone");
  t.equal(await link(asker.ns.name, 'net1'), undefined);
  t.ok((await addressesIn(holder.ns.name)).find((l) => l.ifname === 'net1')?.addresses.includes('198.18.164.10/24'), 'the holder keeps its address');
});
