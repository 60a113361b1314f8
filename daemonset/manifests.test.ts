// What `kubectl apply -k daemonset/` installs, read as the API server would get it: valid YAML,
// every object named, the admission policies that hold the daemon to its node, and the DaemonSet as
// the issue asks for it (the e2e runs its containers).
import t from 'tap';
import { readFileSync } from 'node:fs';
import { parse, parseAllDocuments } from 'yaml';

// YAML objects of many shapes, read by path: any keeps the reads short; a wrong path fails the assertion.
type Obj = Record<string, any>;
const here = (name: string) => new URL(name, import.meta.url);
const kustomization = parse(readFileSync(here('kustomization.yaml'), 'utf8')) as { resources: string[] };

function documents(file: string): Obj[] {
  const docs = parseAllDocuments(readFileSync(here(file), 'utf8'));
  for (const d of docs) if (d.errors.length > 0) throw new Error(`${file}: ${d.errors.map((e) => e.message).join('; ')}`);
  return docs.map((d) => d.toJS() as Obj).filter((o) => o !== null);
}

const objects = kustomization.resources.flatMap(documents);
const find = (kind: string, name: string) => objects.find((o) => o['kind'] === kind && o['metadata']?.['name'] === name);

t.test('every resource of the kustomization is valid YAML of named objects', async (t) => {
  t.strictSame(kustomization.resources, ['crds.yaml', 'namespace.yaml', 'rbac.yaml', 'admission.yaml', 'permissions.yaml', 'daemonset.yaml', 'controller.yaml', 'dra.yaml']);
  for (const o of objects) t.ok(o['apiVersion'] && o['kind'] && o['metadata']?.['name'], `${String(o['kind'])} ${String(o['metadata']?.['name'])}`);
  t.strictSame(
    objects.map((o) => `${String(o['kind'])}/${String(o['metadata']['name'])}`),
    [
      'CustomResourceDefinition/networks.podnetwork.opdev.io',
      'CustomResourceDefinition/podnetworkconfigs.podnetwork.opdev.io',
      'CustomResourceDefinition/podnetworkpermissions.podnetwork.opdev.io',
      'Namespace/podnet-system',
      'ServiceAccount/podnet',
      'ClusterRole/podnet-node',
      'ClusterRoleBinding/podnet-node',
      'ClusterRole/podnet-controller',
      'ClusterRoleBinding/podnet-controller',
      'ClusterRole/podnet-tenant-edit',
      'ClusterRole/podnet-tenant-view',
      'ValidatingAdmissionPolicy/podnet-node-pods',
      'ValidatingAdmissionPolicyBinding/podnet-node-pods',
      'ValidatingAdmissionPolicy/podnet-node-podnetworkconfig-status',
      'ValidatingAdmissionPolicyBinding/podnet-node-podnetworkconfig-status',
      'ValidatingAdmissionPolicy/podnet-node-network-status',
      'ValidatingAdmissionPolicyBinding/podnet-node-network-status',
      'ValidatingAdmissionPolicy/podnet-controller-status',
      'ValidatingAdmissionPolicyBinding/podnet-controller-status',
      'ValidatingAdmissionPolicy/podnet-controller-objects',
      'ValidatingAdmissionPolicyBinding/podnet-controller-objects',
      'ValidatingAdmissionPolicy/podnet-node-resourceslices',
      'ValidatingAdmissionPolicyBinding/podnet-node-resourceslices',
      'ValidatingAdmissionPolicy/podnet-node-resourceclaim-status',
      'ValidatingAdmissionPolicyBinding/podnet-node-resourceclaim-status',
      'ValidatingAdmissionPolicy/podnet-namespace-permissions',
      'ValidatingAdmissionPolicyBinding/podnet-namespace-permissions',
      'DaemonSet/podnet',
      'ServiceAccount/podnet-controller',
      'Deployment/podnet-controller',
      'DeviceClass/podnet',
      'ValidatingAdmissionPolicy/podnet-claims-networks',
      'ValidatingAdmissionPolicyBinding/podnet-claims-networks',
    ],
  );
});

