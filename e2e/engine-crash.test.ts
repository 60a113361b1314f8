// A daemon SIGKILLed at random points while it applies and takes back changes: after a restart it
// converges to exactly the desired state, and after the config goes nothing of it is left, on
// the host or in the pods, and no address stays held.
import t from 'tap';
import { execa } from 'execa';
import { readdir } from 'node:fs/promises';
import { daemonSandbox } from './lib/daemon.ts';
import { hostLinkNames, linkOf, podnetCli, startPod, until, type Pod } from './lib/engine.ts';
import { missingPrerequisite } from './lib/env.ts';
import { addressesIn, linkExists, removeLinkAtTeardown, uniqueName } from './lib/netns.ts';
import { NodeIpam } from '../src/ipam/ipam.ts';
import { hostInterfaceName } from '../src/model/host-links.ts';

const skip = missingPrerequisite();

t.test('SIGKILL mid-apply, again and again: a restart converges with nothing half-applied', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);
  await daemon.start();
  const pods: Pod[] = [];
  for (const name of ['k-0', 'k-1', 'k-2']) pods.push(await startPod(t, daemon, name));
  // An ifb outlives the pod's netns: if the test fails before the daemon takes it back, remove it here.
  for (const pod of pods) removeLinkAtTeardown(t, hostInterfaceName(pod.att.containerId, 'net1', 'pnb'));
  const cli = podnetCli(daemon);
  await cli.apply('net.yaml', `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: crashy }
spec:
  type: bridge
  bridge: { name: ${bridge}, gateway: true }
  ipam: { ranges: [{ subnet: 198.18.88.0/24 }] }
  namespaceSelector: {}
`);
  const config = `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: crashy, namespace: default }
spec:
  podSelector: {}
  attachments: [{ network: crashy, interface: net1, bandwidth: { egressRate: 8000000, egressBurst: 80000 } }]
  interfaces: [{ name: eth0, mtu: 1350 }]
  routes: [{ to: 198.18.89.0/24, via: 198.18.88.1, table: 100 }]
  sysctls: [{ name: net.ipv4.conf.eth0.rp_filter, value: "2" }]
`;
  await daemon.stop();

  // Each round flips the config (there, gone) and kills the daemon a random moment into its work.
  for (let round = 0; round < 10; round++) {
    if (round % 2 === 0) await cli.apply('crashy.yaml', config);
    else await cli.delete('crashy.yaml');
    await daemon.start();
    await new Promise((r) => setTimeout(r, Math.floor(Math.random() * 250)));
    await daemon.kill();
  }
  await cli.apply('crashy.yaml', config);
  await daemon.start();

  for (const pod of pods) {
    await until(`${pod.name} converged`, async () => {
      const net1 = (await addressesIn(pod.ns.name)).find((l) => l.ifname === 'net1');
      const routes = await execa('ip', ['-n', pod.ns.name, 'route', 'show', 'table', '100'], { reject: false });
      return net1?.addresses.some((a) => a.startsWith('198.18.88.')) && (await linkOf(pod.ns.name, 'eth0'))?.mtu === 1350 && routes.stdout.includes('198.18.89.0/24')
        ? true
        : undefined;
    });
  }
  t.pass('every pod has net1 with an address, its route and eth0 MTU');
  await until('nothing left to do', async () => ((await cli.diff('crashy.yaml', config)).stdout === 'no changes' ? true : undefined));
  t.pass('and the daemon has nothing left to do: no half-applied state is in its way');
  // What the IPAM log on disk says, read as the next daemon would read it.
  const held = async () =>
    NodeIpam.open(daemon.stateDir)
      .holders()
      .filter((h) => h.network === 'crashy')
      .map((h) => h.owner);
  t.same((await held()).sort(), pods.map((p) => `${p.att.containerId}/net1`).sort(), 'each pod holds exactly one address');

  await cli.delete('crashy.yaml');
  for (const pod of pods) {
    await until(`${pod.name} taken back`, async () =>
      !(await linkOf(pod.ns.name, 'net1')) && (await linkOf(pod.ns.name, 'eth0'))?.mtu === 1500 ? true : undefined,
    );
    const rpFilter = (await execa('ip', ['netns', 'exec', pod.ns.name, 'cat', '/proc/sys/net/ipv4/conf/eth0/rp_filter'])).stdout.trim();
    t.not(rpFilter, '2', `${pod.name}: rp_filter is back`);
  }
  await until('the bridge removed', async () => ((await linkExists(bridge)) ? undefined : true));
  const ours = pods.flatMap((p) => [hostInterfaceName(p.att.containerId, 'net1'), hostInterfaceName(p.att.containerId, 'net1', 'pnb')]);
  t.same((await hostLinkNames('pn')).filter((n) => ours.includes(n)), [], 'no veth end or ifb of these pods is left on the host');
  t.same(await held(), [], 'no address is held');
  // The bridge goes with the host's last batch; its journal is removed once that batch has answered.
  const journals = async () => (await readdir(`${daemon.stateDir}/journal`)).filter((n) => !n.startsWith('.'));
  await until('the last journal removed', async () => ((await journals()).length === 0 ? true : undefined)).catch(() => undefined);
  t.same(await journals(), [], 'no journal is left');
});
