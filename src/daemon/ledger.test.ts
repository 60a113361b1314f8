// The ledger's rules alone: which sandbox a pass takes, the backoff of a failed one and its one
// retry timer, and the one outcome each reader sees (the socket's list, the status's facts, the
// metrics' attachment states).
import t from 'tap';
import { PodnetError } from '../errors.ts';
import type { Network } from '../protocol/validate.ts';
import type { Resolved } from '../model/state.ts';
import { fakeClock } from '../testing/fakes.ts';
import { SandboxLedger, type SandboxOutcome } from './ledger.ts';

const blue: Network = { apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'Network', metadata: { name: 'blue' }, spec: { type: 'bridge' } };
const nothing: Resolved = { attachments: [], delegated: [], vrfs: [], tuning: [], routes: [], rules: [], sysctls: [] };

function outcome(containerId: string, more: Partial<SandboxOutcome> = {}): SandboxOutcome {
  return {
    record: { containerId, ifname: 'eth0', network: 'k8s', netns: `/run/netns/${containerId}`, cniVersion: '1.0.0', createdAt: '2026-01-01T00:00:00Z', pod: { namespace: 'default', name: containerId } },
    containerId,
    namespace: 'default',
    name: containerId,
    netns: `/run/netns/${containerId}`,
    desired: nothing,
    applied: undefined,
    problems: [],
    lastSteps: [],
    delegated: [],
    wanted: { configs: [], attachments: [], vrfs: [], tuning: [], routes: [], rules: [], sysctls: [], macs: [], problems: [] },
    known: true,
    ...more,
  };
}

t.test('a pass takes a new sandbox, one whose desired state changed, and at a resync every one', async (t) => {
  const clock = fakeClock();
  const ledger = new SandboxLedger(clock.now, clock.timer);
  const due = { containerId: 'c1', desiredJson: '{"a":1}', records: 'r1' };
  t.ok(ledger.isDue(due, false, clock.now()), 'new');
  ledger.begin(outcome('c1'), due);
  t.notOk(ledger.isDue(due, false, clock.now()), 'unchanged');
  t.ok(ledger.isDue({ ...due, desiredJson: '{"a":2}' }, false, clock.now()), 'changed');
  t.ok(ledger.isDue(due, true, clock.now()), 'resync');
  t.ok(ledger.isDue({ ...due, records: 'r2' }, false, clock.now()), 'a new ADD of the same container (a new netns)');
  ledger.track('c1')!.deferred = true;
  t.ok(ledger.isDue(due, false, clock.now()), 'its last plan left part of it for the next pass');
});

t.test('a failed sandbox waits for its backoff, doubling; one retry timer runs a pass when the first is due', async (t) => {
  const clock = fakeClock();
  const ledger = new SandboxLedger(clock.now, clock.timer);
  const due = { containerId: 'c1', desiredJson: '{}', records: 'r1' };
  const first = outcome('c1');
  const began = ledger.begin(first, due);
  t.equal(ledger.failed(first, began.track, began.previous, new PodnetError('IO_FAILURE', 'it broke')), 500);
  t.equal(first.lastError, 'it broke');
  t.equal(began.track.failedWith, 'IO_FAILURE', 'its kind kept');
  t.notOk(ledger.isDue(due, false, clock.now()));
  t.notOk(ledger.isDue(due, true, clock.now()), 'not at a resync either, unless it waits for the port security table');
  began.track.waitsForTable = true;
  t.ok(ledger.isDue(due, true, clock.now()), 'one that waits for the table is tried at each resync');
  let passes = 0;
  ledger.scheduleRetry(() => void passes++);
  t.equal(clock.timers.length, 1);
  t.equal(clock.timers[0]!.at, clock.now() + 505, 'a few ms after the retry is due, never before');
  clock.advance(505);
  clock.timers[0]!.run();
  t.equal(passes, 1);
  t.ok(ledger.isDue(due, false, clock.now()), 'due once its wait is over');
  const again = ledger.begin(outcome('c1'), due);
  t.equal(ledger.failed(outcome('c1'), again.track, again.previous, new PodnetError('IO_FAILURE', 'still')), 1000, 'the second failure in a row waits twice as long');
  ledger.close();
});

t.test('each reader sees the one outcome: the socket without the record, the status only known pods with their links', async (t) => {
  const clock = fakeClock();
  const ledger = new SandboxLedger(clock.now, clock.timer);
  const attachment = { network: 'blue', interface: 'net1', link: { kind: 'bridge' as const, bridge: 'pnbr-blue', bridgeAddresses: [], portSecurity: false }, hostIf: 'pn1', addresses: [], mtu: 1500, networkSpec: blue };
  const desired = { ...nothing, attachments: [attachment] } as unknown as Resolved;
  ledger.begin(outcome('c1', { desired }), { desiredJson: '{}', records: '' });
  ledger.begin(outcome('c2', { known: false }), { desiredJson: '{}', records: '' });
  const pod = new Map([['net1', { name: 'net1', mtu: 1400, up: true, addresses: [] }]]);
  ledger.track('c1')!.sight = { families: new Set(), paths: new Set(), marking: false, guards: new Set(), wireguard: new Set(), records: '', view: { pod, routes: [], rules: [], sysctls: new Map() } };
  const list = ledger.list([{ document: 'Network blue', field: 'spec', reason: 'r' }]);
  t.same(list.documentProblems, [{ document: 'Network blue', field: 'spec', reason: 'r' }]);
  t.same(list.items.map((i) => i.containerId), ['c1', 'c2']);
  t.notOk('record' in list.items[0]! || 'wanted' in list.items[0]! || 'known' in list.items[0]! || 'links' in list.items[0]!, 'the wire report has none of the status\'s fields');
  const facts = ledger.facts();
  t.same(facts.map((f) => f.name), ['c1'], 'a pod the source does not know has no status');
  t.equal(facts[0]!.links?.get('net1')?.mtu, 1400, 'its links as its last pass read them');
  t.same(ledger.attachmentStates(), [{ network: 'blue', state: 'pending' }], 'wanted, not there yet');
  ledger.outcome('c1')!.lastError = 'x';
  t.same(ledger.attachmentStates(), [{ network: 'blue', state: 'failing' }]);
  ledger.forget((cid) => cid === 'c1');
  t.same(ledger.list([]).items.map((i) => i.containerId), ['c2'], 'a gone sandbox is forgotten');
});
