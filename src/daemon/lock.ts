// One daemon per state directory. The lock is taken before the registry is opened, so a second
// daemon is refused before it can sweep, replay or write anything the first one does not know of.
// The lock file holds the holder's pid; a file whose holder is no daemon any more (a SIGKILL
// leaves it) is taken over.
import { closeSync, existsSync, fsyncSync, lstatSync, openSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PodnetError } from '../errors.ts';
import { checkPrivateDir, ensurePrivateDir } from '../registry/atomic-file.ts';
import { stateLayout } from '../protocol/paths.ts';

export const lockFileName = 'daemon.lock';

export interface StateLock {
  release(): void;
}

/**
 * Takes the state dir for this daemon, after checking that it and the folders in it are the
 * daemon's user's alone (checkPrivateDir): nothing is read or written in one that is not.
 */
export function acquireStateLock(stateDir: string): StateLock {
  ensurePrivateDir(stateDir);
  checkPrivateDir(stateDir, 'state dir');
  for (const folder of Object.values(stateLayout)) {
    const path = join(stateDir, folder);
    if (existsSync(path) || isLink(path)) checkPrivateDir(path, 'state dir folder');
  }
  const path = join(stateDir, lockFileName);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      writeFileSync(fd, `${process.pid}\n`);
      fsyncSync(fd);
      closeSync(fd);
      return {
        release() {
          if (holderOf(path) === process.pid) unlinkSync(path);
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = holderOf(path);
      if (holder !== undefined && isDaemon(holder)) {
        throw new PodnetError('BUSY', `state directory ${stateDir} is held by the podnet daemon with pid ${holder}`);
      }
      unlinkSync(path);
    }
  }
  throw new PodnetError('BUSY', `state directory ${stateDir}: another daemon took the lock while this one started`);
}

function holderOf(path: string): number | undefined {
  try {
    const pid = Number(readFileSync(path, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** Whether `pid` is a live podnet daemon (not a process that reused a dead daemon's pid). */
function isDaemon(pid: number): boolean {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').includes('daemon');
  } catch {
    return false;
  }
}

/** Whether `path` is a symlink, dangling ones included (existsSync follows links). */
function isLink(path: string): boolean {
  try {
    return lstatSync(path).isSymbolicLink();
  } catch {
    return false;
  }
}
