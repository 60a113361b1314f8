// The node daemon's lifecycle: open the registry (which replays the spool), serve the socket, keep
// replaying what plugins spool while it runs, stop cleanly on SIGTERM. A SIGKILL at any moment is
// also fine: every change is on disk before it is acknowledged, and the next start repairs the rest.
import { watch, type FSWatcher } from 'node:fs';
import { Registry } from '../registry/registry.ts';
import { spoolDir } from '../registry/spool.ts';
import { startServer, type RunningServer } from './server.ts';
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
  const registry = await Registry.open(opts.stateDir, log);
  log.info('registry loaded', { stateDir: opts.stateDir, attachments: registry.size, quarantined: registry.quarantined().length });

  const server: RunningServer = await startServer({ socketPath: opts.socketPath, registry, version: opts.version, log });
  log.info('serving', { socket: opts.socketPath, version: opts.version });

  const drain = () => {
    registry.drainSpool().catch((err: Error) => log.error('spool replay failed', { error: err.message }));
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
      await registry.drainSpool().catch(() => undefined);
      log.info('stopped');
    },
  };
}
