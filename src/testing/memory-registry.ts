// The attachment registry in memory, for the socket's routes in unit tests: it folds changes as the
// real one does (registry/fold.ts); what the plugins spooled is `spooled`.
import type { AttachmentRegistry } from '../daemon/routes.ts';
import type { AttachmentKey, AttachmentRecord, SpoolEntry } from '../protocol/validate.ts';
import { applyChanges, changesFor, keyOf, type FoldOutcome } from '../registry/fold.ts';

/** The registry in memory, folding changes as the real one does; `spooled` is what the plugins left. */
export class MemoryRegistry implements AttachmentRegistry {
  readonly records = new Map<string, AttachmentRecord>();
  spooled: SpoolEntry[] = [];
  problem: string | undefined;

  get size(): number {
    return this.records.size;
  }
  list(): AttachmentRecord[] {
    return [...this.records.values()];
  }
  get(key: AttachmentKey): AttachmentRecord | undefined {
    return this.records.get(keyOf(key));
  }
  quarantined() {
    return [{ file: '1-1-broken@eth0.json', reason: 'not JSON' }];
  }
  async writableProblem(): Promise<string | undefined> {
    return this.problem;
  }
  async spoolPending(): Promise<number> {
    return this.spooled.length;
  }
  async apply(entry: SpoolEntry): Promise<FoldOutcome> {
    await this.drainSpool();
    const changes = changesFor(this.records, entry);
    applyChanges(this.records, changes);
    return changes;
  }
  async withdraw(record: AttachmentRecord): Promise<boolean> {
    await this.drainSpool();
    const now = this.records.get(keyOf(record));
    if (!now || now.createdAt !== record.createdAt || now.startedWithoutNetwork) return false;
    this.records.delete(keyOf(record));
    return true;
  }
  async drainSpool(): Promise<number> {
    const entries = this.spooled.splice(0);
    for (const entry of entries) applyChanges(this.records, changesFor(this.records, entry));
    return entries.length;
  }
}
