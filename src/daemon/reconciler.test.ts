// The reconciler's rules with fakes for every side effect: a runner that records batches, a kernel
// the test describes (FakeObserver), a clock and timers the test moves. What it asserts is what an
// operator would see: the commands podnet ran, what it recorded, what `podnet explain` reports.
import t, { type Test } from 'tap';
import { dir } from 'tmp-promise';
import { PodnetError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { DelegatedLifecycle, maxFailedDels, pluginTimePerPassMs } from '../delegate/lifecycle.ts';
import { NodeIpam } from '../ipam/ipam.ts';
import { identityOf, podNameLabel, type SandboxIdentity } from '../model/identity.ts';
import { hostInterfaceName } from '../model/host-links.ts';
import type { NamespaceSight } from '../netns/probe.ts';
import type { Where } from '../model/step.ts';
import type { AttachmentRecord, Network, PodNetworkConfig } from '../protocol/validate.ts';
import type { DesiredDocuments } from '../sources/source.ts';
import { fakeClock, fakeSight, FakeObserver, MemoryApplied, MemoryDelegatedRecords, RecordingPlugins, RecordingRunner } from '../testing/fakes.ts';
import type { PassMetrics } from '../metrics.ts';
import { Reconciler } from './reconciler.ts';

const netns = '/run/netns/pod-a';
const record: AttachmentRecord = { containerId: 'c1', ifname: 'eth0', network: 'k8s', netns, cniVersion: '1.0.0', createdAt: '2026-01-01T00:00:00Z', pod: { namespace: 'default', name: 'pod-a' } };
const hostEnd = hostInterfaceName('c1', 'net1');

const blue: Network = {
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'Network',
  metadata: { name: 'blue' },
  // Port security is the planner's to test (planner/plan.test.ts) and the kernel's (e2e): off here, so each pass's steps stay few.
  spec: { type: 'bridge', bridge: { name: 'pnbr-blue', portSecurity: false }, staticMacs: true, ipam: { ranges: [{ subnet: '198.18.20.0/24' }] }, namespaceSelector: {} },
};
const plugged: Network = {
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'Network',
  metadata: { name: 'plugged' },
  spec: { type: 'cni', cni: { config: { cniVersion: '1.0.0', plugins: [{ type: 'bridge' }] } }, namespaceSelector: {} },
};
const config = (spec: Partial<PodNetworkConfig['spec']>): PodNetworkConfig => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'PodNetworkConfig',
  metadata: { name: 'cfg', namespace: 'default' },
  spec: { podSelector: { matchLabels: { [podNameLabel]: 'pod-a' } }, ...spec },
});
const onBlue = config({ attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'eth0', mtu: 1400 }] });

async function setup(t: Test, configs: PodNetworkConfig[] = [onBlue], metrics?: PassMetrics, identity: (r: AttachmentRecord) => SandboxIdentity | undefined = identityOf) {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  const docs: DesiredDocuments = { networks: new Map([['blue', blue], ['plugged', plugged]]), configs, permissions: [], problems: [] };
  const records = [record];
  const run = new RecordingRunner();
  const observe = new FakeObserver();
  observe.hostLinks.set('pnbr-blue', FakeObserver.link('pnbr-blue', { kind: 'bridge' }));
  observe.pod(netns).set('eth0', FakeObserver.link('eth0'));
  const sight = new Map<string, NamespaceSight>();
  const clock = fakeClock();
  const applied = new MemoryApplied();
  const ipam = NodeIpam.open(tmp.path);
  const plugins = new RecordingPlugins();
  const warnings: string[] = [];
  const log: Logger = { info: () => undefined, warn: (msg) => void warnings.push(msg), error: (msg) => void warnings.push(msg) };
  const delegated = new DelegatedLifecycle({
    records: new MemoryDelegatedRecords(),
    plugins,
    sight: fakeSight(sight),
    podLinks: (path) => observe.links({ netns: path }),
    recorded: (cid) => records.some((r) => r.containerId === cid),
    clock: clock.now,
    log,
  });
  const reconciler = new Reconciler({
    stateDir: tmp.path,
    records: { list: () => records },
    source: { documents: () => docs, identity, synced: true },
    run,
    observe,
    sight: fakeSight(sight),
    applied,
    ipam,
    delegated,
    clock: clock.now,
    timer: clock.timer,
    log,
    ...(metrics ? { metrics } : {}),
  });
  t.teardown(() => reconciler.close());
  /** Puts in the fake kernel what the first pass's steps made. */
  const madeByFirstPass = () => {
    observe.hostLinks.set(hostEnd, FakeObserver.link(hostEnd, { master: 'pnbr-blue', alias: 'podnet:c1/net1' }));
    observe.pod(netns).set('net1', FakeObserver.link('net1', { addresses: ['198.18.20.2/24'] }));
    observe.pod(netns).set('eth0', FakeObserver.link('eth0', { mtu: 1400 }));
  };
  const report = () => reconciler.list().items.find((i) => i.containerId === 'c1');
  return { docs, records, run, observe, sight, clock, applied, ipam, plugins, warnings, reconciler, madeByFirstPass, report };
}

const attachLines = [
  `host ip link add name ${hostEnd} master pnbr-blue up type veth peer name net1 address 02:3f:8e:07:a5:15 netns ${netns}`,
  `host ip link set dev ${hostEnd} alias podnet:c1/net1`,
  `netns ${netns} ip link set dev net1 up`,
  `netns ${netns} ip addr add 198.18.20.2/24 dev net1`,
  `netns ${netns} ip link set dev eth0 mtu 1400`,
];

t.test("an address held for a claim's attachment is not one a DRA device offers less: the scheduler counts the claim itself", async (t) => {
  const claimed = (r: AttachmentRecord): SandboxIdentity => ({ ...identityOf(r), claims: [{ document: 'ResourceClaim default/net', attachments: [{ network: 'blue', field: 'spec.devices.requests[net]', interface: 'net1' }] }] });
  const { ipam, reconciler } = await setup(t, [], undefined, claimed);
  await reconciler.schedule('resync');
  t.same(ipam.holders(), [{ network: 'blue', owner: 'c1/net1' }], 'the claim got its address');
  t.strictSame([...reconciler.addressesHeldOutsideClaims()], []);
  t.strictSame([...reconciler.networksAttachedOutsideClaims()], [], 'nor is its Network attached outside claims');
});

