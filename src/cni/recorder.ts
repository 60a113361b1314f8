// How the plugin tells the daemon about attachments: over the socket when the daemon answers in
// time, else into the spool, so that a change is durable before the plugin reports success.
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { PodnetError, type ErrorCode } from '../errors.ts';
import { callDaemon } from '../protocol/client.ts';
import { attachmentRoute, recordFileName, routes, stateLayout } from '../protocol/paths.ts';
import {
  parseDocument,
  type AttachmentKey,
  type AttachmentRecord,
  type GcRequest,
  type SpoolEntry,
} from '../protocol/validate.ts';
import { listSpool, readSpoolEntry, spoolDir, spoolWritable, writeSpoolEntry } from '../registry/spool.ts';
import { applyChanges, changesFor, keyOf } from '../registry/fold.ts';

export interface RecorderSettings {
  socketPath: string;
  stateDir: string;
  timeoutMs: number;
}

/** Where a change went: straight to the daemon, or into the spool for it to replay. */
export type Delivery = 'daemon' | 'spool';

export interface Recorder {
  add(record: AttachmentRecord): Promise<Delivery>;
  del(key: AttachmentKey): Promise<Delivery>;
  gc(request: GcRequest): Promise<Delivery>;
  /** The record of `key` as the daemon (or, when it is down, the state on disk) has it. */
  find(key: AttachmentKey): Promise<AttachmentRecord | undefined>;
  /** Resolves when podnet can record changes now; throws NOT_AVAILABLE otherwise. */
  ready(): Promise<void>;
}

/** Failures after which the change goes to the spool: the daemon is away, busy or broken. */
const spoolOn: ReadonlySet<ErrorCode> = new Set(['NOT_AVAILABLE', 'TRY_AGAIN_LATER', 'IO_FAILURE', 'INTERNAL']);

export function daemonRecorder(settings: RecorderSettings): Recorder {
  const call = (method: 'GET' | 'PUT' | 'POST' | 'DELETE', path: string, body?: unknown) =>
    callDaemon({ socketPath: settings.socketPath, method, path, body, timeoutMs: settings.timeoutMs });

  async function deliver(entry: SpoolEntry, send: () => Promise<unknown>): Promise<Delivery> {
    try {
      await send();
      return 'daemon';
    } catch (err) {
      if (!(err instanceof PodnetError) || !spoolOn.has(err.code)) throw err;
      try {
        await writeSpoolEntry(settings.stateDir, entry);
      } catch (spoolErr) {
        throw new PodnetError(
          'TRY_AGAIN_LATER',
          `podnet could not record the change: ${err.message}, and the spool ${spoolDir(settings.stateDir)} is not writable: ${(spoolErr as Error).message}`,
        );
      }
      return 'spool';
    }
  }

  return {
    add: (record) => deliver({ op: 'add', record }, () => call('PUT', attachmentRoute(record), record)),
    del: (key) => deliver({ op: 'del', key }, () => call('DELETE', attachmentRoute(key))),
    gc: (request) => deliver({ op: 'gc', gc: request }, () => call('POST', routes.gc, request)),

    async find(key) {
      try {
        const view = await call('GET', attachmentRoute(key));
        return (view as { record: AttachmentRecord }).record;
      } catch (err) {
        if (err instanceof PodnetError && err.code === 'NOT_FOUND') return undefined;
        if (!(err instanceof PodnetError) || !spoolOn.has(err.code)) throw err;
        return findOnDisk(settings.stateDir, key);
      }
    },

    async ready() {
      try {
        await call('GET', routes.readyz);
        return;
      } catch (err) {
        if (await spoolWritable(settings.stateDir)) return;
        throw new PodnetError(
          'NOT_AVAILABLE',
          `podnet cannot record attachments: ${(err as Error).message}, and the spool ${spoolDir(settings.stateDir)} is not writable`,
        );
      }
    },
  };
}

/** The daemon's answer, worked out from the record files and the spool when it is down. */
async function findOnDisk(stateDir: string, key: AttachmentKey): Promise<AttachmentRecord | undefined> {
  const records = new Map<string, AttachmentRecord>();
  try {
    const text = await readFile(join(stateDir, stateLayout.records, recordFileName(key)), 'utf8');
    const record = parseDocument('AttachmentRecord', JSON.parse(text) as unknown, 'record');
    records.set(keyOf(record), record);
  } catch {
    // No record file, or a corrupt one the daemon will set aside: not recorded as far as disk says.
  }
  for (const name of await listSpool(stateDir)) {
    const entry = await readSpoolEntry(stateDir, name).catch(() => undefined);
    if (entry) applyChanges(records, changesFor(records, entry));
  }
  return records.get(keyOf(key));
}
