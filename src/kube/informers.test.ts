import t, { type Test } from 'tap';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger, type Logger } from '../log.ts';
import { namespaceNameLabel } from '../model/identity.ts';
import { networksAnnotation } from '../model/annotation.ts';
import type { AttachmentRecord } from '../protocol/validate.ts';
import { KubeApi } from './api.ts';
import { KubeSource } from './informers.ts';
import { apiGroup, apiVersion, paths, type PodObject } from './resources.ts';

const node = 'node-a';
const podsPath = paths.pods;
const namespacesPath = paths.namespaces;
const networksPath = paths.networks;
const configsPath = paths.podNetworkConfigs;
const permissionsPath = paths.podNetworkPermissions;
const definitionsPath = paths.networkAttachmentDefinitions;
const nodesPath = paths.nodes;

/** An object as the API server sends it (JSON: a timestamp is a string). */
type Obj = { apiVersion: string; kind: string; metadata: { name: string; namespace?: string; uid?: string; resourceVersion?: string; labels?: Record<string, string>; [key: string]: unknown }; spec?: Record<string, unknown>; [key: string]: unknown };
type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';

interface OpenWatch {
  path: string;
  fieldSelector: string | undefined;
  res: ServerResponse;
}

/**
 * An API server stand-in on 127.0.0.1: LIST (a JSON list with metadata.resourceVersion) and WATCH
 * (?watch=true: a chunked answer of newline-delimited {type, object} events) of the collections
 * the informers read. A watch from resourceVersion N is sent the events after N first, as the API
 * server's watch cache does, so nothing is lost between a list and its watch. The test moves it:
 * an event (push), a change nobody is told of (quietly), a watch answered 410 Gone (expire), a
 * resource not served (404).
 */
class FakeApiServer {
  /** Every request's method and URL, in order. */
  readonly requests: string[] = [];
  private version = 100;
  /** The resourceVersion of each collection's last list answer. */
  readonly listedAt = new Map<string, string>();
  private readonly store = new Map<string, Map<string, Obj>>();
  private readonly log = new Map<string, { version: number; type: EventType; object: Obj }[]>();
  private readonly watches = new Set<OpenWatch>();
  /** Collections answered 404 (a CRD not installed). */
  readonly unserved = new Set<string>();
  /** Collections whose next watch is answered 410 Gone (the resourceVersion it asks for was compacted). */
  readonly goneNext = new Set<string>();
  /** Collections whose lists fail with 500 (an API server in trouble). */
  readonly failingLists = new Set<string>();
  port = 0;

  constructor() {
    for (const path of [podsPath, nodesPath, namespacesPath, networksPath, configsPath, permissionsPath, definitionsPath]) {
      this.store.set(path, new Map());
      this.log.set(path, []);
    }
  }

  handle(req: IncomingMessage, res: ServerResponse): void {
    this.requests.push(`${req.method} ${req.url}`);
    const url = new URL(req.url ?? '/', 'http://fake');
    const path = url.pathname;
    const items = this.store.get(path);
    const fieldSelector = url.searchParams.get('fieldSelector') ?? undefined;
    if (!items || this.unserved.has(path)) return status(res, 404, 'NotFound', `the server could not find the requested resource (${path})`);
    if (url.searchParams.get('watch') !== 'true') {
      if (this.failingLists.has(path)) return status(res, 500, 'InternalError', 'etcd is down');
      const listed = [...items.values()].filter((o) => selects(fieldSelector, o));
      this.listedAt.set(path, String(this.version));
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'List', apiVersion: 'v1', metadata: { resourceVersion: String(this.version) }, items: listed }));
      return;
    }
    if (this.goneNext.delete(path)) return status(res, 410, 'Expired', 'too old resource version');
    res.writeHead(200, { 'content-type': 'application/json' });
    res.flushHeaders();
    const since = Number(url.searchParams.get('resourceVersion') ?? '0');
    const watch: OpenWatch = { path, fieldSelector, res };
    this.watches.add(watch);
    res.on('close', () => this.watches.delete(watch));
    for (const event of this.log.get(path)!) if (event.version > since) send(watch, event.type, event.object);
  }

  /** An object changed, as a watch tells it: stored, logged and sent to the open watches of its collection. */
  push(path: string, type: EventType, object: Obj): Obj {
    const stored = this.quietly(path, type, object);
    this.log.get(path)!.push({ version: this.version, type, object: stored });
    for (const watch of this.watches) if (watch.path === path) send(watch, type, stored);
    return stored;
  }

  /** An object changed, but no watch is told of it (what a watch that expired missed): only a list shows it. */
  quietly(path: string, type: EventType, object: Obj): Obj {
    const stored = { ...object, metadata: { ...object.metadata, resourceVersion: String(++this.version) } };
    const key = `${object.metadata.namespace ?? ''}/${object.metadata.name}`;
    if (type === 'DELETED') this.store.get(path)!.delete(key);
    else this.store.get(path)!.set(key, stored);
    return stored;
  }

  /** The watches of a collection end with an ERROR event saying 410 Gone, as the API server ends one whose resourceVersion expired. */
  expireByEvent(path: string): void {
    for (const watch of [...this.watches]) {
      if (watch.path !== path) continue;
      watch.res.write(`${JSON.stringify({ type: 'ERROR', object: expired })}\n`);
      watch.res.end();
    }
  }

  /** The watches of a collection end; the next one is answered 410 Gone. */
  expireByStatus(path: string): void {
    this.goneNext.add(path);
    this.endWatches(path);
  }

  /** The watches of a collection end, as the API server ends one at its timeout. */
  endWatches(path: string): void {
    for (const watch of [...this.watches]) if (watch.path === path) watch.res.end();
  }

  openWatches(path: string): number {
    return [...this.watches].filter((w) => w.path === path).length;
  }

  /** The requests of a kind to a collection (LIST or WATCH), as made so far. */
  made(kind: 'LIST' | 'WATCH', path: string): string[] {
    return this.requests.filter((r) => r.startsWith(`GET ${path}`) && r.slice(4 + path.length).match(/^(\?|$)/) && r.includes('watch=true') === (kind === 'WATCH'));
  }
}

