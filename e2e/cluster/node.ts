// A real node for the e2e: containerd (Debian's, runc, cgroupfs) and a kubelet registered with the
// cluster's kube-apiserver as node 127.0.0.1, with kube-controller-manager and kube-scheduler so
// that DaemonSets, ServiceAccounts and scheduling are the cluster's own. A second node (`second`)
// is the same but in a network namespace of its own, joined to the machine's by an underlay
// (a veth pair), as a second machine on a LAN.
//
// The first node shares the machine's kernel, network namespace and PID namespace, as a node would, but
// has a mount namespace of its own: the folders a node's components and podnet's DaemonSet use at
// fixed paths (/opt/cni/bin, /etc/cni/net.d, /var/lib/cni, /var/lib/podnet, /run/podnet,
// /run/netns, /run/containerd, /var/log/containers) are the test's own folders bind-mounted there,
// so the DaemonSet runs as shipped and another podnet or container runtime on the machine is
// never touched. What the node mounts (image layers, pod volumes, netns files) lives and dies with
// that namespace. What a node cannot keep to itself (links on the host, cgroups, three sysctls the
// kubelet sets) is put back at teardown.
import { execa } from 'execa';
import { CoreV1Api, KubeConfig, type V1Node } from '@kubernetes/client-node';
import { existsSync } from 'node:fs';
import { chmod, copyFile, mkdir, mkdtemp, readFile, readdir, readlink, rm, rmdir, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import type { Server } from 'node:net';
import { dirname, join } from 'node:path';
import type { Test } from 'tap';
import { stringify } from 'yaml';
import { stopBeforeCleanup } from '../lib/netns.ts';
import { relay } from '../lib/relay.ts';
import { cachedClusterBinaries, cachedNodeBinaries, ensureNodeBinaries, type NodeBinaries } from './binaries.ts';
import { coldBuildTimeoutMs, freePort, launch, nodeName, ownedTempFolders, secondNodeName, tail, terminate, waitReady, type Cluster, type ClusterUser, type Owner, type Supervised } from './cluster.ts';

/** Debian's reference plugins, which the node's primary network and containerd's loopback use. */
const debianPlugins = '/usr/lib/cni';
const containerdBinary = '/usr/bin/containerd';
const ctrBinary = '/usr/bin/ctr';
const runcBinary = '/usr/sbin/runc';

/** The node paths that are the test's own folders inside the node's mount namespace. */
// /run/nri: containerd 2 serves NRI at /var/run/nri/nri.sock, and a second containerd on the
// machine (another node of the suite) would find the first one's socket there and exit.
const nodeOwnedPaths = ['/opt/cni/bin', '/etc/cni/net.d', '/var/lib/cni', '/var/lib/podnet', '/run/podnet', '/run/containerd', '/run/nri', '/var/lib/kubelet', '/var/log/containers'] as const;

/** The images every node test has: a pause image for sandboxes and busybox for pods' containers. */
export const pauseImage = 'localhost/podnet-e2e/pause:1';
export const busyboxImage = 'localhost/podnet-e2e/busybox:1';

/**
 * The second node's underlay: a veth pair between the machine's network namespace (address
 * `host`) and the node's (`node`, its InternalIP), a /30 of the test range. Both ends are named
 * `device`, as a LAN's nodes name their NIC alike, so one Network spec (a vxlan's device) serves
 * both. Fixed, as the nodes' primary subnets are; the machine's end carries the node's folder as
 * its alias, so that a crashed node's sweep deletes only its own.
 */
export const underlay = { device: 'pnunderlay0', host: '198.18.229.1', node: '198.18.229.2', prefix: 30 } as const;

/** The kernel settings the kubelet changes at start (and never puts back). */
const kubeletSysctls = ['vm/overcommit_memory', 'kernel/panic', 'kernel/panic_on_oops'] as const;

/**
 * The container runtimes a node can run: Debian 12's containerd 1.6, whose libcni caches no netns
 * for a pod, and containerd 2 built from the Go module proxy (e2e/cluster/binaries.ts), whose does.
 */
export const nodeRuntimes = ['containerd-1.6', 'containerd-2'] as const;
export type NodeRuntime = (typeof nodeRuntimes)[number];

export interface Node {
  name: string;
  /** The address the node's kubelet and its host-network pods have, as other nodes reach it. */
  address: string;
  runtime: NodeRuntime;
  /** The node's cgroup, under every hierarchy: gone after teardown. */
  cgroupRoot: string;
  /** The node's folder on the machine: gone after teardown, as every process with it mounted. */
  root: string;
  /** The folder that is `path` (one of nodeOwnedPaths) inside the node, as the machine sees it. */
  folder(path: (typeof nodeOwnedPaths)[number]): string;
  /** The primary network's host bridge, which the node's pods are on. */
  primaryBridge: string;
  /** kubectl as the cluster's admin, or as `as`. */
  kubectl(args: readonly string[], options?: { as?: ClusterUser; input?: string; reject?: boolean }): Promise<{ stdout: string; stderr: string; exitCode: number }>;
  /** A podman image (`podman save`) made known to containerd, under its own name. */
  importImage(tag: string): Promise<void>;
  /** argv that runs `argv` inside the node's mount namespace (where its netns names are), and network namespace for the second node. */
  inNode(argv: readonly string[]): [string, ...string[]];
  /** containerd and the kubelet stopped and started again, pods' containers included: a node's reboot, short of the kernel. */
  restart(): Promise<void>;
  /** The kubelet alone stopped and started again (its pods run on), Ready again. */
  restartKubelet(): Promise<void>;
  /** containerd and the kubelet stopped, every process of its pods killed: a machine switched off. Its Node object stays (a test deletes it). */
  leave(): Promise<void>;
  /** containerd and the kubelet started again after leave(), with the node's folders as they were: the node registers anew under its name. */
  rejoin(): Promise<void>;
}

/**
 * Whether the machine has what a node needs besides the built binaries, or why not. Under CI a
 * missing part is a failure: setup/test installs all of it.
 */
export function missingNodePrerequisite(): string | undefined {
  const missing = [containerdBinary, ctrBinary, runcBinary, '/usr/bin/podman', '/usr/bin/unshare', '/usr/bin/nsenter', '/bin/busybox', `${debianPlugins}/bridge`].filter((p) => !existsSync(p));
  if (missing.length === 0) return undefined;
  const why = `a real node needs ${missing.join(', ')}`;
  if (process.env['CI']) throw new Error(`CI machine lacks what setup/test installs: ${why}`);
  return why;
}

/**
 * For a test file's top, after prepareClusterTest: its time, which is minutes even when every
 * binary is cached (each test starts a cluster and a node), and more when they must be built.
 */
export async function prepareNodeTest(root: Test): Promise<undefined> {
  // The kubelet alone takes about 7 to 14 minutes cold, the controllers and kubectl a few each.
  const cold = !(await cachedNodeBinaries()) || !(await cachedClusterBinaries());
  root.setTimeout(cold ? 2 * coldBuildTimeoutMs : 30 * 60_000);
  return undefined;
}

/**
 * Starts kube-controller-manager and kube-scheduler against `cluster` (started with forNode),
 * then containerd and the kubelet, and waits until the node is Ready. Everything stops at t's
 * teardown, pods' processes included, and the machine is left as it was found.
 */
export async function startNode(t: Owner, cluster: Cluster, options: { primarySubnet: string; runtime: NodeRuntime; second?: boolean }): Promise<Node> {
  const binaries = await ensureNodeBinaries();
  await sweepCrashedNodes();
  const root = await mkdtemp(join(tmpdir(), nodePrefix));
  await writeFile(join(root, 'owner'), String(process.pid));
  const { cgroupRoot, primaryBridge } = nodeNames(root);
  const second = options.second === true;
  const name = second ? secondNodeName : nodeName;
  const address = second ? underlay.node : nodeName;
  const processes: Supervised[] = [];
  await shareMachine();

  let holder: Supervised | undefined;
  /** argv that runs `argv` in the node's mount namespace. */
  const inNode = (argv: readonly string[]): [string, ...string[]] => ['/usr/bin/nsenter', `--mount=/proc/${holder!.pid}/ns/mnt`, ...(second ? [`--net=/proc/${holder!.pid}/ns/net`] : []), '--', ...argv];
  const runInNode = (argv: readonly string[]) => {
    const [file, ...args] = inNode(argv);
    return execa(file, args);
  };
  const admin = new KubeConfig();
  admin.loadFromFile(cluster.kubeconfig('admin'));
  const core = admin.makeApiClient(CoreV1Api);
  const kubectl: Node['kubectl'] = async (args, { as = 'admin', input, reject = true } = {}) => {
    const result = await execa(binaries.kubectl, [`--kubeconfig=${cluster.kubeconfig(as)}`, ...args], { input, reject });
    return { stdout: result.stdout, stderr: result.stderr, exitCode: result.exitCode ?? -1 };
  };

  /** The second node's way to the apiserver: a Unix socket this process relays to it (e2e/lib/relay.ts). */
  let apiserverSocket: Server | undefined;

  const stopNode = async () => {
    if (!t.passing()) await describeNode(kubectl, name);
    // The pods first, while the kubelet still runs them: their CNI DEL takes their host links off.
    await deletePodsOf(core, name).catch((error: unknown) => process.stderr.write(`node teardown: pods not deleted through the API: ${String(error)}\n`));
    for (const p of processes.splice(0).reverse()) await terminate(p, 'SIGTERM', 5000);
    if (holder) await terminate(holder, 'SIGKILL', 0);
    await removeNodeRemains(root);
    await new Promise((resolve) => (apiserverSocket ? apiserverSocket.close(resolve) : resolve(undefined)));
    await leaveMachine(root);
    if (!t.passing()) for (const name of ['containerd', 'kubelet', 'kube-controller-manager', 'kube-scheduler']) process.stderr.write(`--- last lines of ${name}'s log (test failed) ---\n${await tail(join(root, `${name}.log`))}\n`);
    await rm(root, { recursive: true, force: true });
  };
  // Once, at t's teardown or before: a link or netns of the test's that the node's podnet acts on
  // (a Network's bridge) is removed only after the node stopped, else podnet would make it again.
  let stopping: Promise<void> | undefined;
  const stop = () => (stopping ??= stopNode());
  t.teardown(stop);
  stopBeforeCleanup(t, stop);

  // The node's own mount namespace, held open by a process that only sleeps.
  holder = launch('node namespaces', '/usr/bin/unshare', ['--mount', ...(second ? ['--net'] : []), '--propagation', 'private', '--', '/bin/sleep', 'infinity'], join(root, 'holder.log'));
  processes.push(holder);
  const ownMountNs = await readlink('/proc/self/ns/mnt');
  const ownNetNs = await readlink('/proc/self/ns/net');
  await waitReady(holder, 10_000, async () => (await readlink(`/proc/${holder!.pid}/ns/mnt`)) !== ownMountNs && (!second || (await readlink(`/proc/${holder!.pid}/ns/net`)) !== ownNetNs));
  if (second) {
    // The underlay: a veth pair, one end on the machine, the other in the node. Its name is fixed
    // (one spec serves both nodes): a second node of another test on the machine holds it until
    // its teardown, which this one waits for.
    for (let waited = 0; (await execa('ip', ['link', 'show', 'dev', underlay.device], { reject: false })).exitCode === 0; waited += 500) {
      if (waited >= 120_000) throw new Error(`${underlay.device} is on the machine, another test's second node's (ip link show dev ${underlay.device}): one second node at a time`);
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
    await execa('ip', ['link', 'add', underlay.device, 'type', 'veth', 'peer', 'name', underlay.device, 'netns', String(holder.pid)]);
    await execa('ip', ['link', 'set', underlay.device, 'alias', underlayAlias(root)]);
    await execa('ip', ['addr', 'add', `${underlay.host}/${underlay.prefix}`, 'dev', underlay.device]);
    await execa('ip', ['link', 'set', underlay.device, 'up']);
    for (const argv of [
      ['ip', 'link', 'set', 'lo', 'up'],
      ['ip', 'addr', 'add', `${underlay.node}/${underlay.prefix}`, 'dev', underlay.device],
      ['ip', 'link', 'set', underlay.device, 'up'],
    ])
      await runInNode(argv);
    // The apiserver at 127.0.0.1:<port> in the node too, where its kubelet and podnet's DaemonSet look for it.
    const socketPath = join(root, 'apiserver.sock');
    const port = new URL(cluster.server).port;
    apiserverSocket = await relay(`unix:${socketPath}`, `tcp:127.0.0.1:${port}`);
    const [file, ...args] = inNode([process.execPath, join(import.meta.dirname, '../lib/relay.ts'), `tcp:127.0.0.1:${port}=unix:${socketPath}`]);
    const relayed = launch('apiserver relay', file, args, join(root, 'relay.log'));
    processes.push(relayed);
    await waitReady(relayed, 10_000, async () => (await readFile(relayed.logFile, 'utf8')).includes('listening'));
  }

  const folders = new Map<string, string>();
  for (const path of nodeOwnedPaths) {
    const folder = join(root, 'fs', path);
    await mkdir(folder, { recursive: true });
    folders.set(path, folder);
    await mkdirShared(path);
    await runInNode(['mount', '--bind', folder, path]);
  }
  await mkdirShared('/run/netns');
  // Pods' netns files: a tmpfs of the node's own, shared, so that a netns containerd pins after
  // podnet's daemon started reaches the daemon's HostToContainer mount. Made anew at a restart, as
  // a reboot does with /run.
  const freshRunNetns = async () => {
    // Whatever is mounted there goes first, the machine's own included (`ip netns` makes the
    // folder a mount of itself): containerd checks the first mount it finds at the path for
    // propagation, and the machine's is private in the node's namespace.
    for (let i = 0; i < 8; i++) {
      const [file, ...args] = inNode(['umount', '--recursive', '--lazy', '/run/netns']);
      if ((await execa(file, args, { reject: false })).exitCode !== 0) break;
    }
    await runInNode(['mount', '-t', 'tmpfs', '-o', 'mode=0755', 'podnet-e2e-netns', '/run/netns']);
    await runInNode(['mount', '--make-shared', '/run/netns']);
  };
  await freshRunNetns();

  // The reference plugins the node's pods use, in the node's bin dir (podnet install adds itself).
  for (const name of await readdir(debianPlugins)) await copyFile(join(debianPlugins, name), join(folders.get('/opt/cni/bin')!, name));
  await writeFile(
    join(folders.get('/etc/cni/net.d')!, '10-primary.conflist'),
    JSON.stringify({
      cniVersion: '1.0.0',
      name: 'primary',
      plugins: [{ type: 'bridge', bridge: primaryBridge, ipam: { type: 'host-local', ranges: [[{ subnet: options.primarySubnet }]] } }],
    }),
  );

  await makeCgroupRoot(cgroupRoot);
  // One kube-controller-manager and kube-scheduler for the cluster: the first node's.
  if (!second) processes.push(...(await startControllers(cluster, binaries, root)));

  // At containerd's usual path inside the node, where podnet's DaemonSet asks it through the CRI.
  const socket = join(folders.get('/run/containerd')!, 'containerd.sock');
  const ctr = (args: readonly string[], reject = true) => execa(ctrBinary, ['--address', socket, '--namespace', 'k8s.io', ...args], { reject });
  // containerd 2 finds its runc shim on PATH, which must be its own release's, not Debian's.
  const containerdArgv =
    options.runtime === 'containerd-1.6' ? [containerdBinary] : ['/usr/bin/env', `PATH=${dirname(binaries.containerd2)}:${process.env['PATH'] ?? '/usr/bin:/bin'}`, binaries.containerd2];
  const startContainerd = async () => {
    const [file, ...args] = inNode([...containerdArgv, '--config', await containerdConfig(root, options.runtime)]);
    const p = launch('containerd', file, args, join(root, 'containerd.log'));
    processes.push(p);
    await waitReady(p, 30_000, async () => (await ctr(['version'], false)).exitCode === 0);
    return p;
  };
  let containerd = await startContainerd();
  const importImage = async (tag: string) => {
    const archive = join(root, 'image.tar');
    await execa('podman', ['save', '--quiet', '--format', 'docker-archive', '--output', archive, tag]);
    try {
      await ctr(['images', 'import', archive]);
    } finally {
      await rm(archive, { force: true });
    }
  };
  await importTestImages(root, importImage);

  const kubeletConfigFile = await kubeletConfig(root, cgroupRoot, second ? underlay.node : '127.0.0.1');
  const startKubelet = async (again = false): Promise<Supervised> => {
    const [file, ...args] = inNode([
      binaries.kubelet,
      `--config=${kubeletConfigFile}`,
      `--kubeconfig=${cluster.kubeconfig(second ? 'node-2' : 'node')}`,
      // The node's usual root, its own folder in the node's mounts: DaemonSets find the kubelet's
      // plugins_registry and plugins folders there, as on any node.
      '--root-dir=/var/lib/kubelet',
      `--cert-dir=${join(root, 'kubelet-pki')}`,
      `--hostname-override=${name}`,
      ...(second ? [`--node-ip=${underlay.node}`] : []),
      '--v=1',
    ]);
    const p = launch('kubelet', file, args, join(root, 'kubelet.log'));
    processes.push(p);
    let stuck = false;
    try {
      await waitReady(p, 120_000, async () => {
        const node = (await core.readNode({ name }).catch(() => undefined)) as V1Node | undefined;
        stuck = !again && csiNodeGaveUp(node);
        return stuck || isReady(node);
      });
    } catch (err) {
      // What the kubelet says of its node is what tells why it is not Ready.
      const node = (await core.readNode({ name }).catch(() => undefined)) as V1Node | undefined;
      const ready = node?.status?.conditions?.find((c) => c.type === 'Ready');
      const said = (await readFile(join(root, 'kubelet.log'), 'utf8').catch(() => '')).split('\n').filter((l) => / \d+ [a-z_]+\.go:\d+\] .*(regist|Unable)/i.test(l) && l.includes(` ${p.pid} `));
      throw new Error(`node ${name} ${node ? `is not Ready: ${ready?.reason ?? ''}: ${ready?.message ?? ''}` : 'is not registered'}; the kubelet said of its registration:\n${said.slice(-8).join('\n')}`);
    }
    if (stuck) {
      // The kubelet makes its CSINode before it registers its Node, and gives up on it after about
      // 30 s. Started again where its Node object was deleted while it was away, it tears down its
      // old pods first and registers later than that (25 s measured here), then stays NotReady for
      // good; a second start, as an operator would restart it, registers at once.
      await terminate(p, 'SIGTERM', 10_000);
      processes.splice(processes.indexOf(p), 1);
      return startKubelet(true);
    }
    return p;
  };
  let kubelet = await startKubelet();
  /** What a machine's stop does to the pods: every process of theirs gone, their netns with them, and what lives under /run emptied. */
  const leave = async () => {
    for (const p of [kubelet, containerd]) {
      await terminate(p, 'SIGTERM', 10_000);
      processes.splice(processes.indexOf(p), 1);
    }
    await killNodeProcesses(root, cgroupRoot, { spare: [holder!.pid, ...processes.map((p) => p.pid)] });
    await freshRunNetns();
    for (const path of ['/run/podnet', '/run/containerd', '/run/nri'] as const) {
      for (const name of await readdir(folders.get(path)!)) await rm(join(folders.get(path)!, name), { recursive: true, force: true });
    }
    await rm(join(root, 'containerd', 'state'), { recursive: true, force: true });
  };
  const rejoin = async () => {
    containerd = await startContainerd();
    kubelet = await startKubelet();
  };

  return {
    name,
    address,
    runtime: options.runtime,
    cgroupRoot,
    root,
    folder: (path) => folders.get(path)!,
    primaryBridge,
    kubectl,
    importImage,
    inNode,
    async restart() {
      await leave();
      await rejoin();
    },
    async restartKubelet() {
      await terminate(kubelet, 'SIGTERM', 10_000);
      processes.splice(processes.indexOf(kubelet), 1);
      kubelet = await startKubelet();
    },
    leave,
    rejoin,
  };
}

/**
 * What a kubelet node changes on a machine when it is not kept to itself: folders only a kubelet
 * makes, the sysctls it sets, iptables chains it adds. Taken before a node starts and after its
 * teardown, the two must be the same.
 */
export async function machineTraces(): Promise<Record<string, unknown>> {
  const paths = ['/var/lib/kubelet', '/usr/libexec/kubernetes', '/var/log/pods', '/var/log/containers', '/run/containerd'];
  const sysctls = await kubeletSysctlValues();
  const iptables = await execa('iptables-save', [], { reject: false });
  const kubeChains = iptables.exitCode === 0 ? iptables.stdout.split('\n').filter((line) => /KUBE/.test(line)) : 'no iptables-save';
  return { existing: paths.filter((p) => existsSync(p)), sysctls, kubeChains };
}

/** The machine's values of the sysctls the kubelet sets, by key under /proc/sys. */
async function kubeletSysctlValues(): Promise<Record<string, string>> {
  return Object.fromEntries(await Promise.all(kubeletSysctls.map(async (key) => [key, (await readFile(`/proc/sys/${key}`, 'utf8')).trim()] as const)));
}

/** What an operator would look at first when a node test fails: the pods, their events, podnet's logs. */
async function describeNode(nodeKubectl: Node['kubectl'], name: string): Promise<void> {
  const kubectl = async (args: string[]) => {
    const { stdout, stderr } = await nodeKubectl(args, { reject: false });
    return `${stdout}${stderr}`;
  };
  const said = [
    ['pods', await kubectl(['get', 'pods', '-A', '-o', 'wide', `--field-selector=spec.nodeName=${name}`])],
    ['events', await kubectl(['get', 'events', '-A', '--sort-by=.lastTimestamp'])],
    ["podnet's daemon log", await kubectl(['logs', '-n', 'podnet-system', '-l', 'app.kubernetes.io/name=podnet', '-c', 'daemon', '--tail=60', '--prefix'])],
    ["podnet's controller log", await kubectl(['logs', '-n', 'podnet-system', '-l', 'app.kubernetes.io/name=podnet-controller', '--tail=60', '--prefix'])],
    ["podnet's install log", await kubectl(['logs', '-n', 'podnet-system', '-l', 'app.kubernetes.io/name=podnet', '-c', 'install', '--tail=20', '--prefix'])],
  ];
  for (const [what, text] of said) process.stderr.write(`--- ${what} on node ${name} (test failed) ---\n${text}\n`);
}

const nodePrefix = 'podnet-kubelet-node-';

/** The names on the machine that belong to the node whose folder is `root`. */
function nodeNames(root: string): { cgroupRoot: string; primaryBridge: string } {
  const id = root.slice(-6).toLowerCase().replace(/[^a-z0-9]/g, 'x');
  return { cgroupRoot: `/podnet-e2e-${id}`, primaryBridge: `pnnode${id}` };
}

/** The alias of the machine's end of a second node's underlay: its node's folder. */
const underlayAlias = (root: string) => `podnet-e2e:${root}`;

/**
 * A test process killed before its teardown (a runner's timeout) leaves its node: its processes
 * (shims and containers keep running), cgroups, bridge and folder. Whatever such a node left is
 * taken away at the next node's start.
 */
async function sweepCrashedNodes(): Promise<void> {
  for (const { path: root, alive } of await ownedTempFolders(nodePrefix)) {
    if (alive) continue;
    await removeNodeRemains(root);
    await rm(root, { recursive: true, force: true });
  }
}

/**
 * What a node leaves on the machine once its supervised processes are gone: shims and containers
 * outlive containerd (a shim is a session of its own, in a mount namespace of its own), so every
 * process in the node's cgroups or with its folders in its mounts goes; then its cgroups and its
 * bridge. Its folder stays for the caller (a teardown still reads its logs).
 */
async function removeNodeRemains(root: string): Promise<void> {
  const { cgroupRoot, primaryBridge } = nodeNames(root);
  await killNodeProcesses(root, cgroupRoot);
  await removeCgroups(cgroupRoot);
  // A second node's bridge is in its network namespace, gone with its processes.
  await execa('ip', ['link', 'del', primaryBridge], { reject: false });
  // Its underlay's end on the machine is not, if the node's namespace is still held by something.
  const shown = await execa('ip', ['-o', 'link', 'show', 'dev', underlay.device], { reject: false });
  if (shown.exitCode === 0 && shown.stdout.includes(`alias ${underlayAlias(root)}`)) await execa('ip', ['link', 'del', underlay.device], { reject: false });
}

/** Whether a node of another process runs on the machine now (its machine-wide traces are not ours to judge then). */
export async function otherNodeRunning(): Promise<boolean> {
  return (await ownedTempFolders(nodePrefix)).some((f) => f.alive && f.owner !== process.pid);
}

/**
 * What the nodes of a machine share on it: the machine's own values of the sysctls each kubelet
 * sets, and the folders nodes made to mount their own over. Kept in one file while any node runs,
 * whichever test process runs it, and put back by the last node to leave: a node that left first
 * would give the machine its sysctls back under a kubelet still running, or remove a folder another
 * node is mounted on (the kernel then takes that node's mount away). A file a crashed run left
 * keeps the machine's values, and the next last node puts them back.
 */
const machineShareFile = join(tmpdir(), 'podnet-e2e-nodes-machine.json');

interface MachineShare {
  sysctls: Record<string, string>;
  /** Outermost first. */
  mountPoints: string[];
}

/** At a node's start, before its kubelet: the machine's sysctl values, unless a node that runs (or one that crashed) took them first. */
async function shareMachine(): Promise<void> {
  const share: MachineShare = { sysctls: await kubeletSysctlValues(), mountPoints: [] };
  await writeFile(machineShareFile, JSON.stringify(share), { flag: 'wx', mode: 0o600 }).catch((error: NodeJS.ErrnoException) => {
    if (error.code !== 'EEXIST') throw error;
  });
}

async function readMachineShare(): Promise<MachineShare> {
  return JSON.parse(await readFile(machineShareFile, 'utf8')) as MachineShare;
}

/** mkdir -p whose folders made are the machine's share, for the last node to remove. */
async function mkdirShared(path: string): Promise<void> {
  const parts = path.split('/').filter(Boolean);
  for (let i = 1; i <= parts.length; i++) {
    const prefix = `/${parts.slice(0, i).join('/')}`;
    if (existsSync(prefix)) continue;
    await mkdir(prefix);
    const share = await readMachineShare();
    share.mountPoints.push(prefix);
    await writeFile(machineShareFile, JSON.stringify(share));
  }
}

/** At a node's stop, its processes gone: the machine put back, if no other node runs on it. */
async function leaveMachine(root: string): Promise<void> {
  if ((await ownedTempFolders(nodePrefix)).some((f) => f.alive && f.path !== root)) return;
  const share = await readMachineShare().catch(() => undefined);
  if (!share) return;
  for (const [key, value] of Object.entries(share.sysctls)) await writeFile(`/proc/sys/${key}`, value).catch(() => undefined);
  for (const path of share.mountPoints.toReversed()) await rmdir(path).catch(() => undefined);
  await rm(machineShareFile, { force: true });
}

async function startControllers(cluster: Cluster, binaries: NodeBinaries, root: string): Promise<Supervised[]> {
  const common = [`--kubeconfig=${cluster.kubeconfig('admin')}`, '--bind-address=127.0.0.1', '--leader-elect=false', '--profiling=false'];
  const manager = launch(
    'kube-controller-manager',
    binaries.kubeControllerManager,
    [
      ...common,
      `--secure-port=${await freePort()}`,
      `--service-account-private-key-file=${cluster.serviceAccountKeyFile}`,
      // Published to every namespace as kube-root-ca.crt: what pods' in-cluster clients trust.
      `--root-ca-file=${cluster.caFile}`,
      `--cert-dir=${join(root, 'controller-manager-pki')}`,
      // Its default is under /usr/libexec, which it would make on the machine.
      `--flex-volume-plugin-dir=${join(root, 'flex-volume-plugins')}`,
    ],
    join(root, 'kube-controller-manager.log'),
  );
  const scheduler = launch('kube-scheduler', binaries.kubeScheduler, [...common, `--secure-port=${await freePort()}`, `--cert-dir=${join(root, 'scheduler-pki')}`], join(root, 'kube-scheduler.log'));
  return [manager, scheduler];
}

/**
 * containerd's config for the node: its own root, state and socket, the test images' pause, the
 * node's CNI dirs, runc with cgroupfs. containerd 1.6 reads version 2 of the format, containerd 2
 * version 3, where the CRI plugin is split in an images and a runtime part.
 */
async function containerdConfig(root: string, runtime: NodeRuntime): Promise<string> {
  const dir = join(root, 'containerd');
  await mkdir(dir, { recursive: true });
  const file = join(dir, 'config.toml');
  const q = (s: string) => JSON.stringify(s);
  const [cri, criRuntime, criImages] =
    runtime === 'containerd-1.6' ? ['"io.containerd.grpc.v1.cri"', '"io.containerd.grpc.v1.cri"', '"io.containerd.grpc.v1.cri"'] : ['"io.containerd.grpc.v1.cri"', '"io.containerd.cri.v1.runtime"', '"io.containerd.cri.v1.images"'];
  const lines = [
    runtime === 'containerd-1.6' ? 'version = 2' : 'version = 3',
    `root = ${q(join(dir, 'root'))}`,
    `state = ${q(join(dir, 'state'))}`,
    // Snapshotters this machine lacks would only log errors.
    'disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]',
    '[grpc]',
    '  address = "/run/containerd/containerd.sock"',
    '[ttrpc]',
    '  address = "/run/containerd/containerd.sock.ttrpc"',
    `[plugins.${cri}]`,
    '  stream_server_address = "127.0.0.1"',
    '  stream_server_port = "0"',
    ...(runtime === 'containerd-1.6' ? [`  sandbox_image = ${q(pauseImage)}`] : [`[plugins.${criImages}.pinned_images]`, `  sandbox = ${q(pauseImage)}`]),
    ...(criRuntime === cri ? [] : [`[plugins.${criRuntime}]`]),
    // Processes here lack CAP_SYS_RESOURCE: runc cannot lower oom_score_adj below its own.
    '  restrict_oom_score_adj = true',
    '  disable_apparmor = true',
    `  [plugins.${criRuntime}.cni]`,
    runtime === 'containerd-1.6' ? `    bin_dir = ${q('/opt/cni/bin')}` : `    bin_dirs = [${q('/opt/cni/bin')}]`,
    `    conf_dir = ${q('/etc/cni/net.d')}`,
    `  [plugins.${criRuntime}.containerd]`,
    '    default_runtime_name = "runc"',
    `    [plugins.${criRuntime}.containerd.runtimes.runc]`,
    '      runtime_type = "io.containerd.runc.v2"',
    `      [plugins.${criRuntime}.containerd.runtimes.runc.options]`,
    `        BinaryName = ${q(runcBinary)}`,
    '        SystemdCgroup = false',
    '',
  ];
  await writeFile(file, lines.join('\n'));
  return file;
}

async function kubeletConfig(root: string, cgroupRoot: string, address: string): Promise<string> {
  const file = join(root, 'kubelet-config.yaml');
  await mkdir(join(root, 'pod-logs'), { recursive: true });
  await writeFile(
    file,
    stringify({
      apiVersion: 'kubelet.config.k8s.io/v1beta1',
      kind: 'KubeletConfiguration',
      containerRuntimeEndpoint: 'unix:///run/containerd/containerd.sock',
      address,
      port: await freePort(),
      readOnlyPort: 0,
      healthzPort: 0,
      // The apiserver reaches the kubelet (exec, logs) at its address with no client certificate.
      authentication: { anonymous: { enabled: true }, webhook: { enabled: false } },
      authorization: { mode: 'AlwaysAllow' },
      cgroupDriver: 'cgroupfs',
      cgroupRoot,
      failCgroupV1: false,
      failSwapOn: false,
      // Otherwise it adds KUBE-FIREWALL and canary chains to the machine's iptables.
      makeIPTablesUtilChains: false,
      podLogsDir: join(root, 'pod-logs'),
      volumePluginDir: join(root, 'volume-plugins'),
      // A shared machine's disk and memory are not this node's to guard: never evict.
      evictionHard: { 'memory.available': '1Mi', 'nodefs.available': '1%', 'imagefs.available': '1%', 'nodefs.inodesFree': '1%' },
      imageGCHighThresholdPercent: 100,
      imageGCLowThresholdPercent: 99,
      resolvConf: '/etc/resolv.conf',
      nodeStatusUpdateFrequency: '5s',
      syncFrequency: '10s',
    }),
  );
  return file;
}

/**
 * The pause and busybox images, from the machine's busybox-static: the same root, two commands.
 * The pause process only has to live and end on a signal.
 */
async function importTestImages(root: string, importImage: (tag: string) => Promise<void>): Promise<void> {
  const context = join(root, 'busybox-image');
  const bin = join(context, 'rootfs', 'bin');
  await mkdir(bin, { recursive: true });
  await copyFile('/bin/busybox', join(bin, 'busybox'));
  await chmod(join(bin, 'busybox'), 0o755);
  for (const applet of ['sh', 'sleep', 'ip', 'ping', 'cat', 'ls', 'echo', 'true']) await symlink('busybox', join(bin, applet));
  for (const [tag, cmd] of [
    [pauseImage, ['/bin/sh', '-c', 'trap "exit 0" TERM INT; while :; do sleep 3600 & wait; done']],
    [busyboxImage, ['/bin/sleep', '3600']],
  ] as const) {
    await writeFile(join(context, 'Containerfile'), `FROM scratch\nCOPY rootfs/ /\nCMD ${JSON.stringify(cmd)}\n`);
    await execa('podman', ['build', '--quiet', '--file', join(context, 'Containerfile'), '--tag', tag, context]);
    try {
      await importImage(tag);
    } finally {
      await execa('podman', ['rmi', '--force', tag], { reject: false });
    }
  }
}

/** Whether the kubelet gave up making its CSINode, which keeps its node NotReady until it starts again. */
function csiNodeGaveUp(node: V1Node | undefined): boolean {
  return node?.status?.conditions?.some((c) => c.type === 'Ready' && c.status !== 'True' && /failed to initialize CSINode/.test(c.message ?? '')) === true;
}

function isReady(node: V1Node | undefined): boolean {
  return node?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') === true;
}

/** Every pod bound to node `name` deleted, and gone. */
async function deletePodsOf(core: CoreV1Api, name: string): Promise<void> {
  const fieldSelector = `spec.nodeName=${name}`;
  const pods = (await core.listPodForAllNamespaces({ fieldSelector })).items;
  await Promise.all(pods.map((p) => core.deleteNamespacedPod({ name: p.metadata!.name!, namespace: p.metadata!.namespace!, gracePeriodSeconds: 0 }).catch(() => undefined)));
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline && (await core.listPodForAllNamespaces({ fieldSelector })).items.length > 0) await new Promise((r) => setTimeout(r, 500));
}

