// Where the desired state comes from: the documents (Networks and PodNetworkConfigs) and who each
// recorded sandbox is. Two sources implement it: a directory of documents (standalone) and the
// Kubernetes API; the reconciler reads only this interface (docs/adr/0012).
import type { Problem } from '../model/desired.ts';
import { documentName, identityOf, type SandboxIdentity } from '../model/identity.ts';
import type { AttachmentRecord, Network, PodNetworkConfig, PodNetworkPermission } from '../protocol/validate.ts';
import type { ApiDocument } from './documents.ts';

export interface DesiredDocuments {
  networks: Map<string, Network>;
  configs: PodNetworkConfig[];
  /** What each namespace may ask (model/permissions.ts). */
  permissions: PodNetworkPermission[];
  /** Documents that cannot be read, each naming the document and the field. */
  problems: Problem[];
}

export interface DesiredSource {
  /** The documents in force now: read at the start of every pass. */
  documents(): DesiredDocuments;
  /**
   * Who a recorded sandbox is: its labels, its namespace's labels and its annotation. Undefined
   * when the source knows no such pod (Kubernetes: not on this node, or another incarnation of
   * the name): such a sandbox gets nothing of podnet's.
   */
  identity(record: AttachmentRecord): SandboxIdentity | undefined;
  /**
   * The pods of this node as the source knows them before their sandboxes are made (Kubernetes),
   * each by UID with who it is; a source that knows pods only by their records has none.
   */
  nodePods?(): { uid: string; identity: SandboxIdentity }[];
  /** A namespace's labels, where the source knows them (Kubernetes); else only its name's label counts. */
  namespaceLabels?(namespace: string): Record<string, string> | undefined;
  /** Whether the source has its first whole view: a pass before it would take back what is still asked. */
  readonly synced: boolean;
  /** Starts following; `changed` is called on every change. Resolves once synced. */
  start(changed: () => void): Promise<void>;
  stop(): Promise<void>;
}

/**
 * No documents at all, sandboxes known by what their runtime recorded: a pass against it takes
 * back everything podnet applied (`podnet uninstall`).
 */
export const noDocuments: DesiredSource = {
  documents: emptyDocuments,
  identity: identityOf,
  synced: true,
  start: async () => undefined,
  stop: async () => undefined,
};

/** No documents: what a source holds before it read any. */
export function emptyDocuments(): DesiredDocuments {
  return { networks: new Map(), configs: [], permissions: [], problems: [] };
}

/** Puts `doc` with the documents of its kind in `docs`; a Network replaces one of its name. */
export function addDocument(docs: DesiredDocuments, doc: ApiDocument): void {
  if (doc.kind === 'Network') docs.networks.set(doc.metadata.name, doc);
  else if (doc.kind === 'PodNetworkConfig') docs.configs.push(doc);
  else docs.permissions.push(doc);
}

/** `docs` with `extra` on top: a document of the same kind and name replaces the one there. */
export function withDocuments(docs: DesiredDocuments, extra: readonly ApiDocument[]): DesiredDocuments {
  const replaced = new Set(extra.map(documentName));
  const out: DesiredDocuments = {
    networks: new Map(docs.networks),
    configs: docs.configs.filter((c) => !replaced.has(documentName(c))),
    permissions: docs.permissions.filter((p) => !replaced.has(documentName(p))),
    problems: [...docs.problems],
  };
  for (const doc of extra) addDocument(out, doc);
  return out;
}
