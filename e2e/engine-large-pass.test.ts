// A pass larger than the sandboxes it reconciles at once runs in stages (ADR 23): every sandbox of
// a wave plans first, then their veths and port entries are made on the host together, then each
// pod gets its address. What an operator checks is that every pod got what it asked for, that one
// pod podnet must refuse holds no other up, and that deleting the request takes everything back.
import t from 'tap';
import { execa } from 'execa';
import { podnetCli, startPod, until, type Pod } from './lib/engine.ts';
import { daemonSandbox } from './lib/daemon.ts';
import { hostInterfaceName } from '../src/model/host-links.ts';
import { portSecurityTable } from '../src/model/port-security.ts';
import { missingPrerequisite } from './lib/env.ts';
import { addressesIn, linkExists, removeLinkAtTeardown, uniqueName } from './lib/netns.ts';

const skip = missingPrerequisite(['/usr/sbin/nft']);

/** The ports of podnet's port security table, by name. */
async function securedPorts(): Promise<Set<string>> {
  const r = await execa('nft', ['-j', 'list', 'set', ...portSecurityTable.split(' '), 'ports'], { reject: false });
  if (r.exitCode !== 0) return new Set();
  const set = (JSON.parse(r.stdout) as { nftables: { set?: { elem?: unknown[] } }[] }).nftables.find((o) => o.set)?.set;
  return new Set((set?.elem ?? []).map(String));
}

async function linkOf(netns: string, dev: string): Promise<{ mtu: number; operstate: string } | undefined> {
  const r = await execa('ip', ['-n', netns, '-json', 'link', 'show', 'dev', dev], { reject: false });
  return r.exitCode === 0 ? (JSON.parse(r.stdout) as { mtu: number; operstate: string }[])[0] : undefined;
}

t.test('twenty pods in one pass: each gets its secured port and address; a pod whose host end is taken is told, and holds no one up', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);
  const pods: Pod[] = [];
  for (let i = 0; i < 20; i++) pods.push(await startPod(t, daemon, `big-${i}`));
  const hostEnd = (pod: Pod) => hostInterfaceName(pod.att.containerId, 'net1');
  for (const pod of pods) removeLinkAtTeardown(t, hostEnd(pod));
  // Someone else's link under the name pod 7's host end would have: podnet must not take it.
  const taken = pods[7]!;
  await execa('ip', ['link', 'add', hostEnd(taken), 'type', 'bridge']);

  const cli = podnetCli(daemon);
  const documents = `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: wide }
spec:
  type: bridge
  bridge: { name: ${bridge} }
  mtu: 1400
  ipam: { ranges: [{ subnet: 198.18.84.0/24 }] }
  namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: default } }
---
apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: everyone, namespace: default }
spec:
  podSelector:
    matchExpressions: [{ key: podnetwork.opdev.io/pod-name, operator: In, values: [${pods.map((p) => p.name).join(', ')}] }]
  attachments: [{ network: wide, interface: net1 }]
`;
  t.equal((await cli.apply('wide.yaml', documents)).exitCode, 0, 'podnet apply -f wide.yaml');

  const others = pods.filter((p) => p !== taken);
  const addresses = new Set<string>();
  for (const pod of others) {
    const address = await until(`net1 with an address in ${pod.name}`, async () =>
      (await addressesIn(pod.ns.name)).find((l) => l.ifname === 'net1')?.addresses.find((a) => a.startsWith('198.18.84.')),
    );
    addresses.add(address);
    t.match(await linkOf(pod.ns.name, 'net1'), { mtu: 1400 }, `${pod.name}: net1 has the Network's MTU`);
  }
  t.equal(addresses.size, others.length, 'every other pod has an address of its own');
  const ports = await securedPorts();
  t.same(
    others.filter((p) => !ports.has(hostEnd(p))).map((p) => p.name),
    [],
    "every other pod's host end is a secured port",
  );
  const { stdout: enslaved } = await execa('ip', ['-json', 'link', 'show', 'master', bridge]);
  t.same((JSON.parse(enslaved) as { ifname: string }[]).map((l) => l.ifname).sort(), others.map(hostEnd).sort(), "the bridge's ports are theirs, and only theirs");

  const told = await until('pod 7 told why', async () => {
    const r = await cli.explain(`default/${taken.name}`);
    return /\nproblems:\n/.test(r.stdout) ? r.stdout : undefined;
  });
  t.match(told, `the host already has an interface ${hostEnd(taken)}, which podnet did not make`, "pod 7's problem names the link that is in the way");
  t.notOk((await addressesIn(taken.ns.name)).some((l) => l.ifname === 'net1'), 'pod 7 has no net1');
  t.match(await execa('ip', ['-json', '-d', 'link', 'show', 'dev', hostEnd(taken)]).then((r) => JSON.parse(r.stdout)), [{ linkinfo: { info_kind: 'bridge' } }], 'and the link in its way is untouched');

  // Deleting the request takes every pod's net1, host end and port back.
  t.equal((await cli.delete('wide.yaml')).exitCode, 0, 'podnet delete -f wide.yaml');
  for (const pod of others) await until(`net1 gone from ${pod.name}`, async () => ((await linkOf(pod.ns.name, 'net1')) === undefined ? true : undefined));
  // A port's release is its own step beside the veth's delete: waited for, not read at once.
  const stillSecured = async () => {
    const left = await securedPorts();
    return others.filter((p) => left.has(hostEnd(p))).map((p) => p.name);
  };
  await until('their ports released', async () => ((await stillSecured()).length === 0 ? true : undefined)).catch(() => undefined);
  t.same(await stillSecured(), [], 'no port of theirs is left in the table');
  for (const pod of others) t.notOk(await linkExists(hostEnd(pod)), `${pod.name}: its host end is gone`);
  t.ok(await linkExists(hostEnd(taken)), 'the link podnet did not make is still there');
});