const cgroupBase = '/sys/fs/cgroup';

/** The cgroup v1 hierarchies (or the one v2 tree) this machine has. */
async function cgroupHierarchies(): Promise<string[]> {
  if (existsSync(join(cgroupBase, 'cgroup.controllers'))) return [cgroupBase];
  const entries = await readdir(cgroupBase, { withFileTypes: true });
  // Co-mounted controllers appear once as a folder and again as links (cpu -> cpu,cpuacct).
  return entries.filter((e) => e.isDirectory()).map((e) => join(cgroupBase, e.name));
}

/** The kubelet refuses a cgroup root that does not exist. */
async function makeCgroupRoot(cgroupRoot: string): Promise<void> {
  for (const hierarchy of await cgroupHierarchies()) await mkdir(join(hierarchy, cgroupRoot), { recursive: true }).catch(() => undefined);
}

async function cgroupTree(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true }).catch(() => []);
  const children = await Promise.all(entries.filter((e) => e.isDirectory()).map((e) => cgroupTree(join(dir, e.name))));
  return [...children.flat(), dir];
}

/**
 * Every process in the node's cgroups or that has one of the node's folders (under `root`)
 * mounted: the node's mount namespace and every one copied from it (a containerd shim makes its
 * own), and no other process's.
 */
export async function nodeProcesses(root: string, cgroupRoot: string): Promise<Set<number>> {
  const ownMountNs = await readlink('/proc/self/ns/mnt');
  const pids = new Set<number>();
  for (const hierarchy of await cgroupHierarchies()) {
    for (const dir of await cgroupTree(join(hierarchy, cgroupRoot))) {
      for (const line of (await readFile(join(dir, 'cgroup.procs'), 'utf8').catch(() => '')).split('\n')) if (line) pids.add(Number(line));
    }
  }
  for (const name of await readdir('/proc')) {
    const pid = Number(name);
    if (!pid || pids.has(pid)) continue;
    const mountNs = await readlink(`/proc/${pid}/ns/mnt`).catch(() => ownMountNs);
    if (mountNs === ownMountNs) continue;
    // A bind mount's root field is its source path: the node's folders are under root.
    const mounts = await readFile(`/proc/${pid}/mountinfo`, 'utf8').catch(() => '');
    if (mounts.includes(` ${root}/`)) pids.add(pid);
  }
  return pids;
}