t.test('a pass applies what the documents ask, records it and its address, and does nothing more while nothing changes', async (t) => {
  const { run, applied, ipam, reconciler, madeByFirstPass, report } = await setup(t);
  await reconciler.schedule('resync');
  t.same(run.lines(), attachLines);
  t.same(applied.get('c1')?.attachments.map((a) => [a.interface, a.hostIf, a.addresses]), [['net1', hostEnd, ['198.18.20.2/24']]]);
  t.same(ipam.holders(), [{ network: 'blue', owner: 'c1/net1' }]);
  t.strictSame([...reconciler.addressesHeldOutsideClaims()], [['blue', 1]], "its address is one a DRA device offers less: it came from a config, not a claim");
  t.strictSame([...reconciler.networksAttachedOutsideClaims()], ['blue'], 'its Network is attached outside claims: a tunnel Network would be offered no more');
  t.same(report()?.lastSteps.length, 5, 'explain shows the steps of the last pass');
  madeByFirstPass();
  await reconciler.schedule('resync');
  await reconciler.schedule();
  t.same(run.lines(), attachLines, 'a resync that finds everything in place changes nothing');
});

t.test("a config's new generation whose step fails is taken back whole and retried with backoff: 0.5 s, then 1 s, on the clock", async (t) => {
  const { run, applied, clock, reconciler, report, warnings } = await setup(t);
  run.failing = (line) => line.startsWith('addr add');
  await reconciler.schedule('resync');
  t.same(run.lines(), [...attachLines.slice(0, 4), `host ip link del dev ${hostEnd}`], 'the veth made before the failing step is deleted again');
  t.equal(applied.get('c1'), undefined, 'nothing is recorded as applied');
  t.match(report()?.lastError, /^PodNetworkConfig default\/cfg spec\.attachments\[0\]: the node could not make it: .*addr add 198\.18\.20\.2\/24 dev net1 .*Operation not permitted/);
  t.match(report()?.problems, [{ document: 'PodNetworkConfig default/cfg', field: 'spec.attachments[0]' }, { document: 'PodNetworkConfig default/cfg', field: 'spec', reason: 'nothing of it applies to the pod until all of it can' }], "told on the config's field, and that nothing of it applies");
  t.ok(warnings.includes('reconcile failed; what it could not make was refused whole; the rest of its config was applied'));
  t.same(clock.timers.map((x) => x.at - clock.now()), [505], 'one timer, for the retry');

  const tries = () => run.ran.filter((b) => b.lines.some((l) => l.startsWith('link add'))).length;
  await reconciler.schedule();
  t.equal(tries(), 1, 'not before its wait is over');
  clock.advance(500);
  await reconciler.schedule();
  t.equal(tries(), 2, 'tried again after 0.5 s');
  clock.advance(999);
  await reconciler.schedule();
  t.equal(tries(), 2, 'the second wait is 1 s');
  clock.advance(1);
  run.failing = () => false;
  await reconciler.schedule();
  t.equal(tries(), 3);
  t.equal(report()?.lastError, undefined, 'a pass that succeeds clears the error');
  t.ok(applied.get('c1'));
  t.same(clock.timers.length, 0, 'no retry is left pending');
});

t.test('the timer runs the retry: no pass is needed from outside', async (t) => {
  const { run, clock, reconciler } = await setup(t);
  run.failing = (line) => line.startsWith('addr add');
  await reconciler.schedule('resync');
  run.failing = () => false;
  clock.advance(505);
  clock.timers.shift()!.run();
  await reconciler.close();
  t.equal(run.ran.filter((b) => b.lines.some((l) => l.startsWith('link add'))).length, 2);
});

t.test('a resync repairs drift the kernel shows: a pod end deleted by hand is made again, with its host end', async (t) => {
  const { run, observe, reconciler, madeByFirstPass } = await setup(t);
  await reconciler.schedule('resync');
  madeByFirstPass();
  observe.pod(netns).delete('net1');
  const before = run.lines().length;
  await reconciler.schedule();
  t.equal(run.lines().length, before, 'a pass that is not a resync plans from the view it kept, and sees no drift');
  await reconciler.schedule('resync');
  t.same(run.lines().slice(before), [`host ip link del dev ${hostEnd}`, ...attachLines.slice(0, 4)]);
});

t.test('the view a pass left is reused by the next request and read again when a plan from it fails', async (t) => {
  const { run, observe, reconciler, madeByFirstPass, docs, warnings } = await setup(t);
  await reconciler.schedule('resync');
  madeByFirstPass();
  await reconciler.schedule('resync');
  const reads = observe.readsOf(netns);
  const hostReads = observe.readsOf('host');

  docs.configs = [config({ attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'eth0', mtu: 1300 }] })];
  await reconciler.schedule();
  t.same(run.lines().at(-1), `netns ${netns} ip link set dev eth0 mtu 1300`);
  t.equal(observe.readsOf(netns), reads + 1, 'planned from the kept view: the one read is the read back after the change');
  t.equal(observe.readsOf('host'), hostReads, 'the host view is kept too');
  observe.pod(netns).set('eth0', FakeObserver.link('eth0', { mtu: 1300 }));

  // Someone changed eth0 behind podnet's back: the kept view is wrong, and the step fails.
  let failures = 0;
  run.failing = (line) => line === 'link set dev eth0 mtu 1200' && failures++ === 0;
  docs.configs = [config({ attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'eth0', mtu: 1200 }] })];
  await reconciler.schedule();
  t.ok(warnings.includes('a plan from the view the last pass left failed; planning again from the netns and host as they are'));
  t.equal(observe.readsOf(netns), reads + 3, 'read again before the second plan, and read back after it');
  t.equal(observe.readsOf('host'), hostReads + 2, 'the host is read again too, for the plan and for the next pass to start from');
  t.same(run.lines().slice(-2), [`netns ${netns} ip link set dev eth0 mtu 1200`, `netns ${netns} ip link set dev eth0 mtu 1200`]);
});

