// The ResourceClaims the kubelet had podnet prepare on this node (<stateDir>/claims/<uid>.json,
// docs/adr/0033): written, durable, before NodePrepareResources answers, removed when the kubelet
// unprepares the claim. The kubelet prepares a claim once and remembers that it did: a claim
// podnet forgot would leave its pods without their networks, so the files outlive restarts and
// boots. Each file is checked against its schema (PreparedClaim in schemas/state.schema.json) when
// read; one that is not is set aside in quarantine/.
import { join } from 'node:path';
import type { PreparedClaim as PreparedClaimFile } from '../protocol/validate.ts';
import { objectUid, stateLayout } from '../protocol/paths.ts';
import { ensurePrivateDir, namesIn, removeFile, writeFileAtomic } from '../registry/atomic-file.ts';
import { setAside, type OnQuarantined } from '../registry/quarantine.ts';
import { readStateDocument, stateDocumentText, type Unversioned } from '../registry/state-document.ts';

/** A prepared claim as the code holds it. */
export type PreparedClaim = Unversioned<PreparedClaimFile>;

export class PreparedClaims {
  private readonly stateDir: string;
  private readonly dir: string;
  private readonly claims = new Map<string, PreparedClaim>();

  /** Reads every prepared claim; onCorrupt: told of a file that cannot be read, set aside. */
  constructor(stateDir: string, onCorrupt: OnQuarantined) {
    this.stateDir = stateDir;
    this.dir = join(stateDir, stateLayout.claims);
    ensurePrivateDir(this.dir);
    for (const name of namesIn(this.dir).filter((n) => n.endsWith('.json') && !n.startsWith('.'))) {
      const path = join(this.dir, name);
      try {
        const claim = readStateDocument('PreparedClaim', path, `prepared claim ${name}`);
        if (`${claim.claim.uid}.json` !== name) throw new Error(`prepared claim ${name} holds claim ${claim.claim.uid}, not the one of its name`);
        this.claims.set(claim.claim.uid, claim);
      } catch (err) {
        setAside(this.stateDir, path, (err as Error).message, onCorrupt);
      }
    }
  }

  get(uid: string): PreparedClaim | undefined {
    return this.claims.get(uid);
  }

  all(): PreparedClaim[] {
    return [...this.claims.values()];
  }

  /** The prepared claim of this namespace and name, if any. */
  named(namespace: string, name: string): PreparedClaim | undefined {
    return this.all().find((c) => c.claim.namespace === namespace && c.claim.name === name);
  }

  /** On file before it returns. */
  put(claim: PreparedClaim): void {
    writeFileAtomic(join(this.dir, `${claim.claim.uid}.json`), stateDocumentText(claim));
    this.claims.set(claim.claim.uid, claim);
  }

  /** Whether it was prepared; gone from file before it returns. */
  remove(uid: string): boolean {
    const had = this.claims.delete(uid);
    // A UID of the schema's shape names a file here; any other was never prepared.
    if (objectUid.test(uid)) removeFile(join(this.dir, `${uid}.json`));
    return had;
  }
}
