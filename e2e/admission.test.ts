// daemonset/admission.yaml against a real kube-apiserver (e2e/cluster), tried as an attacker who
// stole the daemon's token on one node would try it: the podnet account's token, bound to its pod
// on node-a, writing what belongs to node-b. Two nodes' worth of objects are made (Node objects,
// the daemon's pod on each, workload pods bound to each); no kubelet runs, none is needed, since
// the apiserver reads the node from the pod the token is bound to. Every write is the one the
// daemon makes (src/kube/publisher.ts): a merge patch of the pod's network-status annotation, and
// server-side apply of a status as podnet/<node>. Everything lives in the test's own cluster,
// which its teardown stops and deletes.
import t from 'tap';
import { request } from 'node:https';
import { readFile } from 'node:fs/promises';
import { parseAllDocuments } from 'yaml';
import { prepareClusterTest, startCluster, type Cluster } from './cluster/cluster.ts';
import { until } from './lib/engine.ts';
import { repoRoot } from './lib/env.ts';
import { clientsAs, createManifest, crdsServe, group } from './lib/kube.ts';
import { networkStatusAnnotation, networksAnnotation } from '../src/model/annotation.ts';
import { applyPatch, mergePatch } from '../src/kube/api.ts';

const skip = await prepareClusterTest(t);

const daemonNamespace = 'podnet-system';
const daemonAccount = 'podnet';
const workloads = 'tenant';
const nodeNameKey = 'authentication.kubernetes.io/node-name';

interface Answer {
  status: number;
  // An API object or a Status, read by path.
  body: Record<string, any>;
}
type Caller = (method: string, path: string, body?: object, contentType?: string) => Promise<Answer>;

