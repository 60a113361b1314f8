import t from 'tap';
import type { Network } from '../protocol/validate.ts';
import { driverName } from './devices.ts';
import { prepareClaim, type ClaimObject, type PrepareContext } from './prepare.ts';

const network = (name: string, spec: Partial<Network['spec']> = {}): Network => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'Network',
  metadata: { name },
  spec: { type: 'bridge', namespaceSelector: { matchLabels: { 'kubernetes.io/metadata.name': 'shop' } }, ipam: { ranges: [{ subnet: '198.18.7.0/24' }] }, ...spec },
});
const ctx = (networks: Network[], more: Partial<PrepareContext> = {}): PrepareContext => ({ node: 'node-a', networks: new Map(networks.map((n) => [n.metadata.name, n])), namespaceLabels: { 'kubernetes.io/metadata.name': 'shop' }, nodeLabels: {}, permissions: [], ...more });
const parameters = (p: Record<string, unknown>) => ({ apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'ClaimParameters', ...p });

function claim(more: { config?: unknown[]; results?: unknown[]; classConfig?: unknown[] } = {}): ClaimObject {
  return {
    metadata: { namespace: 'shop', name: 'net', uid: 'claim-uid' },
    spec: { devices: { config: (more.config ?? []) as never } },
    status: {
      allocation: {
        devices: {
          results: (more.results ?? [{ request: 'blue', driver: driverName, pool: 'node-a', device: 'blue', shareID: 'share-1' }]) as never,
          config: (more.classConfig ?? []) as never,
        },
      },
      reservedFor: [{ resource: 'pods', name: 'web-0', uid: 'pod-uid' }],
    },
  };
}

t.test('a claim prepared: each device of this node\'s pool, its Network, its parameters, the pods it is reserved for', async (t) => {
  const prepared = prepareClaim(claim({ config: [{ requests: ['blue'], opaque: { driver: driverName, parameters: parameters({ interface: 'net7', ips: ['198.18.7.9/24'] }) } }] }), ctx([network('blue')]));
  t.strictSame(prepared, {
    claim: { namespace: 'shop', name: 'net', uid: 'claim-uid' },
    pods: ['pod-uid'],
    devices: [{ request: 'blue', pool: 'node-a', device: 'blue', network: 'blue', shareId: 'share-1', parameters: parameters({ interface: 'net7', ips: ['198.18.7.9/24'] }) }],
  });
  const plain = prepareClaim(claim(), ctx([network('blue')]));
  t.strictSame('devices' in plain && plain.devices, [{ request: 'blue', pool: 'node-a', device: 'blue', network: 'blue', shareId: 'share-1' }], 'no parameters: podnet names the interface');
});

t.test("bad parameters are refused naming the claim's field; nothing is prepared", async (t) => {
  const refused = prepareClaim(claim({ config: [{ opaque: { driver: driverName, parameters: parameters({ ips: ['not-an-address'] }) } }] }), ctx([network('blue')]));
  t.match(refused, { error: /^ResourceClaim shop\/net: .*spec\.devices\.config\[0\]\.opaque\.parameters.*ips/ });
  const unknown = prepareClaim(claim({ config: [{ opaque: { driver: driverName, parameters: parameters({ vlan: 7 }) } }] }), ctx([network('blue')]));
  t.match(unknown, { error: /vlan/ });
  const noKind = prepareClaim(claim({ config: [{ opaque: { driver: driverName, parameters: { interface: 'net1' } } }] }), ctx([network('blue')]));
  t.match(noKind, { error: /apiVersion|kind/ });
  const twice = prepareClaim(claim({ config: [{ opaque: { driver: driverName, parameters: parameters({}) } }, { requests: ['blue'], opaque: { driver: driverName, parameters: parameters({}) } }] }), ctx([network('blue')]));
  t.match(twice, { error: /spec\.devices\.config\[0\]\.opaque\.parameters and spec\.devices\.config\[1\]\.opaque\.parameters both configure request blue/ });
  const other = prepareClaim(claim({ config: [{ opaque: { driver: 'gpu.example.com', parameters: { anything: true } } }] }), ctx([network('blue')]));
  t.notMatch(other, { error: /./ }, "another driver's config is not podnet's to read");
});

