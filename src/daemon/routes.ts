// What each of the socket's routes does (docs/adr/0002), apart from the HTTP that carries it
// (server.ts): a handler is given the daemon's parts and the request's path segments and body,
// and answers with a status and a JSON body, or throws a PodnetError the server maps to a status.
import { PodnetError } from '../errors.ts';
import { isNetworkNamespace, networkNamespaceCheck } from '../netns/probe.ts';
import {
  parseDocument,
  type AttachmentKey,
  type AttachmentList,
  type AttachmentRecord,
  type DaemonStatus,
  type DeleteResponse,
  type DiffRequest,
  type DiffResponse,
  type DocumentName,
  type FirstPassRequest,
  type FirstPassResponse,
  type GcRequest,
  type GcResponse,
  type SandboxList,
} from '../protocol/validate.ts';
import type { ApiDocument } from '../sources/documents.ts';
import type { Registry } from '../registry/registry.ts';
import type { AppliedState } from '../model/state.ts';
import { answerWithinMs } from './first-pass.ts';
import type { TableSeen } from './views.ts';

/** What the routes use of the registry. */
export type AttachmentRegistry = Pick<Registry, 'size' | 'list' | 'get' | 'quarantined' | 'writableProblem' | 'spoolPending' | 'apply' | 'drainSpool' | 'withdraw'>;

/** The parts of the daemon the routes answer from. */
export interface DaemonParts {
  registry: AttachmentRegistry;
  version: string;
  /** Standalone: the folder of documents it follows, absolute. */
  configDir?: string;
  /** What the reconciler knows of each sandbox (standalone mode), for `podnet explain`. */
  sandboxes?: () => SandboxList;
  /** podnet's port security table as a pass last read the host (undefined: none has yet), for `podnet status`. */
  portSecuritySeen?: () => TableSeen | undefined;
  /** What the reconciler would do with these documents on top (standalone mode), for `podnet diff`. */
  diff?: (documents: ApiDocument[]) => Promise<DiffResponse>;
  /** A new sandbox's first pass, answered within `waitMs` (docs/adr/0028); none: the daemon follows no documents. */
  firstPass?: (record: AttachmentRecord, waitMs: number) => Promise<FirstPassResponse>;
  /** Runs a pass, waiting for it until `deadline` (ms since the epoch): what takes back a refused sandbox. */
  passBy?: (deadline: number) => Promise<boolean>;
}

export interface RouteRequest<Body> {
  /** The segments the route's pattern captured, still percent-encoded. */
  params: string[];
  /**
   * The body, read and checked against the route's document when called. A handler checks its
   * path and what it needs first, so that a request refused anyway is refused without its body.
   */
  body(): Promise<Body>;
}

export interface Answer {
  status: number;
  body: unknown;
}

export type Method = 'GET' | 'PUT' | 'POST' | 'DELETE';

export interface Route {
  method: Method;
  pattern: RegExp;
  /** The document the body must be, and what an error calls it; a route without one reads no body. */
  body?: { document: DocumentName; what: string };
  /** Its RouteRequest's body type is the one of `body.document`: the table below pairs them. */
  handle(daemon: DaemonParts, request: RouteRequest<unknown>): Promise<Answer>;
}

const followsNoDocuments = () => new PodnetError('NOT_FOUND', 'this daemon follows no documents (start it with --config-dir)');

function decodeSegment(segment: string | undefined): string {
  try {
    return decodeURIComponent(segment ?? '');
  } catch {
    throw new PodnetError('INVALID_REQUEST', `request path segment "${segment}" is not valid percent-encoding`);
  }
}

function keyFromPath(params: string[]): AttachmentKey {
  return parseDocument('AttachmentKey', { containerId: decodeSegment(params[0]), ifname: decodeSegment(params[1]) }, 'attachment in the request path');
}

export async function health(): Promise<Answer> {
  return { status: 200, body: { status: 'ok' } };
}

/** Ready while the daemon can apply changes: its records and the plugins' spool are writable. */
export async function readiness({ registry }: DaemonParts): Promise<Answer> {
  const problem = await registry.writableProblem();
  if (problem) throw new PodnetError('NOT_AVAILABLE', `not ready: ${problem}`);
  return { status: 200, body: { status: 'ready' } };
}

/**
 * The bridge ports of the attachments podnet made: those with a host end, secured or not; and of
 * the secured that the last read of the port security table could judge (`seen`), those it did
 * not filter: all of them when the table was not whole, or could not be read. None is told before
 * a pass has read the table.
 */
function portsOf(list: SandboxList, seen: TableSeen | undefined): NonNullable<DaemonStatus['ports']> {
  let [secured, open, unverified] = [0, 0, 0];
  for (const report of list.items) {
    for (const a of (report.applied as AppliedState | undefined)?.attachments ?? []) {
      if (a.portSecurity) {
        secured++;
        if (a.hostIf && seen?.judged.has(a.hostIf) && !seen.filtered?.has(a.hostIf)) unverified++;
      } else if (a.hostIf) open++;
    }
  }
  return { secured, open, ...(seen ? { unverified } : {}) };
}

export async function getStatus({ registry, version, configDir, sandboxes, portSecuritySeen }: DaemonParts): Promise<Answer> {
  const status: DaemonStatus = {
    version,
    ...(configDir ? { configDir } : {}),
    attachments: registry.size,
    spoolPending: await registry.spoolPending(),
    ...(sandboxes ? { ports: portsOf(sandboxes(), portSecuritySeen?.()) } : {}),
    quarantined: [...registry.quarantined()],
  };
  return { status: 200, body: status };
}

