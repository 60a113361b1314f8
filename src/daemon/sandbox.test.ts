// One sandbox's reconcile called on its own, as a plugin's cmdAdd is in its tests: its work, the
// host as a pass sees it, a recording runner and a kernel the test describes; no reconciler.
import t, { type Test } from 'tap';
import { PodnetError } from '../errors.ts';
import { dir } from 'tmp-promise';
import { DelegatedLifecycle, pluginTimePerPassMs } from '../delegate/lifecycle.ts';
import type { Logger } from '../log.ts';
import { noMetrics } from '../metrics.ts';
import type { DesiredSandbox } from '../model/desired.ts';
import { routeKey } from '../model/routing.ts';
import { identityOf } from '../model/identity.ts';
import type { Resolved } from '../model/state.ts';
import type { AttachmentRecord } from '../protocol/validate.ts';
import { fakeClock, fakeSight, FakeObserver, MemoryApplied, MemoryDelegatedRecords, RecordingPlugins, RecordingRunner } from '../testing/fakes.ts';
import { AppliedRecords } from './applied-records.ts';
import { HostRoom } from './host.ts';
import { SandboxLedger } from './ledger.ts';
import { PassSteps } from './pass-steps.ts';
import { SandboxRoom, type SandboxWork } from './sandbox.ts';
import { hostViewOf, recordsKey } from './views.ts';

const netns = '/run/netns/pod-a';
const record: AttachmentRecord = { containerId: 'c1', ifname: 'eth0', network: 'k8s', netns, cniVersion: '1.0.0', createdAt: '2026-01-01T00:00:00Z', pod: { namespace: 'default', name: 'pod-a' } };
const wanted: DesiredSandbox = { configs: [], attachments: [], vrfs: [], tuning: [], routes: [], rules: [], sysctls: [], macs: [], problems: [] };
const mtu1400: Resolved = { attachments: [], delegated: [], vrfs: [], tuning: [{ interface: 'eth0', settings: { mtu: 1400 } }], routes: [], rules: [], sysctls: [] };
const work: SandboxWork = { record, identity: identityOf(record), desired: mtu1400, desiredJson: JSON.stringify(mtu1400), problems: [], wanted, known: true, records: recordsKey([record]) };
const host = () => Promise.resolve(hostViewOf(new Map(), new Map(), { shaped: false, secured: false }));

async function room(t: Test) {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  const run = new RecordingRunner();
  const observe = new FakeObserver();
  observe.pod(netns).set('eth0', FakeObserver.link('eth0'));
  const clock = fakeClock();
  const store = new MemoryApplied();
  const log: Logger = { info: () => undefined, warn: () => undefined, error: () => undefined };
  const applied = new AppliedRecords({ applied: store, ipam: { release: () => undefined, holders: () => [] }, metrics: noMetrics, log });
  const ledger = new SandboxLedger(clock.now, clock.timer);
  const steps = new PassSteps(run, tmp.path);
  const plugins = new RecordingPlugins();
  const delegated = new DelegatedLifecycle({ records: new MemoryDelegatedRecords(), plugins, sight: fakeSight(new Map()), podLinks: async () => new Map(), recorded: () => true, clock: clock.now, log });
  const again = { asked: 0 };
  const sandboxes = new SandboxRoom({ observe, delegated, applied, ledger, host: new HostRoom({ observe, applied: store, steps, log }), steps, metrics: noMetrics, log, again: () => void again.asked++ });
  return { run, observe, store, ledger, sandboxes, clock, plugins, again };
}

t.test('a sandbox reconciled alone: its plan applied in its netns, recorded, and its outcome in the ledger', async (t) => {
  const { run, observe, store, ledger, sandboxes } = await room(t);
  await sandboxes.reconcile(work, host(), { resync: false, readBack: true });
  t.same(run.lines(), [`netns ${netns} ip link set dev eth0 mtu 1400`]);
  t.same(store.get('c1')?.tuning.map((x) => x.interface), ['eth0'], 'what it applied is recorded');
  t.same(ledger.outcome('c1')?.lastSteps.map((s) => s.line), ['link set dev eth0 mtu 1400']);
  t.equal(ledger.outcome('c1')?.lastError, undefined);
  t.equal(observe.readsOf(netns), 2, 'read to plan, and read back after');
});

