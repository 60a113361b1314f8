// One daemon per state directory. The lock is taken before the registry is opened, so a second
// daemon is refused before it can sweep, replay or write anything the first one does not know of.
// The lock file holds the holder's pid and the time its process started (in clock ticks since
// boot, /proc/<pid>/stat): a file whose holder is gone (a SIGKILL leaves it) is taken over, also
// when another process has since been given the same pid.
import { closeSync, fsyncSync, lstatSync, openSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs';
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
    // lstat: a dangling link is refused too, not taken for a folder that is not there.
    if (lstatSync(path, { throwIfNoEntry: false })) checkPrivateDir(path, 'state dir folder');
  }
  const path = join(stateDir, lockFileName);
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      const fd = openSync(path, 'wx', 0o600);
      writeFileSync(fd, `${process.pid} ${startTimeOf(process.pid) ?? ''}`.trimEnd() + '\n');
      fsyncSync(fd);
      closeSync(fd);
      return {
        release() {
          if (holderOf(path)?.pid === process.pid) unlinkSync(path);
        },
      };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const holder = holderOf(path);
      if (holder !== undefined && holds(holder)) {
        throw new PodnetError('BUSY', `state directory ${stateDir} is held by the podnet daemon with pid ${holder.pid}`);
      }
      unlinkSync(path);
    }
  }
  throw new PodnetError('BUSY', `state directory ${stateDir}: another daemon took the lock while this one started`);
}

interface Holder {
  pid: number;
  /** Absent in a lock an older podnet wrote. */
  startTime?: string;
}

function holderOf(path: string): Holder | undefined {
  try {
    const [pid, startTime] = readFileSync(path, 'utf8').trim().split(' ');
    const n = Number(pid);
    if (!Number.isInteger(n) || n <= 0) return undefined;
    return startTime && /^\d+$/.test(startTime) ? { pid: n, startTime } : { pid: n };
  } catch {
    return undefined;
  }
}

/**
 * Whether the lock's holder still runs: its pid is alive and started when the lock says. A lock
 * without a start time (an older podnet's) is held by a live process that is a podnet daemon.
 */
function holds(holder: Holder): boolean {
  if (holder.startTime !== undefined) return startTimeOf(holder.pid) === holder.startTime;
  try {
    return readFileSync(`/proc/${holder.pid}/cmdline`, 'utf8').split('\0').includes('daemon');
  } catch {
    return false;
  }
}

/** When process `pid` started, in clock ticks since boot (field 22 of /proc/<pid>/stat), or undefined when it is gone. */
function startTimeOf(pid: number): string | undefined {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    // The command name (field 2) is in parentheses and may hold spaces: count fields after it.
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
  } catch {
    return undefined;
  }
}
