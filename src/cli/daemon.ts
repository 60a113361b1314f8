import { Command } from 'commander';
import { startDaemon } from '../daemon/daemon.ts';
import { jsonLogger } from '../log.ts';
import { podnetVersion } from '../version.ts';
import { defaultSocketPath, defaultStateDir } from '../protocol/paths.ts';

export function daemonCommand(): Command {
  return new Command('daemon')
    .description('run the node daemon: record pod sandboxes and serve the podnet socket')
    .option('--socket <path>', 'unix socket to serve', defaultSocketPath)
    .option('--state-dir <dir>', 'state directory (records, spool)', defaultStateDir)
    .action(async (options: { socket: string; stateDir: string }) => {
      const log = jsonLogger();
      const daemon = await startDaemon({ socketPath: options.socket, stateDir: options.stateDir, version: podnetVersion, log });
      const stop = (signal: string) => {
        log.info('stopping', { signal });
        daemon.stop().then(
          () => process.exit(0),
          (err: Error) => {
            log.error('stop failed', { error: err.message });
            process.exit(1);
          },
        );
      };
      process.once('SIGTERM', () => stop('SIGTERM'));
      process.once('SIGINT', () => stop('SIGINT'));
    });
}
