// The spool: the plugin's inbox to the daemon (docs/adr/0003). Every change a plugin makes (ADD,
// DEL, GC) is one file in <stateDir>/spool, written atomically before the plugin reports success;
// the daemon applies them in order and removes each once applied. Not synced (docs/adr/0024): an
// entry tells of a sandbox, which lives and dies with the kernel, as the entry's page does; a
// daemon drops the entries of an earlier boot unread.
//
// Order: a name holds the boot id, the system-wide monotonic clock and the pid. Within a boot the
// monotonic clock orders every writer on the node and never steps back (the wall clock does, at
// boot or under NTP).
import { readdir, readFile } from 'node:fs/promises';
import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import { ensurePrivateDir, removeFile, tempPrefix, writeFileAtomic } from './atomic-file.ts';
import { currentBootId, kernelState } from './boot.ts';
import { stateLayout } from '../protocol/paths.ts';
import type { SpoolEntry } from '../protocol/validate.ts';
import { parseStateDocument, stateDocumentText, type Unversioned } from './state-document.ts';

export function spoolDir(stateDir: string): string {
  return join(stateDir, stateLayout.spool);
}

export function spoolFileName(bootId: string, monotonicNs: bigint, pid: number): string {
  return `${bootId}-${monotonicNs.toString().padStart(20, '0')}-${pid}.json`;
}

/** Whether spool file `name` was written in boot `bootId`. */
const ofBoot = (name: string, bootId: string) => name.startsWith(`${bootId}-`);

/** Writes one entry atomically, not synced (synchronously: see atomic-file.ts); its path. */
export function writeSpoolEntry(stateDir: string, entry: SpoolEntry): string {
  const dir = spoolDir(stateDir);
  ensurePrivateDir(dir);
  const path = join(dir, spoolFileName(currentBootId(), process.hrtime.bigint(), process.pid));
  writeFileAtomic(path, stateDocumentText(entry), kernelState);
  return path;
}

/** The spool's entry names (temp files of writers still at work left out). */
async function spoolNames(stateDir: string): Promise<string[]> {
  try {
    return (await readdir(spoolDir(stateDir))).filter((n) => n.endsWith('.json') && !n.startsWith(tempPrefix));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

/** This boot's spool file names in replay order: by the monotonic clock. */
export async function listSpool(stateDir: string, bootId = currentBootId()): Promise<string[]> {
  return (await spoolNames(stateDir)).filter((n) => ofBoot(n, bootId)).sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/**
 * Removes the entries an earlier boot left, unread: they tell of sandboxes that went with that
 * kernel, and a power cut may have left them torn (they were not synced). Their names.
 */
export async function dropEarlierBoots(stateDir: string, bootId = currentBootId()): Promise<string[]> {
  const earlier = (await spoolNames(stateDir)).filter((n) => !ofBoot(n, bootId));
  for (const name of earlier) removeFile(join(spoolDir(stateDir), name), kernelState);
  return earlier;
}

export async function readSpoolEntry(stateDir: string, name: string): Promise<Unversioned<SpoolEntry>> {
  return parseStateDocument('SpoolEntry', await readFile(join(spoolDir(stateDir), name), 'utf8'), `spool entry ${name}`);
}

/** Whether a plugin can record now: the spool folder exists (or can be made) and is writable. */
export function spoolWritable(stateDir: string): boolean {
  try {
    ensurePrivateDir(spoolDir(stateDir));
    accessSync(spoolDir(stateDir), constants.W_OK);
    return true;
  } catch {
    return false;
  }
}
