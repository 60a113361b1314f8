import t from 'tap';
import type { TableSeen } from './views.ts';
import type { DaemonStatus, SandboxList } from '../protocol/validate.ts';
import { attachmentRoute, routes } from '../protocol/paths.ts';
import type { DiffRequest, DiffResponse } from '../protocol/validate.ts';
import { keyOf } from '../registry/fold.ts';
import { liveRecord } from '../testing/records.ts';
import { MemoryRegistry } from '../testing/memory-registry.ts';
import {
  collectGarbage,
  deleteAttachment,
  diff,
  firstPass,
  getAttachment,
  getStatus,
  health,
  listAttachments,
  listSandboxes,
  putAttachment,
  readiness,
  routeTable,
  type DaemonParts,
  type RouteRequest,
} from './routes.ts';

const daemon = (reconciler: Pick<DaemonParts, 'sandboxes' | 'portSecuritySeen' | 'diff'> = {}) => {
  const registry = new MemoryRegistry();
  return { registry, parts: { registry, version: '0.1.0-test', ...reconciler } satisfies DaemonParts };
};

/** A request with these path segments (percent-encoded, as the path carries them) and body, telling whether the handler read the body. */
function request<Body>(params: string[], body?: Body): RouteRequest<Body> & { bodyRead: () => boolean } {
  let read = false;
  return {
    params,
    body: async () => {
      read = true;
      return body as Body;
    },
    bodyRead: () => read,
  };
}
const noBody = (params: string[] = []) => request<never>(params);

const record = liveRecord;

t.test('health, readiness and status', async (t) => {
  const { registry, parts } = daemon();
  t.strictSame(await health(), { status: 200, body: { status: 'ok' } });
  t.strictSame(await readiness(parts), { status: 200, body: { status: 'ready' } });
  registry.problem = '/state/spool is not writable: EROFS';
  await t.rejects(readiness(parts), { code: 'NOT_AVAILABLE', message: 'not ready: /state/spool is not writable: EROFS' });

  registry.spooled.push({ op: 'add', record: record('aaa') });
  t.strictSame(await getStatus(parts), {
    status: 200,
    body: { version: '0.1.0-test', attachments: 0, spoolPending: 1, quarantined: registry.quarantined() },
  }, 'status reads the spool without applying it');
});

t.test('status counts the bridge ports of the attachments podnet made, secured and open', async (t) => {
  const attachment = (hostIf: string | undefined, secured: boolean) => ({ interface: 'net1', network: 'blue', addresses: [], ...(hostIf ? { hostIf } : {}), ...(secured ? { portSecurity: { mac: '02:00:00:00:00:01', addresses: [] } } : {}) });
  const report = (...attachments: object[]) => ({ applied: { attachments } });
  const sandboxes = () => ({ documentProblems: [], items: [report(attachment('pnv1', true), attachment('pnv2', false)), report(attachment('pnv3', true)), report(attachment(undefined, false)), {}] }) as unknown as SandboxList;
  let seen: TableSeen | undefined;
  const { parts } = daemon({ sandboxes, portSecuritySeen: () => seen });
  t.strictSame(((await getStatus(parts)).body as DaemonStatus).ports, { secured: 2, open: 1 }, 'a macvlan-like attachment (no host end) is no port; a sandbox with nothing applied has none; before any read of the table, nothing is said of filtering');
  const judged = new Set(['pnv1', 'pnv3']);
  seen = { filtered: new Set(['pnv1', 'pnv3']), judged };
  t.match((await getStatus(parts)).body, { ports: { secured: 2, open: 1, unverified: 0 } }, 'both in the table as last read');
  seen = { filtered: new Set(['pnv1']), judged };
  t.match((await getStatus(parts)).body, { ports: { secured: 2, open: 1, unverified: 1 } }, 'a secured port whose entries the table lacks is not verified');
  seen = { judged };
  t.match((await getStatus(parts)).body, { ports: { secured: 2, open: 1, unverified: 2 } }, 'none, when the table was not whole or could not be read');
  seen = { judged: new Set(['pnv1']) };
  t.match((await getStatus(parts)).body, { ports: { secured: 2, open: 1, unverified: 1 } }, 'a port made after that read is not judged by it');
});