/**
 * SIGKILL for every process of the node (nodeProcesses) but `spare`, until there is none or 30 s
 * went by (what is left then, the machine-left-as-found test names).
 */
async function killNodeProcesses(root: string, cgroupRoot: string, { spare = [] as number[] } = {}): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const pids = await nodeProcesses(root, cgroupRoot);
    for (const pid of spare) pids.delete(pid);
    if (pids.size === 0) return;
    for (const pid of pids) {
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        // Gone already.
      }
    }
    await thawCgroups(cgroupRoot);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * runc freezes a container's cgroup while it signals its processes (kill --all) and thaws it
 * after; a runc killed in between (a node switched off) leaves it frozen, and a frozen process
 * takes its SIGKILL only once thawed.
 */
async function thawCgroups(cgroupRoot: string): Promise<void> {
  for (const hierarchy of await cgroupHierarchies()) {
    for (const dir of await cgroupTree(join(hierarchy, cgroupRoot))) {
      // cgroup v1's freezer hierarchy, or v2's every folder but the root.
      for (const [file, thawed] of [['freezer.state', 'THAWED'], ['cgroup.freeze', '0']] as const) {
        if (existsSync(join(dir, file))) await writeFile(join(dir, file), thawed).catch(() => undefined);
      }
    }
  }
}

async function removeCgroups(cgroupRoot: string): Promise<void> {
  for (const hierarchy of await cgroupHierarchies()) for (const dir of await cgroupTree(join(hierarchy, cgroupRoot))) await rmdir(dir).catch(() => undefined);
}