t.test("the daemon's role reads, and writes only status, pod annotations, Events and its DRA driver's slices", async (t) => {
  const rules = find('ClusterRole', 'podnet-node')!['rules'] as Obj[];
  const verbs = new Set(rules.flatMap((r) => r['verbs'] as string[]));
  for (const never of ['create', 'update', 'delete', 'deletecollection', '*']) {
    const granted = rules.filter((r) => (r['verbs'] as string[]).includes(never)).flatMap((r) => r['resources'] as string[]);
    // A DRA driver writes its node's ResourceSlices (the admission policy holds it to its own).
    t.strictSame(granted, never === 'create' ? ['events', 'resourceslices'] : never === 'delete' ? ['resourceslices'] : [], `${never}: ${granted.join(', ') || 'nothing'}`);
  }
  t.ok(verbs.has('watch'), 'it watches');
  t.notOk(rules.some((r) => (r['resources'] as string[]).includes('*') || (r['apiGroups'] as string[]).includes('*')), 'no wildcard');
  t.notOk(rules.some((r) => (r['resources'] as string[]).includes('secrets')), 'no secrets');
  const patched = rules.filter((r) => (r['verbs'] as string[]).includes('patch')).flatMap((r) => r['resources'] as string[]);
  t.strictSame(patched.sort(), ['events', 'networks/status', 'podnetworkconfigs/status', 'pods', 'resourceclaims/status', 'resourceslices'], "it patches pods (network-status), the statuses, its slices and Events; never a spec");
  const driver = rules.find((r) => (r['resources'] as string[]).includes('resourceclaims/driver'))!;
  t.strictSame([driver['resourceNames'], driver['verbs']], [['dra.podnetwork.opdev.io'], ['associated-node:patch', 'associated-node:update']], "a claim's device status: its own driver's, on claims of its own node only");
  const tenant = find('ClusterRole', 'podnet-tenant-edit')!;
  const written = (tenant['rules'] as Obj[]).filter((r) => (r['verbs'] as string[]).some((v) => !['get', 'list', 'watch'].includes(v))).flatMap((r) => r['resources'] as string[]);
  t.strictSame(written, ['podnetworkconfigs'], 'tenants write PodNetworkConfigs, never Networks or PodNetworkPermissions');
  t.strictSame((tenant['rules'] as Obj[]).flatMap((r) => r['resources'] as string[]), ['podnetworkconfigs', 'podnetworkpermissions'], 'and read the permissions of their namespace');
});

t.test("the admission policies hold the daemon's account to its own node for every write RBAC gives it but Events", async (t) => {
  const account = find('ServiceAccount', 'podnet')!;
  const username = `system:serviceaccount:${String(account['metadata']['namespace'])}:${String(account['metadata']['name'])}`;
  const policies = objects.filter((o) => o['kind'] === 'ValidatingAdmissionPolicy' && String(o['metadata']['name']).startsWith('podnet-node-'));
  const bindings = objects.filter((o) => o['kind'] === 'ValidatingAdmissionPolicyBinding');
  const matched = policies.flatMap((p) => (p['spec']['matchConstraints']['resourceRules'] as Obj[]).flatMap((r) => r['resources'] as string[]));
  const patched = (find('ClusterRole', 'podnet-node')!['rules'] as Obj[]).filter((r) => (r['verbs'] as string[]).includes('patch')).flatMap((r) => r['resources'] as string[]);
  t.strictSame(matched.sort(), patched.filter((r) => r !== 'events').sort(), 'every resource the role patches, Events aside');
  for (const policy of policies) {
    const name = String(policy['metadata']['name']);
    const spec = policy['spec'] as Obj;
    t.equal(spec['failurePolicy'], 'Fail', `${name}: refuses when it cannot decide`);
    t.strictSame(spec['matchConditions'], [{ name: 'podnet-daemon', expression: `request.userInfo.username == '${username}'` }], `${name}: only the daemon's account (the one rbac.yaml makes)`);
    t.ok((spec['variables'] as Obj[]).some((v) => String(v['expression']).includes("'authentication.kubernetes.io/node-name'")), `${name}: reads the node from the token`);
    for (const v of spec['validations'] as Obj[]) {
      t.equal(v['reason'], 'Forbidden', `${name}: refuses with 403`);
      t.ok(v['message'] && v['messageExpression'], `${name}: says what it refused and why`);
    }
    const bound = bindings.filter((b) => b['spec']['policyName'] === name);
    t.strictSame(
      bound.map((b) => b['spec']),
      [{ policyName: name, validationActions: ['Deny'] }],
      `${name}: one binding, which denies`,
    );
  }
});

