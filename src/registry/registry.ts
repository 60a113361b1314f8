// The daemon's registry of attachments: a map in memory mirrored by one file per record under
// <stateDir>/records. Every change is written before it is acknowledged (renamed into place, not
// synced: a new boot drops records/, ADR 26). Changes are serialized,
// and each one first replays the spool (the plugins' inbox), so a change that reaches the daemon
// over the socket never overtakes one the plugins recorded before it.
import { access, constants, readdir, readFile, stat, unlink } from 'node:fs/promises';
import { join } from 'node:path';
import { stateLayout, recordFileName } from '../protocol/paths.ts';
import type { AttachmentKey, AttachmentRecord, SpoolEntry } from '../protocol/validate.ts';
import { ensurePrivateDir, removeFile, removeTempFiles, tempPrefix, writeFileAtomic } from './atomic-file.ts';
import { applyChanges, changesFor, keyOf, sameSandbox, type FoldOutcome } from './fold.ts';
import { QuarantineLog, setAside, type Quarantined } from './quarantine.ts';
import { kernelState } from './boot.ts';
import { addOfEarlierBoot, listSpool, readSpoolEntry, spoolDir } from './spool.ts';
import { parseStateDocument, stateDocumentText } from './state-document.ts';
import type { Logger } from '../log.ts';
import { PodnetError } from '../errors.ts';
import { isNodeNetworkNamespace } from '../netns/probe.ts';
import { byCodeUnits } from '../order.ts';

export type { Quarantined } from './quarantine.ts';

/** A plugin's temp file older than this belongs to a plugin that died mid-write. */
const staleSpoolTempMs = 5 * 60_000;

export class Registry {
  readonly stateDir: string;
  private readonly log: Logger;
  private readonly records = new Map<string, AttachmentRecord>();
  /** Every file of the state dir set aside since the daemon started, by any store. */
  readonly quarantine: QuarantineLog;
  private tail: Promise<unknown> = Promise.resolve();

  private constructor(stateDir: string, log: Logger) {
    this.stateDir = stateDir;
    this.log = log;
    this.quarantine = new QuarantineLog(log);
  }

  /** Loads the records on disk, setting aside any that are corrupt, and replays the spool. */
  static async open(stateDir: string, log: Logger): Promise<Registry> {
    const registry = new Registry(stateDir, log);
    for (const dir of Object.values(stateLayout)) ensurePrivateDir(join(stateDir, dir));
    await registry.load();
    await registry.drainSpool();
    return registry;
  }

  private changes = 0;

  get size(): number {
    return this.records.size;
  }

  list(): AttachmentRecord[] {
    return [...this.records.values()].sort((a, b) => byCodeUnits(a.createdAt, b.createdAt) || byCodeUnits(keyOf(a), keyOf(b)));
  }

  get(key: AttachmentKey): AttachmentRecord | undefined {
    return this.records.get(keyOf(key));
  }

  quarantined(): readonly Quarantined[] {
    return this.quarantine.list();
  }

  /** Why changes could not be applied now (a folder of the state dir is not writable), if so. */
  async writableProblem(): Promise<string | undefined> {
    for (const dir of [stateLayout.records, stateLayout.spool]) {
      const path = join(this.stateDir, dir);
      try {
        await access(path, constants.W_OK);
      } catch (err) {
        return `${path} is not writable: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`;
      }
    }
    return undefined;
  }

  async spoolPending(): Promise<number> {
    return (await listSpool(this.stateDir)).length;
  }

  /** Applies one change after everything spooled before it; resolves once it is written. */
  apply(entry: SpoolEntry): Promise<FoldOutcome> {
    const refused = entryRefusal(entry);
    if (refused) return Promise.reject(new PodnetError('INVALID_REQUEST', refused));
    return this.serialize(async () => {
      await this.replaySpool();
      return this.commit(entry);
    });
  }

  /**
   * Records an attachment podnet never saw the ADD of (src/registry/adopt.ts), unless it is
   * recorded by then, the spool's changes included: an ADD's own record always wins. Whether it was added.
   */
  adopt(record: AttachmentRecord): Promise<boolean> {
    return this.serialize(async () => {
      await this.replaySpool();
      if (this.records.has(keyOf(record)) || recordRefusal(record) !== undefined) return false;
      this.commit({ op: 'add', record });
      return true;
    });
  }

  /**
   * Removes the record of a sandbox whose ADD the daemon refuses (ADR 28), after everything
   * spooled: unless the record is by then another sandbox's, or the plugin's, marked
   * startedWithoutNetwork (it gave up waiting, and the pod starts). Whether it was removed.
   */
  withdraw(record: AttachmentRecord): Promise<boolean> {
    return this.serialize(async () => {
      await this.replaySpool();
      const now = this.records.get(keyOf(record));
      if (!now || !sameSandbox(now, record) || now.startedWithoutNetwork === true) return false;
      this.commit({ op: 'del', key: { containerId: record.containerId, ifname: record.ifname } });
      return true;
    });
  }

