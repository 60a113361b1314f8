// A network a pod asks for at its creation is there when its ADD returns (docs/adr/0028): the
// reference bridge plugin as the primary, podnet chained after it, a standalone daemon whose
// documents select the pod before it exists. And the bounds: a frozen daemon holds an ADD no
// longer than the config's firstPassTimeoutMs, a daemon that is down not at all; the network
// comes once the daemon runs again, and the record says the pod started without it. A required
// attachment that cannot be made fails the ADD and leaves nothing of podnet's on the host.
import t, { type Test } from 'tap';
import { execa } from 'execa';
import { mkdir, writeFile } from 'node:fs/promises';
import { CniError, CniRuntime, type Attachment, type Conflist } from './lib/cni-runtime.ts';
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
  t.equal((await daemon.records()).find((r) => r.containerId === att.containerId)?.startedWithoutNetwork, undefined, 'its containers started with their network: the record is not marked');
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
  t.equal((await daemon.records()).find((r) => r.containerId === att.containerId)?.startedWithoutNetwork, true, 'the record says its containers started without its network');
  await runtime.del(list, att);
});

t.test('a required attachment that cannot be made fails the ADD naming it, and leaves no port on the host; once its Network exists the next ADD succeeds', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  const [bridge, later] = [uniqueName('pnbr'), uniqueName('pnbr')];
  removeLinkAtTeardown(t, bridge);
  removeLinkAtTeardown(t, later);
  await mkdir(daemon.configDir, { recursive: true, mode: 0o700 });
  const network = (name: string, dev: string, subnet: number) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: ${name} }
spec:
  type: bridge
  bridge: { name: ${dev} }
  ipam: { ranges: [{ subnet: 198.18.${subnet}.0/24 }] }
  namespaceSelector: {}
`;
  await writeFile(`${daemon.configDir}/made.yaml`, network('made', bridge, 96));
  await writeFile(
    `${daemon.configDir}/needs.yaml`,
    `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: needs, namespace: default }
spec:
  podSelector: { matchLabels: { podnetwork.opdev.io/pod-name: needs-0 } }
  attachments:
  - { network: made, interface: net2 }
  - { network: later, interface: net1, required: true }
`,
  );
  await daemon.start();
  const runtime = new CniRuntime([referencePluginDir, daemon.binDir]);
  const list = await conflist(t, daemon, 97);
  const first = await pod(t, 'needs-0');
  const refused = await runtime.add(list, first.att).then(() => undefined, (err: unknown) => err);
  t.ok(refused instanceof CniError && refused.plugin === 'podnet' && refused.code === 101, `podnet failed the ADD with code 101 (${String(refused)})`);
  t.match((refused as Error).message, /required attachments cannot be made: net1 on Network later \(PodNetworkConfig default\/needs spec\.attachments\[1\]\): no Network named later/);
  // The bridge too goes once no port is left on it (podnet made it).
  const ports = async () => ((await linkOf(undefined, bridge)) ? (JSON.parse((await execa('ip', ['-json', 'link', 'show', 'master', bridge])).stdout) as unknown[]) : []);
  t.strictSame(await ports(), [], 'net2, made in the pass, is taken back before the ADD fails: no port left on its bridge');
  t.notOk((await daemon.records()).some((r) => r.containerId === first.att.containerId), 'no record left');
  // As a runtime does after a failed ADD.
  await runtime.del(list, first.att);

  await writeFile(`${daemon.configDir}/later.yaml`, network('later', later, 98));
  const second = await pod(t, 'needs-0');
  await until('an ADD that succeeds once the Network is there', async () => {
    try {
      await runtime.add(list, second.att);
      return true;
    } catch (err) {
      if (!(err instanceof CniError) || err.code !== 101) throw err;
      await runtime.del(list, second.att);
      return undefined;
    }
  });
  const links = await addressesIn(second.ns.name);
  t.ok(links.find((l) => l.ifname === 'net1')?.addresses.some((a) => a.startsWith('198.18.98.')), 'net1 on the Network made since');
  t.ok(links.find((l) => l.ifname === 'net2')?.addresses.some((a) => a.startsWith('198.18.96.')), 'and net2');
  await runtime.del(list, second.att);
});