/** The Status an API server sends in a watch whose resourceVersion was compacted. */
const expired = { kind: 'Status', apiVersion: 'v1', status: 'Failure', reason: 'Expired', message: 'too old resource version: 100 (120)', code: 410 };

function status(res: ServerResponse, code: number, reason: string, message: string): void {
  res.writeHead(code, { 'content-type': 'application/json' }).end(JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', reason, message, code }));
}

function send(watch: OpenWatch, type: EventType, object: Obj): void {
  if (selects(watch.fieldSelector, object)) watch.res.write(`${JSON.stringify({ type, object })}\n`);
}

/** The one field selector the informers use: spec.nodeName=<node>. */
function selects(fieldSelector: string | undefined, object: Obj): boolean {
  if (fieldSelector === undefined) return true;
  const byNode = /^spec\.nodeName=(.*)$/.exec(fieldSelector);
  if (byNode) return object.spec?.['nodeName'] === byNode[1];
  const byName = /^metadata\.name=(.*)$/.exec(fieldSelector);
  if (byName) return object.metadata.name === byName[1];
  throw new Error(`the fake API server does not know the field selector ${fieldSelector}`);
}

/** The fake API server listening, a KubeApi pointed at it (as api.test.ts does), and a KubeSource over it; all stopped at teardown, the source first. */
async function fixture(t: Test, setup: (server: FakeApiServer) => void = () => undefined, log: Logger = silentLogger) {
  const server = new FakeApiServer();
  setup(server);
  const http = createServer((req, res) => server.handle(req, res));
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', resolve));
  server.port = (http.address() as { port: number }).port;
  const folder = await mkdtemp(join(tmpdir(), 'podnet-informers-'));
  const kubeconfig = join(folder, 'kubeconfig');
  await writeFile(kubeconfig, JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: { server: `http://127.0.0.1:${server.port}`, 'insecure-skip-tls-verify': true } }],
    users: [{ name: 'u', user: { token: 'x' } }],
    contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
    'current-context': 'ctx',
  }));
  const api = KubeApi.load(kubeconfig, { deadlineMs: 2000 });
  const source = new KubeSource({ api, nodeName: node, log });
  let changes = 0;
  t.teardown(async () => {
    await source.stop();
    http.closeAllConnections();
    await new Promise<void>((resolve) => http.close(() => resolve()));
    await rm(folder, { recursive: true, force: true });
  });
  const start = () => within('start() resolves', source.start(() => void changes++), 3000);
  return { server, source, start, changes: () => changes };
}

/** Polls `probe` until it gives a value (not undefined or false), failing with `what` at the deadline. */
async function until<T>(what: string, probe: () => T | undefined | false, ms = 3000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`no ${what} in ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

/** `promise`, or a failure naming `what` once `ms` passed. */
async function within<T>(what: string, promise: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what}: not in ${ms} ms`)), ms)));
  try {
    return await Promise.race([promise, deadline]);
  } finally {
    clearTimeout(timer);
  }
}

/** Whether `promise` settles within `ms` (false: it is still pending). */
async function settles(promise: Promise<unknown>, ms: number): Promise<boolean> {
  return within('', promise.then(() => true, () => true), ms).catch(() => false);
}

