// podnet as the benchmarks run it: the daemon from the built executable in folders of the run's
// own, its socket read over HTTP, sandboxes recorded through the plugin as a runtime would, and
// the network namespaces and links of the run. Every command is an argv array.
import { execa, type ResultPromise } from 'execa';
import { spawnSync } from 'node:child_process';
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, realpathSync, renameSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { basename, dirname, join } from 'node:path';
import { podnetBinary as builtBinary } from '../../e2e/lib/env.ts';
import { releaseSecuredPorts } from '../../e2e/lib/daemon.ts';
import { now, onCleanup, until } from './harness.ts';

/** The state dirs whose secured ports are released at cleanup, each once. */
const released = new Set<string>();

/** dist/podnet (npm run build), or another build named by PODNET_BINARY. */
export const podnetBinary = process.env['PODNET_BINARY'] ?? builtBinary;

/** Where a daemon's log goes: the run's folder (removed at the end), or PNBENCH_LOG_DIR to keep it. */
export function daemonLogFile(work: string, name: string): string {
  const dir = process.env['PNBENCH_LOG_DIR'];
  if (dir) mkdirSync(dir, { recursive: true });
  return join(dir ?? work, name);
}

export interface DaemonPaths {
  socketPath: string;
  stateDir: string;
  /** Standalone mode when set. */
  configDir?: string;
}

export interface RunningDaemon {
  pid: number;
  /** Monotonic ms at spawn. */
  spawnedAt: number;
  logFile: string;
  /** Whether the process has exited. */
  exited(): boolean;
  /** Waits until /readyz answers 200; the monotonic ms it did. */
  ready(timeoutMs?: number): Promise<number>;
  /**
   * VmHWM and VmRSS of the daemon process, the anonymous and file-backed parts of VmRSS, and the
   * largest anonymous part seen by sampling every 20 ms since the spawn, in KiB.
   */
  memory(): { hwmKiB: number; rssKiB: number; anonKiB: number; fileKiB: number; anonPeakKiB: number; launcher?: { hwmKiB: number; anonPeakKiB: number } };
  /**
   * utime + stime of the daemon, and of its children: those it waited for, and those still
   * running with what they waited for (its launcher, ADR 22), in clock ticks (USER_HZ, 100);
   * `launcher`, the running children's own share of `children`.
   */
  cpuTicks(): { self: number; launcher: number; children: number };
  stop(signal?: 'SIGTERM' | 'SIGKILL'): Promise<void>;
}

const takesArgument = new Map<string, boolean>();
/** Whether `binary` takes Node options as a `--node-options=` argument (ADR 27): a build from before sees an unknown option. */
function takesNodeOptionsArgument(binary: string): boolean {
  let takes = takesArgument.get(binary);
  if (takes === undefined) {
    takes = spawnSync(binary, ['--node-options=', 'version'], { stdio: 'ignore' }).status === 0;
    takesArgument.set(binary, takes);
  }
  return takes;
}

/**
 * Starts `podnet daemon` (of `binary`, podnetBinary unless given); stderr (its JSON log) appends to
 * `logFile`. Stopped at cleanup. With `netns`, it runs in that named netns (`ip netns exec` execs
 * it: the pid is the daemon's still).
 */
