// The spool: the plugin's inbox to the daemon (docs/adr/0003). Every change a plugin makes (ADD,
// DEL, GC) is one file in <stateDir>/spool, written atomically before the plugin reports success;
// the daemon applies them in order and removes each once applied. An ADD's entry is not synced
// (docs/adr/0024): it tells of a sandbox, which lives and dies with the kernel, as the entry's
// page does; the ADD of an earlier boot is not applied. A DEL or GC is synced, and so is the
// daemon's removal of it once applied (docs/adr/0026).
//
// Order: a name holds the boot id, the system-wide monotonic clock and the pid. Within a boot the
// monotonic clock orders every writer on the node and never steps back (the wall clock does, at
// boot or under NTP). Entries of an earlier boot, which a daemon never got to, come first.
//
// node:fs/promises is taken where it is read, not imported: loading it costs every plugin run
// about 2 ms (ADR 1), and the plugin reads the spool only on a CHECK.
import { accessSync, constants } from 'node:fs';
import { join } from 'node:path';
import { ensurePrivateDir, tempPrefix, writeFileAtomic } from './atomic-file.ts';
import { currentBootId, kernelState } from './boot.ts';
import { stateLayout } from '../protocol/paths.ts';
import type { SpoolEntry } from '../protocol/validate.ts';
import { parseStateDocument, stateDocumentText, type Unversioned } from './state-document.ts';
import { byCodeUnits } from '../order.ts';

export function spoolDir(stateDir: string): string {
  return join(stateDir, stateLayout.spool);
}

export function spoolFileName(bootId: string, monotonicNs: bigint, pid: number): string {
  return `${bootId}-${monotonicNs.toString().padStart(20, '0')}-${pid}.json`;
}

/** The boot id spool file `name` begins with; none when it has no dash. */
function bootOf(name: string): string | undefined {
  const dash = name.indexOf('-');
  return dash < 0 ? undefined : name.slice(0, dash);
}

/** Replay order: earlier boots first, then this boot's entries by the monotonic clock. */
export function replayOrder(names: readonly string[], bootId: string): string[] {
  const thisBoot = (n: string) => bootOf(n) === bootId;
  return [...names].sort((a, b) => Number(thisBoot(a)) - Number(thisBoot(b)) || byCodeUnits(a, b));
}

/**
 * Whether the entry in spool file `name` is an ADD of an earlier boot: its sandbox went with that
 * kernel. Only when both boots are known: a side that could not read its boot id names none.
 */
export function addOfEarlierBoot(name: string, entry: Pick<SpoolEntry, 'op'>, bootId = currentBootId()): boolean {
  const written = bootOf(name);
  return entry.op === 'add' && bootId !== 'unknown' && written !== undefined && written !== 'unknown' && written !== bootId;
}

/** Writes one entry atomically (synchronously: see atomic-file.ts), synced unless an ADD's; its path. */
export function writeSpoolEntry(stateDir: string, entry: SpoolEntry): string {
  const dir = spoolDir(stateDir);
  ensurePrivateDir(dir);
  const path = join(dir, spoolFileName(currentBootId(), process.hrtime.bigint(), process.pid));
  writeFileAtomic(path, stateDocumentText(entry), entry.op === 'add' ? kernelState : {});
  return path;
}

/** Spool file names in replay order; temp files of writers still at work are not listed. */
export async function listSpool(stateDir: string): Promise<string[]> {
  let names: string[];
  try {
    names = await process.getBuiltinModule('node:fs/promises').readdir(spoolDir(stateDir));
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
  return replayOrder(
    names.filter((n) => n.endsWith('.json') && !n.startsWith(tempPrefix)),
    currentBootId(),
  );
}

export async function readSpoolEntry(stateDir: string, name: string): Promise<Unversioned<SpoolEntry>> {
  return parseStateDocument('SpoolEntry', await process.getBuiltinModule('node:fs/promises').readFile(join(spoolDir(stateDir), name), 'utf8'), `spool entry ${name}`);
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
