// Finding an executable and running it: argv arrays only (never a shell), output collected up to
// a bound. Shared by the netns runner (ip, tc, nsenter: hundreds of processes a pass) and the
// delegate's plugin runner (CNI plugins: env, stdin, their own process group, a time limit).
// node:child_process directly: a pass runs hundreds of these, and a wrapper's own cost per
// process adds up.
import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants, statSync } from 'node:fs';
import { join } from 'node:path';
import type { Readable } from 'node:stream';

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

export interface ProcessOptions {
  /** Its whole environment; the daemon's own when left out. */
  env?: Readonly<Record<string, string>>;
  /** A process group of its own, led by it: kill() then reaches what it started too. */
  ownGroup?: boolean;
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
  /** Resolves once it has exited, however it did; rejects only when it could not start (exec failed). */
  exited: Promise<ProcessExit>;
  /** Whether the process keeps the event loop alive: a process started ahead of its use should not. Held at start. */
  hold(held: boolean): void;
  /** Whether it started and has not exited yet. */
  running(): boolean;
  /**
   * SIGKILL to it (to its group, with ownGroup), for a time limit. `exited` then comes when it has
   * exited, not when its pipes close: one that a grandchild holds would keep it waiting.
   */
  kill(): void;
}

/**
 * Starts `file` with `args`, a pipe on stdin, stdout and stderr. `file` is run as given: a bare
 * name is searched on PATH by spawn on every start, so callers pass a path (findExecutable).
 * Throws what spawn throws outright (an argument it refuses); an exec that fails rejects `exited`.
 */
export function startProcess(file: string, args: readonly string[], options: ProcessOptions): StartedProcess {
  const child: ChildProcess = spawn(file, args, { env: options.env, stdio: ['pipe', 'pipe', 'pipe'], detached: options.ownGroup ?? false });
  // The pipes are null when spawn gave up before making them (EMFILE): `exited` rejects then.
  const { stdin, stdout, stderr } = child;
  // A child that exits before reading all of its input (ip stops at a failed line) closes the pipe.
  stdin?.on('error', () => undefined);
  const exited = new Promise<ProcessExit>((resolve, reject) => {
    const out = collect(stdout, options.maxStdoutBytes);
    const err = collect(stderr, options.maxStderrBytes);
    // An error once it runs is a failed kill; its exit still comes, and says what happened.
    child.on('error', (e) => {
      if (child.pid === undefined) reject(e);
    });
    child.on('close', (code, signal) =>
      resolve({ code, signal, stdout: out.text(), stderr: err.text(), stdoutCut: out.cut(), stderrCut: err.cut() }),
    );
  });
  const handles = [child, stdin, stdout, stderr].filter((h) => h !== null) as unknown as { ref(): void; unref(): void }[];
  return {
    feed: (input) => stdin?.end(input),
    exited,
    hold: (held) => handles.forEach((h) => (held ? h.ref() : h.unref())),
    running: () => child.pid !== undefined && child.exitCode === null && child.signalCode === null,
    kill() {
      if (options.ownGroup && child.pid !== undefined) {
        try {
          process.kill(-child.pid, 'SIGKILL');
        } catch {
          // The group is gone already.
        }
      } else {
        child.kill('SIGKILL');
      }
      stdout?.destroy();
      stderr?.destroy();
    },
  };
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