export async function listAttachments({ registry }: DaemonParts): Promise<Answer> {
  await registry.drainSpool();
  const netnsExists = networkNamespaceCheck();
  const list: AttachmentList = { items: registry.list().map((record) => ({ record, netnsExists: netnsExists(record.netns) })) };
  return { status: 200, body: list };
}

export async function getAttachment({ registry }: DaemonParts, { params }: RouteRequest<never>): Promise<Answer> {
  const key = keyFromPath(params);
  await registry.drainSpool();
  const record = registry.get(key);
  if (!record) throw new PodnetError('NOT_FOUND', `no attachment recorded for container ${key.containerId} interface ${key.ifname}`);
  return { status: 200, body: { record, netnsExists: isNetworkNamespace(record.netns) } };
}

export async function putAttachment({ registry }: DaemonParts, request: RouteRequest<AttachmentRecord>): Promise<Answer> {
  const key = keyFromPath(request.params);
  const record = await request.body();
  if (record.containerId !== key.containerId || record.ifname !== key.ifname) {
    throw new PodnetError('INVALID_REQUEST', `record of ${record.containerId}/${record.ifname} sent to the path of ${key.containerId}/${key.ifname}`);
  }
  await registry.apply({ op: 'add', record });
  return { status: 200, body: { record, netnsExists: isNetworkNamespace(record.netns) } };
}

/** Removing what is not recorded succeeds too, removing nothing: a runtime repeats its DELs. */
export async function deleteAttachment({ registry }: DaemonParts, { params }: RouteRequest<never>): Promise<Answer> {
  const changes = await registry.apply({ op: 'del', key: keyFromPath(params) });
  const answer: DeleteResponse = { removed: changes.removed.length > 0 };
  return { status: 200, body: answer };
}

export async function listSandboxes({ sandboxes }: DaemonParts): Promise<Answer> {
  if (!sandboxes) throw followsNoDocuments();
  return { status: 200, body: sandboxes() };
}

export async function diff(daemon: DaemonParts, request: RouteRequest<DiffRequest>): Promise<Answer> {
  if (!daemon.diff) throw followsNoDocuments();
  const { documents } = await request.body();
  // Each document against its own kind's schema: the request's schema only names the kinds.
  return { status: 200, body: await daemon.diff(documents.map((doc, i) => parseDocument(doc.kind, doc, `diff request document ${i + 1}`))) };
}

/**
 * An ADD's wait for its sandbox's first pass (docs/adr/0028): its record is taken in from the
 * spool, and the daemon answers within the plugin's wait what the pass came to.
 */
export async function firstPass(daemon: DaemonParts, request: RouteRequest<FirstPassRequest>): Promise<Answer> {
  const key = keyFromPath(request.params);
  // The plugin's wait runs from its request: what reading it and the spool took is counted.
  const arrived = Date.now();
  const { waitMs } = await request.body();
  await daemon.registry.drainSpool();
  const record = daemon.registry.get(key);
  if (!record) throw new PodnetError('NOT_FOUND', `no attachment recorded for container ${key.containerId} interface ${key.ifname}`);
  const left = waitMs - (Date.now() - arrived);
  const answer: FirstPassResponse = !daemon.firstPass ? { outcome: 'nothing-asked' } : left <= 0 ? { outcome: 'pending' } : await daemon.firstPass(record, left);
  if (answer.outcome !== 'refused') return { status: 200, body: answer };
  // Its ADD fails and the runtime tears the sandbox down: the record goes now, and the pass that
  // takes back what podnet made of it runs before the answer, as far as the wait allows. Not when
  // the plugin gave up waiting first (its pod starts, its record marked): then it is a failure.
  const deadline = arrived + answerWithinMs(waitMs);
  if (Date.now() >= deadline || !(await daemon.registry.withdraw(record))) {
    return { status: 200, body: { outcome: 'failed', ...(answer.error ? { error: answer.error } : {}) } satisfies FirstPassResponse };
  }
  await daemon.passBy?.(deadline);
  return { status: 200, body: answer };
}

export async function collectGarbage({ registry }: DaemonParts, request: RouteRequest<GcRequest>): Promise<Answer> {
  const changes = await registry.apply({ op: 'gc', gc: await request.body() });
  const answer: GcResponse = { removed: changes.removed };
  return { status: 200, body: answer };
}

const attachmentPattern = /^\/v1\/attachments\/([^/]+)\/([^/]+)$/;
const firstPassPattern = /^\/v1\/attachments\/([^/]+)\/([^/]+)\/first-pass$/;

/** The socket's routes; a path's methods, in this order, are its 405 answer's Allow header. */
export const routeTable: readonly Route[] = [
  { method: 'GET', pattern: /^\/healthz$/, handle: health },
  { method: 'GET', pattern: /^\/readyz$/, handle: readiness },
  { method: 'GET', pattern: /^\/v1\/status$/, handle: getStatus },
  { method: 'GET', pattern: /^\/v1\/attachments$/, handle: listAttachments },
  { method: 'GET', pattern: attachmentPattern, handle: getAttachment },
  { method: 'PUT', pattern: attachmentPattern, body: { document: 'AttachmentRecord', what: 'attachment record' }, handle: putAttachment },
  { method: 'DELETE', pattern: attachmentPattern, handle: deleteAttachment },
  { method: 'POST', pattern: firstPassPattern, body: { document: 'FirstPassRequest', what: 'first pass request' }, handle: firstPass },
  { method: 'GET', pattern: /^\/v1\/sandboxes$/, handle: listSandboxes },
  { method: 'POST', pattern: /^\/v1\/diff$/, body: { document: 'DiffRequest', what: 'diff request' }, handle: diff },
  { method: 'POST', pattern: /^\/v1\/gc$/, body: { document: 'GcRequest', what: 'GC request' }, handle: collectGarbage },
];
