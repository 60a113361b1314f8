// The e2e control plane itself: a real kube-apiserver on etcd, where pods bound to a node with no
// kubelet can be made, RBAC decides for the static-token tenants, service accounts get tokens,
// and what was written survives an apiserver restart.
import t from 'tap';
import { AuthenticationV1Api, AuthorizationV1Api, CoreV1Api, KubeConfig, RbacAuthorizationV1Api, VersionApi } from '@kubernetes/client-node';
import { kubernetesVersion } from './cluster/binaries.ts';
import { until } from './lib/engine.ts';
import { prepareClusterTest, startCluster, type Cluster, type ClusterUser } from './cluster/cluster.ts';

// A cold build of kube-apiserver and etcd takes minutes: then the file gets more than 300 s.
const skip = await prepareClusterTest(t);

const statusOf = (request: Promise<unknown>) =>
  request.then(
    () => 200,
    (error: { code?: number }) => error.code ?? 0,
  );

function clientAs(cluster: Cluster, user: ClusterUser) {
  const kc = new KubeConfig();
  kc.loadFromFile(cluster.kubeconfig(user));
  return {
    core: kc.makeApiClient(CoreV1Api),
    rbac: kc.makeApiClient(RbacAuthorizationV1Api),
    authz: kc.makeApiClient(AuthorizationV1Api),
    version: kc.makeApiClient(VersionApi),
  };
}

t.test('a real control plane on 127.0.0.1', { skip }, async (t) => {
  const started = Date.now();
  const cluster = await startCluster(t);
  t.comment(`cluster ready in ${((Date.now() - started) / 1000).toFixed(1)} s`);
  t.match(cluster.server, /^https:\/\/127\.0\.0\.1:\d+$/);
  const admin = clientAs(cluster, 'admin');
  const tenantA = clientAs(cluster, 'tenant-a');
  const tenantB = clientAs(cluster, 'tenant-b');
  const namespace = 'smoke';
  t.equal((await admin.version.getCode()).gitVersion, `v${kubernetesVersion}`, 'the apiserver is the pinned release');

  await t.test('a pod bound to a node without a kubelet is made and stays Pending', async (t) => {
    await admin.core.createNamespace({ body: { metadata: { name: namespace } } });
    const pod = await admin.core.createNamespacedPod({
      namespace,
      body: { metadata: { name: 'pod-1' }, spec: { nodeName: 'node-a', containers: [{ name: 'main', image: 'busybox' }] } },
    });
    t.equal(pod.spec?.nodeName, 'node-a');
    t.equal(pod.status?.phase, 'Pending');
    const read = await admin.core.readNamespacedPod({ namespace, name: 'pod-1' });
    t.equal(read.metadata?.uid, pod.metadata?.uid);
  });

  await t.test('RBAC decides for the tenants', async (t) => {
    t.equal(await statusOf(tenantA.core.listNamespacedPod({ namespace })), 403, 'tenant-a may not list pods before a grant');
    await admin.rbac.createNamespacedRole({
      namespace,
      body: { metadata: { name: 'pod-reader' }, rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'watch'] }] },
    });
    await admin.rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'tenant-a-reads-pods' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'pod-reader' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'tenant-a' }],
      },
    });
    // RBAC follows the binding through the apiserver's informers: a moment, not at once.
    const pods = await until('tenant-a may list pods', () => tenantA.core.listNamespacedPod({ namespace }).catch(() => undefined));
    t.same(pods.items.map((p) => p.metadata?.name), ['pod-1'], 'tenant-a lists the pods once granted');
    t.equal(await statusOf(tenantB.core.listNamespacedPod({ namespace })), 403, 'tenant-b is still refused');
    t.equal(await statusOf(tenantA.core.deleteNamespacedPod({ namespace, name: 'pod-1' })), 403, 'the grant is read-only');
  });

  await t.test('a service account gets a kubeconfig through TokenRequest', async (t) => {
    const kc = new KubeConfig();
    kc.loadFromFile(await cluster.serviceAccountKubeconfig('podnet-system', 'podnet'));
    const review = await kc.makeApiClient(AuthenticationV1Api).createSelfSubjectReview({ body: {} });
    t.equal(review.status?.userInfo?.username, 'system:serviceaccount:podnet-system:podnet');
    t.equal(await statusOf(kc.makeApiClient(CoreV1Api).listNamespacedPod({ namespace })), 403, 'and nothing more until bound');
  });

  await t.test('aggregated ClusterRoles get their rules once aggregated, as no controller runs here', async (t) => {
    const canList = async () => {
      const review = await tenantB.authz.createSelfSubjectAccessReview({
        body: { spec: { resourceAttributes: { group: 'podnetwork.opdev.io', resource: 'podnetworkconfigs', verb: 'list', namespace } } },
      });
      return review.status?.allowed;
    };
    await admin.rbac.createClusterRole({
      body: {
        metadata: { name: 'smoke-view-podnetworkconfigs', labels: { 'rbac.authorization.k8s.io/aggregate-to-view': 'true' } },
        rules: [{ apiGroups: ['podnetwork.opdev.io'], resources: ['podnetworkconfigs'], verbs: ['get', 'list', 'watch'] }],
      },
    });
    await admin.rbac.createNamespacedRoleBinding({
      namespace,
      body: {
        metadata: { name: 'tenant-b-views' },
        roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
        subjects: [{ apiGroup: 'rbac.authorization.k8s.io', kind: 'User', name: 'tenant-b' }],
      },
    });
    t.equal(await canList(), false, 'view is empty before aggregation');
    await cluster.aggregateClusterRoles();
    t.ok(await until('view to aggregate', async () => (await canList()) || undefined), 'view holds the labelled role rules after');
    t.equal(await statusOf(tenantB.core.listNamespacedPod({ namespace })), 200, 'and the built-in view rules');
  });

  await t.test('what was written survives an apiserver restart', async (t) => {
    await cluster.restartApiserver();
    const pod = await admin.core.readNamespacedPod({ namespace, name: 'pod-1' });
    t.equal(pod.spec?.nodeName, 'node-a');
    const pods = await tenantA.core.listNamespacedPod({ namespace });
    t.equal(pods.items.length, 1, 'and so does the grant');
  });

  await t.test('a bound pod is gone only when deleted with grace 0, as a kubelet would finish it', async (t) => {
    await admin.core.deleteNamespacedPod({ namespace, name: 'pod-1' });
    const terminating = await admin.core.readNamespacedPod({ namespace, name: 'pod-1' });
    t.ok(terminating.metadata?.deletionTimestamp, 'a plain delete leaves it terminating: no kubelet confirms');
    await admin.core.deleteNamespacedPod({ namespace, name: 'pod-1', gracePeriodSeconds: 0 });
    t.equal(await statusOf(admin.core.readNamespacedPod({ namespace, name: 'pod-1' })), 404);
  });
});
