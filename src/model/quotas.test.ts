import t from 'tap';
import type { Network } from '../protocol/validate.ts';
import type { DesiredAttachment } from './desired.ts';
import { overQuota, type QuotaClaims } from './quotas.ts';

const limited = (name: string, attachmentsPerNamespace?: number): Network => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'Network',
  metadata: { name },
  spec: { type: 'bridge', ...(attachmentsPerNamespace === undefined ? {} : { limits: { attachmentsPerNamespace } }) },
});
const blue = limited('blue', 2);
const open = limited('open');
const at = (network: Network, iface: string, from = 'PodNetworkConfig ns/c'): DesiredAttachment => ({ network, interface: iface, from, field: `spec.attachments[${iface.slice(3)}]` });
const sandbox = (containerId: string, namespace: string, attachments: DesiredAttachment[], has: (string | [string, string])[] = []): QuotaClaims => ({ containerId, namespace, attachments, has: new Map(has.map((h) => (typeof h === 'string' ? [h, undefined] : h))) });
const refusedOf = (result: ReturnType<typeof overQuota>) => Object.fromEntries([...result].map(([id, list]) => [id, list.map((r) => r.interface)]));

t.test('a namespace gets at most the quota of a Network on the node; other namespaces and Networks are apart', async (t) => {
  const result = overQuota([
    sandbox('c1', 'tenant-a', [at(blue, 'net1'), at(blue, 'net2'), at(open, 'net3')]),
    sandbox('c2', 'tenant-a', [at(blue, 'net1'), at(open, 'net2')]),
    sandbox('c3', 'tenant-b', [at(blue, 'net1'), at(blue, 'net2')]),
  ]);
  t.same(refusedOf(result), { c2: ['net1'] }, "tenant-a's third is refused; tenant-b has its own two; the Network without limits counts nothing");
  t.same(result.get('c2')?.[0]?.problem, {
    document: 'PodNetworkConfig ns/c',
    field: 'spec.attachments[1]',
    reason: 'Network blue allows 2 attachments per namespace on a node (its spec.limits.attachmentsPerNamespace), and namespace tenant-a has 2 here already',
  });
});

t.test('what a pod has keeps its place: a new pod never takes it away, whatever its name', async (t) => {
  const running = sandbox('z-running', 'tenant-a', [at(blue, 'net1'), at(blue, 'net2')], ['blue/net1', 'blue/net2']);
  const newcomer = sandbox('a-new', 'tenant-a', [at(blue, 'net1')]);
  for (const order of [[running, newcomer], [newcomer, running]]) t.same(refusedOf(overQuota(order)), { 'a-new': ['net1'] });
  const moved = sandbox('z-running', 'tenant-a', [at(blue, 'net1'), at(blue, 'net2')], ['red/net1']);
  t.same(refusedOf(overQuota([moved, newcomer])), { 'z-running': ['net2'] }, 'an interface that had another Network is new to this one: counted by name');
});

t.test('a quota of 0 shuts a Network to every namespace; no quota, no limit', async (t) => {
  const shut = limited('shut', 0);
  t.same(refusedOf(overQuota([sandbox('c1', 'ns', [at(shut, 'net1')], ['shut/net1'])])), { c1: ['net1'] }, 'even what a pod had');
  t.same(refusedOf(overQuota([sandbox('c1', 'ns', Array.from({ length: 40 }, (_, i) => at(open, `net${i}`)))])), {});
  t.match(overQuota([sandbox('c1', 'ns', [at(limited('one', 1), 'net1'), at(limited('one', 1), 'net2')])]).get('c1')?.[0]?.problem.reason, /allows 1 attachment per namespace/);
});