export function startDaemon(paths: DaemonPaths, logFile: string, extra: readonly string[] = [], { netns, binary = podnetBinary }: { netns?: string; binary?: string } = {}): RunningDaemon {
  // PNBENCH_DAEMON_NODE_OPTIONS: the daemon's own Node options, not the bench's (--cpu-prof, written
  // when a daemon stops by SIGTERM; --heapsnapshot-signal=SIGUSR2): on its command line (ADR 27),
  // or for a build from before, which took them from NODE_OPTIONS alone, there.
  const nodeOptions = process.env['PNBENCH_DAEMON_NODE_OPTIONS'] ?? '';
  const onCommandLine = takesNodeOptionsArgument(binary);
  const args = [...(onCommandLine && nodeOptions ? [`--node-options=${nodeOptions}`] : []), 'daemon', '--socket', paths.socketPath, '--state-dir', paths.stateDir];
  if (paths.configDir) args.push('--config-dir', paths.configDir);
  const spawnedAt = now();
  const [file, argv] = netns ? ['ip', ['netns', 'exec', netns, binary, ...args, ...extra]] : [binary, [...args, ...extra]];
  const proc: ResultPromise = execa(file, argv, {
    reject: false,
    stdin: 'ignore',
    stdout: 'ignore',
    stderr: { file: logFile, append: true },
    ...(onCommandLine ? {} : { env: { NODE_OPTIONS: nodeOptions } }),
  });
  const pid = proc.pid;
  if (pid === undefined) throw new Error(`could not start ${binary}`);
  let done = false;
  void proc.finally(() => (done = true));

  const stop = async (signal: 'SIGTERM' | 'SIGKILL' = 'SIGTERM') => {
    if (done) return;
    proc.kill(signal);
    const timer = setTimeout(() => proc.kill('SIGKILL'), 10_000);
    await proc.catch(() => undefined);
    clearTimeout(timer);
  };
  // Its ports' entries in the host's port security table, once it is stopped (the host's only: a
  // daemon in a netns of its own took its table with it). Else every run left them behind.
  if (!netns && !released.has(paths.stateDir)) {
    released.add(paths.stateDir);
    onCleanup(`release the ports of ${paths.stateDir}`, () => releaseSecuredPorts(paths.stateDir));
  }
  onCleanup(`stop daemon ${pid}`, () => stop('SIGTERM'));

  const status = (of = pid) => readFileSync(`/proc/${of}/status`, 'utf8');
  const kib = (text: string, field: string) => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text)?.[1] ?? NaN);
  // The daemon's launcher: its child with PODNET_LAUNCHER=1 in its environment, once it has one.
  let launcherPid: number | undefined;
  const launcher = () => {
    if (launcherPid !== undefined && existsSync(`/proc/${launcherPid}`)) return launcherPid;
    launcherPid = childrenOf(pid).find((child) => {
      try {
        return readFileSync(`/proc/${child}/environ`, 'utf8').split('\0').includes('PODNET_LAUNCHER=1');
      } catch {
        return false;
      }
    });
    return launcherPid;
  };
  let launcherAnonPeakKiB = 0;
  // VmHWM counts the executable's own file-backed pages too; the kernel keeps no peak of the
  // anonymous part (heap, buffers), so it is sampled.
  let anonPeakKiB = 0;
  const sampler = setInterval(() => {
    try {
      anonPeakKiB = Math.max(anonPeakKiB, kib(status(), 'RssAnon'));
    } catch {
      clearInterval(sampler); // the process is gone
      return;
    }
    const l = launcher();
    if (l !== undefined) launcherAnonPeakKiB = Math.max(launcherAnonPeakKiB, kib(status(l), 'RssAnon') || 0);
  }, 20);
  sampler.unref();
  void proc.finally(() => clearInterval(sampler));
  return {
    pid,
    spawnedAt,
    logFile,
    exited: () => done,
    async ready(timeoutMs = 30_000) {
      return until(
        `daemon ${pid} ready on ${paths.socketPath}`,
        async () => {
          if (done) throw new Error(`the daemon exited before it was ready; its log: ${logFile}\n${readFileSync(logFile, 'utf8').slice(-2000)}`);
          const r = await getJson(paths.socketPath, '/readyz', 1000).catch(() => undefined);
          return r?.status === 200 ? now() : undefined;
        },
        timeoutMs,
        5,
      ).then((at) => {
        // The pid is the daemon itself: the executable runs the CLI in its own process, no wrapper.
        const exe = realpathSync(`/proc/${pid}/exe`);
        if (exe !== realpathSync(binary)) throw new Error(`pid ${pid} runs ${exe}, not ${binary}`);
        return at;
      });
    },
    memory() {
      const text = status();
      const anonKiB = kib(text, 'RssAnon');
      anonPeakKiB = Math.max(anonPeakKiB, anonKiB);
      const l = launcher();
      const launcherText = l === undefined ? undefined : status(l);
      if (launcherText) launcherAnonPeakKiB = Math.max(launcherAnonPeakKiB, kib(launcherText, 'RssAnon'));
      return {
        hwmKiB: kib(text, 'VmHWM'),
        rssKiB: kib(text, 'VmRSS'),
        anonKiB,
        fileKiB: kib(text, 'RssFile'),
        anonPeakKiB,
        ...(launcherText ? { launcher: { hwmKiB: kib(launcherText, 'VmHWM'), anonPeakKiB: launcherAnonPeakKiB } } : {}),
      };
    },
    cpuTicks() {
      const own = cpuOf(pid);
      const running = childrenOf(pid).map(cpuOf);
      const launcher = running.reduce((sum, c) => sum + c.self, 0);
      return { self: own.self, launcher, children: own.children + launcher + running.reduce((sum, c) => sum + c.children, 0) };
    },
    stop,
  };
}

