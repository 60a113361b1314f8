// The plugin's hints for pods that ask podnet for nothing (docs/adr/0028): their ADD then does not
// ask the daemon for a first pass, which would cost a pod's creation a round trip over the socket
// for nothing. One empty file per pod of the node that asks nothing, by UID, in the state dir's
// quiet-pods/ (Kubernetes mode, where pods are known before their ADD); `_all` while no document
// can ask anything of any pod (standalone mode without a PodNetworkConfig). Written from the
// documents and pods of now at each change of either; what a change has not reached yet is the
// same as a daemon that did not answer in time: the pod's network comes after it starts.
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../log.ts';
import type { SandboxIdentity } from '../model/identity.ts';
import { allPodsQuiet, objectUid, stateLayout } from '../protocol/paths.ts';
import type { DesiredDocuments } from '../sources/source.ts';
import { asksAnything } from './first-pass.ts';

export class QuietPods {
  private readonly dir: string;
  private readonly log: Logger;
  /** The hint files there now, as this daemon wrote them. */
  private written = new Set<string>();

  /** Starts from an empty folder: hints an earlier daemon left may no longer hold. */
  constructor(stateDir: string, log: Logger) {
    this.dir = join(stateDir, stateLayout.quietPods);
    this.log = log;
    try {
      rmSync(this.dir, { recursive: true, force: true });
      mkdirSync(this.dir, { mode: 0o700 });
    } catch (err) {
      // No hints: every ADD asks the daemon, as before them.
      log.warn('could not make the folder of hints for the plugin', { dir: this.dir, error: (err as Error).message });
    }
  }

  /** The hints for `docs` and, where the source knows them, the node's pods (nodePods). */
  update(docs: DesiredDocuments, pods: readonly { uid: string; identity: SandboxIdentity }[] | undefined): void {
    const quiet = new Set<string>();
    if (pods === undefined) {
      // Without pods known ahead (standalone), only a node whose documents select no pod at all.
      if (docs.configs.length === 0) quiet.add(allPodsQuiet);
    } else {
      // A UID names a file here: one that is not a UID's shape (the API server's word alone) gets no hint.
      for (const { uid, identity } of pods) if (objectUid.test(uid) && !asksAnything(identity, docs.configs)) quiet.add(uid);
    }
    // Removed first: a pod that asks now must not be told quiet a moment longer than needed. One
    // that could not be removed stays known as written, and is tried again at the next change.
    const next = new Set(quiet);
    for (const name of this.written) if (!quiet.has(name) && !this.remove(name)) next.add(name);
    for (const name of quiet) if (!this.written.has(name) && !this.write(name)) next.delete(name);
    this.written = next;
  }

  private write(name: string): boolean {
    try {
      writeFileSync(join(this.dir, name), '', { mode: 0o600 });
      return true;
    } catch (err) {
      this.log.warn("could not write a hint for the plugin; that pod's ADD asks the daemon", { file: join(this.dir, name), error: (err as Error).message });
      return false;
    }
  }

  private remove(name: string): boolean {
    try {
      rmSync(join(this.dir, name), { force: true });
      return true;
    } catch (err) {
      this.log.warn('could not remove a hint for the plugin; trying again at the next change', { file: join(this.dir, name), error: (err as Error).message });
      return false;
    }
  }
}