const group = `${apiGroup}/${apiVersion}`;
const network = (name: string, spec: Record<string, unknown>, uid = `uid-net-${name}`): Obj => ({
  apiVersion: group,
  kind: 'Network',
  metadata: { name, uid, generation: 1, creationTimestamp: '2026-11-24T00:00:00Z' },
  spec,
});
const podNetworkConfig = (namespace: string, name: string, spec: Record<string, unknown>): Obj => ({
  apiVersion: group,
  kind: 'PodNetworkConfig',
  metadata: { name, namespace, uid: `uid-pnc-${namespace}-${name}`, generation: 1 },
  spec,
});
const definition = (namespace: string, name: string, config: unknown): Obj => ({
  apiVersion: 'k8s.cni.cncf.io/v1',
  kind: 'NetworkAttachmentDefinition',
  metadata: { name, namespace, uid: `uid-nad-${namespace}-${name}` },
  spec: { config: typeof config === 'string' ? config : JSON.stringify(config) },
});
const namespace = (name: string, labels: Record<string, string> = {}): Obj => ({
  apiVersion: 'v1',
  kind: 'Namespace',
  metadata: { name, uid: `uid-ns-${name}`, labels: { [namespaceNameLabel]: name, ...labels } },
});
const pod = (ns: string, name: string, opts: { node?: string; uid?: string; labels?: Record<string, string>; annotations?: Record<string, string> } = {}): Obj => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name, namespace: ns, uid: opts.uid ?? `uid-pod-${ns}-${name}`, ...(opts.labels ? { labels: opts.labels } : {}), ...(opts.annotations ? { annotations: opts.annotations } : {}) },
  spec: { nodeName: opts.node ?? node },
  status: { phase: 'Running' },
});
const bridgeConfig = { cniVersion: '1.0.0', name: 'lab', plugins: [{ type: 'bridge', bridge: 'br-lab' }] };

/** Networks blue (bridge) and nad (cni, naming tenant/bridge-conf), config tenant/fleet, namespace tenant, pod tenant/app on this node. */
function cluster(server: FakeApiServer): void {
  server.quietly(namespacesPath, 'ADDED', namespace('tenant', { team: 'red' }));
  server.quietly(networksPath, 'ADDED', { ...network('blue', { type: 'bridge' }), status: { conditions: [{ type: 'Ready', status: 'True' }] } });
  server.quietly(networksPath, 'ADDED', network('nad', { type: 'cni', cni: { networkAttachmentDefinition: { namespace: 'tenant', name: 'bridge-conf' } } }));
  server.quietly(configsPath, 'ADDED', podNetworkConfig('tenant', 'fleet', { podSelector: {}, attachments: [{ network: 'blue' }] }));
  server.quietly(definitionsPath, 'ADDED', definition('tenant', 'bridge-conf', bridgeConfig));
  server.quietly(podsPath, 'ADDED', pod('tenant', 'app', { labels: { app: 'web' } }));
}

t.test('start() resolves once every informer listed; the documents are the Networks and configs, a broken one a problem naming it', async (t) => {
  const { server, source, start, changes } = await fixture(t, (server) => {
    cluster(server);
    server.quietly(networksPath, 'ADDED', network('broken', { type: 'no-such-kind' }));
    server.quietly(configsPath, 'ADDED', podNetworkConfig('tenant', 'bad', { podSelector: {}, attachments: [{ network: 'blue', interface: 'this-name-is-too-long' }] }));
    server.quietly(permissionsPath, 'ADDED', { ...podNetworkConfig('tenant', 'lab', { allow: ['routes'] }), kind: 'PodNetworkPermission' });
    server.quietly(permissionsPath, 'ADDED', { ...podNetworkConfig('tenant', 'typo', { allow: ['everything'] }), kind: 'PodNetworkPermission' });
  });
  t.equal(source.synced, false, 'not synced before start');
  t.same(source.documents().networks.size, 0, 'no documents before start');
  await start();
  t.equal(source.synced, true, 'synced once start() resolved');
  for (const path of [podsPath, nodesPath, namespacesPath, networksPath, configsPath, permissionsPath, definitionsPath]) {
    t.equal(server.made('LIST', path).length, 1, `${path} listed once`);
  }
  t.ok(changes() > 0, 'the lists were told to the changed callback (a pass follows)');
  const docs = source.documents();
  t.same([...docs.networks.keys()].sort(), ['blue', 'nad'], 'the Networks that pass the schema');
  const listedBlue = source.objects('Network').find((o) => o.metadata.name === 'blue')!;
  t.strictSame(docs.networks.get('blue'), { apiVersion: group, kind: 'Network', metadata: { name: 'blue', uid: 'uid-net-blue', generation: 1, creationTimestamp: '2026-11-24T00:00:00Z', resourceVersion: listedBlue.metadata.resourceVersion }, spec: { type: 'bridge' } }, 'a Network as the API server holds it, its status left out');
  t.ok(listedBlue.status, '(the object listed had a status)');
  t.same(docs.configs.map((c) => `${c.metadata.namespace}/${c.metadata.name}`), ['tenant/fleet'], 'the configs that pass the schema');
  t.same(docs.configs[0]!.spec, { podSelector: {}, attachments: [{ network: 'blue' }] });
  t.same(docs.permissions.map((p) => [p.metadata.name, p.spec.allow]), [['lab', ['routes']], ['typo', []]], 'the permissions; a broken one stands, allowing nothing');
  t.equal(docs.problems.length, 3, 'one problem for each broken document, and only them');
  t.match(docs.problems.find((p) => p.document === 'Network broken'), { document: 'Network broken', field: 'spec', reason: /^invalid Network: .*type/ }, 'the broken Network, named, with its field and why');
  t.match(docs.problems.find((p) => p.document === 'PodNetworkConfig tenant/bad'), { document: 'PodNetworkConfig tenant/bad', field: 'spec', reason: /interface: must be 1 to 15 letters/ }, 'the broken config, named, with its field and why');
  t.same(source.objects('Network').map((o) => o.metadata.name).sort(), ['blue', 'broken', 'nad'], 'objects() holds every Network listed, broken or not');
  t.same(source.objects('PodNetworkConfig').map((o) => o.metadata.name).sort(), ['bad', 'fleet']);
  await until('a watch open on every collection', () => [podsPath, namespacesPath, networksPath, configsPath, permissionsPath, definitionsPath].every((p) => server.openWatches(p) === 1));
  for (const path of [podsPath, nodesPath, namespacesPath, networksPath, configsPath, permissionsPath, definitionsPath]) {
    t.match(server.made('WATCH', path), [new RegExp(`[?&]resourceVersion=${server.listedAt.get(path)}(&|$)`)], `${path} watched from its list's resourceVersion`);
  }
});

