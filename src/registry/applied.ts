// What podnet has applied, per sandbox (<stateDir>/applied/<containerId>.json), and the host
// bridges it made (<stateDir>/host-objects.json): what undo takes back, and the only host
// objects podnet ever removes.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { emptyApplied, isEmptyApplied, type AppliedState } from '../model/state.ts';
import { hostObjectsFile, stateLayout } from '../protocol/paths.ts';
import { ensurePrivateDir, removeFile, writeFileAtomic } from './atomic-file.ts';
import { kernelState } from './boot.ts';

export class AppliedStore {
  private readonly dir: string;
  private readonly hostObjectsFile: string;
  /** Every record, read once: only this daemon writes them (one daemon per state dir). */
  private cache: Map<string, AppliedState> | undefined;

  constructor(stateDir: string) {
    this.dir = join(stateDir, stateLayout.applied);
    this.hostObjectsFile = join(stateDir, hostObjectsFile);
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
    // An empty state is kept while it names its pass (see execute): the sandbox's going removes it.
    if (isEmptyApplied(state) && state.pass === undefined) {
      removeFile(file, kernelState);
      this.records().delete(state.containerId);
    } else {
      writeFileAtomic(file, `${JSON.stringify(state, null, 2)}\n`, kernelState);
      this.records().set(state.containerId, state);
    }
  }

  remove(containerId: string): void {
    removeFile(join(this.dir, `${containerId}.json`), kernelState);
    this.records().delete(containerId);
  }

  private records(): Map<string, AppliedState> {
    this.cache ??= new Map(
      readdirSync(this.dir)
        .filter((n) => n.endsWith('.json') && !n.startsWith('.'))
        .map((n) => read(join(this.dir, n)))
        .map((state) => [state.containerId, state]),
    );
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
    const objects = { bridges: [...new Set(bridges)].sort(), ...(pass ? { pass } : {}) };
    writeFileAtomic(this.hostObjectsFile, `${JSON.stringify(objects, null, 2)}\n`, kernelState);
  }

  private hostObjects(): { bridges: string[]; pass?: string } {
    return existsSync(this.hostObjectsFile) ? (JSON.parse(readFileSync(this.hostObjectsFile, 'utf8')) as { bridges: string[]; pass?: string }) : { bridges: [] };
  }
}

/** A record, with the parts an older podnet did not write filled in (attachments were all bridge ones). */
function read(file: string): AppliedState {
  const state = JSON.parse(readFileSync(file, 'utf8')) as AppliedState;
  const full = { ...emptyApplied(state.containerId, state.netns), ...state };
  full.attachments = full.attachments.map((a) => ({ ...a, kind: a.kind ?? 'bridge' }));
  return full;
}
