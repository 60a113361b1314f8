// Between resyncs the daemon plans a pod's changes from its netns as the last pass left it
// (read back after every change it makes), not from a fresh read on the request's path. These
// tests run with resync far away, so that every plan after the first comes from such a view.
import t from 'tap';
import { execa } from 'execa';
import { hostLinkNames, linkOf, podnetCli, startPod, until } from './lib/engine.ts';
import { daemonSandbox } from './lib/daemon.ts';
import { hostInterfaceName } from '../src/model/host-links.ts';
import { missingPrerequisite } from './lib/env.ts';
import { addressesIn, removeLinkAtTeardown, uniqueName } from './lib/netns.ts';

const skip = missingPrerequisite();

const network = (bridge: string) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: green }
spec:
  type: bridge
  bridge: { name: ${bridge} }
  ipam: { ranges: [{ subnet: 198.18.82.0/24 }] }
  namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: default } }
`;
const config = (pod: string) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: ${pod}, namespace: default }
spec:
  podSelector: { matchLabels: { podnetwork.opdev.io/pod-name: ${pod} } }
  attachments: [{ network: green, interface: net1 }]
`;

const net1Address = async (netns: string) => (await addressesIn(netns)).find((l) => l.ifname === 'net1')?.addresses.find((a) => a.startsWith('198.18.82.'));

t.test('attach, detach and attach again, each planned from the view the change before left', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true, resyncSeconds: 3600 });
  await daemon.start();
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);
  const pod = await startPod(t, daemon, 'pod-v');
  const cli = podnetCli(daemon);
  t.equal((await cli.apply('green.yaml', network(bridge))).exitCode, 0, 'podnet apply -f green.yaml');
  for (const round of [1, 2, 3]) {
    t.equal((await cli.apply('pod.yaml', config('pod-v'))).exitCode, 0, `round ${round}: podnet apply -f pod.yaml`);
    t.match(await until('net1 with its address', () => net1Address(pod.ns.name)), /^198\.18\.82\.\d+\/24$/, `round ${round}: net1 is in the pod with an address`);
    t.equal((await cli.delete('pod.yaml')).exitCode, 0, `round ${round}: podnet delete -f pod.yaml`);
    await until('net1 gone', async () => ((await linkOf(pod.ns.name, 'net1')) ? undefined : true));
    t.pass(`round ${round}: net1 is gone`);
  }
  t.same(await hostLinkNames(hostInterfaceName(pod.att.containerId, 'net1')), [], 'no host end of the veth is left');
});

t.test('a link made by hand after the daemon last looked is seen, refused and left alone', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true, resyncSeconds: 3600 });
  await daemon.start();
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);
  const pod = await startPod(t, daemon, 'pod-h');
  const cli = podnetCli(daemon);
  t.equal((await cli.apply('green.yaml', network(bridge))).exitCode, 0, 'podnet apply -f green.yaml');
  // The daemon has looked at the pod once it explains it.
  await until('the pod reconciled', async () => ((await cli.explain('default/pod-h')).exitCode === 0 ? true : undefined));
  await execa('ip', ['-n', pod.ns.name, 'link', 'add', 'net1', 'type', 'veth', 'peer', 'name', 'hand1']);

  t.equal((await cli.apply('pod.yaml', config('pod-h'))).exitCode, 0, 'podnet apply -f pod.yaml');
  const explained = await until('the refusal explained', async () => {
    const { stdout } = await cli.explain('default/pod-h');
    return /net1 already exists in the pod and podnet did not make it/.test(stdout) ? stdout : undefined;
  });
  t.match(explained, /PodNetworkConfig default\/pod-h spec: nothing of it applies to the pod until all of it can/, "the config, refused whole for it, says so, and is tried again with the pod's backoff");
  const net1 = await linkOf(pod.ns.name, 'net1');
  t.match(net1, { ifname: 'net1', linkinfo: { info_kind: 'veth' } }, 'the hand-made net1 is still there');
  t.ok(await linkOf(pod.ns.name, 'hand1'), 'with its peer in the pod');
  t.same(await hostLinkNames(hostInterfaceName(pod.att.containerId, 'net1')), [], 'nothing of the refused attachment is on the host');
});