t.test('documents() is one object while only pods change, and a new one, showing the change, after a Network, config, definition or namespace event', async (t) => {
  const { server, source, start, changes } = await fixture(t, cluster);
  await start();
  await until('watches open', () => [podsPath, namespacesPath, networksPath, configsPath, permissionsPath, definitionsPath].every((p) => server.openWatches(p) === 1));
  let docs = source.documents();
  t.equal(source.documents(), docs, 'the same object on a second call');
  t.equal(source.documents(), docs, 'and a third');

  // Pods: a pass follows each event, but the documents are the same object.
  let told = changes();
  server.push(podsPath, 'ADDED', pod('tenant', 'db'));
  await until('the new pod in the cache', () => source.pod('tenant', 'db'));
  server.push(podsPath, 'MODIFIED', pod('tenant', 'app', { labels: { app: 'web', tier: 'front' } }));
  await until('the pod\'s new labels', () => source.pod('tenant', 'app')?.metadata.labels?.['tier'] === 'front');
  server.push(podsPath, 'DELETED', pod('tenant', 'db'));
  await until('the pod gone', () => source.pod('tenant', 'db') === undefined);
  t.equal(changes(), told + 3, 'each pod event told to the changed callback');
  t.equal(source.documents(), docs, 'pod events leave the documents the same object');

  // A Network modified: a new object, with the change.
  told = changes();
  server.push(networksPath, 'MODIFIED', network('blue', { type: 'bridge', mtu: 1400 }));
  await until('the Network event told', () => changes() > told);
  t.not(source.documents(), docs, 'a Network modified: a new object');
  t.equal(source.documents().networks.get('blue')?.spec.mtu, 1400, 'which holds the change');
  docs = source.documents();
  t.equal(source.documents(), docs, 'and is kept until the next change');

  // A Network added, then deleted.
  told = changes();
  server.push(networksPath, 'ADDED', network('green', { type: 'bridge' }));
  await until('the Network event told', () => changes() > told);
  t.not(source.documents(), docs, 'a Network added: a new object');
  t.ok(source.documents().networks.has('green'), 'holding it');
  docs = source.documents();
  told = changes();
  server.push(networksPath, 'DELETED', network('green', { type: 'bridge' }));
  await until('the Network event told', () => changes() > told);
  t.not(source.documents(), docs, 'a Network deleted: a new object');
  t.notOk(source.documents().networks.has('green'), 'without it');

  // A PodNetworkConfig modified.
  docs = source.documents();
  told = changes();
  server.push(configsPath, 'MODIFIED', podNetworkConfig('tenant', 'fleet', { podSelector: { matchLabels: { app: 'web' } }, attachments: [{ network: 'blue' }] }));
  await until('the config event told', () => changes() > told);
  t.not(source.documents(), docs, 'a PodNetworkConfig modified: a new object');
  t.same(source.documents().configs[0]?.spec.podSelector, { matchLabels: { app: 'web' } }, 'which holds the change');

  // A NetworkAttachmentDefinition modified: the Network naming it gets its new config.
  docs = source.documents();
  t.equal(docs.networks.get('nad')?.spec.cni?.config?.['plugins' as never]?.[0]?.['bridge'], 'br-lab');
  told = changes();
  server.push(definitionsPath, 'MODIFIED', definition('tenant', 'bridge-conf', { ...bridgeConfig, plugins: [{ type: 'bridge', bridge: 'br-new' }] }));
  await until('the definition event told', () => changes() > told);
  t.not(source.documents(), docs, 'a NetworkAttachmentDefinition modified: a new object');
  t.equal(source.documents().networks.get('nad')?.spec.cni?.config?.['plugins' as never]?.[0]?.['bridge'], 'br-new', 'the Network naming it has the new config');

  // A namespace modified.
  docs = source.documents();
  told = changes();
  server.push(namespacesPath, 'MODIFIED', namespace('tenant', { team: 'blue' }));
  await until('the namespace event told', () => changes() > told);
  t.equal(source.namespaceLabels('tenant')?.['team'], 'blue', 'the namespace\'s new labels');
  t.not(source.documents(), docs, 'a namespace modified: a new object');

  // And pods again: the object made last stays.
  docs = source.documents();
  told = changes();
  server.push(podsPath, 'MODIFIED', pod('tenant', 'app', { labels: { app: 'web', tier: 'back' } }));
  await until('the pod event told', () => changes() > told);
  t.equal(source.documents(), docs, 'a pod event after them leaves the documents the same object');
});