t.test('a sandbox whose step fails: taken back, told on its outcome, and its retry put off by its backoff', async (t) => {
  const { run, store, ledger, sandboxes, clock } = await room(t);
  run.failing = (line) => line.includes('mtu 1400');
  await sandboxes.reconcile(work, host(), { resync: false, readBack: true });
  t.equal(store.get('c1'), undefined, 'nothing recorded');
  t.match(ledger.outcome('c1')?.lastError, /Operation not permitted/);
  t.notOk(ledger.isDue({ containerId: 'c1', desiredJson: work.desiredJson, records: work.records }, false, clock.now()), 'not due before its backoff');
  t.equal(ledger.track('c1')?.retryAt, clock.now() + 500);
});

t.test("a config's new generation of which a part cannot be planned or made is refused whole; the other config applies; the sandbox retries", async (t) => {
  const route = { family: 4 as const, to: '198.18.161.0/24', table: 100, dev: 'eth9' };
  const a = { name: 'PodNetworkConfig default/a', spec: { podSelector: {}, interfaces: [{ name: 'eth0', mtu: 1400 }] } };
  const b = { name: 'PodNetworkConfig default/b', spec: { podSelector: {}, routes: [{ to: route.to, dev: route.dev, table: 100 }] } };
  const origins = new Map([['tune eth0', `${a.name} spec.interfaces[0]`], [routeKey(route), `${b.name} spec.routes[0]`]]);
  const both: Resolved = { ...mtu1400, routes: [route] };
  const refusedSeen: string[][] = [];
  const rewant: NonNullable<SandboxWork['rewant']> = (refused) => {
    refusedSeen.push(refused.map((r) => `${r.config} ${r.problem.field}: ${r.problem.reason}`));
    const told = refused.map((r) => r.problem);
    return { wanted: { ...wanted, whole: [a], origins, problems: told }, desired: mtu1400, problems: told, desiredJson: JSON.stringify(mtu1400) };
  };
  const withB: SandboxWork = { ...work, desired: both, desiredJson: JSON.stringify(both), wanted: { ...wanted, whole: [a, b], origins }, rewant };

  const { run, store, ledger, sandboxes } = await room(t);
  await sandboxes.reconcile(withB, host(), { resync: false, readBack: true });
  t.strictSame(refusedSeen, [[`${b.name} spec.routes[0]: the pod has no interface eth9`]], 'b refused whole, once, for what the plan found, at its field');
  t.same(run.lines(), [`netns ${netns} ip link set dev eth0 mtu 1400`], 'a applied, nothing of b');
  t.same(store.get('c1')?.configs?.map((c) => c.name), [a.name], 'the pod has a whole');
  t.match(ledger.outcome('c1')?.lastError, /PodNetworkConfig default\/b spec\.routes\[0\]: the pod has no interface eth9/, 'told, and retried with its backoff');

  // At apply: b's route via an address the kernel refuses. This pass's steps are taken back, and a applies alone.
  const via = { family: 4 as const, to: '198.18.162.0/24', table: 100, via: '198.18.250.1' };
  const viaOrigins = new Map([['tune eth0', `${a.name} spec.interfaces[0]`], [routeKey(via), `${b.name} spec.routes[0]`]]);
  const second = await room(t);
  second.run.failing = (line) => line.includes('198.18.250.1');
  refusedSeen.length = 0;
  const mtuAndVia: Resolved = { ...mtu1400, routes: [via] };
  await second.sandboxes.reconcile({ ...work, desired: mtuAndVia, desiredJson: JSON.stringify(mtuAndVia), wanted: { ...wanted, whole: [a, b], origins: viaOrigins }, rewant }, host(), { resync: false, readBack: true });
  t.equal(refusedSeen.length, 1, 'b refused once');
  t.match(refusedSeen[0], [/^PodNetworkConfig default\/b spec\.routes\[0\]: the node could not make it: .*Operation not permitted/], 'for the step that failed, in the kernel\'s words after podnet\'s');
  t.strictSame(second.run.lines(), [
    `netns ${netns} ip link set dev eth0 mtu 1400`,
    `netns ${netns} ip route add 198.18.162.0/24 via 198.18.250.1 table 100`,
    `netns ${netns} ip link set dev eth0 mtu 1500`,
    `netns ${netns} ip link set dev eth0 mtu 1400`,
  ], "the pass's steps taken back, then a's alone applied");
  t.match(second.ledger.outcome('c1')?.lastError, /^PodNetworkConfig default\/b spec\.routes\[0\]: the node could not make it: /);
  t.match(second.ledger.outcome('c1')?.problems, [{ document: b.name, field: 'spec.routes[0]' }]);
  t.same(second.store.get('c1')?.configs?.map((c) => c.name), [a.name]);
  t.same(second.store.get('c1')?.routes, [], 'no route of b recorded');
  t.same(second.store.get('c1')?.tuning.map((x) => x.interface), ['eth0']);
});

