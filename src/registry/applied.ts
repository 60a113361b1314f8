// What podnet has applied, per sandbox (<stateDir>/applied/<containerId>.json), and the host
// bridges it made (<stateDir>/host-objects.json): what undo takes back, and the only host
// objects podnet ever removes. Each file is checked against its schema (schemas/state.schema.json)
// when read: its names reach command lines. One that fails is set aside in quarantine/ and told;
// what it described is then podnet's no more (left in place, never taken back).
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import { emptyApplied, isEmptyApplied, type AppliedState } from '../model/state.ts';
import { hostObjectsFile, stateLayout } from '../protocol/paths.ts';
import { ensurePrivateDir, removeFile, writeFileAtomic } from './atomic-file.ts';
import { kernelState } from './boot.ts';
import { setAside, type OnQuarantined } from './quarantine.ts';
import { readStateDocument, stateDocumentText } from './state-document.ts';

interface HostObjects {
  bridges: string[];
  pass?: string;
}

export class AppliedStore {
  private readonly stateDir: string;
  private readonly dir: string;
  private readonly hostObjectsFile: string;
  private readonly onQuarantined: OnQuarantined;
  /** Every record, read once: only this daemon writes them (one daemon per state dir). */
  private cache: Map<string, AppliedState> | undefined;

  /** onQuarantined: told of a file that fails its schema, set aside in quarantine/. */
  constructor(stateDir: string, onQuarantined: OnQuarantined = () => undefined) {
    this.stateDir = stateDir;
    this.dir = join(stateDir, stateLayout.applied);
    this.hostObjectsFile = join(stateDir, hostObjectsFile);
    this.onQuarantined = onQuarantined;
    ensurePrivateDir(this.dir);
  }

  get(containerId: string): AppliedState | undefined {
    return this.records().get(containerId);
  }

  all(): AppliedState[] {
    return [...this.records().values()];
  }

  put(state: AppliedState): void {
    const file = join(this.dir, `${state.containerId}.json`);
    // An empty state is kept while it names its pass (see execute), or the configs the sandbox
    // has whole (which made nothing of podnet's own, a cni Network's say): the sandbox's going removes it.
    if (isEmptyApplied(state) && state.pass === undefined && !state.configs?.length) {
      removeFile(file, kernelState);
      this.records().delete(state.containerId);
    } else {
      writeFileAtomic(file, stateDocumentText(state), kernelState);
      this.records().set(state.containerId, state);
    }
  }

  remove(containerId: string): void {
    removeFile(join(this.dir, `${containerId}.json`), kernelState);
    this.records().delete(containerId);
  }

  private records(): Map<string, AppliedState> {
    if (this.cache) return this.cache;
    this.cache = new Map();
    for (const name of readdirSync(this.dir).filter((n) => n.endsWith('.json') && !n.startsWith('.'))) {
      const path = join(this.dir, name);
      try {
        const state = read(path, name);
        this.cache.set(state.containerId, state);
      } catch (err) {
        setAside(this.stateDir, path, (err as Error).message, this.onQuarantined);
      }
    }
    return this.cache;
  }

  bridges(): string[] {
    return this.hostObjects().bridges;
  }

  /** The pass that last recorded the bridges (see execute). */
  hostPass(): string | undefined {
    return this.hostObjects().pass;
  }

  setBridges(bridges: readonly string[], pass = this.hostPass()): void {
    const objects: HostObjects = { bridges: [...new Set(bridges)].sort(), ...(pass ? { pass } : {}) };
    writeFileAtomic(this.hostObjectsFile, stateDocumentText(objects), kernelState);
  }

  private hostObjects(): HostObjects {
    if (!existsSync(this.hostObjectsFile)) return { bridges: [] };
    try {
      return readStateDocument('HostObjects', this.hostObjectsFile, hostObjectsFile);
    } catch (err) {
      // Its bridges are left in place: podnet removes only bridges it knows it made.
      setAside(this.stateDir, this.hostObjectsFile, (err as Error).message, this.onQuarantined);
      return { bridges: [] };
    }
  }
}

/** A record, with the parts an older podnet did not write filled in (attachments were all bridge ones). */
function read(path: string, name: string): AppliedState {
  const state = readStateDocument('AppliedState', path, `applied state ${name}`);
  if (`${state.containerId}.json` !== name) throw new Error(`applied state ${name} holds the state of ${state.containerId}, not of its own name`);
  const full = { ...emptyApplied(state.containerId, state.netns), ...state };
  return { ...full, attachments: full.attachments.map((a) => ({ ...a, kind: a.kind ?? 'bridge' })) };
}
