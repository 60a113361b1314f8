// State that describes the running kernel's objects: what podnet applied (applied/), the
// addresses those objects hold (ipam/), passes under way (journal/) and the bridges podnet made
// (host-objects.json). None of it means anything once the kernel is gone: a reboot takes every
// pod netns, veth and bridge with it. So it is written without fsync (docs/adr/0006), and a start
// in a later boot drops it, whatever a power cut left in those files; the records of that boot's
// sandboxes with it (docs/adr/0024).
import { readFileSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { bootIdFile, hostObjectsFile, stateLayout } from '../protocol/paths.ts';
import { namesIn, removeFile, writeFileAtomic, type WriteOptions } from './atomic-file.ts';

let cachedBootId: string | undefined;

/** This boot's id, without dashes ("unknown" where /proc does not say). */
export function currentBootId(): string {
  if (cachedBootId === undefined) {
    try {
      cachedBootId = readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim().replaceAll('-', '');
    } catch {
      cachedBootId = 'unknown';
    }
  }
  return cachedBootId;
}

/** How kernel-mirroring state is written and removed: atomically, not synced. */
export const kernelState: WriteOptions = { sync: false };

/** The folders of kernel-mirroring state, in the state dir (host-objects.json is beside them). */
export const kernelStateDirs = [stateLayout.applied, stateLayout.ipam, stateLayout.journal, stateLayout.wireguard] as const;

/**
 * At start, before anything reads kernel-mirroring state: drops it when an earlier boot wrote
 * it, then records this boot. State without a boot record is kept (an older podnet synced every
 * write, and wrote none). Whether anything was dropped. The records of that boot's sandboxes go
 * too (records/, ADR 24; written without sync since ADR 26): each sandbox went with its kernel,
 * and nothing else would remove a record the runtime sends no DEL for. The delegated records
 * stay: their plugins' DEL frees what outlives the boot (a host-local address on disk), once
 * their sandbox is gone.
 */
export function dropStateOfEarlierBoot(stateDir: string, bootId = currentBootId()): boolean {
  if (bootId === 'unknown') return false;
  const marker = join(stateDir, bootIdFile);
  let written: string | undefined;
  try {
    written = readFileSync(marker, 'utf8').trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
  }
  if (written === bootId) return false;
  const earlier = written !== undefined;
  if (earlier) {
    for (const dir of [...kernelStateDirs, stateLayout.records].map((d) => join(stateDir, d))) for (const name of namesIn(dir)) unlinkSync(join(dir, name));
    removeFile(join(stateDir, hostObjectsFile));
  }
  // Synced, after the drop: a crash before this line drops again at the next start, harmlessly.
  writeFileAtomic(marker, `${bootId}\n`);
  return earlier;
}
