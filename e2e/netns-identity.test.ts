// A sandbox is the netns it was made in, not its path (issue 38): a runtime that names a netns
// /proc/<pid>/ns/net hands podnet a path another namespace takes once the pid is reused. The
// path is reused here by deleting the namespace and making another under its name; podnet must
// take the sandbox for gone and never act in the new namespace, nor have a plugin's DEL act there.
import t from 'tap';
import { execa } from 'execa';
import { daemonSandbox } from './lib/daemon.ts';
import { linkOf, podnetCli, startPod, until } from './lib/engine.ts';
import { missingPrerequisite, referencePluginDir } from './lib/env.ts';
import { removeLinkAtTeardown, uniqueName } from './lib/netns.ts';

const skip = missingPrerequisite([`${referencePluginDir}/bridge`, `${referencePluginDir}/host-local`]);

t.test("a netns path that names another namespace now is a gone sandbox: podnet's settings and a plugin's DEL never reach the new one", { skip, timeout: 120_000 }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true, args: ['--cni-bin-dir', referencePluginDir] });
  await daemon.start();
  const pod = await startPod(t, daemon, 'cnf-i');
  const cli = podnetCli(daemon);
  const bridge = uniqueName('pnid');
  removeLinkAtTeardown(t, bridge);
  const ipam = `${daemon.root}/host-local`;
  t.equal(
    (
      await cli.apply(
        'docs.yaml',
        `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: plugged-id }
spec:
  type: cni
  namespaceSelector: {}
  cni: { config: { cniVersion: 1.0.0, type: bridge, bridge: ${bridge}, ipam: { type: host-local, ranges: [[{ subnet: 198.18.165.0/24 }]], dataDir: ${ipam} } } }
---
apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: identity, namespace: default }
spec:
  podSelector: {}
  attachments: [{ network: plugged-id, interface: net1 }]
  interfaces: [{ name: lo, mtu: 64000 }]
`,
      )
    ).exitCode,
    0,
  );
  await until('net1 made by the plugin, and lo at 64000', async () => ((await linkOf(pod.ns.name, 'net1')) && (await linkOf(pod.ns.name, 'lo'))?.mtu === 64000 ? true : undefined));

  // Another namespace under the same path, with a net1 of its own (someone else's).
  await execa('ip', ['netns', 'del', pod.ns.name]);
  await execa('ip', ['netns', 'add', pod.ns.name]);
  await execa('ip', ['-n', pod.ns.name, 'link', 'add', 'net1', 'type', 'veth', 'peer', 'name', 'theirs1']);
  // Bounded generously: on a loaded machine (the suite's kubelet nodes beside it) a pass takes seconds.
  await until('the sandbox taken for gone', async () => ((await cli.explain('default/cnf-i')).exitCode !== 0 ? true : undefined), 60_000);
  await until('its plugin attachment forgotten (DEL run without the netns)', async () => ((await execa('ls', [`${daemon.stateDir}/delegated`])).stdout.trim() === '' ? true : undefined), 60_000);
  // A few resyncs (one a second) in which podnet would repair lo's MTU in a netns it took for the sandbox's.
  await new Promise((r) => setTimeout(r, 3000));
  t.equal((await linkOf(pod.ns.name, 'lo'))?.mtu, 65536, "the new namespace's lo is untouched");
  t.ok(await linkOf(pod.ns.name, 'net1'), 'its own net1 was not deleted by the plugin\'s DEL');
  t.match(await linkOf(pod.ns.name, 'theirs1'), { ifname: 'theirs1' }, 'nor its peer');
});