t.test("the namespace permissions' policy: every permission of the request's namespace, none when it has none, specs only", async (t) => {
  const policy = find('ValidatingAdmissionPolicy', 'podnet-namespace-permissions')!['spec'] as Obj;
  t.strictSame(policy['paramKind'], { apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'PodNetworkPermission' });
  t.equal(policy['failurePolicy'], 'Fail');
  t.strictSame(policy['matchConstraints']['resourceRules'][0]['resources'], ['podnetworkconfigs'], 'the spec, not the status the daemons write');
  for (const v of policy['validations'] as Obj[]) {
    t.equal(v['reason'], 'Forbidden');
    t.match(String(v['messageExpression']), /variables\.permission/, 'names the permission');
  }
  const binding = find('ValidatingAdmissionPolicyBinding', 'podnet-namespace-permissions')!['spec'] as Obj;
  t.strictSame(binding, { policyName: 'podnet-namespace-permissions', paramRef: { selector: {}, parameterNotFoundAction: 'Allow' }, validationActions: ['Deny'] });
});

t.test('the DaemonSet: host namespaces, privileged daemon, exact mounts, probe, resources, every node', async (t) => {
  const spec = find('DaemonSet', 'podnet')!['spec']['template']['spec'] as Obj;
  t.equal(spec['hostNetwork'], true);
  t.equal(spec['hostPID'], true);
  t.strictSame(spec['tolerations'], [{ operator: 'Exists' }], 'tolerates every taint');
  const [install] = spec['initContainers'] as Obj[];
  const [daemon] = spec['containers'] as Obj[];
  t.match(install!['args'], ['install', '--cni-bin-dir', '/host/opt/cni/bin', '--cni-conf-dir', '/host/etc/cni/net.d']);
  t.notOk(install!['securityContext']['privileged'], 'the init container needs no privilege');
  t.strictSame(install!['securityContext']['capabilities'], { drop: ['ALL'] });
  t.match(daemon!['args'], ['daemon', '--node-name', '$(NODE_NAME)', '--cni-conf-dir', '/host/etc/cni/net.d', '--cni-cache-dir', '/var/lib/cni']);
  t.same(daemon!['env'], [{ name: 'NODE_NAME', valueFrom: { fieldRef: { fieldPath: 'spec.nodeName' } } }], 'the node name comes from the downward API');
  t.equal(daemon!['securityContext']['privileged'], true);
  t.strictSame(daemon!['readinessProbe']['exec']['command'], ['/usr/local/bin/podnet', 'status', '--ready']);
  for (const c of [install!, daemon!]) {
    t.ok(c['resources']['requests']['memory'] && c['resources']['limits']['memory'], `${String(c['name'])}: memory request and limit`);
    t.ok(c['resources']['requests']['cpu'] && c['resources']['limits']['cpu'], `${String(c['name'])}: cpu request and limit`);
  }
  const volumes = new Map((spec['volumes'] as Obj[]).map((v) => [v['name'] as string, v]));
  // Where each mount lands in the container: from which node path, read-only, propagated.
  const mounts = (c: Obj) =>
    Object.fromEntries((c['volumeMounts'] as Obj[]).map((m) => [String(m['mountPath']), `${volumes.get(m['name'])!['hostPath']?.['path'] ?? 'emptyDir'}${m['readOnly'] ? ' ro' : ''}${m['mountPropagation'] ? ` ${String(m['mountPropagation'])}` : ''}`]));
  t.strictSame(mounts(install!), { '/host/opt/cni/bin': '/opt/cni/bin', '/host/etc/cni/net.d': '/etc/cni/net.d' });
  t.strictSame(mounts(daemon!), {
    '/host/etc/cni/net.d': '/etc/cni/net.d',
    '/opt/cni/bin': '/opt/cni/bin ro',
    '/var/lib/cni': '/var/lib/cni',
    '/var/lib/podnet': '/var/lib/podnet',
    '/run/podnet': '/run/podnet',
    '/run/netns': '/run/netns HostToContainer',
    '/var/run/netns': '/run/netns HostToContainer',
    '/run/containerd': '/run/containerd ro',
    '/tmp': 'emptyDir',
    '/var/lib/kubelet/plugins_registry': '/var/lib/kubelet/plugins_registry',
    '/var/lib/kubelet/plugins/dra.podnetwork.opdev.io': '/var/lib/kubelet/plugins/dra.podnetwork.opdev.io',
  });
  t.notOk([...volumes.values()].some((v) => String(v['hostPath']?.['path'] ?? '').startsWith('/var/run/')), 'no hostPath under /var/run: where it links to /run, the runtime refuses to propagate mounts from it');
  t.equal(volumes.size, new Set([...(install!['volumeMounts'] as Obj[]), ...(daemon!['volumeMounts'] as Obj[])].map((m) => m['name'])).size, 'no volume goes unmounted');
});