/** The pids of `pid`'s children, from each of its threads. */
function childrenOf(pid: number): number[] {
  try {
    return readdirSync(`/proc/${pid}/task`).flatMap((task) => readFileSync(`/proc/${pid}/task/${task}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number));
  } catch {
    return [];
  }
}

/** utime + stime of `pid`, and of the children it waited for, in clock ticks; zero once it is gone. */
function cpuOf(pid: number): { self: number; children: number } {
  try {
    // Fields after the command's closing parenthesis: utime is the 14th field of the line.
    const line = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = line.slice(line.lastIndexOf(') ') + 2).split(' ');
    const at = (n: number) => Number(fields[n - 3]);
    return { self: at(14) + at(15), children: at(16) + at(17) };
  } catch {
    return { self: 0, children: 0 };
  }
}

/** One GET over the daemon's unix socket; the parsed JSON body. */
export function getJson(socketPath: string, path: string, timeoutMs = 5000): Promise<{ status: number; body: unknown }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath, path, method: 'GET', agent: false, timeout: timeoutMs, headers: { host: 'podnet', connection: 'close' } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        try {
          resolve({ status: res.statusCode ?? 0, body: text === '' ? undefined : JSON.parse(text) });
        } catch (err) {
          reject(err as Error);
        }
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${path} timed out`)));
    req.on('error', reject);
    req.end();
  });
}

/** What the daemon reports of a sandbox (GET /v1/sandboxes, what `podnet explain` shows). */
export interface SandboxReport {
  containerId: string;
  namespace: string;
  name: string;
  netns: string;
  desired: { attachments: { interface: string; hostIf: string; addresses: string[] }[]; tuning: { interface: string }[] };
  applied?: { attachments: { interface: string; hostIf?: string; addresses: string[] }[]; tuning: { interface: string; original: Record<string, unknown> }[] };
  problems: { document: string; field: string; reason: string }[];
  lastSteps: unknown[];
  lastError?: string;
}

export interface SandboxList {
  documentProblems: { document: string; field: string; reason: string }[];
  items: SandboxReport[];
}

export async function sandboxes(socketPath: string): Promise<SandboxList> {
  const r = await getJson(socketPath, '/v1/sandboxes', 10_000);
  if (r.status !== 200) throw new Error(`GET /v1/sandboxes answered ${r.status}: ${JSON.stringify(r.body)}`);
  return r.body as SandboxList;
}

/** The bridge ports of the attachments the daemon made (GET /v1/status): a few hundred bytes, whatever the sandboxes. */
export interface DaemonPorts {
  secured: number;
  open: number;
}

export async function portsOf(socketPath: string): Promise<DaemonPorts> {
  const r = await getJson(socketPath, '/v1/status', 10_000);
  const ports = (r.body as { ports?: DaemonPorts } | undefined)?.ports;
  if (r.status !== 200 || !ports) throw new Error(`GET /v1/status answered ${r.status} without ports: ${JSON.stringify(r.body)}`);
  return ports;
}

export interface PodIdentity {
  netns: string;
  containerId: string;
  namespace: string;
  name: string;
}