t.test('a pass too large to read each netns back as it goes reads back the ones it changed before it ends: the status has their links (MTU, MAC)', async (t) => {
  const { records, observe, reconciler } = await setup(t, [config({ interfaces: [{ name: 'eth0', mtu: 1400 }] })]);
  // Nine pods, one more than a pass reconciles at once.
  for (let i = 2; i <= 9; i++) records.push({ ...record, containerId: `c${i}`, netns: `/run/netns/pod-${i}`, pod: { namespace: 'default', name: 'pod-a' } });
  for (const r of records) observe.pod(r.netns).set('eth0', FakeObserver.link('eth0'));
  const reads = records.map((r) => observe.readsOf(r.netns));
  await reconciler.schedule();
  const readsAfter = records.map((r) => observe.readsOf(r.netns));
  t.same(readsAfter.map((n, i) => n - reads[i]!), records.map(() => 2), 'each netns read to plan, and once more after all had their steps');
  t.same(reconciler.facts().map((f) => f.links?.has('eth0')), records.map(() => true), 'every sandbox has its links for the status');
});

/** What ip -json -d addr show prints of the links the fake kernel holds in `netns`: a batch's read back. */
function addrShowOf(observe: FakeObserver, where: Where): unknown[] {
  const links = [...observe.pod(where === 'host' ? 'host' : where.netns).values()];
  return [links.map((l) => ({ ifname: l.name, mtu: l.mtu, flags: l.up ? ['UP'] : [], addr_info: l.addresses.map((a) => ({ local: a.split('/')[0], prefixlen: Number(a.split('/')[1]) })) }))];
}

t.test("a change whose last batch is ip's in the netns reads the links back in that batch: no read of its own, and the next request plans from it", async (t) => {
  const { run, observe, reconciler, madeByFirstPass, docs } = await setup(t);
  await reconciler.schedule('resync');
  madeByFirstPass();
  await reconciler.schedule('resync');
  const reads = observe.readsOf(netns);
  const readsAfter = run.readsAfter.length;
  // The fake kernel changes as the batch asks, and the batch's read shows it.
  run.readAfter = (where) => {
    observe.pod(netns).set('eth0', FakeObserver.link('eth0', { mtu: 1300 }));
    return addrShowOf(observe, where);
  };
  docs.configs = [config({ attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'eth0', mtu: 1300 }] })];
  await reconciler.schedule();
  t.same(run.readsAfter.slice(readsAfter), [`netns ${netns}`], 'the batch that set the MTU ended with the read');
  t.equal(observe.readsOf(netns), reads, 'and no read of its own followed');
  t.equal(reconciler.facts().find((f) => f.record.containerId === 'c1')?.links?.get('eth0')?.mtu, 1300, 'the status has the MTU read back');

  docs.configs = [config({ attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'eth0', mtu: 1200 }] })];
  await reconciler.schedule();
  t.same(run.lines().at(-1), `netns ${netns} ip link set dev eth0 mtu 1200`, 'the next request planned from the view read back');
  t.equal(observe.readsOf(netns), reads, 'without reading the netns');
});

t.test('a read back that is not links fails nothing: the change stands, told, and the netns is read on its own', async (t) => {
  const { run, observe, reconciler, madeByFirstPass, docs, report, warnings } = await setup(t);
  await reconciler.schedule('resync');
  madeByFirstPass();
  await reconciler.schedule('resync');
  const reads = observe.readsOf(netns);
  run.readAfter = () => [{ not: 'links' }];
  docs.configs = [config({ attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'eth0', mtu: 1300 }] })];
  await reconciler.schedule();
  t.equal(report()?.lastError, undefined, 'the sandbox did not fail');
  t.ok(warnings.includes('the links read back after a pass could not be read; reading the netns again'));
  t.equal(observe.readsOf(netns), reads + 1, 'its netns was read on its own instead');
});

t.test('a large pass takes the links its batches read back, and reads again only the netns whose read did not come', async (t) => {
  const { run, records, observe, reconciler } = await setup(t, [config({ interfaces: [{ name: 'eth0', mtu: 1400 }] })]);
  for (let i = 2; i <= 9; i++) records.push({ ...record, containerId: `c${i}`, netns: `/run/netns/pod-${i}`, pod: { namespace: 'default', name: 'pod-a' } });
  for (const r of records) observe.pod(r.netns).set('eth0', FakeObserver.link('eth0'));
  // c2's netns answers nothing after its batch (as when the read fails): it is read on its own.
  run.readAfter = (where) => (where !== 'host' && where.netns === '/run/netns/pod-2' ? undefined : addrShowOf(observe, where));
  const reads = records.map((r) => observe.readsOf(r.netns));
  await reconciler.schedule();
  t.same(records.map((r, i) => observe.readsOf(r.netns) - reads[i]!), records.map((r) => (r.netns === '/run/netns/pod-2' ? 2 : 1)), 'one read each to plan; one more for the netns not read back');
  t.same(reconciler.facts().map((f) => f.links?.has('eth0')), records.map(() => true), 'every sandbox has its links for the status');
});

t.test('a gone sandbox is taken back: its host end deleted, its address released, its record dropped; an unsure netns is left alone', async (t) => {
  const { run, sight, applied, ipam, reconciler, madeByFirstPass, report, warnings } = await setup(t);
  await reconciler.schedule('resync');
  madeByFirstPass();
  await reconciler.schedule('resync');
  const before = run.lines().length;

  sight.set(netns, 'unsure');
  await reconciler.schedule('resync');
  t.equal(run.lines().length, before, 'a netns that cannot be looked at is neither reconciled nor taken back');
  t.ok(applied.get('c1'));
  t.ok(warnings.some((w) => w.startsWith("cannot tell whether these sandboxes' netns are there")));

  sight.set(netns, 'not-net');
  run.failing = (line) => line === `link del dev ${hostEnd}`;
  await reconciler.schedule();
  t.ok(applied.get('c1'), 'a host end that could not be deleted keeps the record, for the next pass');
  run.failing = () => false;
  await reconciler.schedule();
  t.same(run.lines().slice(before), [`host ip link del dev ${hostEnd}`, `host ip link del dev ${hostEnd}`]);
  t.equal(applied.get('c1'), undefined);
  t.same(ipam.holders(), [], 'its address is free again');
  t.equal(report(), undefined, 'explain no longer lists it');
});

