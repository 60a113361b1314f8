// The daemon's side of its launcher (ADR 22): the tools a pass runs are started by a small child
// process instead of by the daemon. Node forks the whole daemon for each process it starts and
// waits for the child's exec: with the daemon's 80 to 100 MiB of memory that cost 5 to 6 ms of CPU
// a process (the kernel copies and then tears down its page tables), against 2 from a small
// process, and a pass of 500 sandboxes starts some 1,600 of them (bench/resync). The launcher is
// the same executable (PODNET_LAUNCHER=1 in its environment), started at the first tool and spoken
// to over an IPC channel only the two of them hold. A launcher that ends fails what it had under
// way (the executor then takes back the whole pass: which of its steps ran is not known), and the
// next start makes a new one.
import { spawn, type ChildProcess } from 'node:child_process';
import { isSea } from 'node:sea';
import type { ProcessExit, ProcessOptions, StartedProcess } from '../process.ts';
import type { LauncherAnswer, LauncherRequest } from './protocol.ts';

/** What a launcher starts: a tool with its whole environment and bounded output; nothing of a PID namespace or process group. */
export type LaunchOptions = Pick<ProcessOptions, 'maxStdoutBytes' | 'maxStderrBytes'> & { env: Readonly<Record<string, string>> };

export interface Launcher {
  /** As startProcess: `exited` rejects when the tool could not start, or when the launcher ended first. */
  start(file: string, args: readonly string[], options: LaunchOptions): StartedProcess;
  /** Lets the launcher go; what it had under way fails. */
  close(): void;
}

interface Waiting {
  launcher: ChildProcess;
  resolve(exit: ProcessExit): void;
  reject(err: Error): void;
}

/** A launcher run as `command` (the executable, and its script when run from the source tree), started at its first use. */
export function launcher(command: readonly [string, ...string[]]): Launcher {
  let child: ChildProcess | undefined;
  let nextId = 1;
  const waiting = new Map<number, Waiting>();
  // The channel keeps the daemon's event loop alive only while a process held (hold) is under way.
  let held = 0;
  const refresh = () => {
    if (!child) return;
    if (held > 0) {
      child.ref();
      child.channel?.ref();
    } else {
      child.unref();
      child.channel?.unref();
    }
  };

  const endOf = (ended: ChildProcess, why: string) => {
    if (child === ended) child = undefined;
    for (const [id, w] of waiting) {
      if (w.launcher !== ended) continue;
      waiting.delete(id);
      w.reject(new Error(`podnet's launcher ${why} before the process it started ended`));
    }
  };

  const running = (): ChildProcess => {
    if (child?.connected) return child;
    const [file, ...args] = command;
    const started = spawn(file, args, { stdio: ['ignore', 'ignore', 'inherit', 'ipc'], env: { ...process.env, PODNET_LAUNCHER: '1' } });
    started.on('message', (answer: LauncherAnswer) => {
      const w = waiting.get(answer.id);
      if (!w) return;
      waiting.delete(answer.id);
      if ('exit' in answer) w.resolve(answer.exit);
      else w.reject(new Error(answer.failed));
    });
    // Once its channel has closed too: an answer sent just before it ended is read first.
    started.on('close', (code, signal) => endOf(started, `ended (${signal ?? `exit status ${code}`})`));
    started.on('error', (err) => endOf(started, `failed (${err.message})`));
    child = started;
    refresh();
    return started;
  };

  const post = (to: ChildProcess, request: LauncherRequest) => {
    if (!to.connected) return;
    to.send(request, (err) => {
      if (!err) return;
      endOf(to, `could not be reached (${err.message})`);
      // Not left behind: the next start makes a new one.
      to.kill('SIGKILL');
    });
  };

  return {
    start(file, args, options) {
      const id = nextId++;
      const to = running();
      let done = false;
      let isHeld = true;
      held++;
      refresh();
      const hold = (h: boolean) => {
        if (done || h === isHeld) return;
        isHeld = h;
        held += h ? 1 : -1;
        refresh();
      };
      const exited = new Promise<ProcessExit>((resolve, reject) => waiting.set(id, { launcher: to, resolve, reject }));
      const release = () => {
        hold(false);
        done = true;
      };
      exited.then(release, release);
      post(to, { op: 'start', id, file, args, env: options.env, maxStdoutBytes: options.maxStdoutBytes, maxStderrBytes: options.maxStderrBytes });
      return {
        feed: (input) => post(to, { op: 'feed', id, input }),
        exited,
        hold,
        running: () => !done,
        kill: () => post(to, { op: 'kill', id }),
      };
    },
    close() {
      const ending = child;
      if (!ending) return;
      endOf(ending, 'was closed');
      if (ending.connected) ending.disconnect();
    },
  };
}

/**
 * The launcher's own Node options, after the executable's (so these win), on its command line:
 * the one place the executable takes options from at run time (ADR 27). Its heap holds little
 * that lives: a young generation of 1 MiB a half, and one V8 worker thread instead of one per
 * core, took its peak from 29 MiB of anonymous memory to 24 in bench/resync at 500 sandboxes, at
 * the same CPU. Neither is a flag V8 checks a code cache against: the main script keeps its cache.
 */
const launcherNodeOptions = ['--max-semi-space-size=1', '--v8-pool-size=1'];

/** The command of the executable's launcher, run as `executable` (see executableLauncher). */
export function launcherCommand(executable: string): [string, ...string[]] {
  return [executable, `--node-options=${launcherNodeOptions.join(' ')}`];
}

/**
 * The launcher of the installed executable: itself, with PODNET_LAUNCHER=1, as /proc/self/exe
 * names it, the file this process runs even after a new build or install has been renamed over
 * its path (the launcher and the daemon are one build). None when podnet runs from the source
 * tree (node bin/podnet.ts): the tools are then started by the daemon itself.
 */
export function executableLauncher(): Launcher | undefined {
  return isSea() ? launcher(launcherCommand('/proc/self/exe')) : undefined;
}