  /** Replays whatever the plugins spooled; the number of entries applied. */
  drainSpool(): Promise<number> {
    return this.serialize(() => this.replaySpool());
  }

  private serialize<T>(work: () => Promise<T>): Promise<T> {
    const run = this.tail.then(work, work);
    this.tail = run.catch(() => undefined);
    return run;
  }

  /** Counts the changes committed since open: a reader that saw one count knows whether records changed since. */
  get changeCount(): number {
    return this.changes;
  }

  /** Writes one change; every way in (apply, adopt, the spool) has refused what may not be recorded. */
  private commit(entry: SpoolEntry): FoldOutcome {
    const changes = changesFor(this.records, entry);
    if (changes.put.length + changes.removed.length > 0) this.changes++;
    const recordsDir = join(this.stateDir, stateLayout.records);
    // Not synced (ADR 26): a record tells of a sandbox, which a machine's crash takes with it, and
    // the next boot's start drops records/ whatever the crash left there (boot.ts).
    for (const r of changes.put) writeFileAtomic(join(recordsDir, recordFileName(r)), stateDocumentText(r), kernelState);
    for (const k of changes.removed) removeFile(join(recordsDir, recordFileName(k)), kernelState);
    applyChanges(this.records, changes);
    return changes;
  }

  private async replaySpool(): Promise<number> {
    let applied = 0;
    for (const name of await listSpool(this.stateDir)) {
      let entry: SpoolEntry;
      try {
        entry = await readSpoolEntry(this.stateDir, name);
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
        this.setAside(join(spoolDir(this.stateDir), name), (err as Error).message);
        continue;
      }
      const refused = entryRefusal(entry);
      if (refused) {
        this.setAside(join(spoolDir(this.stateDir), name), refused);
        continue;
      }
      if (addOfEarlierBoot(name, entry)) {
        removeFile(join(spoolDir(this.stateDir), name), kernelState);
        this.log.info('dropped a spooled ADD of an earlier boot: its sandbox went with that kernel', { file: name });
        continue;
      }
      const changes = this.commit(entry);
      // Only once the change is written does its spool file go; a crash in between replays it,
      // which is harmless: every change is idempotent. An ADD's goes without sync (ADR 26): one a
      // power cut brings back is an earlier boot's, dropped. A DEL's or GC's is synced: where a
      // boot id is unknown, an earlier boot's entry may sort after this boot's, and a GC replayed
      // there would take back the records of this boot's running pods.
      removeFile(join(spoolDir(this.stateDir), name), entry.op === 'add' ? kernelState : {});
      applied++;
      this.log.info('replayed spooled change', { file: name, op: entry.op, put: changes.put.length, removed: changes.removed.length });
    }
    return applied;
  }

  private async load(): Promise<void> {
    const recordsDir = join(this.stateDir, stateLayout.records);
    removeTempFiles(recordsDir);
    for (const name of await readdir(recordsDir)) {
      const path = join(recordsDir, name);
      try {
        const record = parseStateDocument('AttachmentRecord', await readFile(path, 'utf8'), `record ${name}`);
        if (recordFileName(record) !== name) throw new Error(`holds the record of ${keyOf(record)}, not of its own name`);
        const refused = recordRefusal(record);
        if (refused) throw new Error(refused);
        this.records.set(keyOf(record), record);
      } catch (err) {
        this.setAside(path, (err as Error).message);
      }
    }
    await this.sweepSpoolTemps();
  }

  private async sweepSpoolTemps(): Promise<void> {
    const dir = spoolDir(this.stateDir);
    for (const name of await readdir(dir)) {
      if (!name.startsWith(tempPrefix)) continue;
      const path = join(dir, name);
      const info = await stat(path).catch(() => undefined);
      if (info && Date.now() - info.mtimeMs > staleSpoolTempMs) await unlink(path).catch(() => undefined);
    }
  }

  /** Moves a corrupt file out of the way, keeping it for a human, and remembers why. */
  private setAside(path: string, reason: string): void {
    setAside(this.stateDir, path, reason, this.quarantine.told('what it recorded is not known to podnet'));
  }
}

/** Why a record may not be, whoever wrote it (the plugin, the socket, a file planted in the spool), if so. */
function recordRefusal(record: AttachmentRecord): string | undefined {
  if (isNodeNetworkNamespace(record.netns)) {
    return `netns ${record.netns} of container ${record.containerId} is the node's own network namespace, not a pod's: podnet changes pods' networks, never the node's`;
  }
  return undefined;
}

function entryRefusal(entry: SpoolEntry): string | undefined {
  return entry.op === 'add' ? recordRefusal(entry.record) : undefined;
}