/** A CNI ADD of the podnet plugin in a chain after a primary plugin, as the runtime runs it. */
export async function recordSandbox(paths: DaemonPaths, pod: PodIdentity): Promise<void> {
  const config = {
    cniVersion: '1.0.0',
    name: 'pnbench',
    type: 'podnet',
    socketPath: paths.socketPath,
    stateDir: paths.stateDir,
    timeoutMs: 1000,
    prevResult: { cniVersion: '1.0.0', interfaces: [{ name: 'eth0', sandbox: pod.netns }], ips: [] },
  };
  const r = await execa(podnetBinary, [], {
    env: {
      CNI_COMMAND: 'ADD',
      CNI_CONTAINERID: pod.containerId,
      CNI_NETNS: pod.netns,
      CNI_IFNAME: 'eth0',
      CNI_PATH: dirname(podnetBinary),
      CNI_ARGS: `IgnoreUnknown=1;K8S_POD_NAMESPACE=${pod.namespace};K8S_POD_NAME=${pod.name}`,
    },
    extendEnv: false,
    input: JSON.stringify(config),
    reject: false,
  });
  if (r.exitCode !== 0) throw new Error(`podnet ADD for ${pod.name} failed (${r.exitCode}): ${r.stdout}${r.stderr}`);
}

/** Makes the named netns in one `ip -batch`; each is deleted at cleanup, in one batch too. */
export async function makeNetns(names: readonly string[]): Promise<void> {
  onCleanup(`delete ${names.length} netns`, () => ipBatch(names.map((n) => `netns del ${n}`), true));
  await ipBatch(names.map((n) => `netns add ${n}`));
}

/** Host links, deleted at cleanup when they still exist. */
export function deleteLinksAtCleanup(what: string, names: () => readonly string[]): void {
  onCleanup(what, async () => {
    const present = new Set(await hostLinkNames());
    const lines = names().filter((n) => present.has(n)).map((n) => `link del ${n}`);
    if (lines.length > 0) await ipBatch(lines, true);
  });
}

/** `ip -batch -`; with `force`, ip goes on past failing lines (-force). */
export async function ipBatch(lines: readonly string[], force = false): Promise<void> {
  if (lines.length === 0) return;
  const r = await execa('ip', [...(force ? ['-force'] : []), '-batch', '-'], { input: `${lines.join('\n')}\n`, reject: false });
  if (r.exitCode !== 0 && !force) throw new Error(`ip -batch failed: ${r.stderr}`);
}

export async function hostLinkNames(): Promise<string[]> {
  const { stdout } = await execa('ip', ['-json', 'link', 'show']);
  return (JSON.parse(stdout) as { ifname: string }[]).map((l) => l.ifname);
}

export interface LinkState {
  ifname: string;
  flags: string[];
  mtu: number;
  txqlen?: number;
  addr_info?: { family: string; local: string; prefixlen: number }[];
}

/** Every link of a netns with its addresses (`ip -n NAME -json addr show`). */
export async function linksIn(netnsName: string): Promise<LinkState[]> {
  const { stdout } = await execa('ip', ['-n', netnsName, '-json', 'addr', 'show']);
  return JSON.parse(stdout) as LinkState[];
}

export const isUp = (l: LinkState | undefined): boolean => !!l && l.flags.includes('UP') && l.flags.includes('LOWER_UP') && !l.flags.includes('NO-CARRIER');

export const ipv4Of = (l: LinkState | undefined): string[] => (l?.addr_info ?? []).filter((a) => a.family === 'inet').map((a) => `${a.local}/${a.prefixlen}`);

/**
 * Writes a file as `podnet apply` does, minus the timing: the content goes to a dot-file (which the
 * daemon ignores) and is fsynced first; `land()` is then the rename alone, the moment the daemon's
 * directory watch sees the document. The directory is not fsynced: the daemon does not wait on it.
 */
export function prepareFile(path: string, content: string): { land: () => void } {
  const temp = join(dirname(path), `.tmp-pnbench-${basename(path)}`);
  const fd = openSync(temp, 'w', 0o600);
  try {
    writeFileSync(fd, content);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  return { land: () => renameSync(temp, path) };
}