t.test('a PUT record is listed and read back; a DELETE removes it, a second removes nothing', async (t) => {
  const { registry, parts } = daemon();
  const r = record('aaa');
  t.strictSame(await putAttachment(parts, request(['aaa', 'eth0'], r)), { status: 200, body: { record: r, netnsExists: true } });
  const gone = record('bbb', { ifname: 'net1', netns: '/var/run/netns/cni-gone' });
  await putAttachment(parts, request(['bbb', 'net1'], gone));

  t.strictSame(await listAttachments(parts), { status: 200, body: { items: [{ record: r, netnsExists: true }, { record: gone, netnsExists: false }] } });
  t.strictSame(await getAttachment(parts, noBody(['aaa', 'eth0'])), { status: 200, body: { record: r, netnsExists: true } });

  t.strictSame(await deleteAttachment(parts, noBody(['aaa', 'eth0'])), { status: 200, body: { removed: true } });
  t.strictSame(await deleteAttachment(parts, noBody(['aaa', 'eth0'])), { status: 200, body: { removed: false } }, 'an unknown key: 200, removed false');
  await t.rejects(getAttachment(parts, noBody(['aaa', 'eth0'])), { code: 'NOT_FOUND', message: 'no attachment recorded for container aaa interface eth0' });
  t.strictSame(registry.list(), [gone]);
});

t.test('reads apply what the plugins spooled before them', async (t) => {
  const { registry, parts } = daemon();
  registry.spooled.push({ op: 'add', record: record('aaa') });
  t.strictSame(await getAttachment(parts, noBody(['aaa', 'eth0'])), { status: 200, body: { record: record('aaa'), netnsExists: true } });
  registry.spooled.push({ op: 'del', key: { containerId: 'aaa', ifname: 'eth0' } }, { op: 'add', record: record('bbb') });
  t.strictSame(await listAttachments(parts), { status: 200, body: { items: [{ record: record('bbb'), netnsExists: true }] } });
});

t.test('the path is checked before the body is read', async (t) => {
  const { registry, parts } = daemon();
  const mismatch = request(['bbb', 'eth0'], record('aaa'));
  await t.rejects(putAttachment(parts, mismatch), { code: 'INVALID_REQUEST', message: 'record of aaa/eth0 sent to the path of bbb/eth0' });

  for (const params of [['aaa', '%2E%2E'], ['has%20space', 'eth0']]) {
    const bad = request(params, record('aaa'));
    await t.rejects(putAttachment(parts, bad), { code: 'INVALID_REQUEST', message: /^invalid attachment in the request path: at \/(ifname|containerId)/ }, params.join('/'));
    t.notOk(bad.bodyRead(), 'the body is left unread');
  }
  await t.rejects(deleteAttachment(parts, noBody(['%ZZ', 'eth0'])), { code: 'INVALID_REQUEST', message: 'request path segment "%ZZ" is not valid percent-encoding' });
  t.equal(registry.size, 0, 'nothing recorded');
});

t.test('sandboxes and diff without a reconciler: 404, before the body is read', async (t) => {
  const { parts } = daemon();
  await t.rejects(listSandboxes(parts), { code: 'NOT_FOUND', message: 'this daemon follows no documents (start it with --config-dir)' });
  const req = request<DiffRequest>([], { documents: [] });
  await t.rejects(diff(parts, req), { code: 'NOT_FOUND', message: 'this daemon follows no documents (start it with --config-dir)' });
  t.notOk(req.bodyRead(), 'the body is left unread');
});

t.test('sandboxes and diff with a reconciler', async (t) => {
  const seen: unknown[] = [];
  const wouldDo: DiffResponse = { documentProblems: [], hostSteps: [], items: [] };
  const { parts } = daemon({
    sandboxes: () => ({ documentProblems: [], items: [] }),
    diff: async (documents) => (seen.push(...documents), wouldDo),
  });
  t.strictSame(await listSandboxes(parts), { status: 200, body: { documentProblems: [], items: [] } });

  const network = { apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'Network', metadata: { name: 'blue' }, spec: { type: 'bridge' } } as const;
  t.strictSame(await diff(parts, request([], { documents: [network] })), { status: 200, body: wouldDo });
  t.strictSame(seen, [network]);
  await t.rejects(diff(parts, request([], { documents: [{ ...network, spec: { type: 'bareudp' } }] })), {
    code: 'INVALID_REQUEST',
    message: /^invalid diff request document 1: .*\/spec\/type/,
  });
  t.equal(seen.length, 1, 'an invalid document reaches no reconciler');
});

