import t from 'tap';
import { PodnetError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { Json } from '../kube/api.ts';
import type { ApiObject } from '../kube/resources.ts';
import { controllerManager, GoneNodes, type ControllerView } from './controller.ts';

/** Each node writes its entry as podnet/<node>; the tenant's kubectl wrote the spec. */
const managers = (nodes: string[]) => [{ manager: 'kubectl-client-side-apply', operation: 'Update' }, ...nodes.map((n) => ({ manager: `podnet/${n}`, operation: 'Apply', subresource: 'status' }))];
const config = (name: string, nodes: string[]): ApiObject => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'PodNetworkConfig',
  metadata: { name, namespace: 'tenant-a', uid: `uid-${name}`, resourceVersion: '41', managedFields: managers(nodes) },
  status: { ready: `${nodes.length}/${nodes.length}`, nodes: nodes.map((n) => ({ name: n, selected: 1, ready: 1 })) },
});
const network: ApiObject = {
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'Network',
  metadata: { name: 'blue', resourceVersion: '7', managedFields: managers(['node-a', 'node-gone']) },
  status: { ready: '2/2', nodes: [{ name: 'node-a', ready: true, attachedPods: 1 }, { name: 'node-gone', ready: true, attachedPods: 1 }] },
};

/** An API server whose nodes are `existing`; `failing` answers other than 404 for a node's GET, `proxied` a 404 that is not the API server's (no NotFound). */
function fakeApi(existing: string[], failing: string[] = [], proxied: string[] = []) {
  const gets: string[] = [];
  const patches: { path: string; operations: readonly Json[]; manager: string }[] = [];
  const posts: { path: string; body: Json }[] = [];
  return {
    gets,
    patches,
    posts,
    api: {
      async get<T>(path: string): Promise<T> {
        gets.push(path);
        const name = path.split('/').at(-1)!;
        // An object read again: as the cache had it, its version moved on.
        if (path.includes('/podnetworkconfigs/')) return { ...config(name, ['node-a', 'node-gone']), metadata: { ...config(name, ['node-a', 'node-gone']).metadata, resourceVersion: '60' } } as T;
        if (failing.includes(name)) throw new PodnetError('NOT_AVAILABLE', 'the API server is unreachable');
        if (proxied.includes(name)) throw new PodnetError('NOT_FOUND', 'GET /api/v1/nodes: 404 <html>Not Found</html>');
        if (!existing.includes(name)) throw new PodnetError('NOT_FOUND', `nodes "${name}" not found`, 'NotFound');
        return { metadata: { name } } as T;
      },
      /** A status write answers the object, its version moved on and its managers as they were. */
      async patch(path: string, operations: readonly Json[], manager: string): Promise<Json> {
        patches.push({ path, operations, manager });
        const name = path.replace(/\/status$/, '').split('/').at(-1)!;
        const nodes = name === 'blue' ? ['node-a', 'node-gone'] : ['node-a', 'node-gone', 'node-new'];
        return { metadata: { name, ...(name === 'blue' ? {} : { namespace: 'tenant-a' }), resourceVersion: '50', managedFields: managers(nodes) } };
      },
      async post(path: string, body: Json): Promise<Json> {
        posts.push({ path, body });
        return {};
      },
    },
  };
}

const quiet: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined };

t.test("entries of nodes the API server does not have are removed, over the version read, each told once; a node the cache has not seen yet stays", async (t) => {
  const fake = fakeApi(['node-a', 'node-new']);
  const view: ControllerView = { knowsNode: (n) => n === 'node-a', objects: (kind) => (kind === 'Network' ? [network] : [config('cnf-blue', ['node-a', 'node-gone', 'node-new']), config('cnf-red', ['node-a'])]) };
  await new GoneNodes({ api: fake.api, view, log: quiet, clock: () => Date.parse('2026-11-28T08:00:00Z') }).sweep();
  t.same(fake.gets.sort(), ['/api/v1/nodes/node-gone', '/api/v1/nodes/node-new'], 'each unknown node asked once, for both objects that name one');
  t.same(fake.patches.map((p) => p.path), [
    '/apis/podnetwork.opdev.io/v1alpha1/namespaces/tenant-a/podnetworkconfigs/cnf-blue/status',
    '/apis/podnetwork.opdev.io/v1alpha1/namespaces/tenant-a/podnetworkconfigs/cnf-blue',
    '/apis/podnetwork.opdev.io/v1alpha1/networks/blue/status',
    '/apis/podnetwork.opdev.io/v1alpha1/networks/blue',
  ], 'each status, then the object itself');
  t.same(fake.patches[1]!.operations, [{ op: 'test', path: '/metadata/resourceVersion', value: '50' }, { op: 'remove', path: '/metadata/managedFields/2' }], "the gone node's field manager, over the version the status write left; no other");
  const [first] = fake.patches;
  t.same(first!.operations[0], { op: 'test', path: '/metadata/resourceVersion', value: '41' }, 'written over the version read');
  t.match(first!.operations[1], { op: 'replace', path: '/status', value: { ready: '2/2', nodes: [{ name: 'node-a' }, { name: 'node-new' }] } });
  t.equal(first!.manager, controllerManager);
  t.same(
    fake.posts.map((p) => [p.path, (p.body as { reason: string }).reason, (p.body as { message: string }).message]),
    [
      ['/api/v1/namespaces/tenant-a/events', 'NodeGone', 'node node-gone is gone from the cluster: removed from status.nodes (READY 2/2)'],
      ['/api/v1/namespaces/default/events', 'NodeGone', 'node node-gone is gone from the cluster: removed from status.nodes (READY 1/1)'],
    ],
    "an Event on each object, a cluster-scoped one's in default",
  );
});