t.test('the namespace lets Pod Security admit the privileged daemon', async (t) => {
  t.equal(find('Namespace', 'podnet-system')!['metadata']['labels']['pod-security.kubernetes.io/enforce'], 'privileged');
});

t.test('uninstall.yaml takes podnet off each node, with no API access', async (t) => {
  const [removal, ...others] = documents('uninstall.yaml');
  t.equal(others.length, 0);
  const spec = removal!['spec']['template']['spec'] as Obj;
  t.equal(spec['automountServiceAccountToken'], false);
  t.match(spec['initContainers'][0]['args'], ['uninstall', '--cni-bin-dir', '/host/opt/cni/bin', '--cni-conf-dir', '/host/etc/cni/net.d']);
  t.notOk(kustomization.resources.includes('uninstall.yaml'), 'not part of what apply -k installs');
});

t.test('daemonset-metrics/: the base with the daemon serving metrics on the node address, and a PodMonitor that finds them', async (t) => {
  const overlay = parse(readFileSync(here('../daemonset-metrics/kustomization.yaml'), 'utf8')) as { resources: string[]; patches: { path: string }[] };
  t.strictSame(overlay.resources, ['../daemonset/', 'podmonitor.yaml', 'alerts.yaml']);
  const [patch] = documents('../daemonset-metrics/daemon-metrics.yaml');
  const base = find('DaemonSet', 'podnet')!;
  t.equal(patch!['metadata']['name'], base['metadata']['name']);
  const [daemon] = patch!['spec']['template']['spec']['containers'] as Obj[];
  const [baseDaemon] = base['spec']['template']['spec']['containers'] as Obj[];
  t.equal(daemon!['name'], baseDaemon!['name'], 'patches the daemon container');
  t.strictSame(daemon!['args'], [...(baseDaemon!['args'] as string[]), '--metrics-address', '$(POD_IP):9109'], "the base's arguments and the metrics address: the overlay does not drift from the base");
  t.strictSame(daemon!['env'], [...(baseDaemon!['env'] as Obj[]), { name: 'POD_IP', valueFrom: { fieldRef: { fieldPath: 'status.podIP' } } }]);
  const [monitor] = documents('../daemonset-metrics/podmonitor.yaml');
  t.strictSame(monitor!['spec']['selector']['matchLabels'], { 'app.kubernetes.io/name': base['spec']['template']['metadata']['labels']['app.kubernetes.io/name'] }, "selects the daemon's pods");
  t.equal(monitor!['metadata']['namespace'], base['metadata']['namespace']);
  t.equal(monitor!['spec']['podMetricsEndpoints'][0]['port'], (daemon!['ports'] as Obj[])[0]!['name'], 'by the port the patch names');
  t.notOk(kustomization.resources.some((r) => r.includes('metrics')), 'not in the default install');
  const [rules] = documents('../daemonset-metrics/alerts.yaml');
  t.equal(rules!['metadata']['namespace'], base['metadata']['namespace']);
  const expressions = (rules!['spec']['groups'] as Obj[]).flatMap((g) => (g['rules'] as Obj[]).map((r) => String(r['expr'])));
  t.ok(expressions.some((e) => e.includes(`job="${monitor!['metadata']['namespace']}/${monitor!['metadata']['name']}"`)), "the daemon-down alert names the PodMonitor's job");
});