t.test('what the Network does not allow is refused as for a config: a MAC where staticMacs is off, addresses outside its ranges', async (t) => {
  const mac = prepareClaim(claim({ config: [{ opaque: { driver: driverName, parameters: parameters({ mac: '02:00:00:00:00:01' }) } }] }), ctx([network('blue')]));
  t.match(mac, { error: /^ResourceClaim shop\/net: spec\.devices\.requests\[blue\]\.mac: .*staticMacs/ });
  const outside = prepareClaim(claim({ config: [{ opaque: { driver: driverName, parameters: parameters({ ips: ['198.18.99.1/24'] }) } }] }), ctx([network('blue')]));
  t.match(outside, { error: /spec\.devices\.requests\[blue\]\.ips/ });
});

t.test('a Network that does not admit the namespace, or is not served here, or is gone: refused', async (t) => {
  t.match(prepareClaim(claim(), ctx([network('blue', { namespaceSelector: { matchLabels: { team: 'red' } } })])), { error: 'ResourceClaim shop/net: spec.devices.requests[blue].network: Network blue does not admit namespace shop' });
  t.match(prepareClaim(claim(), ctx([network('blue', { nodeSelector: { matchLabels: { edge: 'true' } } })])), { error: /Network blue is not served on this node/ });
  t.match(prepareClaim(claim(), ctx([])), { error: /allocated device blue, which is no Network podnet knows/ });
  t.match(prepareClaim(claim({ results: [{ request: 'blue', driver: driverName, pool: 'node-b', device: 'blue' }] }), ctx([network('blue')])), { error: /no device of driver dra.podnetwork.opdev.io allocated on node node-a/ });
});

t.test("a DeviceClass's parameters apply when the claim gives none of its own", async (t) => {
  const fromClass = [{ source: 'FromClass', opaque: { driver: driverName, parameters: parameters({ bandwidth: { ingressRate: 1000000, ingressBurst: 20000 } }) } }];
  const prepared = prepareClaim(claim({ classConfig: fromClass }), ctx([network('blue')]));
  t.strictSame('devices' in prepared && prepared.devices[0]!.parameters, parameters({ bandwidth: { ingressRate: 1000000, ingressBurst: 20000 } }));
  const own = prepareClaim(claim({ classConfig: fromClass, config: [{ opaque: { driver: driverName, parameters: parameters({ interface: 'net2' }) } }] }), ctx([network('blue')]));
  t.strictSame('devices' in own && own.devices[0]!.parameters, parameters({ interface: 'net2' }), "the claim's own over its class's");
});

t.test('two requests asking for one interface name are refused', async (t) => {
  const results = [
    { request: 'a', driver: driverName, pool: 'node-a', device: 'blue' },
    { request: 'b', driver: driverName, pool: 'node-a', device: 'red' },
  ];
  const config = [{ opaque: { driver: driverName, parameters: parameters({ interface: 'net1' }) } }];
  t.match(prepareClaim(claim({ results, config }), ctx([network('blue'), network('red')])), { error: /spec\.devices\.requests\[a\].*interface net1.*spec\.devices\.requests\[b\]|spec\.devices\.requests\[b\].*interface net1/ });
});

t.test("the namespace's PodNetworkPermissions hold for claims as for configs", async (t) => {
  const permission = { apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'PodNetworkPermission', metadata: { name: 'routes-only', namespace: 'shop' }, spec: { allow: ['routes'] } } as never;
  t.match(prepareClaim(claim(), ctx([network('blue')], { permissions: [permission] })), { error: /ResourceClaim shop\/net: spec\.devices\.requests\[blue\]: .*PodNetworkPermission shop\/routes-only/ });
});

t.test('a claim gives one pod its interfaces, one device a request, no admin access', async (t) => {
  const shared = claim();
  shared.status!.reservedFor = [{ resource: 'pods', name: 'a', uid: 'a' }, { resource: 'pods', name: 'b', uid: 'b' }];
  t.match(prepareClaim(shared, ctx([network('blue')])), { error: /reserved for 2 pods; a claim on podnet's Networks gives one pod its interfaces/ });
  const two = claim({ results: [{ request: 'blue', driver: driverName, pool: 'node-a', device: 'blue', shareID: 's1' }, { request: 'blue', driver: driverName, pool: 'node-a', device: 'blue', shareID: 's2' }] });
  t.match(prepareClaim(two, ctx([network('blue')])), { error: /request blue was allocated more than one of podnet's devices/ });
  const admin = claim({ results: [{ request: 'blue', driver: driverName, pool: 'node-a', device: 'blue', adminAccess: true }] });
  t.match(prepareClaim(admin, ctx([network('blue')])), { error: /admin access/ });
});