t.test('a cni Network naming a NetworkAttachmentDefinition gets its config, with disableGC; a missing or unreadable one is a problem at spec.cni.networkAttachmentDefinition', async (t) => {
  const { server, source, start, changes } = await fixture(t, (server) => {
    cluster(server);
    server.quietly(networksPath, 'ADDED', network('ghost', { type: 'cni', cni: { networkAttachmentDefinition: { namespace: 'tenant', name: 'not-there' } } }));
    server.quietly(networksPath, 'ADDED', network('elsewhere', { type: 'cni', cni: { networkAttachmentDefinition: { namespace: 'other', name: 'bridge-conf' } } }));
    server.quietly(networksPath, 'ADDED', network('empty', { type: 'cni', cni: { networkAttachmentDefinition: { namespace: 'tenant', name: 'empty' } } }));
    server.quietly(networksPath, 'ADDED', network('garbled', { type: 'cni', cni: { networkAttachmentDefinition: { namespace: 'tenant', name: 'garbled' } } }));
    server.quietly(definitionsPath, 'ADDED', definition('tenant', 'empty', ''));
    server.quietly(definitionsPath, 'ADDED', definition('tenant', 'garbled', '{"type": '));
  });
  await start();
  const docs = source.documents();
  t.same(docs.networks.get('nad')?.spec.cni, { networkAttachmentDefinition: { namespace: 'tenant', name: 'bridge-conf' }, config: { ...bridgeConfig, disableGC: true } }, 'the definition\'s config, disableGC true, the reference kept');
  for (const [name, reference] of [['ghost', 'tenant/not-there'], ['elsewhere', 'other/bridge-conf'], ['empty', 'tenant/empty'], ['garbled', 'tenant/garbled']] as const) {
    // It stays as it came: the planner refuses a cni Network without a config (model/cni-config.ts).
    const [namespace, name_] = reference.split('/');
    t.same(docs.networks.get(name)?.spec.cni, { networkAttachmentDefinition: { namespace, name: name_ } }, `Network ${name}, whose definition gives no config, gets none`);
  }
  const byDocument = [...docs.problems].sort((a, b) => a.document.localeCompare(b.document));
  t.match(byDocument, [
    { document: 'Network elsewhere', field: 'spec.cni.networkAttachmentDefinition', reason: 'there is no NetworkAttachmentDefinition other/bridge-conf' },
    { document: 'Network empty', field: 'spec.cni.networkAttachmentDefinition', reason: 'NetworkAttachmentDefinition tenant/empty has no spec.config (podnet does not read configs from the node\'s files)' },
    { document: 'Network garbled', field: 'spec.cni.networkAttachmentDefinition', reason: /^NetworkAttachmentDefinition tenant\/garbled: spec\.config is not JSON: ./ },
    { document: 'Network ghost', field: 'spec.cni.networkAttachmentDefinition', reason: 'there is no NetworkAttachmentDefinition tenant/not-there' },
  ], 'each Network whose definition is missing (by namespace and name) or unreadable, named at spec.cni.networkAttachmentDefinition');
  t.equal(docs.problems.length, 4, 'no other problem');

  // The missing definition created: the Network is in force, with it.
  const told = changes();
  server.push(definitionsPath, 'ADDED', definition('tenant', 'not-there', { type: 'macvlan', master: 'eth1' }));
  await until('the definition event told', () => changes() > told);
  t.same(source.documents().networks.get('ghost')?.spec.cni?.config, { type: 'macvlan', master: 'eth1', disableGC: true }, 'a definition created later fills the Network');
  t.notOk(source.documents().problems.some((p) => p.document === 'Network ghost'), 'and its problem is gone');
  // Deleted again: the problem again.
  const again = changes();
  server.push(definitionsPath, 'DELETED', definition('tenant', 'not-there', {}));
  await until('the definition event told', () => changes() > again);
  t.equal(source.documents().networks.get('ghost')?.spec.cni?.config, undefined, 'its definition deleted, the Network has no config again');
  t.ok(source.documents().problems.some((p) => p.document === 'Network ghost' && p.field === 'spec.cni.networkAttachmentDefinition'), 'and a problem again');
});

