// Delegated attachments on file (<stateDir>/delegated/<container>@<interface>.json): the config a
// plugin's ADD ran with, what it was run for, and its result, which DEL and CHECK are given. A
// record is written before the ADD runs and again with its result: one without a result is an ADD
// a crash may have cut short, taken back with DEL. Durable, and kept across boots (docs/adr/0011).
// Each file is checked against its schema (DelegatedRecord in schemas/state.schema.json) when read:
// its plugin types are run and its names handed to them.
import { join } from 'node:path';
import type { DelegatedRecord as DelegatedRecordFile } from '../protocol/validate.ts';
import { recordFileName, stateLayout } from '../protocol/paths.ts';
import { ensurePrivateDir, namesIn, removeFile, writeFileAtomic } from '../registry/atomic-file.ts';
import { setAside, type OnQuarantined } from '../registry/quarantine.ts';
import { readStateDocument, stateDocumentText, type Unversioned } from '../registry/state-document.ts';
import type { PluginTarget } from './plugin.ts';

/** A record as the code holds it (DelegatedRecord in schemas/state.schema.json). */
export type DelegatedRecord = Unversioned<DelegatedRecordFile>;

export class DelegatedStore {
  private readonly stateDir: string;
  private readonly dir: string;
  private readonly onCorrupt: OnQuarantined;
  /** Every record, read once: only this daemon writes them. */
  private cache: Map<string, DelegatedRecord> | undefined;

  /** onCorrupt: told of a record that cannot be read, set aside in quarantine/ (not lost, not in the way). */
  constructor(stateDir: string, onCorrupt: OnQuarantined) {
    this.stateDir = stateDir;
    this.dir = join(stateDir, stateLayout.delegated);
    this.onCorrupt = onCorrupt;
    ensurePrivateDir(this.dir);
  }

  all(): DelegatedRecord[] {
    return [...this.records().values()];
  }

  of(containerId: string): DelegatedRecord[] {
    return this.all().filter((r) => r.containerId === containerId);
  }

  put(record: DelegatedRecord): void {
    const name = fileOf(record);
    writeFileAtomic(join(this.dir, name), stateDocumentText(record));
    this.records().set(name, record);
  }

  remove(record: DelegatedRecord): void {
    const name = fileOf(record);
    removeFile(join(this.dir, name));
    this.records().delete(name);
  }

  private records(): Map<string, DelegatedRecord> {
    if (this.cache) return this.cache;
    this.cache = new Map();
    for (const name of namesIn(this.dir).filter((n) => n.endsWith('.json') && !n.startsWith('.'))) {
      const path = join(this.dir, name);
      try {
        this.cache.set(name, read(path, name));
      } catch (err) {
        setAside(this.stateDir, path, (err as Error).message, this.onCorrupt);
      }
    }
    return this.cache;
  }
}

function read(path: string, name: string): DelegatedRecord {
  const record = readStateDocument('DelegatedRecord', path, `delegated record ${name}`);
  if (fileOf(record) !== name) throw new Error(`delegated record ${name} holds the record of ${fileOf(record)}, not of its own name`);
  return record;
}

const fileOf = (record: Pick<DelegatedRecord, 'containerId' | 'interface'>) => recordFileName({ containerId: record.containerId, ifname: record.interface });

/** What a record's plugins are run for; `netns` empty when it is gone. */
export function targetOf(record: DelegatedRecord, netnsThere: boolean): PluginTarget {
  return { containerId: record.containerId, netns: netnsThere ? record.netns : '', ifname: record.interface, args: record.args };
}
