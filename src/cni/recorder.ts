// How the plugin tells the daemon about attachments (docs/adr/0003): every change goes into the
// spool, the daemon's inbox, and is there before the plugin reports success (an ADD's not synced:
// it lives as long as the kernel whose sandbox it tells of, docs/adr/0024). A daemon that is down,
// slow or restarting never fails a pod, and slows one at most by a bound the config sets: an ADD
// waits for its sandbox's first pass (docs/adr/0028), a DEL of a container with delegated
// attachments for their plugins' DEL (see plugin.ts). CHECK asks the daemon, and answers from disk
// when it cannot.
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { PodnetError } from '../errors.ts';
import { callDaemon } from '../protocol/client.ts';
import { allPodsQuiet, attachmentRoute, firstPassRoute, recordFileName, stateLayout } from '../protocol/paths.ts';
import type { AttachmentKey, AttachmentRecord, FirstPassResponse, GcRequest, SpoolEntry } from '../protocol/validate.ts';
import { parseStateDocument } from '../registry/state-document.ts';
import { listSpool, readSpoolEntry, spoolDir, spoolWritable, writeSpoolEntry } from '../registry/spool.ts';
import { applyChanges, changesFor, keyOf } from '../registry/fold.ts';

export interface RecorderSettings {
  socketPath: string;
  stateDir: string;
  timeoutMs: number;
  /** How long ADD waits for its sandbox's first pass; 0: it does not. */
  firstPassTimeoutMs: number;
}

export interface Recorder {
  add(record: AttachmentRecord): Promise<void>;
  del(key: AttachmentKey): Promise<void>;
  gc(request: GcRequest): Promise<void>;
  /** The record of `key` as the daemon (or, when it does not answer, the state on disk) has it. */
  find(key: AttachmentKey): Promise<AttachmentRecord | undefined>;
  /** Resolves when podnet can record changes now; throws NOT_AVAILABLE otherwise. */
  ready(): Promise<void>;
  /**
   * Asks the daemon for the first pass of the sandbox `record` tells of, once its ADD is spooled,
   * and waits at most firstPassTimeoutMs: what the pass came to, or undefined when the daemon did
   * not answer (down, frozen, slower than the bound) or was not asked. Never an error: the pod
   * starts all the same, and the daemon makes its network later; when the daemon was asked and
   * did not answer that the pod has what it asks, the record is marked startedWithoutNetwork.
   */
  firstPass(record: AttachmentRecord): Promise<FirstPassResponse | undefined>;
  /**
   * Resolves once the container has no delegated attachment on file (the daemon ran their
   * plugins' DEL), or after the timeout: never an error.
   */
  delegatedGone(containerId: string): Promise<void>;
}

export function spoolRecorder(settings: RecorderSettings): Recorder {
  /** The spool file of this invocation's removal, until the daemon takes it in. */
  let spooledDel: string | undefined;
  const record = async (entry: SpoolEntry) => {
    try {
      const path = writeSpoolEntry(settings.stateDir, entry);
      if (entry.op === 'del') spooledDel = path;
    } catch (err) {
      throw new PodnetError('IO_FAILURE', `podnet could not record the ${entry.op} in ${spoolDir(settings.stateDir)}: ${(err as Error).message}`);
    }
  };
  return {
    add: (r) => record({ op: 'add', record: r }),
    del: (key) => record({ op: 'del', key }),
    gc: (request) => record({ op: 'gc', gc: request }),

    async find(key) {
      try {
        const view = await callDaemon({ socketPath: settings.socketPath, method: 'GET', path: attachmentRoute(key), timeoutMs: settings.timeoutMs });
        return (view as { record: AttachmentRecord }).record;
      } catch (err) {
        if (err instanceof PodnetError && err.code === 'NOT_FOUND') return undefined;
        if (!(err instanceof PodnetError) || err.code !== 'NOT_AVAILABLE') throw err;
        return findOnDisk(settings.stateDir, key);
      }
    },

    async delegatedGone(containerId) {
      const dir = join(settings.stateDir, stateLayout.delegated);
      const prefix = `${recordFileName({ containerId, ifname: '' })}`.replace(/\.json$/, '');
      // Taken here, not imported: node:fs/promises costs every plugin run 2 ms to load (spool.ts).
      const { readdir } = process.getBuiltinModule('node:fs/promises');
      const hasRecords = async () => (await readdir(dir).catch(() => [] as string[])).some((n) => n.startsWith(prefix));
      // None: nothing to wait for (the common DEL). Else done once the daemon has taken the removal
      // in (from then on it starts nothing new for the container) and no record of it is left.
      if (!(await hasRecords())) return;
      const taken = () => spooledDel === undefined || !existsSync(spooledDel);
      const deadline = Date.now() + settings.timeoutMs;
      while (Date.now() < deadline && (!taken() || (await hasRecords()))) await new Promise((r) => setTimeout(r, 20));
    },

    async firstPass(added) {
      const waitMs = settings.firstPassTimeoutMs;
      if (waitMs === 0) return undefined;
      // The daemon's hint that the pod asks for nothing: no round trip, which would cost every
      // such pod's creation more than all the rest of ADD (docs/adr/0028).
      const hints = join(settings.stateDir, stateLayout.quietPods);
      const podUid = added.pod.uid;
      if (existsSync(join(hints, allPodsQuiet)) || (podUid !== undefined && existsSync(join(hints, podUid)))) return { outcome: 'nothing-asked' };
      let answer: FirstPassResponse | undefined;
      try {
        // The daemon answers before waitMs is up; the client's bound is the plugin's own.
        answer = (await callDaemon({ socketPath: settings.socketPath, method: 'POST', path: firstPassRoute(added), body: { waitMs }, timeoutMs: waitMs })) as FirstPassResponse;
      } catch {
        answer = undefined;
      }
      if (answer?.outcome !== 'applied' && answer?.outcome !== 'nothing-asked' && answer?.outcome !== 'refused') {
        // The containers start before the pod's network: the daemon tells it when it makes what the pod asked then.
        await record({ op: 'add', record: { ...added, startedWithoutNetwork: true } }).catch(() => undefined);
      }
      return answer;
    },

    async ready() {
      if (!spoolWritable(settings.stateDir)) {
        throw new PodnetError('NOT_AVAILABLE', `podnet cannot record attachments: the spool ${spoolDir(settings.stateDir)} is not writable`);
      }
    },
  };
}

/** The daemon's answer, worked out from the record files and the spool when it does not answer. */
async function findOnDisk(stateDir: string, key: AttachmentKey): Promise<AttachmentRecord | undefined> {
  // The spool first: a daemon that applies an entry between the two reads then still shows it.
  const spooled = await listSpool(stateDir);
  const records = new Map<string, AttachmentRecord>();
  try {
    const text = await process.getBuiltinModule('node:fs/promises').readFile(join(stateDir, stateLayout.records, recordFileName(key)), 'utf8');
    const found = parseStateDocument('AttachmentRecord', text, 'record');
    records.set(keyOf(found), found);
  } catch {
    // No record file, or a corrupt one the daemon will set aside: not recorded as far as disk says.
  }
  for (const name of spooled) {
    const entry = await readSpoolEntry(stateDir, name).catch(() => undefined);
    if (entry) applyChanges(records, changesFor(records, entry));
  }
  return records.get(keyOf(key));
}
