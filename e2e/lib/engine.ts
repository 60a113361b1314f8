// What the engine's e2e tests share: pods made the way a primary plugin would (a veth eth0 left
// in the pod, recorded through podnet), the user's commands, and waiting for the kernel to show
// a change.
import { execa } from 'execa';
import { writeFile } from 'node:fs/promises';
import type { Test } from 'tap';
import { CniRuntime, type Attachment } from './cni-runtime.ts';
import type { DaemonSandbox } from './daemon.ts';
import { addressesIn, makeNetns, uniqueName } from './netns.ts';

/**
 * Polls `probe` every 100 ms until it gives a value; fails naming `what` after `timeoutMs`. The
 * default is long: a condition met costs only its own time, and a loaded two-core machine or the
 * VM's emulated kernel takes several times an idle machine's.
 */
export async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 60_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

export interface LinkView {
  ifindex: number;
  ifname: string;
  /** The MAC, as `ip` shows it: "address". */
  address?: string;
  mtu: number;
  txqlen: number;
  flags: string[];
  /** The link it is a port of: a bridge, a VRF. */
  master?: string;
  operstate?: string;
  linkinfo?: { info_kind?: string; info_data?: Record<string, unknown> };
}

/** A link of a netns (or the host, netns undefined) as `ip -d -json link` shows it. */
export async function linkOf(netns: string | undefined, dev: string): Promise<LinkView | undefined> {
  const r = await execa('ip', [...(netns ? ['-n', netns] : []), '-d', '-json', 'link', 'show', 'dev', dev], { reject: false });
  return r.exitCode === 0 ? (JSON.parse(r.stdout) as LinkView[])[0] : undefined;
}

export async function hostLinkNames(prefix: string): Promise<string[]> {
  const { stdout } = await execa('ip', ['-json', 'link', 'show']);
  return (JSON.parse(stdout) as { ifname: string }[]).map((l) => l.ifname).filter((n) => n.startsWith(prefix));
}

export interface Pod {
  name: string;
  ns: { name: string; path: string };
  att: Attachment;
}

/**
 * A pod named `name` in namespace default: a netns with an eth0 (a veth whose peer stays in the
 * pod, as if a primary plugin made it), recorded through podnet's CNI ADD.
 */
export async function startPod(t: Test, daemon: DaemonSandbox, name: string, namespace = 'default'): Promise<Pod> {
  const runtime = new CniRuntime([daemon.binDir]);
  const list = { cniVersion: '1.0.0', name: 'primary', plugins: [{ type: 'podnet', ...daemon.pluginSettings() }] };
  const ns = await makeNetns(t);
  await execa('ip', ['-n', ns.name, 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'peer0']);
  await execa('ip', ['-n', ns.name, 'link', 'set', 'eth0', 'up']);
  await execa('ip', ['-n', ns.name, 'link', 'set', 'lo', 'up']);
  const att: Attachment = { containerId: uniqueName('ctr'), netns: ns.path, ifname: 'eth0', args: `K8S_POD_NAMESPACE=${namespace};K8S_POD_NAME=${name}` };
  await runtime.invoke(list, list.plugins[0]!, 'ADD', att, { cniVersion: '1.0.0', interfaces: [{ name: 'eth0' }], ips: [] });
  return { name, ns, att };
}

/** The podnet CLI against this daemon sandbox: apply, diff and delete documents, explain a pod. */
export function podnetCli(daemon: DaemonSandbox) {
  const podnet = (...args: string[]) => execa(`${daemon.binDir}/podnet`, args, { reject: false });
  const file = async (name: string, text: string) => {
    const path = `${daemon.root}/${name}`;
    await writeFile(path, text);
    return path;
  };
  return {
    podnet,
    apply: async (name: string, text: string) => podnet('apply', '-f', await file(name, text), '--config-dir', daemon.configDir, '--socket', daemon.socketPath),
    diff: async (name: string, text: string) => podnet('diff', '-f', await file(name, text), '--socket', daemon.socketPath),
    delete: (name: string) => podnet('delete', '-f', `${daemon.root}/${name}`, '--config-dir', daemon.configDir),
    explain: (pod: string) => podnet('explain', pod, '--socket', daemon.socketPath),
  };
}

/** A Network for every namespace: `spec` is its spec's other lines, indented two spaces. */
export const networkDocument = (name: string, spec: string) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: ${name} }
spec:
${spec}
  namespaceSelector: {}
`;

/** A config named attach giving every pod of default a net1 on `network`, with `ips` when static. */
export const attachConfig = (network: string, ips?: string) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: attach, namespace: default }
spec:
  podSelector: {}
  attachments: [{ network: ${network}, interface: net1${ips ? `, ips: [${ips}]` : ''} }]
`;

/** net1's address in the netns that starts with `prefix`, when it has one. */
export async function net1Address(ns: string, prefix: string): Promise<string | undefined> {
  return (await addressesIn(ns)).find((l) => l.ifname === 'net1')?.addresses.find((a) => a.startsWith(prefix));
}

/** ping's exit code, two pings from the netns to `address` (a CIDR or a bare address). */
export async function pingFrom(ns: string, address: string): Promise<number | undefined> {
  return (await execa('ip', ['netns', 'exec', ns, 'busybox', 'ping', '-c', '2', '-W', '2', address.split('/')[0]!], { reject: false })).exitCode;
}