t.test('podnet deletes on the host only links it names: a gone record naming a foreign link deletes nothing', async (t) => {
  const { run, sight, applied, observe, reconciler } = await setup(t);
  observe.hostLinks.set('eth0', FakeObserver.link('eth0'));
  applied.put({ containerId: 'c1', netns, attachments: [{ interface: 'net1', network: 'blue', kind: 'bridge', bridge: 'pnbr-blue', hostIf: 'eth0', addresses: [] }], tuning: [], routes: [], rules: [], sysctls: [] });
  sight.set(netns, 'not-net');
  await reconciler.schedule('resync');
  t.same(run.lines(), [], 'the host\'s eth0 is not podnet\'s');
  t.equal(applied.get('c1'), undefined);
});

t.test('unused bridges podnet made go through a journaled pass once nothing uses them; one it did not make stays', async (t) => {
  const { run, applied, observe, reconciler } = await setup(t, []);
  observe.hostLinks.set('pnbr-old', FakeObserver.link('pnbr-old', { kind: 'bridge' }));
  applied.setBridges(['pnbr-old']);
  await reconciler.schedule('resync');
  t.same(run.lines(), ['host ip link del dev pnbr-old'], 'pnbr-blue, which podnet did not make, stays');
  t.same(applied.bridges(), []);
  t.ok(applied.hostPass(), 'the pass is on record: a crash after it is not undone at start');
});

t.test('a delegated ADD whose DEL keeps failing is held: told on the sandbox, no retry timer, no more plugin calls', async (t) => {
  const { plugins, clock, reconciler, report } = await setup(t, [config({ attachments: [{ network: 'plugged', interface: 'net1' }] })]);
  plugins.answers.ADD = new PodnetError('IO_FAILURE', 'ADD broke');
  plugins.answers.DEL = new PodnetError('IO_FAILURE', 'DEL broke');
  await reconciler.schedule('resync');
  t.match(report()?.problems, [{ document: 'PodNetworkConfig default/cfg', field: 'spec.attachments[0]', reason: 'ADD broke' }]);
  t.equal(report()?.lastError, 'ADD broke');
  for (let i = 0; i < 6; i++) {
    clock.advance(60_000);
    await reconciler.schedule('resync');
  }
  t.same(plugins.commands(), ['ADD plugged c1/net1', ...Array<string>(maxFailedDels).fill('DEL plugged c1/net1')]);
  t.match(report()?.problems, [{ reason: /its DEL failed 3 times, so the Network's plugins are not run for this pod again/ }]);
  t.equal(report()?.lastError, undefined, 'held is not failing: the sandbox is not retried');
  t.same(clock.timers.length, 0);
});

t.test("a gone sandbox's DELs that a pass's plugin time leaves go on in the next pass, which runs by itself", async (t) => {
  const dels: number[] = [];
  const metrics: PassMetrics = { passEnded: () => void dels.push(plugins.commands().filter((c) => c.startsWith('DEL')).length), sandboxFailed: () => undefined, attachmentsChanged: () => undefined };
  const { plugins, clock, reconciler, records, sight } = await setup(t, [config({ attachments: [{ network: 'plugged', interface: 'net1' }, { network: 'plugged', interface: 'net2' }] })], metrics);
  await reconciler.schedule();
  t.same(plugins.commands(), ['ADD plugged c1/net1', 'ADD plugged c1/net2']);
  records.length = 0;
  sight.set(netns, 'not-net');
  plugins.during = () => clock.advance(pluginTimePerPassMs);
  dels.length = 0;
  await reconciler.schedule();
  t.same(plugins.commands().slice(2), ['DEL plugged c1/net1', 'DEL plugged c1/net2']);
  t.same(dels, [1, 2], 'one DEL spent the pass; the next pass, asked by none, took the rest');
});

t.test('a source that has not synced gets no pass: nothing is taken back on a partial view', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  const run = new RecordingRunner();
  const applied = new MemoryApplied();
  applied.put({ containerId: 'c1', netns, attachments: [], tuning: [{ interface: 'eth0', original: { mtu: 1500 } }], routes: [], rules: [], sysctls: [] });
  const clock = fakeClock();
  const observe = new FakeObserver();
  observe.pod(netns).set('eth0', FakeObserver.link('eth0', { mtu: 1400 }));
  const reconciler = new Reconciler({
    stateDir: tmp.path,
    records: { list: () => [record] },
    source: { documents: () => ({ networks: new Map(), configs: [], permissions: [], problems: [] }), identity: () => undefined, synced: false },
    run,
    observe,
    sight: fakeSight(new Map()),
    applied,
    ipam: NodeIpam.open(tmp.path),
    delegated: new DelegatedLifecycle({ records: new MemoryDelegatedRecords(), plugins: new RecordingPlugins(), sight: fakeSight(new Map()), podLinks: async () => new Map(), recorded: () => true, clock: clock.now, log: { info() {}, warn() {}, error() {} } }),
    clock: clock.now,
    timer: clock.timer,
    log: { info() {}, warn() {}, error() {} },
  });
  await reconciler.schedule('resync');
  await reconciler.close();
  t.same(run.lines(), []);
  t.ok(applied.get('c1'), 'the tuning stays applied');
});

t.test('two pods asking one static MAC: neither gets it, each is told at its field, and nothing else of the config that asked it applies (ADR 17)', async (t) => {
  const mac = '02:00:00:00:00:0c';
  const forA = config({ attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'net1', mac, mtu: 1300 }] });
  const forB: PodNetworkConfig = {
    ...config({ podSelector: { matchLabels: { [podNameLabel]: 'pod-b' } }, attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'net1', mac }] }),
    metadata: { name: 'cfg-b', namespace: 'default' },
  };
  const { records, run, observe, reconciler, warnings } = await setup(t, [forA, forB]);
  records.push({ ...record, containerId: 'c2', netns: '/run/netns/pod-b', pod: { namespace: 'default', name: 'pod-b' } });
  observe.pod('/run/netns/pod-b').set('eth0', FakeObserver.link('eth0'));
  await reconciler.schedule();
  t.notOk(run.lines().some((l) => l.includes(`address ${mac}`)), 'no pod is given the MAC');
  t.notOk(warnings.some((w) => w.includes('rounds')), 'nor given it back by the rounds that give back refusals that no longer hold: the two are refused together again');
  t.notOk(run.lines().some((l) => l.includes('net1')), 'nor the attachment or MTU the same configs ask');
  for (const [cid, doc] of [['c1', 'PodNetworkConfig default/cfg'], ['c2', 'PodNetworkConfig default/cfg-b']] as const) {
    t.match(
      reconciler.list().items.find((i) => i.containerId === cid)?.problems,
      [
        { document: doc, field: 'spec.interfaces[0].mac', reason: /MAC 02:00:00:00:00:0c is asked for another pod on this node too; neither gets it/ },
        { document: doc, field: 'spec', reason: 'nothing of it applies to the pod until all of it can' },
      ],
      cid,
    );
  }
});