t.test("a write that does not take tells nothing; a node whose existence cannot be asked, or that a 404 not the API server's names, keeps its entries", async (t) => {
  const fake = fakeApi(['node-a'], ['node-unsure'], ['node-proxied']);
  fake.api.patch = async (path, operations, manager) => {
    fake.patches.push({ path, operations, manager });
    throw new PodnetError('IO_FAILURE', 'the test operation failed: resourceVersion changed');
  };
  const warnings: string[] = [];
  const log: Logger = { ...quiet, warn: (msg) => void warnings.push(msg) };
  const view: ControllerView = { knowsNode: (n) => n === 'node-a', objects: (kind) => (kind === 'Network' ? [] : [config('cnf-blue', ['node-a', 'node-gone']), config('cnf-red', ['node-unsure', 'node-proxied'])]) };
  await new GoneNodes({ api: fake.api, view, log }).sweep();
  t.strictSame(fake.patches.map((p) => [p.path.split('/').at(-2), p.operations[0]]), [
    ['cnf-blue', { op: 'test', path: '/metadata/resourceVersion', value: '41' }],
    ['cnf-blue', { op: 'test', path: '/metadata/resourceVersion', value: '60' }],
    ['cnf-blue', { op: 'test', path: '/metadata/resourceVersion', value: '60' }],
  ], 'only cnf-blue was written to: read again after each write that did not take, three writes in a look');
  t.same(fake.posts, [], 'no Event for a write that did not take');
  t.same(warnings, [
    "could not remove gone nodes' entries; looking again at the next change or sweep",
    'could not ask whether a node exists; its entries stay until the next look',
    'could not ask whether a node exists; its entries stay until the next look',
  ]);
});

t.test("a write that lost the race with a live node's is made again at once over the version read anew, and told once", async (t) => {
  const fake = fakeApi(['node-a']);
  const patch = fake.api.patch;
  fake.api.patch = async (path, operations, manager) => {
    if (fake.patches.length === 0) {
      fake.patches.push({ path, operations, manager });
      throw new PodnetError('IO_FAILURE', 'the test operation failed: resourceVersion changed');
    }
    return patch(path, operations, manager);
  };
  const view: ControllerView = { knowsNode: (n) => n === 'node-a', objects: (kind) => (kind === 'Network' ? [] : [config('cnf-blue', ['node-a', 'node-gone'])]) };
  await new GoneNodes({ api: fake.api, view, log: quiet }).sweep();
  const statusWrites = fake.patches.filter((p) => p.path.endsWith('/status'));
  t.strictSame(statusWrites.map((p) => p.operations[0]), [{ op: 'test', path: '/metadata/resourceVersion', value: '41' }, { op: 'test', path: '/metadata/resourceVersion', value: '60' }]);
  t.equal(fake.posts.length, 1, 'one Event, of the write that took');
});

t.test("a gone node's field manager left without its entry (a write whose second half failed, or a node from before the controller) is removed alone", async (t) => {
  const fake = fakeApi(['node-a']);
  const left: ApiObject = { ...config('cnf-old', ['node-a']), metadata: { ...config('cnf-old', ['node-a']).metadata, managedFields: managers(['node-gone', 'node-a']) } };
  const view: ControllerView = { knowsNode: (n) => n === 'node-a', objects: (kind) => (kind === 'Network' ? [] : [left]) };
  await new GoneNodes({ api: fake.api, view, log: quiet }).sweep();
  t.same(fake.patches.map((p) => [p.path, p.operations]), [
    ['/apis/podnetwork.opdev.io/v1alpha1/namespaces/tenant-a/podnetworkconfigs/cnf-old', [{ op: 'test', path: '/metadata/resourceVersion', value: '41' }, { op: 'remove', path: '/metadata/managedFields/1' }]],
  ]);
  t.same(fake.posts, [], 'no Event: no entry went');
});
