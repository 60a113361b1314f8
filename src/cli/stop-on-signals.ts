import type { Logger } from '../log.ts';

/** A long-running command's end: on SIGTERM or SIGINT, `stop`, then exit 0, or 1 when stopping failed. */
export function stopOnSignals(log: Logger, stop: () => Promise<void>): void {
  const stopping = (signal: string) => {
    log.info('stopping', { signal });
    stop().then(
      () => process.exit(0),
      (err: Error) => {
        log.error('stop failed', { error: err.message });
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => stopping('SIGTERM'));
  process.once('SIGINT', () => stopping('SIGINT'));
}