t.test("a Network's quota refusing a config's attachment refuses the whole config for that pod; the pod that fits gets all of its own", async (t) => {
  const limited: Network = { ...blue, spec: { ...blue.spec, limits: { attachmentsPerNamespace: 1 } } };
  const forB: PodNetworkConfig = { ...config({ podSelector: { matchLabels: { [podNameLabel]: 'pod-b' } }, attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'eth0', mtu: 1300 }] }), metadata: { name: 'cfg-b', namespace: 'default' } };
  const { docs, records, run, observe, reconciler } = await setup(t, [onBlue, forB]);
  docs.networks.set('blue', limited);
  records.push({ ...record, containerId: 'c2', netns: '/run/netns/pod-b', pod: { namespace: 'default', name: 'pod-b' } });
  observe.pod('/run/netns/pod-b').set('eth0', FakeObserver.link('eth0'));
  await reconciler.schedule();
  t.ok(run.lines().some((l) => l === `netns ${netns} ip link set dev eth0 mtu 1400`), 'the first pod by name gets its MTU');
  t.ok(run.lines().some((l) => l.startsWith(`netns ${netns} ip addr add 198.18.20.`)), 'and its attachment');
  t.notOk(run.lines().some((l) => l.includes('/run/netns/pod-b')), 'the other pod gets nothing of its config: not even the MTU the quota does not count');
  t.match(reconciler.list().items.find((i) => i.containerId === 'c2')?.problems, [
    { document: 'PodNetworkConfig default/cfg-b', field: 'spec.attachments[0]', reason: /Network blue allows 1 attachment per namespace on a node/ },
    { document: 'PodNetworkConfig default/cfg-b', field: 'spec', reason: 'nothing of it applies to the pod until all of it can' },
  ]);
});

t.test('a quota place a pod lost with its whole config is given back: the pod it was refused for gets it, told nothing of the quota', async (t) => {
  const limited: Network = { ...blue, spec: { ...blue.spec, staticMacs: true, limits: { attachmentsPerNamespace: 1 } } };
  const mac = '02:00:00:00:00:0d';
  // pod-a is first by name for the quota, but its config also asks a MAC pod-z has: it gets none of it (ADR 17).
  const forA = config({ attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'net1', mac }] });
  const forB: PodNetworkConfig = { ...config({ podSelector: { matchLabels: { [podNameLabel]: 'pod-b' } }, attachments: [{ network: 'blue', interface: 'net1' }] }), metadata: { name: 'cfg-b', namespace: 'default' } };
  const { docs, records, run, observe, applied, reconciler } = await setup(t, [forA, forB]);
  docs.networks.set('blue', limited);
  records.push({ ...record, containerId: 'c2', netns: '/run/netns/pod-b', pod: { namespace: 'default', name: 'pod-b' } });
  records.push({ ...record, containerId: 'c3', netns: '/run/netns/pod-z', pod: { namespace: 'other', name: 'pod-z' } });
  observe.pod('/run/netns/pod-b').set('eth0', FakeObserver.link('eth0'));
  observe.pod('/run/netns/pod-z').set('eth0', FakeObserver.link('eth0'));
  // What podnet recorded giving pod-z: an attachment with the MAC, on a Network no document names now.
  applied.put({ containerId: 'c3', netns: '/run/netns/pod-z', attachments: [{ interface: 'net2', network: 'gone', kind: 'bridge', addresses: [], mac }], tuning: [], routes: [], rules: [], sysctls: [] });
  await reconciler.schedule();
  const problemsOf = (cid: string) => reconciler.list().items.find((i) => i.containerId === cid)?.problems;
  t.notOk(run.lines().some((l) => l.startsWith(`netns ${netns} `) || l.includes('podnet:c1/')), 'pod-a gets nothing of its config');
  t.match(problemsOf('c1'), [
    { document: 'PodNetworkConfig default/cfg', field: 'spec.interfaces[0].mac', reason: /MAC 02:00:00:00:00:0d is in use by another pod's interface on this node/ },
    { document: 'PodNetworkConfig default/cfg', field: 'spec', reason: 'nothing of it applies to the pod until all of it can' },
  ]);
  t.ok(run.lines().some((l) => l.startsWith('netns /run/netns/pod-b ip addr add 198.18.20.')), 'pod-b gets the attachment pod-a does not use');
  t.same(problemsOf('c2'), [], 'and is told no count that does not hold');
  t.same(applied.get('c2')?.attachments.map((a) => a.network), ['blue']);
});