t.test('a tunnel Network has one attachment a node, whatever the namespace; the pod that has it keeps it; its quota counts only what is kept', async (t) => {
  const tunnel = (name: string, type: 'gre' | 'geneve' | 'vxlan', attachmentsPerNamespace?: number): Network => ({
    apiVersion: 'podnetwork.opdev.io/v1alpha1',
    kind: 'Network',
    metadata: { name },
    spec: {
      type,
      ...(type === 'gre' ? { gre: { remote: '198.18.100.2' } } : type === 'geneve' ? { geneve: { vni: 7, remote: '198.18.100.2' } } : { vxlan: { vni: 7 } }),
      ...(attachmentsPerNamespace === undefined ? {} : { limits: { attachmentsPerNamespace } }),
    },
  });
  const gre = tunnel('gre', 'gre');
  const result = overQuota([sandbox('c1', 'tenant-a', [at(gre, 'net1')]), sandbox('c2', 'tenant-b', [at(gre, 'net1'), at(blue, 'net2')])]);
  t.same(refusedOf(result), { c2: ['net1'] }, "tenant-b's pod is refused the tunnel tenant-a's pod has; its bridge attachment is not");
  t.same(result.get('c2')?.[0]?.problem.reason, "Network gre is a gre tunnel, and a node has one attachment to it: its tunnel endpoint (remote and key) is the node's; another pod on this node has it", 'the reason names the Network, never the other pod');
  const running = sandbox('z-running', 'tenant-b', [at(gre, 'net1')], ['gre/net1']);
  t.same(refusedOf(overQuota([sandbox('a-new', 'tenant-a', [at(gre, 'net1')]), running])), { 'a-new': ['net1'] }, 'a new pod never takes it from the pod that has it');
  for (const type of ['geneve', 'vxlan'] as const) {
    const other = tunnel(type, type);
    t.same(refusedOf(overQuota([sandbox('c1', 'a', [at(other, 'net1')]), sandbox('c2', 'a', [at(other, 'net1')])])), { c2: ['net1'] }, `${type} too`);
  }
  // Where each attachment chooses its remote, each remote is its own endpoint.
  const ranged: Network = { ...gre, metadata: { name: 'ranged' }, spec: { type: 'geneve', geneve: { vni: 7, remoteRanges: ['198.18.100.0/24', '2001:db8:100::/64'] } } };
  const to = (iface: string, remote: string): DesiredAttachment => ({ ...at(ranged, iface), remote });
  const chosen = overQuota([sandbox('c1', 'a', [to('net1', '198.18.100.2')]), sandbox('c2', 'b', [to('net1', '198.18.100.3'), to('net2', '2001:db8:100::2')]), sandbox('c3', 'b', [to('net1', '198.18.100.2'), to('net2', '2001:DB8:100::2')])]);
  t.same(refusedOf(chosen), { c3: ['net1', 'net2'] }, 'two remotes are two tunnels on one node; a remote another pod has is refused, however it is spelled');
  t.same(chosen.get('c3')?.[1]?.problem.reason, "Network ranged is a geneve tunnel, and a node has one attachment to it per remote: its tunnel endpoint (VNI, remote and port) is the node's; another pod on this node has it to the same remote (2001:db8:100::2)");
  // A pod that changes its remote asks a new endpoint: it never takes the one another pod has, whatever their names.
  const a = '198.18.100.2';
  const b = '198.18.100.3';
  for (const [mover, holder] of [['a-pod', 'z-pod'], ['z-pod', 'a-pod']] as const) {
    const moved = overQuota([sandbox(mover, 'a', [to('net1', b)], [['ranged/net1', a]]), sandbox(holder, 'b', [to('net1', b)], [['ranged/net1', b]])]);
    t.same(refusedOf(moved), { [mover]: ['net1'] }, `${mover}, moving to the remote ${holder} has, is refused it`);
  }
  t.same(refusedOf(overQuota([sandbox('c1', 'a', [to('net1', '2001:DB8:100::2')], [['ranged/net1', '2001:db8:100::2']]), sandbox('a0', 'b', [to('net1', '2001:db8:100::2')])])), { a0: ['net1'] }, 'the same remote, however spelled, is still held, whatever else of its Network changed');
  t.same(refusedOf(overQuota([sandbox('z1', 'a', [to('net1', a)], ['ranged/net1']), sandbox('a0', 'b', [to('net1', a)])])), { a0: ['net1'] }, "a record of an older podnet, without its remote: held, as before");
  // A pod its namespace's quota refuses does not hold the tunnel for the others.
  const shut = tunnel('shut', 'gre', 0);
  t.same(refusedOf(overQuota([sandbox('c1', 'tenant-a', [at(shut, 'net1')]), sandbox('c2', 'tenant-b', [at(tunnel('shut', 'gre'), 'net1')])])), { c1: ['net1'] }, "a quota's refusal leaves the tunnel to the next pod");
});