t.test('GC answers what it removed: the unlisted records of its network', async (t) => {
  const { registry, parts } = daemon();
  const kept = record('aaa');
  const otherNetwork = record('ccc', { network: 'vlan100' });
  for (const r of [kept, record('bbb'), otherNetwork]) await registry.apply({ op: 'add', record: r });
  const gc = { network: 'kindnet', validAttachments: [{ containerId: 'aaa', ifname: 'eth0' }] };
  t.strictSame(await collectGarbage(parts, request([], gc)), { status: 200, body: { removed: [{ containerId: 'bbb', ifname: 'eth0' }] } });
  t.strictSame(registry.list(), [kept, otherNetwork]);
});

t.test('the route table serves each of the client\'s paths, checking the bodies of the routes that change things', async (t) => {
  const served = (path: string) => routeTable.filter((r) => r.pattern.test(path)).map((r) => (r.body ? `${r.method} ${r.body.document}` : r.method));
  const paths = [...Object.values(routes), attachmentRoute({ containerId: 'aaa', ifname: 'eth0' })];
  t.strictSame(Object.fromEntries(paths.map((path) => [path, served(path)])), {
    '/healthz': ['GET'],
    '/readyz': ['GET'],
    '/v1/status': ['GET'],
    '/v1/attachments': ['GET'],
    '/v1/gc': ['POST GcRequest'],
    '/v1/sandboxes': ['GET'],
    '/v1/diff': ['POST DiffRequest'],
    // In the order of a 405's Allow header.
    '/v1/attachments/aaa/eth0': ['GET', 'PUT AttachmentRecord', 'DELETE'],
  });
  t.strictSame(served('/v1/attachments/aaa'), [], 'an attachment is named by container and interface');
});

t.test("a first pass the reconciler refuses (a required attachment) drops the sandbox's record and runs the pass that takes it back before answering", async (t) => {
  const { registry, parts } = daemon();
  registry.records.set(keyOf(record('aaa')), record('aaa'));
  registry.records.set(keyOf(record('bbb')), record('bbb'));
  const passes: { deadline: number; records: string[] }[] = [];
  const refused = { outcome: 'refused' as const, error: 'required', unmet: [] };
  const answers: Record<string, { outcome: 'refused' | 'applied' }> = { aaa: refused, bbb: { outcome: 'applied' } };
  const withReconciler: DaemonParts = {
    ...parts,
    firstPass: async (r) => answers[r.containerId]!,
    passBy: async (deadline) => {
      passes.push({ deadline, records: registry.list().map((r) => r.containerId) });
      return true;
    },
  };
  const started = Date.now();
  t.strictSame((await firstPass(withReconciler, request(['aaa', 'eth0'], { waitMs: 2000 }))).body, refused);
  t.strictSame(passes.map((p) => p.records), [['bbb']], 'one pass, after the record went');
  t.ok(passes[0]!.deadline <= started + 2000 && passes[0]!.deadline >= started + 1000, "bounded by the plugin's wait");
  t.strictSame((await firstPass(withReconciler, request(['bbb', 'eth0'], { waitMs: 2000 }))).body, { outcome: 'applied' });
  t.equal(passes.length, 1, 'an applied one: nothing more');
  t.ok(registry.get({ containerId: 'bbb', ifname: 'eth0' }));

  // The plugin gave up before the refusal: its pod starts, its record marked in the spool.
  registry.records.set(keyOf(record('ccc')), record('ccc'));
  answers['ccc'] = refused;
  const gaveUp: DaemonParts = { ...withReconciler, firstPass: async (r) => (registry.spooled.push({ op: 'add', record: { ...r, startedWithoutNetwork: true } }), refused) };
  t.strictSame((await firstPass(gaveUp, request(['ccc', 'eth0'], { waitMs: 2000 }))).body, { outcome: 'failed', error: 'required' }, 'a failure, not a refusal');
  t.equal(registry.get({ containerId: 'ccc', ifname: 'eth0' })?.startedWithoutNetwork, true, 'the running pod keeps its record');
  t.equal(passes.length, 1, 'and nothing is taken back');
});