t.test('the steps a pass tells the metrics include the port security table it makes with nft', async (t) => {
  const steps: number[] = [];
  const metrics: PassMetrics = { passEnded: (pass) => void steps.push(pass.steps), sandboxFailed: () => undefined, attachmentsChanged: () => undefined };
  const { docs, run, observe, reconciler } = await setup(t, [onBlue], metrics);
  docs.networks.set('blue', { ...blue, spec: { ...blue.spec, bridge: { name: 'pnbr-blue', portSecurity: true } } });
  // The table reads whole once nft has taken the ruleset, as on a node.
  run.failing = (line) => {
    if (line.startsWith('add table')) observe.securedPortNames = new Set();
    return false;
  };
  await reconciler.schedule();
  const table = run.ran.filter((b) => b.tool === 'nft' && b.where === 'host' && b.lines.some((l) => l.includes('table')));
  t.ok(table.length > 0, 'the pass made the port security table');
  t.ok(run.lines().some((l) => l.includes('add element bridge podnet ports')), 'and the port\'s entries');
  t.same(steps, [run.lines().length], 'every step it ran is counted, the nft ones too');
});

t.test('a port security table that nft took but that does not read whole afterwards is said, and no port is made in it; one that reads whole is not', async (t) => {
  const said = 'the port security table was put but does not read whole; no port is secured in it';
  const broken = await setup(t, [onBlue]);
  broken.docs.networks.set('blue', { ...blue, spec: { ...blue.spec, bridge: { name: 'pnbr-blue', portSecurity: true } } });
  await broken.reconciler.schedule();
  t.ok(broken.run.ran.some((b) => b.tool === 'nft' && b.lines.some((l) => l.startsWith('add table'))), 'the pass put the table');
  t.ok(broken.warnings.includes(said), 'read again, it is still not whole: said');
  t.notOk(broken.run.lines().some((l) => l.includes('type veth') || l.includes('add element')), 'and no port is made in a table that would filter nothing');
  const waiting = broken.reconciler.list().items[0];
  t.match(waiting?.problems, [{ document: 'Network blue', field: 'spec.bridge.portSecurity', reason: 'port security cannot secure the port of net1 on this node: bridge podnet was put but does not read whole' }], 'the pod is told why its interface waits');
  t.match(waiting?.lastError, /^port security cannot secure the port of net1/, 'and fails, to be tried again with its backoff');

  const whole = await setup(t, [onBlue]);
  whole.docs.networks.set('blue', { ...blue, spec: { ...blue.spec, bridge: { name: 'pnbr-blue', portSecurity: true } } });
  // The table reads whole once nft has taken the ruleset, as on a node.
  whole.run.failing = (line) => {
    if (line.startsWith('add table')) whole.observe.securedPortNames = new Set();
    return false;
  };
  await whole.reconciler.schedule();
  t.ok(whole.run.ran.some((b) => b.tool === 'nft' && b.lines.some((l) => l.startsWith('add table'))), 'the pass put the table');
  t.notOk(whole.warnings.includes(said), 'read again, it is whole: nothing said');
  t.ok(whole.run.lines().some((l) => l.includes('type veth')), 'and the pod gets its interface');
  t.equal(whole.reconciler.list().items[0]?.lastError, undefined);
});

t.test('without nft on the node, a pod with a secured port fails saying so, and gets the rest of its config', async (t) => {
  const { docs, run, observe, clock, reconciler, warnings } = await setup(t, [onBlue]);
  docs.networks.set('blue', { ...blue, spec: { ...blue.spec, bridge: { name: 'pnbr-blue', portSecurity: true } } });
  const missing = 'nft (Debian package nftables) is not installed on this node: port security and DSCP marking need it; install it, or set spec.bridge.portSecurity: false on the Network and ask no dscp';
  observe.securedPortsFailure = new PodnetError('NOT_AVAILABLE', missing);
  run.failing = (line) => line.startsWith('add table');
  await reconciler.schedule();
  const report = reconciler.list().items[0];
  t.match(report?.lastError, `nft could not put bridge podnet: nft add table bridge podnet in host: RTNETLINK answers: Operation not permitted`, 'the put\'s failure, the last word of this pass');
  t.notOk(run.lines().some((l) => l.includes('type veth')), 'no veth for the port');
  t.ok(run.lines().some((l) => l.includes('link set dev eth0 mtu 1400')), 'the config\'s MTU on eth0 applied all the same');
  t.ok(warnings.includes('reconcile failed; the rest of its config was applied'), 'and the log says so, not that it was undone');

  t.same(clock.timers.map((x) => x.at - clock.now()), [505], 'tried again after its backoff');

  // nft installed: at the retry the read and the put succeed, and the interface is made.
  observe.securedPortsFailure = undefined;
  run.failing = (line) => {
    if (line.startsWith('add table')) observe.securedPortNames = new Set();
    return false;
  };
  clock.advance(505);
  await reconciler.schedule();
  t.equal(reconciler.list().items[0]?.lastError, undefined, 'once nft is there, the pod no longer fails');
  t.ok(run.lines().some((l) => l.includes('type veth')), 'and gets its interface');
});

t.test('a pod that waits for the port security table is tried again at each resync, before its backoff is over; the ports the table filters are told as the last pass read them', async (t) => {
  const { docs, run, observe, reconciler } = await setup(t, [onBlue]);
  docs.networks.set('blue', { ...blue, spec: { ...blue.spec, bridge: { name: 'pnbr-blue', portSecurity: true } } });
  observe.securedPortsFailure = new PodnetError('NOT_AVAILABLE', 'nft (Debian package nftables) is not installed on this node');
  run.failing = (line) => line.startsWith('add table');
  await reconciler.schedule();
  t.ok(reconciler.list().items[0]?.lastError, 'it fails');
  t.same(reconciler.portSecuritySeen(), { judged: new Set() }, 'the table could not be read, and no port was there to judge');
  observe.securedPortsFailure = undefined;
  run.failing = (line) => {
    if (line.startsWith('add table')) observe.securedPortNames ??= new Set();
    if (line.includes(`add element bridge podnet ports { ${hostEnd} }`)) observe.securedPortNames = new Set([...(observe.securedPortNames ?? []), hostEnd]);
    return false;
  };
  await reconciler.schedule();
  t.notOk(run.lines().some((l) => l.includes('type veth')), 'a request pass leaves it to its backoff');
  await reconciler.schedule('resync');
  t.ok(run.lines().some((l) => l.includes('type veth')), 'the resync takes it: its port is made');
  t.equal(reconciler.list().items[0]?.lastError, undefined);
  t.same(reconciler.portSecuritySeen(), { filtered: new Set([hostEnd]), judged: new Set([hostEnd]) }, 'and the table, read at the pass\'s end, filters its port');
});

