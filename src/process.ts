// Finding an executable and running it: argv arrays only (never a shell), output collected up to
// a bound. Shared by the netns runner (ip, tc, nsenter: hundreds of processes a pass) and the
// delegate's plugin runner (CNI plugins: env, stdin, a PID namespace or process group of their
// own, a time limit; ADR 14). node:child_process directly: a pass runs hundreds of these, and a
// wrapper's own cost per process adds up.
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import type { Readable } from 'node:stream';
import { PodnetError } from './errors.ts';

/** The first `dir/name` of `dirs` that is an executable file (not a directory named so). */
export function findExecutable(name: string, dirs: readonly string[]): string | undefined {
  return dirs.map((dir) => join(dir, name)).find(isExecutable);
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

/** util-linux's unshare, once probePidNamespaces has seen it make PID and mount namespaces here. */
export interface PidNamespaces {
  readonly unshare: string;
  /**
   * util-linux's setpriv from unshare's folder, which starts unshare with a parent-death signal
   * (setprivOptions), once the probe has seen it do so. Absent where there is none, or one that
   * cannot: unshare is then started directly, as before, and outlives a daemon killed outright.
   */
  readonly setpriv?: string;
}

export interface ProcessOptions {
  /** Its whole environment; the daemon's own when left out. */
  env?: Readonly<Record<string, string>>;
  /**
   * A process group of its own, led by it: kill() then reaches what it started too, and what is
   * left of the group when it exits is killed (for a one-shot). A process that leaves the group
   * (setsid) escapes both.
   */
  ownGroup?: boolean;
  /**
   * A PID namespace of its own, where it is pid 1 and has a /proc of that namespace: whatever it
   * started, in any session or group, ends when it does, however it does (the kernel's rule).
   */
  pidNamespace?: PidNamespaces;
  /** Bytes of stdout kept; what comes after is read and dropped, so that the process is not stalled on a full pipe. */
  maxStdoutBytes: number;
  /** Bytes of stderr kept, the same way. */
  maxStderrBytes: number;
}

export interface ProcessExit {
  /** Its exit status; null when a signal ended it. */
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Decoded whole: a chunk may end inside a character. */
  stdout: string;
  stderr: string;
  /** Whether it printed more than the bound and `stdout` holds only the start. */
  stdoutCut: boolean;
  stderrCut: boolean;
}

export interface StartedProcess {
  /** Writes its whole input and closes its stdin. Call once. */
  feed(input: string): void;
  /**
   * Resolves once it has exited, however it did; rejects only when it could not start (exec
   * failed; in a PID namespace, a PodnetError NOT_AVAILABLE with unshare's reason).
   */
  exited: Promise<ProcessExit>;
  /** Whether the process keeps the event loop alive: a process started ahead of its use should not. Held at start. */
  hold(held: boolean): void;
  /** Whether it started and has not exited yet. */
  running(): boolean;
  /**
   * SIGKILL to it (to its group, with ownGroup; to its whole PID namespace, with pidNamespace), for
   * a time limit. `exited` then comes when it has exited, not when its pipes close: one that a
   * grandchild holds would keep it waiting.
   */
  kill(): void;
}

/**
 * Starts `file` with `args`, a pipe on stdin, stdout and stderr. `file` is run as given: a bare
 * name is searched on PATH by spawn on every start, so callers pass a path (findExecutable).
 * Throws what spawn throws outright (an argument it refuses); an exec that fails rejects `exited`.
 */
export function startProcess(file: string, args: readonly string[], options: ProcessOptions): StartedProcess {
  const [command, argv] = options.pidNamespace ? inPidNamespace(options.pidNamespace, file, args) : [file, args];
  const child: ChildProcess = spawn(command, argv, { env: options.env, stdio: ['pipe', 'pipe', 'pipe'], detached: options.ownGroup ?? false });
  // The pipes are null when spawn gave up before making them (EMFILE): `exited` rejects then.
  const { stdin, stdout, stderr } = child;
  // A child that exits before reading all of its input (ip stops at a failed line) closes the pipe.
  stdin?.on('error', () => undefined);
  // What it left in its group is ended with it; `exited` then need not wait for those holding its pipes.
  if (options.ownGroup) child.on('exit', () => killGroup(child));
  const exited = new Promise<ProcessExit>((resolve, reject) => {
    const out = collect(stdout, options.maxStdoutBytes);
    const err = collect(stderr, options.maxStderrBytes);
    // An error once it runs is a failed kill; its exit still comes, and says what happened.
    child.on('error', (e) => {
      if (child.pid === undefined) reject(e);
    });
    child.on('close', (code, signal) => {
      const exit = { code, signal, stdout: out.text(), stderr: err.text(), stdoutCut: out.cut(), stderrCut: err.cut() };
      const failed = options.pidNamespace ? wrapperFailure(exit) : undefined;
      if (failed !== undefined) reject(new PodnetError('NOT_AVAILABLE', failed));
      else resolve(exit);
    });
  });
  const handles = [child, stdin, stdout, stderr].filter((h) => h !== null) as unknown as { ref(): void; unref(): void }[];
  return {
    feed: (input) => stdin?.end(input),
    exited,
    hold: (held) => handles.forEach((h) => (held ? h.ref() : h.unref())),
    running: () => child.pid !== undefined && child.exitCode === null && child.signalCode === null,
    kill() {
      // In a PID namespace, unshare's death is enough: --kill-child then kills its pid 1, and the kernel the rest.
      // With setpriv in front, its pid is unshare's (setpriv execs unshare), and its group too.
      if (options.ownGroup) killGroup(child);
      else child.kill('SIGKILL');
      stdout?.destroy();
      stderr?.destroy();
    },
  };
}

/** SIGKILL to the group `child` leads, whatever of it is left. */
function killGroup(child: ChildProcess): void {
  if (child.pid === undefined) return;
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    // The group is gone already.
  }
}

