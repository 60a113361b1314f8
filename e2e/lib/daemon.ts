// The node daemon as a real process of the built executable, in folders of the test's own.
import { execa, type ResultPromise } from 'execa';
import { dir } from 'tmp-promise';
import { mkdir, readdir, readFile, symlink } from 'node:fs/promises';
import type { Test } from 'tap';
import { callDaemon } from '../../src/protocol/client.ts';
import { routes, stateLayout } from '../../src/protocol/paths.ts';
import { parseDocument, type AttachmentRecord } from '../../src/protocol/validate.ts';
import { podnetBinary } from './env.ts';
import { stopBeforeCleanup } from './netns.ts';
import { releasePortLine } from '../../src/model/port-security.ts';
import type { AppliedState } from '../../src/model/state.ts';

export interface DaemonSandbox {
  /** Holds state/, run/podnet.sock and bin/podnet (a link to the built executable). */
  root: string;
  stateDir: string;
  socketPath: string;
  binDir: string;
  /** Standalone documents folder, followed when the sandbox was made with `standalone`. */
  configDir: string;
  /** Starts the daemon and waits until it answers /readyz. */
  start(): Promise<void>;
  /** SIGTERM, and wait for the exit. */
  stop(): Promise<void>;
  /** SIGKILL, and wait for the exit. */
  kill(): Promise<void>;
  records(): Promise<AttachmentRecord[]>;
  /** What the daemon has written to stderr (its JSON log lines) since the sandbox was made, over every start. */
  log(): string;
  /** The plugin config keys that point podnet at this sandbox. */
  pluginSettings(): { socketPath: string; stateDir: string; timeoutMs: number };
}

/**
 * standalone: follow a config dir, with a resync every `resyncSeconds` (1); netns: run the daemon
 * inside that netns file, which is then its host (a test's stand-in for a second node); args: more
 * daemon options.
 */
export async function daemonSandbox(t: Test, options: { standalone?: boolean; resyncSeconds?: number; netns?: string; args?: string[] } = {}): Promise<DaemonSandbox> {
  const tmp = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-' });
  const root = tmp.path;
  const stateDir = `${root}/state`;
  const socketPath = `${root}/run/podnet.sock`;
  const binDir = `${root}/bin`;
  const configDir = `${root}/config.d`;
  await mkdir(binDir);
  await symlink(podnetBinary, `${binDir}/podnet`);
  let proc: ResultPromise | undefined;
  let exited: Promise<{ stderr: unknown }> | undefined;
  let log = '';

  const waitReady = async () => {
    // A clock, not a count of tries: a refused connect returns at once, and a daemon's start (its
    // registry opened, what it left adopted) takes seconds on a loaded machine or in the VM.
    const deadline = Date.now() + 60_000;
    while (Date.now() < deadline) {
      try {
        await callDaemon({ socketPath, method: 'GET', path: routes.readyz, timeoutMs: 500 });
        return;
      } catch {
        const early = await Promise.race([exited, new Promise<undefined>((r) => setTimeout(() => r(undefined), 25))]);
        if (early) throw new Error(`podnet daemon exited before it was ready: ${String(early.stderr)}`);
      }
    }
    throw new Error(`podnet daemon did not become ready on ${socketPath} within 60 s`);
  };
  const end = async (signal: 'SIGTERM' | 'SIGKILL') => {
    const running = proc;
    proc = undefined;
    if (!running) return;
    running.kill(signal);
    await running.catch(() => undefined);
  };

  const sandbox: DaemonSandbox = {
    root,
    stateDir,
    socketPath,
    binDir,
    configDir,
    async start() {
      const standalone = options.standalone ? ['--config-dir', configDir, '--resync-seconds', String(options.resyncSeconds ?? 1)] : [];
      const command = [podnetBinary, 'daemon', '--socket', socketPath, '--state-dir', stateDir, ...standalone, ...(options.args ?? [])];
      // nsenter execs the daemon in place: its pid, which names its netns to ip, is the daemon's.
      const [file, ...args] = options.netns ? ['nsenter', `--net=${options.netns}`, '--', ...command] : command;
      proc = execa(file!, args, {
        reject: false,
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      proc.stderr?.on('data', (chunk: Buffer) => (log += chunk.toString('utf8')));
      exited = proc.then((r) => ({ stderr: r.stderr }));
      await waitReady();
    },
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
    async records() {
      const body = await callDaemon({ socketPath, method: 'GET', path: routes.attachments, timeoutMs: 5000 });
      return parseDocument('AttachmentList', body, 'daemon answer').items.map((i) => i.record);
    },
    log: () => log,
    pluginSettings: () => ({ socketPath, stateDir, timeoutMs: 1000 }),
  };
  stopBeforeCleanup(t, () => end('SIGKILL'));
  t.teardown(async () => {
    await end('SIGKILL');
    // The daemon's netns goes with its test; on the host, the ports it secured are taken out.
    if (!options.netns) await releaseSecuredPorts(stateDir);
    await tmp.cleanup();
  });
  return sandbox;
}

/**
 * Takes the ports the daemon's applied states name out of the host's port security table, as the
 * daemon would once their pods are gone: the test's own entries, never another podnet's. The
 * table itself stays (another podnet on the machine may be using it).
 */
export async function releaseSecuredPorts(stateDir: string): Promise<void> {
  const folder = `${stateDir}/${stateLayout.applied}`;
  const files = await readdir(folder).catch(() => [] as string[]);
  const lines: string[] = [];
  for (const file of files.filter((f) => f.endsWith('.json') && !f.startsWith('.'))) {
    const state = JSON.parse(await readFile(`${folder}/${file}`, 'utf8')) as AppliedState;
    for (const a of state.attachments ?? []) if (a.hostIf && a.portSecurity) lines.push(releasePortLine(a.hostIf, a.portSecurity));
  }
  if (lines.length > 0) await execa('nft', ['-f', '-'], { input: `${lines.join('\n')}\n`, reject: false });
}