t.test("the controller's role reads Nodes and both resources, and writes only their status and Events; its policy lets it only shrink status.nodes", async (t) => {
  const rules = find('ClusterRole', 'podnet-controller')!['rules'] as Obj[];
  const written = rules.filter((r) => (r['verbs'] as string[]).some((v) => !['get', 'list', 'watch'].includes(v))).flatMap((r) => r['resources'] as string[]);
  t.strictSame(written.sort(), ['events', 'networks', 'networks/status', 'podnetworkconfigs', 'podnetworkconfigs/status']);
  t.strictSame(rules.flatMap((r) => r['resources'] as string[]).filter((r) => !written.includes(r)).sort(), ['nodes'], 'and reads Nodes');
  const verbs = rules.flatMap((r) => (r['verbs'] as string[]).filter((v) => !['get', 'list', 'watch'].includes(v)));
  t.strictSame([...new Set(verbs)].sort(), ['create', 'patch'], 'it patches, and creates only Events');
  t.strictSame(rules.filter((r) => (r['verbs'] as string[]).includes('create')).flatMap((r) => r['resources'] as string[]), ['events']);
  const binding = find('ClusterRoleBinding', 'podnet-controller')!;
  t.strictSame(binding['subjects'], [{ kind: 'ServiceAccount', name: 'podnet-controller', namespace: 'podnet-system' }]);
  const policy = find('ValidatingAdmissionPolicy', 'podnet-controller-status')!['spec'] as Obj;
  t.strictSame(policy['matchConditions'], [{ name: 'podnet-controller', expression: "request.userInfo.username == 'system:serviceaccount:podnet-system:podnet-controller'" }]);
  t.strictSame((policy['matchConstraints']['resourceRules'] as Obj[]).flatMap((r) => r['resources'] as string[]), ['networks/status', 'podnetworkconfigs/status'], 'every resource it patches, Events aside');
  t.ok(find('ValidatingAdmissionPolicyBinding', 'podnet-controller-status'), 'and it is bound');
  const objects = find('ValidatingAdmissionPolicy', 'podnet-controller-objects')!['spec'] as Obj;
  t.strictSame(objects['matchConditions'], policy['matchConditions'], 'the same account');
  t.strictSame((objects['matchConstraints']['resourceRules'] as Obj[]).flatMap((r) => r['resources'] as string[]), ['networks', 'podnetworkconfigs'], 'its writes of the objects themselves');
  t.match(objects['validations'][0]['expression'], /object\.spec == oldObject\.spec/);
  t.ok(find('ValidatingAdmissionPolicyBinding', 'podnet-controller-objects'), 'bound');
  const deployment = find('Deployment', 'podnet-controller')!;
  const pod = deployment['spec']['template']['spec'] as Obj;
  t.equal(pod['serviceAccountName'], 'podnet-controller');
  t.notOk(pod['hostNetwork'], 'not on the host network');
  t.match(pod['containers'][0], { args: ['controller'], securityContext: { privileged: false, allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: { drop: ['ALL'] } } });
  t.equal(pod['securityContext']['runAsNonRoot'], true);
});