/**
 * How unshare runs a process in a PID namespace of its own:
 *  - --pid --fork: the process is pid 1 of a new PID namespace. When pid 1 exits, however it does,
 *    the kernel kills every other process there, and no process can leave a PID namespace: setsid,
 *    double forks and orphans reparented stay inside.
 *  - --kill-child: unshare, its parent outside, dying (killed) takes pid 1 with it, also when pid 1
 *    left unshare's process group.
 *  - --mount-proc: a /proc of that namespace, so that a process finds itself there. Go's CNI plugins
 *    open /proc/<getpid()>/task/<gettid()>/ns/net, which the node's /proc would resolve to another
 *    process (pid 1 is the node's init there). It needs a mount namespace of its own, made private
 *    (spelled out, though unshare's default): nothing mounted inside reaches the node.
 */
const unshareOptions = ['--pid', '--fork', '--kill-child', '--propagation', 'private', '--mount-proc'];

/**
 * How setpriv starts unshare: --pdeathsig KILL (PR_SET_PDEATHSIG, kept across its exec of
 * unshare), so that unshare is killed when the daemon dies, also of a SIGKILL or a crash that no
 * handler of the daemon's sees; --kill-child then takes the namespace with it. Without it, a
 * daemon killed outright left unshare and the whole namespace running, reparented to init.
 * The kernel sends the signal when the *thread* that forked exits, not the process: libuv forks
 * in uv_spawn, on the thread that calls spawn, which is the daemon's main thread (it starts no
 * workers); a process started from a worker_thread would be killed when that worker ends.
 * A daemon that dies between the fork and setpriv's prctl (well under a millisecond) still leaves
 * that one run behind: setpriv does not check that its parent is still there.
 */
const setprivOptions = ['--pdeathsig', 'KILL'];