t.test('NetworkAttachmentDefinitions not served (404): start() resolves all the same, the documents work, and a definition served later is seen', async (t) => {
  const { server, source, start } = await fixture(t, (server) => {
    cluster(server);
    server.unserved.add(definitionsPath);
  });
  const started = Date.now();
  await start();
  t.ok(Date.now() - started < 1500, 'without waiting for the definitions');
  t.equal(source.synced, true, 'synced');
  t.equal(server.made('WATCH', definitionsPath).length, 0, 'no watch of a resource not served');
  const docs = source.documents();
  t.ok(docs.networks.has('blue'), 'the other Networks are in force');
  t.equal(docs.configs.length, 1, 'and the configs');
  t.same(docs.problems, [{ document: 'Network nad', field: 'spec.cni.networkAttachmentDefinition', reason: 'there is no NetworkAttachmentDefinition tenant/bridge-conf' }], 'a Network naming a definition is a problem');

  // The CRD installed: the informer looks again (after its backoff, half a second) and finds it.
  server.unserved.delete(definitionsPath);
  const network = await until('the definition seen once served', () => source.documents().networks.get('nad')?.spec.cni?.config && source.documents().networks.get('nad'), 3000);
  t.same(network.spec.cni?.config, { ...bridgeConfig, disableGC: true }, 'the Network naming it gets its config');
  t.equal(source.documents().problems.length, 0, 'and its problem is gone');
  await until('a watch of the definitions', () => server.openWatches(definitionsPath) === 1);
});

t.test('a watch ended by a 410 Gone event lists again: a change its watch never told is seen, and the documents are new', async (t) => {
  const { server, source, start } = await fixture(t, cluster);
  await start();
  await until('watches open', () => server.openWatches(networksPath) === 1);
  const docs = source.documents();
  server.quietly(networksPath, 'ADDED', network('missed', { type: 'bridge' }));
  server.quietly(networksPath, 'DELETED', network('blue', { type: 'bridge' }));
  server.expireByEvent(networksPath);
  await until('the Network added meanwhile, in the cache', () => source.objects('Network').some((o) => o.metadata.name === 'missed'));
  t.equal(server.made('LIST', networksPath).length, 2, 'the Networks listed again');
  t.ok(source.documents().networks.has('missed'), 'the documents hold the Network added while no watch told it');
  t.notOk(source.documents().networks.has('blue'), 'and not the one deleted meanwhile');
  t.not(source.documents(), docs, 'a new object');
  await until('a watch again', () => server.openWatches(networksPath) === 1);
  t.match(server.made('WATCH', networksPath).at(-1), new RegExp(`[?&]resourceVersion=${server.listedAt.get(networksPath)}(&|$)`), 'from the new list\'s resourceVersion');
});

t.test('a watch answered 410 Gone lists again: a change made meanwhile is seen', async (t) => {
  const infos: string[] = [];
  const log: Logger = { ...silentLogger, info: (msg) => void infos.push(msg) };
  const { server, source, start } = await fixture(t, cluster, log);
  await start();
  await until('watches open', () => server.openWatches(configsPath) === 1);
  const docs = source.documents();
  server.quietly(configsPath, 'ADDED', podNetworkConfig('tenant', 'meanwhile', { podSelector: {}, attachments: [] }));
  server.expireByStatus(configsPath);
  await until('the config made meanwhile, in the documents', () => source.objects('PodNetworkConfig').some((o) => o.metadata.name === 'meanwhile'));
  t.equal(server.made('LIST', configsPath).length, 2, 'the configs listed again');
  t.same(source.documents().configs.map((c) => c.metadata.name).sort(), ['fleet', 'meanwhile'], 'the documents hold it');
  t.not(source.documents(), docs, 'a new object');
  t.ok(infos.includes('the watch\'s resourceVersion expired (410 Gone); listing again'), 'the relist is told in the log');
  // client-node waits its reconnect backoff (1 s) before the next watch: wait for it, so nothing is left in flight at stop.
  await until('a watch again', () => server.openWatches(configsPath) === 1, 3000);
  t.equal(source.synced, true, 'still synced');
});

