// Atomic file writes: a crash at any point leaves either the old file or the new one, never a
// torn one. Temp file in the same directory, fsync, rename, fsync of the directory; without the
// two fsyncs for state that describes the running kernel (docs/adr/0006) and the plugin's ADD
// entry (docs/adr/0024), where the rename is what a crash of the process needs and a crash of the
// machine takes the objects with it.
//
// Synchronous on purpose. The CNI plugin is a one-shot process whose every thread-pool round trip
// is paid on a pod's creation (nine of them made an async write cost 3-5 ms there, against about
// 1.5 ms for these calls; bench/plugin-add); the daemon applies changes one at a time anyway, and
// most of what it writes is not synced (kernel state, records: docs/adr/0006, docs/adr/0026).
import { closeSync, fsyncSync, lstatSync, mkdirSync, openSync, readdirSync, renameSync, statSync, unlinkSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { PodnetError } from '../errors.ts';

/** Temp files start with this; a reader skips them and a start-up sweep may remove stale ones. */
export const tempPrefix = '.tmp-';

/**
 * Makes `dir` (0700) and any missing parent, each durably; nothing when it exists. One level at a
 * time, each tried once: Node's recursive mkdir retries forever where a folder exists but nothing
 * may be made in it (a stateDir of /proc/self spun the plugin until the runtime killed it).
 */
export function ensurePrivateDir(dir: string): void {
  const missing: string[] = [];
  for (let at = resolve(dir); !isThere(at); at = dirname(at)) {
    missing.unshift(at);
    if (dirname(at) === at) break;
  }
  for (const folder of missing) {
    try {
      mkdirSync(folder, { mode: 0o700 });
    } catch (err) {
      // Made meanwhile by another writer (two plugins at once): as good as made here.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    // A folder made is an entry in its parent: synced, from the top one down.
    syncDir(dirname(folder));
  }
}

/** Whether `path` exists; an error other than its absence (EACCES, ENOTDIR) is thrown. */
function isThere(path: string): boolean {
  try {
    statSync(path);
    return true;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
}

/**
 * Refuses a folder someone other than the daemon's user could change: a symlink (its target can be
 * swapped), a folder of another owner, or one group or others may write into. Whoever can write
 * into the state dir plants what the daemon reads and acts on; into the socket's folder, a socket
 * in podnet's place. `what` names the folder in the message ("state dir").
 */
export function checkPrivateDir(dir: string, what: string): void {
  const info = lstatSync(dir);
  const refuse = (why: string) => new PodnetError('INVALID_CONFIG', `${what} ${dir} ${why}`);
  if (info.isSymbolicLink()) throw refuse("is a symlink: give podnet the folder itself (a link's target can be swapped)");
  if (!info.isDirectory()) throw refuse('is not a folder');
  const uid = process.geteuid?.() ?? 0;
  if (info.uid !== uid) throw refuse(`is owned by uid ${info.uid}, not by the daemon's user (uid ${uid}): chown ${uid} it`);
  if ((info.mode & 0o022) !== 0) throw refuse(`is writable by group or others (mode ${(info.mode & 0o7777).toString(8)}): chmod 700 it`);
}

/** Makes `dir`'s entries (a rename, an unlink) reach the disk. */
export function syncDir(dir: string): void {
  const fd = openSync(dir, 'r');
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export interface WriteOptions {
  /** Default 0600. */
  mode?: number;
  /**
   * Whether the data and the directory entry reach the disk before this returns (default). False
   * for kernel-mirroring state: applied/, ipam/, journal/ and host-objects.json (docs/adr/0006),
   * a spooled ADD (docs/adr/0024), and records/ with the removal of an ADD taken in (docs/adr/0026).
   */
  sync?: boolean;
}

export function writeFileAtomic(path: string, data: string, { mode = 0o600, sync = true }: WriteOptions = {}): void {
  const dir = dirname(path);
  // pid and the monotonic clock make the name unique without loading node:crypto on the plugin path.
  const temp = join(dir, `${tempPrefix}${basename(path)}.${process.pid}.${process.hrtime.bigint()}`);
  const fd = openSync(temp, 'wx', mode);
  try {
    writeFileSync(fd, data); // loops over short writes
    if (sync) fsyncSync(fd);
  } catch (err) {
    closeSync(fd);
    unlinkQuietly(temp);
    throw err;
  }
  closeSync(fd);
  try {
    renameSync(temp, path);
  } catch (err) {
    unlinkQuietly(temp);
    throw err;
  }
  if (sync) syncDir(dir);
}

/**
 * Removes the temp files of writes cut short from `dir`, a folder only the daemon writes (one
 * daemon runs per state dir): at start, none of them is a write under way. The names removed.
 */
export function removeTempFiles(dir: string): string[] {
  const names = namesIn(dir).filter((n) => n.startsWith(tempPrefix));
  for (const name of names) unlinkQuietly(join(dir, name));
  return names;
}

/** The entries of `dir`; none when it is not made yet. */
export function namesIn(dir: string): string[] {
  try {
    return readdirSync(dir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

/** Removes `path`, durably unless `sync` is false (see WriteOptions); false when it was not there. */
export function removeFile(path: string, { sync = true }: Pick<WriteOptions, 'sync'> = {}): boolean {
  try {
    unlinkSync(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  if (sync) syncDir(dirname(path));
  return true;
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // Already gone, or the directory is unusable: the start-up sweep removes what is left.
  }
}