/** The command and argv that start `file` with `args` in a PID namespace of its own, under setpriv where there is one. */
function inPidNamespace(namespaces: PidNamespaces, file: string, args: readonly string[]): [string, string[]] {
  const unshare = [namespaces.unshare, ...unshareOptions, '--', file, ...args];
  return namespaces.setpriv === undefined ? [unshare[0]!, unshare.slice(1)] : [namespaces.setpriv, [...setprivOptions, '--', ...unshare]];
}

/**
 * The failure of unshare, or of setpriv in front of it, when it is one: unshare could not make the
 * namespaces (no CAP_SYS_ADMIN, a namespace limit reached) or exec the file, or setpriv could not
 * set the signal or exec unshare. Their messages start with their name and they print nothing on
 * stdout; the file never ran then.
 */
function wrapperFailure(exit: ProcessExit): string | undefined {
  if (exit.code === 0 || exit.signal !== null || exit.stdout !== '') return undefined;
  const prefix = ['unshare: ', 'setpriv: '].find((p) => exit.stderr.startsWith(p));
  return prefix === undefined ? undefined : exit.stderr.split('\n')[0]!.slice(prefix.length);
}

/** One probe per unshare path for the process's life; a probe that could not start is not kept. */
const probes = new Map<string, Promise<PidNamespaces | string>>();

/**
 * Whether `unshare` gives a process PID and mount namespaces of its own here (it needs
 * CAP_SYS_ADMIN): the PidNamespaces for startProcess, or unshare's reason why not. Rejects only
 * when unshare could not be started at all (EMFILE), which the next call asks again. The setpriv
 * of unshare's folder (util-linux ships both) is probed in front of it too; see runProbe.
 */
export function probePidNamespaces(unshare: string): Promise<PidNamespaces | string> {
  let probe = probes.get(unshare);
  if (probe === undefined) {
    probe = runProbe(unshare);
    probes.set(unshare, probe);
    probe.catch(() => probes.delete(unshare));
  }
  return probe;
}

/**
 * Here the code decides on setpriv: found in unshare's folder and seen starting unshare with the
 * parent-death signal, it is used; missing, or failing (one older than util-linux 2.33 has no
 * --pdeathsig), unshare is started directly, as before setpriv was used, and a daemon killed
 * outright leaves unshare and its namespace running.
 */
async function runProbe(unshare: string): Promise<PidNamespaces | string> {
  const setpriv = findExecutable('setpriv', [dirname(unshare)]);
  if (setpriv !== undefined) {
    const probe = await probeOnce({ unshare, setpriv });
    if (typeof probe === 'object') return probe;
  }
  return probeOnce({ unshare });
}

async function probeOnce(namespaces: PidNamespaces): Promise<PidNamespaces | string> {
  // unshare itself as the process inside: the probe needs no other program.
  const started = startProcess(namespaces.unshare, ['--version'], { pidNamespace: namespaces, maxStdoutBytes: 4096, maxStderrBytes: 4096 });
  started.feed('');
  try {
    const { code, signal } = await started.exited;
    return code === 0 ? namespaces : `${namespaces.setpriv ?? namespaces.unshare} ended with ${signal ?? `exit status ${code}`}`;
  } catch (err) {
    if (err instanceof PodnetError) return err.message;
    throw err;
  }
}

/** Keeps the first `max` bytes a stream gives. */
function collect(stream: Readable | null, max: number): { text(): string; cut(): boolean } {
  const chunks: Buffer[] = [];
  let kept = 0;
  let cut = false;
  stream?.on('data', (chunk: Buffer) => {
    if (kept + chunk.length <= max) {
      chunks.push(chunk);
      kept += chunk.length;
    } else {
      if (kept < max) chunks.push(chunk.subarray(0, max - kept));
      kept = max;
      cut = true;
    }
  });
  return { text: () => Buffer.concat(chunks).toString('utf8'), cut: () => cut };
}
