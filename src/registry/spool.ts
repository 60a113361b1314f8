// The spool: registry changes the plugin could not hand the daemon in time, one file each in
// <stateDir>/spool. The plugin writes them; the daemon replays them in name order and removes each
// once applied. Names sort by wall clock, then by the system-wide monotonic clock, so entries of
// one sandbox replay in the order the runtime issued them. See docs/adr/0003.
import { readdir, readFile, access, constants } from 'node:fs/promises';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { ensurePrivateDir, tempPrefix, writeFileAtomic } from './atomic-file.ts';
import { stateLayout } from '../protocol/paths.ts';
import { parseDocument, type SpoolEntry } from '../protocol/validate.ts';

export function spoolDir(stateDir: string): string {
  return join(stateDir, stateLayout.spool);
}

export function spoolFileName(wallClockMs: number, monotonicNs: bigint): string {
  const wall = String(wallClockMs).padStart(15, '0');
  const mono = monotonicNs.toString().padStart(20, '0');
  return `${wall}-${mono}-${process.pid}-${randomBytes(3).toString('hex')}.json`;
}

export async function writeSpoolEntry(stateDir: string, entry: SpoolEntry): Promise<string> {
  const dir = spoolDir(stateDir);
  await ensurePrivateDir(dir);
  const path = join(dir, spoolFileName(Date.now(), process.hrtime.bigint()));
  await writeFileAtomic(path, JSON.stringify(entry));
  return path;
}

/** Spool file names in replay order; temp files of writers still at work are not listed. */
export async function listSpool(stateDir: string): Promise<string[]> {
  let names: string[];
  try {
    names = await readdir(spoolDir(stateDir));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  return names.filter((n) => n.endsWith('.json') && !n.startsWith(tempPrefix)).sort();
}

export async function readSpoolEntry(stateDir: string, name: string): Promise<SpoolEntry> {
  const text = await readFile(join(spoolDir(stateDir), name), 'utf8');
  return parseDocument('SpoolEntry', JSON.parse(text) as unknown, `spool entry ${name}`);
}

/** Whether a plugin could spool now: the spool folder exists (or can be made) and is writable. */
export async function spoolWritable(stateDir: string): Promise<boolean> {
  try {
    await ensurePrivateDir(spoolDir(stateDir));
    await access(spoolDir(stateDir), constants.W_OK);
    return true;
  } catch {
    return false;
  }
}