t.test('each pass tells the metrics its time and steps, the attachments it made and removed, and the sandboxes that failed', async (t) => {
  const told: string[] = [];
  const metrics: PassMetrics = {
    passEnded: ({ steps, resync }) => void told.push(`pass steps=${steps} resync=${resync}`),
    sandboxFailed: (code) => void told.push(`failed ${code}`),
    attachmentsChanged: (network, change) => void told.push(`${change} ${network}`),
  };
  const { docs, run, reconciler, madeByFirstPass } = await setup(t, [onBlue], metrics);
  await reconciler.schedule();
  t.same(told, ['attached blue', `pass steps=${run.lines().length} resync=false`], 'the first pass: one attachment on blue, every step it ran');
  t.same(reconciler.attachmentStates(), [{ network: 'blue', state: 'ready' }]);

  madeByFirstPass();
  told.length = 0;
  docs.configs = [];
  const before = run.lines().length;
  await reconciler.schedule('resync');
  t.same(told, ['detached blue', `pass steps=${run.lines().length - before} resync=true`], 'the config gone: the attachment is removed');
  t.ok(run.lines().length > before, 'by steps the pass ran');
  t.same(reconciler.attachmentStates(), []);
});

t.test('a sandbox whose pass fails is told to the metrics by its code, and its attachment counted failing', async (t) => {
  const told: string[] = [];
  const metrics: PassMetrics = { passEnded: () => undefined, sandboxFailed: (code) => void told.push(`failed ${code}`), attachmentsChanged: (network, change) => void told.push(`${change} ${network}`) };
  const { run, reconciler } = await setup(t, [onBlue], metrics);
  run.failing = (line) => line.startsWith('addr add');
  await reconciler.schedule();
  t.same(told, ['failed IO_FAILURE'], 'nothing attached');
  t.same(reconciler.attachmentStates(), [{ network: 'blue', state: 'failing' }]);
});

