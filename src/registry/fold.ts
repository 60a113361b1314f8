// What a registry change does to the set of records: one pure function, used by the daemon's
// registry and by the plugin when it must answer CHECK from disk alone.
import type { AttachmentKey, AttachmentRecord, SpoolEntry } from '../protocol/validate.ts';

export function keyOf(key: AttachmentKey): string {
  return `${key.containerId}@${key.ifname}`;
}

/**
 * Whether two records tell of one sandbox: its netns and its ADD's time, not its container id
 * alone (podman keeps a container's id across a restart, in a new netns).
 */
export function sameSandbox(a: Pick<AttachmentRecord, 'netns' | 'createdAt'>, b: Pick<AttachmentRecord, 'netns' | 'createdAt'>): boolean {
  return a.netns === b.netns && a.createdAt === b.createdAt;
}

export interface FoldOutcome {
  put: AttachmentRecord[];
  removed: AttachmentKey[];
}

/** The records to write and remove so that `records` reflects `entry`. */
export function changesFor(records: ReadonlyMap<string, AttachmentRecord>, entry: SpoolEntry): FoldOutcome {
  switch (entry.op) {
    case 'add':
      return { put: [entry.record], removed: [] };
    case 'del':
      return { put: [], removed: records.has(keyOf(entry.key)) ? [entry.key] : [] };
    case 'gc': {
      const valid = new Set(entry.gc.validAttachments.map(keyOf));
      const removed = [...records.values()]
        .filter((r) => r.network === entry.gc.network && !valid.has(keyOf(r)))
        .map((r) => ({ containerId: r.containerId, ifname: r.ifname }));
      return { put: [], removed };
    }
  }
}

export function applyChanges(records: Map<string, AttachmentRecord>, changes: FoldOutcome): void {
  for (const r of changes.put) records.set(keyOf(r), r);
  for (const k of changes.removed) records.delete(keyOf(k));
}
