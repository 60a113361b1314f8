// vlan Networks on a kernel that has 802.1q (run in a VM of Debian's kernel by e2e/kernel.test.ts):
// two pods, each with a vlan 5 sub-interface of one end of a veth pair, reach each other through
// the tagged link; undo leaves both parents as they were and nothing of podnet's on the host.
import t from 'tap';
import { execa } from 'execa';
import { daemonSandbox } from '../lib/daemon.ts';
import { attachConfig, hostLinkNames, linkOf, net1Address, networkDocument, pingFrom, podnetCli, startPod, until } from '../lib/engine.ts';
import { missingPrerequisite } from '../lib/env.ts';
import { removeLinkAtTeardown, uniqueName } from '../lib/netns.ts';

t.test('vlan: pods on the two ends of a tagged link reach each other', { skip: missingPrerequisite(['/bin/busybox']) }, async (t) => {
  const parent = uniqueName('pnvl');
  removeLinkAtTeardown(t, parent);
  await execa('ip', ['link', 'add', parent, 'type', 'veth', 'peer', 'name', `${parent}p`]);
  for (const l of [parent, `${parent}p`]) await execa('ip', ['link', 'set', l, 'up']);
  const before = await hostLinkNames('');
  const pods = [];
  for (const [i, end] of [parent, `${parent}p`].entries()) {
    // One daemon an end, as if each end were a node's uplink: a Network names one parent.
    const daemon = await daemonSandbox(t, { standalone: true });
    await daemon.start();
    const cli = podnetCli(daemon);
    await cli.apply('vl.yaml', networkDocument('vl', `  type: vlan\n  vlan: { parent: ${end}, id: 5 }\n  mtu: 1400\n  staticAddresses: true`));
    await cli.apply('attach.yaml', attachConfig('vl', `198.18.86.${i + 1}/24`));
    pods.push({ pod: await startPod(t, daemon, `vl-${i}`), cli });
  }
  for (const { pod } of pods) {
    await until(`net1 in ${pod.name}`, () => net1Address(pod.ns.name, '198.18.86.'));
    t.match(await linkOf(pod.ns.name, 'net1'), { mtu: 1400, linkinfo: { info_kind: 'vlan', info_data: { protocol: '802.1Q', id: 5 } } }, `${pod.name}: net1 is vlan 5`);
  }
  t.equal(await pingFrom(pods[0]!.pod.ns.name, '198.18.86.2'), 0, 'vl-0 reaches vl-1 through vlan 5');

  for (const { pod, cli } of pods) {
    await cli.delete('attach.yaml');
    await until(`net1 gone from ${pod.name}`, async () => ((await linkOf(pod.ns.name, 'net1')) ? undefined : true));
  }
  t.same((await hostLinkNames('')).sort(), before.sort(), "the host's links are as they were");
  t.match(await linkOf(undefined, parent), { ifname: parent, flags: ['BROADCAST', 'MULTICAST', 'UP', 'LOWER_UP'] }, 'the parent is left up');
});
