// One sandbox's reconcile called on its own, as a plugin's cmdAdd is in its tests: its work, the
// host as a pass sees it, a recording runner and a kernel the test describes; no reconciler.
import t, { type Test } from 'tap';
import { dir } from 'tmp-promise';
import { DelegatedLifecycle } from '../delegate/lifecycle.ts';
import type { Logger } from '../log.ts';
import { noMetrics } from '../metrics.ts';
import type { DesiredSandbox } from '../model/desired.ts';
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
const wanted: DesiredSandbox = { configs: [], attachments: [], tuning: [], routes: [], rules: [], sysctls: [], macs: [], problems: [] };
const mtu1400: Resolved = { attachments: [], delegated: [], tuning: [{ interface: 'eth0', settings: { mtu: 1400 } }], routes: [], rules: [], sysctls: [] };
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
  const delegated = new DelegatedLifecycle({ records: new MemoryDelegatedRecords(), plugins: new RecordingPlugins(), sight: fakeSight(new Map()), podLinks: async () => new Map(), recorded: () => true, clock: clock.now, log });
  const sandboxes = new SandboxRoom({ observe, delegated, applied, ledger, host: new HostRoom({ observe, applied: store, steps, log }), steps, metrics: noMetrics, log, again: () => undefined });
  return { run, observe, store, ledger, sandboxes, clock };
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
