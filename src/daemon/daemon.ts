// The node daemon's lifecycle: open the registry (which replays the spool), serve the socket, keep
// replaying what plugins spool while it runs, stop cleanly on SIGTERM. A SIGKILL at any moment is
// also fine: every change is on disk before it is acknowledged, and the next start repairs the rest.
import { watch, type FSWatcher } from 'node:fs';
import { Registry } from '../registry/registry.ts';
import { spoolDir } from '../registry/spool.ts';
import { startServer, type RunningServer } from './server.ts';
import { acquireStateLock } from './lock.ts';
import type { Logger } from '../log.ts';

export interface DaemonOptions {
  socketPath: string;
  stateDir: string;
  version: string;
  log: Logger;
  /** How often the spool is replayed even without a change notice (fs.watch can miss events). */
  spoolIntervalMs?: number;
}

export interface RunningDaemon {
  registry: Registry;
  stop(): Promise<void>;
}

export async function startDaemon(opts: DaemonOptions): Promise<RunningDaemon> {
  const { log } = opts;
  const lock = acquireStateLock(opts.stateDir);
  let registry: Registry;
  let server: RunningServer;
  try {
    registry = await Registry.open(opts.stateDir, log);
    server = await startServer({ socketPath: opts.socketPath, registry, version: opts.version, log });
  } catch (err) {
    lock.release();
    throw err;
  }
  log.info('serving', {
    socket: opts.socketPath,
    version: opts.version,
    stateDir: opts.stateDir,
    attachments: registry.size,
    quarantined: registry.quarantined().length,
  });

  // A burst of spool writes raises a burst of watch events; one drain at a time, one more queued.
  let draining: Promise<void> | undefined;
  let again = false;
  const drain = () => {
    if (draining) {
      again = true;
      return;
    }
    draining = registry
      .drainSpool()
      .then(
        () => undefined,
        (err: Error) => log.error('spool replay failed', { error: err.message }),
      )
      .finally(() => {
        draining = undefined;
        if (again) {
          again = false;
          drain();
        }
      });
  };
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(spoolDir(opts.stateDir), drain);
    watcher.on('error', (err) => log.warn('spool watch failed; the periodic replay remains', { error: err.message }));
  } catch (err) {
    log.warn('spool watch unavailable; the periodic replay remains', { error: (err as Error).message });
  }
  const timer = setInterval(drain, opts.spoolIntervalMs ?? 2000);

  return {
    registry,
    async stop() {
      clearInterval(timer);
      watcher?.close();
      await server.close();
      await draining;
      await registry.drainSpool().catch(() => undefined);
      lock.release();
      log.info('stopped');
    },
  };
}