/** Plain HTTPS with a bearer token: the status code and message as the apiserver gave them, nothing retried or rewritten. */
function callerWith(cluster: Cluster, token: string): Caller {
  return (method, path, body, contentType = 'application/json') =>
    new Promise((resolve, reject) => {
      const payload = body === undefined ? undefined : JSON.stringify(body);
      const headers: Record<string, string> = { authorization: `Bearer ${token}`, accept: 'application/json' };
      if (payload !== undefined) headers['content-type'] = contentType;
      const req = request(`${cluster.server}${path}`, { method, ca: cluster.caData, headers, timeout: 15_000 }, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) }));
        res.on('error', reject);
      });
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer in 15s`)));
      req.on('error', reject);
      req.end(payload);
    });
}

/** The daemon's writes, as publisher.ts makes them; `query` adds e.g. dryRun=All. */
function daemonWrites(call: Caller, node: string, query = '') {
  const apply = (path: string, kind: string, metadata: object, status: object) =>
    call('PATCH', `${path}/status?fieldManager=${encodeURIComponent(`podnet/${node}`)}&force=true${query}`, { apiVersion: group, kind, metadata, status }, applyPatch);
  return {
    annotate: (pod: string, value: string) => call('PATCH', `/api/v1/namespaces/${workloads}/pods/${pod}?${query}`, { metadata: { annotations: { [networkStatusAnnotation]: value } } }, mergePatch),
    patchPod: (pod: string, patch: object) => call('PATCH', `/api/v1/namespaces/${workloads}/pods/${pod}?${query}`, patch, mergePatch),
    configStatus: (nodes: object[]) => apply(`/apis/${group}/namespaces/${workloads}/podnetworkconfigs/fast`, 'PodNetworkConfig', { name: 'fast', namespace: workloads }, { ready: `${nodes.length}/${nodes.length}`, nodes }),
    networkStatus: (nodes: object[]) => apply(`/apis/${group}/networks/blue`, 'Network', { name: 'blue' }, { ready: `${nodes.length}/${nodes.length}`, nodes }),
    mergeStatus: (path: string, status: object) => call('PATCH', `${path}/status?${query}`, { status }, mergePatch),
  };
}

/** A node's entry in a PodNetworkConfig's status: its counts, and one failing pod when `failing` says why. */
const configEntry = (node: string, selected: number, failing?: string) => ({ name: node, selected, ready: failing ? selected - 1 : selected, ...(failing ? { failingPods: [{ name: `${node}-pod`, reason: failing }] } : {}) });
const nodeEntry = (name: string, attachedPods: number) => ({ name, ready: true, attachedPods });

t.test("a daemon token bound to its pod on node-a writes only node-a's pods and status entries", { skip }, async (t) => {
  const cluster = await startCluster(t);
  const admin = clientsAs(cluster, 'admin');
  const asAdmin = callerWith(cluster, cluster.token('admin'));
  // As shipped: the files of daemonset/ that make the account, its role and the policies.
  for (const file of ['namespace.yaml', 'crds.yaml', 'rbac.yaml', 'admission.yaml']) await createManifest(admin, file);

  for (const node of ['node-a', 'node-b']) await admin.core.createNode({ body: { metadata: { name: node } } });
  // The daemon's pod on each node, whose token the kubelet would mount.
  const daemonPods = new Map<string, string>();
  for (const node of ['node-a', 'node-b']) {
    const pod = await admin.core.createNamespacedPod({
      namespace: daemonNamespace,
      body: { metadata: { name: `podnet-${node}` }, spec: { nodeName: node, serviceAccountName: daemonAccount, containers: [{ name: 'daemon', image: 'localhost/podnet:0.1.0' }] } },
    });
    daemonPods.set(node, pod.metadata!.uid!);
  }
  await admin.core.createNamespace({ body: { metadata: { name: workloads } } });
  for (const [name, node] of [['a1', 'node-a'], ['b1', 'node-b'], ['b2', 'node-b']] as const) {
    await admin.core.createNamespacedPod({ namespace: workloads, body: { metadata: { name, labels: { app: 'cnf' } }, spec: { nodeName: node, containers: [{ name: 'main', image: 'busybox' }] } } });
  }
  await crdsServe(admin);
  await admin.objects.create({ apiVersion: group, kind: 'Network', metadata: { name: 'blue' }, spec: { type: 'bridge', ipam: { ranges: [{ subnet: '198.18.101.0/24' }] } } });
  await admin.objects.create({ apiVersion: group, kind: 'PodNetworkConfig', metadata: { name: 'fast', namespace: workloads }, spec: { podSelector: { matchLabels: { app: 'cnf' } }, attachments: [{ network: 'blue', interface: 'net1' }] } });

  const token = async (boundObjectRef?: { apiVersion: string; kind: string; name: string; uid: string }) => {
    const answer = await admin.core.createNamespacedServiceAccountToken({ namespace: daemonNamespace, name: daemonAccount, body: { spec: { audiences: [], expirationSeconds: 3600, ...(boundObjectRef ? { boundObjectRef } : {}) } } });
    if (!answer.status?.token) throw new Error(`TokenRequest for ${daemonNamespace}/${daemonAccount} gave no token`);
    return answer.status.token;
  };
  // What the kubelet asks for the daemon's pod: a token bound to it.
  const boundToken = (node: string) => token({ apiVersion: 'v1', kind: 'Pod', name: `podnet-${node}`, uid: daemonPods.get(node)! });
  const asNodeA = callerWith(cluster, await boundToken('node-a'));
  const asNodeB = callerWith(cluster, await boundToken('node-b'));
  // The account's token bound to nothing: what `kubectl create token` gives, or a token lifted from somewhere else.
  const asUnbound = callerWith(cluster, await token());
  const nodeA = daemonWrites(asNodeA, 'node-a');
  const nodeB = daemonWrites(asNodeB, 'node-b');
  const unbound = daemonWrites(asUnbound, 'node-a');
  const configPath = `/apis/${group}/namespaces/${workloads}/podnetworkconfigs/fast`;
  const networkPath = `/apis/${group}/networks/blue`;

  await t.test('the apiserver names the pod and its node in the bound token\'s extra, and no node in the unbound one\'s', async (t) => {
    const whoami = (call: Caller) => call('POST', '/apis/authentication.k8s.io/v1/selfsubjectreviews', { apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' });
    const bound = (await whoami(asNodeA)).body['status']['userInfo'];
    t.comment(`extra of the token bound to podnet-node-a: ${JSON.stringify(bound['extra'])}`);
    t.equal(bound['username'], `system:serviceaccount:${daemonNamespace}:${daemonAccount}`);
    const nodeUid = (await admin.core.readNode({ name: 'node-a' })).metadata!.uid!;
    t.strictSame(bound['extra'][nodeNameKey], ['node-a'], 'node-name: the node the pod is bound to');
    t.strictSame(bound['extra']['authentication.kubernetes.io/node-uid'], [nodeUid], 'node-uid: that Node object');
    t.strictSame(bound['extra']['authentication.kubernetes.io/pod-name'], ['podnet-node-a']);
    t.strictSame(bound['extra']['authentication.kubernetes.io/pod-uid'], [daemonPods.get('node-a')]);
    const plain = (await whoami(asUnbound)).body['status']['userInfo'];
    t.comment(`extra of the unbound token: ${JSON.stringify(plain['extra'])}`);
    t.notOk(plain['extra']?.[nodeNameKey], 'no node-name');
  });

  await t.test('the policies are stored as the file says', async (t) => {
    // client-node's YAML loader, which createManifest uses, would drop a field its models lack.
    const shipped = parseAllDocuments(await readFile(`${repoRoot}daemonset/admission.yaml`, 'utf8')).map((d) => d.toJS() as Record<string, any>);
    const policies = shipped.filter((o) => o['kind'] === 'ValidatingAdmissionPolicy');
    t.same(
      policies.map((p) => p['metadata']['name']),
      ['podnet-node-pods', 'podnet-node-podnetworkconfig-status', 'podnet-node-network-status', 'podnet-controller-status', 'podnet-controller-objects', 'podnet-node-resourceslices', 'podnet-node-resourceclaim-status'],
    );
    for (const policy of policies) {
      const name = policy['metadata']['name'] as string;
      const stored = (await asAdmin('GET', `/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/${name}`)).body;
      for (const key of ['failurePolicy', 'matchConditions', 'variables', 'validations']) t.strictSame(stored['spec'][key], policy['spec'][key], `${name}: ${key} as shipped`);
      t.strictSame(stored['spec']['matchConstraints']['resourceRules'], policy['spec']['matchConstraints']['resourceRules'].map((r: object) => ({ ...r, scope: '*' })), `${name}: what it matches`);
    }
  });

  // A policy is enforced a moment after it is made (the apiserver's informers): dry runs go through admission and change nothing.
  await until(
    'the policies are enforced',
    async () => {
      const probe = daemonWrites(asUnbound, 'node-a', '&dryRun=All');
      const answers = await Promise.all([probe.annotate('a1', '[]'), probe.configStatus([configEntry('node-a', 1)]), probe.networkStatus([nodeEntry('node-a', 1)])]);
      return answers.every((a) => a.status === 403) ? true : undefined;
    },
    30_000,
  );

  await t.test("pods: node-a's token patches node-a's pods' network-status, nothing of node-b's and nothing else", async (t) => {
    const denied = await nodeA.annotate('b1', '[{"name":"forged"}]');
    t.equal(denied.status, 403, "node-b's pod: refused");
    t.match(denied.body['message'], "podnet's daemon on node node-a may patch only pods bound to node node-a; pod tenant/b1 is bound to node node-b");
    t.notOk((await admin.core.readNamespacedPod({ namespace: workloads, name: 'b1' })).metadata?.annotations?.[networkStatusAnnotation], 'b1 unchanged');

    const allowed = await nodeA.annotate('a1', '[{"name":"primary","interface":"eth0","default":true}]');
    t.equal(allowed.status, 200, `node-a's pod: allowed (${String(allowed.body['message'] ?? '')})`);
    t.equal((await admin.core.readNamespacedPod({ namespace: workloads, name: 'a1' })).metadata?.annotations?.[networkStatusAnnotation], '[{"name":"primary","interface":"eth0","default":true}]');
    t.equal((await nodeB.annotate('b1', '[]')).status, 200, "node-b's token on node-b's pod: allowed");

    // What RBAC's patch alone would let through on its own node's pods.
    for (const [what, patch] of [
      ['the networks annotation (what the pod asks for)', { metadata: { annotations: { [networksAnnotation]: 'blue' } } }],
      ['a label (what Services and PodNetworkConfigs select by)', { metadata: { labels: { app: 'other' } } }],
      ['a container image', { spec: { containers: [{ name: 'main', image: 'evil' }] } }],
    ] as const) {
      const answer = await nodeA.patchPod('a1', patch);
      t.equal(answer.status, 403, `${what}: refused`);
      t.match(answer.body['message'], "podnet's daemon on node node-a may change only the podnetwork.opdev.io/network-status annotation of pod tenant/a1");
    }
    const a1 = await admin.core.readNamespacedPod({ namespace: workloads, name: 'a1' });
    t.strictSame([a1.metadata?.labels, a1.metadata?.annotations?.[networksAnnotation], a1.spec?.containers[0]?.image], [{ app: 'cnf' }, undefined, 'busybox'], 'a1 unchanged');
  });

  await t.test("PodNetworkConfig status: node-a writes its own entry and never node-b's", async (t) => {
    t.equal((await nodeB.configStatus([configEntry('node-b', 2)])).status, 200, 'node-b writes its entry');
    // Both nodes write in turn, as their passes do: each keeps the other's entry as it was.
    for (const round of [1, 2, 3]) {
      const a = await nodeA.configStatus([configEntry('node-a', round, round === 2 ? 'net1: no address left' : undefined)]);
      t.equal(a.status, 200, `round ${round}: node-a writes its entry (${String(a.body['message'] ?? '')})`);
      const b = await nodeB.configStatus([configEntry('node-b', 2, round === 2 ? 'x' : undefined)]);
      t.equal(b.status, 200, `round ${round}: node-b writes its entry (${String(b.body['message'] ?? '')})`);
    }
    const before = (await asAdmin('GET', configPath)).body['status']['nodes'] as { name: string }[];
    t.strictSame([...before].sort((x, y) => x.name.localeCompare(y.name)), [configEntry('node-a', 3), configEntry('node-b', 2)], "every node's entry is there");

    const message = "podnet's daemon on node node-a may write only node node-a's entry in status.nodes of PodNetworkConfig tenant/fast; this write adds, changes or removes entries of other nodes";
    for (const [what, write] of [
      ["changing node-b's entry", () => nodeA.configStatus([configEntry('node-a', 3), configEntry('node-b', 2, 'forged')])],
      ['adding an entry for node-c', () => nodeA.configStatus([configEntry('node-a', 3), configEntry('node-c', 1)])],
      ["removing node-b's entry (a merge patch of the list)", () => nodeA.mergeStatus(configPath, { nodes: [configEntry('node-a', 3)] })],
    ] as const) {
      const answer = await write();
      t.equal(answer.status, 403, `${what}: refused`);
      t.match(answer.body['message'], message);
    }
    t.strictSame((await asAdmin('GET', configPath)).body['status']['nodes'], before, 'the entries are as they were');
    t.equal((await nodeA.configStatus([])).status, 200, 'node-a removes its own entry');
    t.strictSame(((await asAdmin('GET', configPath)).body['status']['nodes'] as { name: string }[]).map((n) => n.name), ['node-b'], "only node-b's is left");
  });

  await t.test("Network status: node-a writes its own node entry and never node-b's", async (t) => {
    t.equal((await nodeB.networkStatus([nodeEntry('node-b', 2)])).status, 200, 'node-b writes its entry');
    const own = await nodeA.networkStatus([nodeEntry('node-a', 1)]);
    t.equal(own.status, 200, `node-a writes its entry (${String(own.body['message'] ?? '')})`);
    const before = (await asAdmin('GET', networkPath)).body['status']['nodes'] as { name: string }[];
    t.strictSame(before.map((n) => n.name).sort(), ['node-a', 'node-b']);

    const message = "podnet's daemon on node node-a may write only node node-a's entry in status.nodes of Network blue; this write adds, changes or removes entries of other nodes";
    for (const [what, write] of [
      ["changing node-b's entry", () => nodeA.networkStatus([nodeEntry('node-a', 1), { name: 'node-b', ready: false, attachedPods: 0, message: 'forged' }])],
      ['adding an entry for node-c', () => nodeA.networkStatus([nodeEntry('node-a', 1), nodeEntry('node-c', 1)])],
      ["removing node-b's entry (a merge patch of the list)", () => nodeA.mergeStatus(networkPath, { nodes: [nodeEntry('node-a', 1)] })],
    ] as const) {
      const answer = await write();
      t.equal(answer.status, 403, `${what}: refused`);
      t.match(answer.body['message'], message);
    }
    t.strictSame((await asAdmin('GET', networkPath)).body['status']['nodes'], before, 'the entries are as they were');
  });

  await t.test("ResourceSlices (podnet's DRA driver): node-a writes its own pool's slices and no other node's, pool or name", async (t) => {
    const slice = (name: string, node: string, pool = node, driver = 'dra.podnetwork.opdev.io') => ({
      apiVersion: 'resource.k8s.io/v1',
      kind: 'ResourceSlice',
      metadata: { name },
      spec: { driver, nodeName: node, pool: { name: pool, generation: 1, resourceSliceCount: 1 }, devices: [] },
    });
    const slices = '/apis/resource.k8s.io/v1/resourceslices';
    const create = (call: Caller, body: object) => call('POST', slices, body);
    const own = await create(asNodeA, slice('node-a-podnet-0', 'node-a'));
    t.equal(own.status, 201, `node-a creates its own slice (${String(own.body['message'] ?? '')})`);
    t.equal((await create(asNodeB, slice('node-b-podnet-0', 'node-b'))).status, 201, 'node-b its own');
    const refusal = /ValidatingAdmissionPolicy 'podnet-node-resourceslices'.*podnet's daemon on node node-a may write only node node-a's ResourceSlices of driver dra\.podnetwork\.opdev\.io, in pool node-a, named node-a-podnet-N/;
    for (const [what, body] of [
      ["a slice of node-b's", slice('node-a-podnet-1', 'node-b')],
      ["node-b's pool on node-a", slice('node-a-podnet-1', 'node-a', 'node-b')],
      ["node-b's slice name", slice('node-b-podnet-1', 'node-a')],
      ["another driver's slice", slice('node-a-podnet-1', 'node-a', 'node-a', 'gpu.example.com')],
    ] as const) {
      const answer = await create(asNodeA, body);
      t.equal(answer.status, 403, `${what}: refused`);
      t.match(answer.body['message'], refusal);
    }
    const removed = await asNodeA('DELETE', `${slices}/node-b-podnet-0`);
    t.equal(removed.status, 403, "deleting node-b's slice: refused");
    t.equal((await asNodeA('DELETE', `${slices}/node-a-podnet-0`)).status, 200, 'deleting its own: allowed');
    const unboundAnswer = await create(asUnbound, slice('node-a-podnet-2', 'node-a'));
    t.equal(unboundAnswer.status, 403, 'a token naming no node creates no slice');
    t.match(unboundAnswer.body['message'], /only with the token of its own pod on a node/);
  });

  await t.test('a token of the account bound to no pod writes none of it; reads and Events stay allowed', async (t) => {
    const cases = [
      ['patching a pod', () => unbound.annotate('a1', '[]'), "podnet's daemon account may patch pod tenant/a1 only with the token of its own pod on a node; this token names no node"],
      ["writing a PodNetworkConfig's status", () => unbound.configStatus([configEntry('node-a', 1)]), "podnet's daemon account may write the status of PodNetworkConfig tenant/fast only with the token of its own pod on a node; this token names no node"],
      ["writing a Network's status", () => unbound.networkStatus([nodeEntry('node-a', 1)]), "podnet's daemon account may write the status of Network blue only with the token of its own pod on a node; this token names no node"],
    ] as const;
    for (const [what, write, message] of cases) {
      const answer = await write();
      t.equal(answer.status, 403, `${what}: refused`);
      t.match(answer.body['message'], message);
    }
    for (const [who, call] of [
      ['unbound', asUnbound],
      ['node-a', asNodeA],
    ] as const) {
      t.equal((await call('GET', `/api/v1/namespaces/${workloads}/pods/b1`)).status, 200, `${who}: reads a pod of node-b`);
      t.equal((await call('GET', `/apis/${group}/podnetworkconfigs`)).status, 200, `${who}: lists PodNetworkConfigs`);
      const event = await call('POST', `/api/v1/namespaces/${workloads}/events`, {
        apiVersion: 'v1',
        kind: 'Event',
        metadata: { name: `a1.${who}` },
        involvedObject: { kind: 'Pod', apiVersion: 'v1', name: 'a1', namespace: workloads },
        reason: 'Attached',
        message: 'net1 attached to blue',
        type: 'Normal',
        source: { component: 'podnet', host: 'node-a' },
      });
      t.equal(event.status, 201, `${who}: creates an Event`);
    }
  });
});