t.test('pods() is what the server gave for this node\'s field selector; pod, identity and podIdentity read it', async (t) => {
  const { server, source, start } = await fixture(t, (server) => {
    cluster(server);
    server.quietly(podsPath, 'ADDED', pod('tenant', 'elsewhere', { node: 'node-b' }));
    server.quietly(podsPath, 'ADDED', pod('tenant', 'annotated', { annotations: { [networksAnnotation]: 'blue@net1' } }));
    server.quietly(podsPath, 'ADDED', pod('unknown-ns', 'stray'));
    server.quietly(nodesPath, 'ADDED', { apiVersion: 'v1', kind: 'Node', metadata: { name: node, uid: 'node-uid', labels: { 'example.com/edge': 'true' } } });
    server.quietly(nodesPath, 'ADDED', { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-b', uid: 'node-b-uid', labels: { 'example.com/core': 'true' } } });
  });
  await start();
  t.same(server.made('LIST', nodesPath), [`GET ${nodesPath}?fieldSelector=metadata.name%3D${node}`], 'its own Node listed alone');
  const selector = `fieldSelector=spec.nodeName%3D${node}`;
  t.same(server.made('LIST', podsPath), [`GET ${podsPath}?${selector}`], 'the pods listed with this node\'s field selector');
  t.same(server.made('LIST', namespacesPath), [`GET ${namespacesPath}`], 'other collections listed without one');
  await until('the pods watched', () => server.openWatches(podsPath) === 1);
  t.ok(server.made('WATCH', podsPath).every((r) => r.includes(selector)), 'and watched with it');
  t.same(source.pods().map((p) => `${p.metadata.namespace}/${p.metadata.name}`).sort(), ['tenant/annotated', 'tenant/app', 'unknown-ns/stray'], 'pods() holds this node\'s pods only');
  t.equal(source.pod('tenant', 'elsewhere'), undefined, 'another node\'s pod is not known');

  // A pod of another node created, one of this node: the watch tells only this node's.
  server.push(podsPath, 'ADDED', pod('tenant', 'far', { node: 'node-b' }));
  server.push(podsPath, 'ADDED', pod('tenant', 'near'));
  await until('the pod of this node', () => source.pod('tenant', 'near'));
  t.equal(source.pod('tenant', 'far'), undefined, 'the other node\'s is not');

  const app = source.pod('tenant', 'app')!;
  t.same(source.podIdentity(app), { namespace: 'tenant', name: 'app', labels: { app: 'web' }, namespaceLabels: { [namespaceNameLabel]: 'tenant', team: 'red' }, nodeLabels: { 'example.com/edge': 'true' } }, 'podIdentity: its labels, its namespace\'s and its node\'s, no annotation');
  t.same(source.podIdentity(source.pod('tenant', 'annotated')!), { namespace: 'tenant', name: 'annotated', labels: {}, namespaceLabels: { [namespaceNameLabel]: 'tenant', team: 'red' }, nodeLabels: { 'example.com/edge': 'true' }, annotation: { selections: [{ name: 'blue', interface: 'net1' }] } }, 'no labels: {}; its annotation read');
  t.same(source.podIdentity(source.pod('unknown-ns', 'stray')!).namespaceLabels, { [namespaceNameLabel]: 'unknown-ns' }, 'a namespace not known: its name\'s label alone');
  const garbled = { metadata: { namespace: 'tenant', name: 'bad', uid: 'u', annotations: { [networksAnnotation]: '[{"name": ' } } } as PodObject;
  t.match(source.podIdentity(garbled).annotation, { problem: new RegExp(networksAnnotation) }, 'an annotation that cannot be read is a problem naming it, not a throw');

  const record = (pod: AttachmentRecord['pod'], ifname = 'eth0'): AttachmentRecord => ({ containerId: 'c1', ifname, network: 'primary', netns: '/run/netns/x', cniVersion: '1.0.0', createdAt: '2026-11-24T00:00:00.000Z', pod });
  t.same(source.identity(record({ namespace: 'tenant', name: 'app', uid: 'uid-pod-tenant-app' }, 'eth7')), { ...source.podIdentity(app), primaryInterface: 'eth7' }, 'identity: the pod\'s, with the record\'s interface as the primary one');
  t.same(source.identity(record({ namespace: 'tenant', name: 'app' })), { ...source.podIdentity(app), primaryInterface: 'eth0' }, 'a record without a uid matches by name');
  t.equal(source.identity(record({ namespace: 'tenant', name: 'app', uid: 'another-incarnation' })), undefined, 'another incarnation of the name (its uid differs): undefined');
  t.equal(source.identity(record({ namespace: 'tenant', name: 'elsewhere' })), undefined, 'a pod of another node: undefined');
  t.equal(source.identity(record({ namespace: 'tenant', name: 'deleted' })), undefined, 'a pod the API server does not have: undefined');
  t.equal(source.identity(record({ name: 'app' })), undefined, 'a record without a namespace: undefined');
  t.equal(source.identity(record({ namespace: 'tenant' })), undefined, 'a record without a name: undefined');
  // A static pod: the kubelet's UID of it is its mirror's config.mirror annotation, not the mirror's own.
  server.push(podsPath, 'ADDED', pod('tenant', 'static-web', { uid: 'mirror-uid', annotations: { 'kubernetes.io/config.mirror': 'static-hash' } }));
  await until('the mirror pod', () => source.pod('tenant', 'static-web'));
  t.ok(source.identity(record({ namespace: 'tenant', name: 'static-web', uid: 'static-hash' })), "a static pod's sandbox is its mirror's pod");
  t.equal(source.identity(record({ namespace: 'tenant', name: 'static-web', uid: 'mirror-uid' })), undefined, "the mirror's own UID is no sandbox's");
  t.ok(source.nodePods().some((p) => p.uid === 'static-hash'), 'and the plugin\'s hints name it by the UID its sandbox has');

  // The namespace's labels change: podIdentity reads them as they are now.
  server.push(namespacesPath, 'MODIFIED', namespace('tenant', { team: 'blue' }));
  await until('the namespace\'s new labels', () => source.namespaceLabels('tenant')?.['team'] === 'blue');
  t.equal(source.podIdentity(app).namespaceLabels?.['team'], 'blue', 'podIdentity follows the namespace');
  // A pod deleted: identity no more.
  server.push(podsPath, 'DELETED', pod('tenant', 'app'));
  await until('the pod gone', () => source.pod('tenant', 'app') === undefined);
  t.equal(source.identity(record({ namespace: 'tenant', name: 'app', uid: 'uid-pod-tenant-app' })), undefined, 'a pod deleted: undefined');
  t.notOk(source.pods().some((p) => p.metadata.name === 'app'), 'and out of pods()');
});

// ListWatch.start() returns once the first watch's answer came; a 410 status begins a relist it
// does not wait for, with the resourceVersion emptied: the informer counts as synced once that
// list is in its cache, not when start returns (it never did before).
t.test('an informer whose first watch is answered 410 Gone lists again, and counts as synced once that list is in: start() resolves', async (t) => {
  const { server, source } = await fixture(t, (server) => {
    cluster(server);
    server.goneNext.add(networksPath);
  });
  const started = source.start(() => undefined);
  await until('the Networks listed again and watched', () => server.made('LIST', networksPath).length === 2 && server.openWatches(networksPath) === 1);
  t.ok(source.objects('Network').length > 0, 'the cache holds the Networks');
  t.ok(await settles(started, 700), 'start() resolves');
  t.ok(source.synced, 'synced');
});

t.test('stop() while start() waits for the lists: start() settles (it was left pending for ever)', async (t) => {
  const { server, source } = await fixture(t, (server) => {
    cluster(server);
    server.failingLists.add(networksPath);
  });
  const started = source.start(() => undefined);
  await until('a list of the Networks failed', () => server.made('LIST', networksPath).length >= 1);
  await source.stop();
  t.ok(await settles(started, 500), 'start() settles once the source is stopped');
});

// client-node's ListWatch waits its reconnect backoff (1 s after a watch ended twice) and then
// watches without asking whether it was stopped meanwhile; the wait is KubeSource's (delayFn),
// which stop() cancels.
t.test('stop() during the reconnect backoff of a watch: no watch is opened after it (one was, and left open)', async (t) => {
  const { server, source, start } = await fixture(t, cluster);
  await start();
  await until('the Networks watched', () => server.openWatches(networksPath) === 1);
  server.endWatches(networksPath);
  await until('watched again at once', () => server.made('WATCH', networksPath).length === 2 && server.openWatches(networksPath) === 1);
  server.endWatches(networksPath);
  await until('that watch ended', () => server.openWatches(networksPath) === 0);
  await source.stop();
  const watches = server.made('WATCH', networksPath).length;
  const after = await until('a watch after stop()', () => server.made('WATCH', networksPath).length > watches, 1500).then(() => true, () => false);
  t.notOk(after, 'no watch is opened once the source is stopped');
  t.equal(server.openWatches(networksPath), 0, 'no watch left open');
});
