// A network a pod asks for at its creation is there when its ADD returns (docs/adr/0028): the
// reference bridge plugin as the primary, podnet chained after it, a standalone daemon whose
// documents select the pod before it exists. And the bounds: a frozen daemon holds an ADD no
// longer than the config's firstPassTimeoutMs, a daemon that is down not at all; the network
// comes once the daemon runs again.
import t, { type Test } from 'tap';
import { execa } from 'execa';
import { mkdir, writeFile } from 'node:fs/promises';
import { CniRuntime, type Attachment, type Conflist } from './lib/cni-runtime.ts';
import { daemonSandbox, type DaemonSandbox } from './lib/daemon.ts';
import { linkOf, until } from './lib/engine.ts';
import { primaryConflist } from './lib/kube.ts';
import { missingPrerequisite, referencePluginDir } from './lib/env.ts';
import { addressesIn, makeNetns, removeLinkAtTeardown, uniqueName } from './lib/netns.ts';

const skip = missingPrerequisite([`${referencePluginDir}/bridge`, `${referencePluginDir}/host-local`]);

/** The Network and the config that selects `pod` by name, in the daemon's config dir before the pod exists. */
async function documentsFor(t: Test, daemon: DaemonSandbox, pod: string, subnet: number): Promise<void> {
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);
  await mkdir(daemon.configDir, { recursive: true, mode: 0o700 });
  await writeFile(
    `${daemon.configDir}/first.yaml`,
    `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: first }
spec:
  type: bridge
  bridge: { name: ${bridge} }
  ipam: { ranges: [{ subnet: 198.18.${subnet}.0/24 }] }
  namespaceSelector: {}
---
apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: at-creation, namespace: default }
spec:
  podSelector: { matchLabels: { podnetwork.opdev.io/pod-name: ${pod} } }
  attachments: [{ network: first, interface: net1 }]
  interfaces: [{ name: eth0, mtu: 1400 }]
`,
  );
}

/** The reference bridge plugin as the pod's primary (primaryConflist), podnet after it with its wait. */
async function conflist(t: Test, daemon: DaemonSandbox, subnet: number, firstPassTimeoutMs?: number): Promise<Conflist> {
  const list = await primaryConflist(t, daemon, `198.18.${subnet}.0/24`);
  if (firstPassTimeoutMs === undefined) return list;
  return { ...list, plugins: list.plugins.map((p) => (p.type === 'podnet' ? { ...p, firstPassTimeoutMs } : p)) };
}

async function pod(t: Test, name: string): Promise<{ att: Attachment; ns: { name: string } }> {
  const ns = await makeNetns(t);
  return { ns, att: { containerId: uniqueName('ctr'), netns: ns.path, ifname: 'eth0', args: `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=${name}` } };
}

const net1Of = async (ns: string) => (await addressesIn(ns)).find((l) => l.ifname === 'net1');

t.test('a pod selected before it exists has net1, its address and eth0 MTU when its ADD returns', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await documentsFor(t, daemon, 'early-0', 90);
  await daemon.start();
  const runtime = new CniRuntime([referencePluginDir, daemon.binDir]);
  const list = await conflist(t, daemon, 91);
  const { att, ns } = await pod(t, 'early-0');
  const result = await runtime.add(list, att);
  const net1 = await net1Of(ns.name);
  t.ok(net1?.addresses.some((a) => a.startsWith('198.18.90.')), 'net1 with its address, as ADD returns');
  t.equal((await linkOf(ns.name, 'eth0'))?.mtu, 1400, "eth0's MTU");
  t.match(result, { interfaces: [{ name: String }], ips: [{ address: /^198\.18\.91\./ }] }, "the primary's result passed through");
  await runtime.del(list, att);
});

t.test('a frozen daemon holds an ADD no longer than firstPassTimeoutMs; its network comes once the daemon runs', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await documentsFor(t, daemon, 'frozen-0', 92);
  await daemon.start();
  const runtime = new CniRuntime([referencePluginDir, daemon.binDir]);
  const list = await conflist(t, daemon, 93, 1000);
  const { att, ns } = await pod(t, 'frozen-0');
  const pid = Number((await execa('pgrep', ['-f', `daemon --socket ${daemon.socketPath}`])).stdout.split('\n')[0]);
  process.kill(pid, 'SIGSTOP');
  let took: number;
  try {
    const started = Date.now();
    await runtime.add(list, att);
    took = Date.now() - started;
    t.notOk(await net1Of(ns.name), 'no net1 yet: the daemon is frozen');
  } finally {
    process.kill(pid, 'SIGCONT');
  }
  // The bound is the plugin's; the rest is the processes' own start (a few hundred ms at most here).
  t.ok(took < 1000 + 3000, `ADD returned after ${took} ms, bounded by its 1000 ms wait`);
  await until('net1 once the daemon runs again', async () => ((await net1Of(ns.name))?.addresses.some((a) => a.startsWith('198.18.92.')) ? true : undefined));
  await runtime.del(list, att);
});

t.test('a daemon that is down holds no ADD; the pod gets its network when the daemon starts', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await documentsFor(t, daemon, 'down-0', 94);
  const runtime = new CniRuntime([referencePluginDir, daemon.binDir]);
  const list = await conflist(t, daemon, 95, 60_000);
  const { att, ns } = await pod(t, 'down-0');
  const started = Date.now();
  await runtime.add(list, att);
  t.ok(Date.now() - started < 30_000, 'ADD did not wait out its 60 s for a daemon that is not there');
  t.notOk(await net1Of(ns.name), 'no net1: nothing runs to make it');
  await daemon.start();
  await until('net1 once the daemon started', async () => ((await net1Of(ns.name))?.addresses.some((a) => a.startsWith('198.18.94.')) ? true : undefined));
  await runtime.del(list, att);
});