t.test("a diff taken while a pass reads the host judges static MACs against the host as last read, not against nothing", async (t) => {
  const { observe, reconciler } = await setup(t);
  const hostMac = '0a:58:00:00:00:01';
  observe.hostLinks.set('eth0', FakeObserver.link('eth0', { mac: hostMac }));
  await reconciler.schedule();
  // The next pass (a resync: it reads the host anew) waits in its read of the host.
  let release: () => void = () => undefined;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const read = observe.links.bind(observe);
  observe.links = async (where: Where) => {
    if (where === 'host') await gate;
    return read(where);
  };
  const pass = reconciler.schedule('resync');
  const asking = config({ attachments: [{ network: 'blue', interface: 'net1' }], interfaces: [{ name: 'net1', mac: hostMac }] });
  const diff = reconciler.diff([asking]);
  release();
  const [answer] = await Promise.all([diff, pass]);
  t.match(answer.items.find((i) => i.containerId === 'c1')?.problems, [
    { document: 'PodNetworkConfig default/cfg', field: 'spec.interfaces[0].mac', reason: /MAC 0a:58:00:00:00:01 is the MAC of one of the node's own interfaces/ },
    { document: 'PodNetworkConfig default/cfg', field: 'spec', reason: /this generation cannot be applied whole to the pod/ },
  ]);
});

t.test("a daemon's first pass gives no pod an address of the host's own: the host is read before the node judges", async (t) => {
  const plain: Network = { ...blue, metadata: { name: 'plain' }, spec: { type: 'bridge', bridge: { name: 'pnbr-blue', portSecurity: false }, staticAddresses: true, namespaceSelector: {} } };
  const asking = config({ attachments: [{ network: 'plain', interface: 'net1', ips: ['198.18.30.1/24'] }] });
  const { docs, observe, run, reconciler, report } = await setup(t, [asking]);
  docs.networks.set('plain', plain);
  observe.hostLinks.set('eth1', FakeObserver.link('eth1', { addresses: ['198.18.30.1/24'] }));
  await reconciler.schedule('resync');
  t.notOk(run.lines().some((l) => l.includes('198.18.30.1')), 'the address is not given');
  t.match(report()?.problems, [{ document: 'PodNetworkConfig default/cfg', field: 'spec.attachments[0].ips', reason: /address 198.18.30.1 is an address of one of the node's own interfaces/ }, { field: 'spec' }]);
});

t.test("an ADD's first pass: what the pod asks is made before the answer, which says so", async (t) => {
  const { run, reconciler, madeByFirstPass } = await setup(t);
  const answer = await reconciler.firstPass(record, 5000);
  t.strictSame(answer, { outcome: 'applied' });
  t.ok(attachLines.every((l) => run.lines().includes(l)), 'net1 made before the answer');
  madeByFirstPass();
});

t.test("an ADD's first pass of a pod that asks podnet for nothing is answered at once, without a pass", async (t) => {
  const { run, reconciler } = await setup(t, []);
  t.strictSame(await reconciler.firstPass(record, 5000), { outcome: 'nothing-asked' });
  t.same(run.lines(), []);
});

t.test("an ADD's first pass whose pass fails says why; the pod's retries go on with its backoff", async (t) => {
  const { run, reconciler } = await setup(t);
  run.failing = (line) => line.includes('mtu 1400');
  const answer = await reconciler.firstPass(record, 5000);
  t.equal(answer.outcome, 'failed');
  t.match(answer.error, /Operation not permitted/);
});

t.test("an ADD's first pass waits for a pod its source does not know yet, and answers unknown-pod past its wait", async (t) => {
  let known = false;
  const { clock, reconciler, run } = await setup(t, [onBlue], undefined, (r) => (known ? identityOf(r) : undefined));
  const settle = async () => {
    for (let i = 0; i < 10; i++) await Promise.resolve();
  };
  /** Moves the clock to the first timer's time and runs it. */
  const tick = async () => {
    await settle();
    const next = clock.timers.sort((a, b) => a.at - b.at).shift();
    if (next) {
      clock.advance(Math.max(0, next.at - clock.now()));
      next.run();
    }
    await settle();
  };
  const late = reconciler.firstPass(record, 1000);
  await tick();
  await tick();
  known = true;
  let answer: unknown;
  void late.then((a) => (answer = a));
  for (let i = 0; i < 5 && answer === undefined; i++) await tick();
  t.strictSame(answer, { outcome: 'applied' }, 'the pod seen a moment after the ADD: its network made all the same');
  t.ok(run.lines().length > 0);

  known = false;
  const unknown = reconciler.firstPass({ ...record, containerId: 'c9', netns: '/run/netns/pod-9' }, 1000);
  let said: unknown;
  void unknown.then((a) => (said = a));
  for (let i = 0; i < 40 && said === undefined; i++) await tick();
  t.strictSame(said, { outcome: 'unknown-pod' });
  t.ok(clock.now() - 1_000_000 <= 2000, 'within the wait on the clock');
});

t.test("an ADD's first pass whose sandbox no pass can take (its netns not seen) answers pending after one pass, not a stream of them", async (t) => {
  let passes = 0;
  const metrics: PassMetrics = { passEnded: () => void passes++, sandboxFailed: () => undefined, attachmentsChanged: () => undefined };
  const { sight, reconciler } = await setup(t, [onBlue], metrics);
  sight.set(netns, 'unsure');
  t.strictSame(await reconciler.firstPass(record, 5000), { outcome: 'pending' });
  t.equal(passes, 1);
});

t.test("an ADD of a container podnet has reconciled before, in a new netns, is its own first pass: applied only once made there", async (t) => {
  const { records, observe, run, reconciler, madeByFirstPass } = await setup(t);
  t.strictSame(await reconciler.firstPass(record, 5000), { outcome: 'applied' });
  madeByFirstPass();
  const again: AttachmentRecord = { ...record, netns: '/run/netns/pod-a2', createdAt: '2026-01-01T00:01:00Z' };
  records.splice(0, 1, again);
  observe.pod(again.netns).set('eth0', FakeObserver.link('eth0'));
  const before = run.lines().length;
  t.strictSame(await reconciler.firstPass(again, 5000), { outcome: 'applied' });
  t.ok(run.lines().slice(before).some((l) => l.startsWith(`netns ${again.netns} `)), 'made in the new netns before the answer');
});

t.test("an ADD's first pass of a pod whose required attachment cannot be made is refused, naming the attachment and why; a non-required one never refuses", async (t) => {
  const requiring = (network: string, required: boolean) => config({ attachments: [{ network, interface: 'net1', required }, { network: 'blue', interface: 'net2' }] });
  const refused = await setup(t, [requiring('red', true)]);
  const answer = await refused.reconciler.firstPass(record, 5000);
  t.equal(answer.outcome, 'refused');
  t.strictSame(answer.unmet, [{ document: 'PodNetworkConfig default/cfg', field: 'spec.attachments[0]', network: 'red', interface: 'net1', reason: 'no Network named red' }]);
  t.match(answer.error, /required attachments cannot be made: net1 on Network red \(PodNetworkConfig default\/cfg spec\.attachments\[0\]\): no Network named red/);

  const optional = await setup(t, [requiring('red', false)]);
  t.strictSame(await optional.reconciler.firstPass(record, 5000), { outcome: 'applied' }, 'not required: the rest is made and the pod starts');

  const failing = await setup(t, [config({ attachments: [{ network: 'blue', interface: 'net1', required: true }] })]);
  failing.run.failing = (line) => line.startsWith('link add');
  const failed = await failing.reconciler.firstPass(record, 5000);
  t.equal(failed.outcome, 'refused', 'a required attachment whose steps fail refuses too');
  t.match(failed.unmet, [{ network: 'blue', interface: 'net1', reason: /Operation not permitted/ }]);
  t.notOk(failed.unmet?.some((u) => 'own' in u), 'the answer is the schema\'s');

  const other = await setup(t, [config({ attachments: [{ network: 'blue', interface: 'net1', required: true }, { network: 'blue', interface: 'net2' }] })]);
  other.run.failing = (line) => line.startsWith('link add') && line.includes('peer name net2');
  const byOther = await other.reconciler.firstPass(record, 5000);
  t.equal(byOther.outcome, 'failed', 'another part failing took net1 back with it: the pod starts, and its retry makes both');
  t.match(byOther.error, /spec\.attachments\[1\]: .*net2/);
});

t.test('what a pod asked at start and did not have when its ADD was answered is what can come late; a new ADD of it starts that again', async (t) => {
  const { docs, records, sight, observe, reconciler, madeByFirstPass } = await setup(t);
  const facts = () => reconciler.facts().find((f) => f.record.containerId === 'c1');
  sight.set(netns, 'unsure');
  t.strictSame(await reconciler.firstPass(record, 5000), { outcome: 'pending' });
  t.strictSame([...(facts()?.awaitedAtStart ?? ['none taken'])], ['none taken'], 'no pass took it yet');
  sight.delete(netns);
  records.splice(0, 1, { ...record, startedWithoutNetwork: true });
  await reconciler.schedule();
  madeByFirstPass();
  t.strictSame([...(facts()?.awaitedAtStart ?? [])], ['blue net1'], 'first taken after the ADD returned: net1 came late');
  t.equal(facts()?.record.startedWithoutNetwork, true, "the plugin's mark reaches the facts");
  docs.configs = [config({ attachments: [{ network: 'blue', interface: 'net1' }, { network: 'blue', interface: 'net3' }] })];
  await reconciler.schedule();
  t.strictSame([...(facts()?.awaitedAtStart ?? [])], ['blue net1'], 'asked later: a change at run time, not of its start');

  const again: AttachmentRecord = { ...record, netns: '/run/netns/pod-a2', createdAt: '2026-01-01T00:01:00Z' };
  records.splice(0, 1, again);
  observe.pod(again.netns).set('eth0', FakeObserver.link('eth0'));
  t.strictSame(await reconciler.firstPass(again, 5000), { outcome: 'applied' });
  t.strictSame([...(facts()?.awaitedAtStart ?? ['none'])], [], 'a new ADD answered applied: everything it asked was there in time');
});