t.test("a pass's plugin time spent with ADDs left: the plan and the config's record wait for the next pass, which makes it whole", async (t) => {
  const { run, observe, store, ledger, sandboxes, clock, plugins, again } = await room(t);
  // Each ADD takes 0.3 s and makes its interface in the pod.
  plugins.during = (command, target) => {
    clock.advance(0.6 * pluginTimePerPassMs);
    if (command === 'ADD') observe.pod(netns).set(target.ifname, FakeObserver.link(target.ifname));
  };
  const config = { name: 'slow', cniVersion: '1.0.0', plugins: [{ type: 'bridge' }] };
  const b = { name: 'PodNetworkConfig default/b', spec: { podSelector: {}, attachments: [] } };
  const route = { family: 4 as const, to: '198.18.163.0/24', table: 100, dev: 'net3' };
  const interfaces = ['net1', 'net2', 'net3'];
  const desired: Resolved = { attachments: [], delegated: interfaces.map((i) => ({ interface: i, network: 'slow', config })), vrfs: [], tuning: [], routes: [route], rules: [], sysctls: [] };
  const network = { apiVersion: 'podnetwork.opdev.io/v1alpha1' as const, kind: 'Network' as const, metadata: { name: 'slow' }, spec: { type: 'cni' as const, cni: { config } } };
  const asked: DesiredSandbox = {
    ...wanted,
    whole: [b],
    origins: new Map([[routeKey(route), `${b.name} spec.routes[0]`]]),
    attachments: interfaces.map((i, n) => ({ network, interface: i, from: b.name, field: `spec.attachments[${n}]` })),
  };
  const none: Resolved = { attachments: [], delegated: [], vrfs: [], tuning: [], routes: [], rules: [], sysctls: [] };
  const rewant: NonNullable<SandboxWork['rewant']> = (refused) => {
    const told = refused.map((r) => r.problem);
    return { wanted: { ...wanted, whole: [], problems: told }, desired: none, problems: told, desiredJson: JSON.stringify(none) };
  };
  const slow: SandboxWork = { ...work, desired, desiredJson: JSON.stringify(desired), wanted: asked, rewant };

  await sandboxes.reconcile(slow, host(), { resync: false, readBack: true });
  t.same(plugins.commands(), ['ADD slow c1/net1', 'ADD slow c1/net2'], 'two ADDs, then the time is spent');
  t.same(run.lines(), [], 'no plan: its route is via an interface still being made');
  t.equal(store.get('c1')?.configs, undefined, 'b is not recorded as applied');
  t.equal(ledger.outcome('c1')?.lastError, undefined, 'nothing failed');
  t.ok(ledger.track('c1')?.deferred, 'the next pass goes on');
  t.equal(again.asked, 1, 'at once');

  await sandboxes.reconcile(slow, host(), { resync: false, readBack: true });
  t.same(plugins.commands().slice(2), ['ADD slow c1/net3']);
  t.same(run.lines(), [`netns ${netns} ip route add 198.18.163.0/24 dev net3 table 100`], 'the route, once net3 is there');
  t.same(store.get('c1')?.configs?.map((c) => c.name), [b.name], 'b whole');
  t.notOk(ledger.track('c1')?.deferred);

  // A slow ADD that fails, its time spent: the sandbox waits for its backoff, not for the next pass.
  const { sandboxes: failing, plugins: failingPlugins, clock: failingClock, ledger: failingLedger, again: failingAgain } = await room(t);
  failingPlugins.during = () => failingClock.advance(pluginTimePerPassMs);
  failingPlugins.answers.ADD = new PodnetError('IO_FAILURE', 'timed out');
  const annotated: SandboxWork = { ...slow, wanted: { ...asked, whole: [] } };
  await failing.reconcile(annotated, host(), { resync: false, readBack: true });
  t.notOk(failingLedger.track('c1')?.deferred, 'not deferred past its backoff');
  t.equal(failingAgain.asked, 0);
  t.notOk(failingLedger.isDue({ containerId: 'c1', desiredJson: annotated.desiredJson, records: annotated.records }, false, failingClock.now()), 'not due before its backoff');
});
