// Files of the state dir found corrupt, or not of a format this podnet reads, are set aside in
// <stateDir>/quarantine/ for a human: not lost, not in the way, and never acted on. One helper for
// every store (records, spool, applied, host objects, delegated records, journals).
import { renameSync } from 'node:fs';
import { join } from 'node:path';
import { stateLayout } from '../protocol/paths.ts';
import { ensurePrivateDir } from './atomic-file.ts';
import type { Logger } from '../log.ts';

/** A file set aside: its name in quarantine/ and why. */
export interface Quarantined {
  file: string;
  reason: string;
}

/** Told of each file set aside: where it was, its name in quarantine/, and why. */
export type OnQuarantined = (file: string, quarantinedAs: string, reason: string) => void;

/** The name a corrupt file is set aside under in quarantine/: the clock's nanoseconds keep two of one name apart. */
export function quarantinedName(path: string): string {
  return `${Date.now()}-${process.hrtime.bigint()}-${path.split('/').pop() ?? 'file'}`;
}

/** Moves `path` into the state dir's quarantine/ and tells `told` of it; what was set aside. */
export function setAside(stateDir: string, path: string, reason: string, told: OnQuarantined = () => undefined): Quarantined {
  const dir = join(stateDir, stateLayout.quarantine);
  ensurePrivateDir(dir);
  const name = quarantinedName(path);
  renameSync(path, join(dir, name));
  told(path, name, reason);
  return { file: name, reason };
}

/**
 * What the daemon's stores set aside since it started, each one logged with what it means: one
 * list for every store of the state dir, which `podnet status` shows.
 */
export class QuarantineLog {
  private readonly items: Quarantined[] = [];
  private readonly log: Logger;

  constructor(log: Logger) {
    this.log = log;
  }

  /** The callback a store tells its set-aside files to; `consequence` says what that file's loss means. */
  told(consequence: string): OnQuarantined {
    return (file, quarantinedAs, reason) => {
      this.items.push({ file: quarantinedAs, reason });
      this.log.warn(`set aside a file that cannot be read; ${consequence}`, { file, quarantinedAs, reason });
    };
  }

  list(): readonly Quarantined[] {
    return this.items;
  }
}
