import t from 'tap';
import type { AppliedState, ObservedLink, ResolvedAttachment } from '../model/state.ts';
import { plan, type PlanInput } from './plan.ts';

const netns = '/run/netns/pod-a';
const blue: ResolvedAttachment = {
  interface: 'net1',
  network: 'blue',
  bridge: 'pn-blue',
  bridgeAddresses: ['198.18.80.1/24'],
  hostIf: 'pnv0123456789',
  mtu: 1400,
  addresses: ['198.18.80.2/24'],
};

function link(name: string, extra: Partial<ObservedLink> = {}): [string, ObservedLink] {
  return [name, { name, mtu: 1500, up: true, addresses: [], ...extra }];
}

function input(extra: Partial<PlanInput>): PlanInput {
  return {
    containerId: 'c1',
    netns,
    attachments: [],
    tuning: [],
    observed: { pod: new Map([link('eth0')]), host: new Map() },
    applied: undefined,
    hostNetnsRef: '4242',
    ...extra,
  };
}

/** What the kernel shows once `blue` is in place. */
const attachedObserved = {
  pod: new Map([link('eth0'), link('net1', { mtu: 1400, addresses: ['198.18.80.2/24'] })]),
  host: new Map([
    link('pn-blue', { mtu: 1400, kind: 'bridge', addresses: ['198.18.80.1/24'] }),
    link('pnv0123456789', { mtu: 1400, kind: 'veth', master: 'pn-blue' }),
  ]),
};
const attachedApplied: AppliedState = {
  containerId: 'c1',
  netns,
  attachments: [{ interface: 'net1', network: 'blue', bridge: 'pn-blue', hostIf: 'pnv0123456789', addresses: ['198.18.80.2/24'] }],
  tuning: [],
};

t.test('a fresh attachment: bridge, veth across namespaces, master, up, address', async (t) => {
  const p = plan(input({ attachments: [blue] }));
  t.same(
    p.steps.map((s) => [s.where === 'host' ? 'host' : 'pod', s.line]),
    [
      ['host', 'link add name pn-blue type bridge'],
      ['host', 'link set pn-blue mtu 1400'],
      ['host', 'link set pn-blue up'],
      ['host', 'addr add 198.18.80.1/24 dev pn-blue'],
      ['pod', 'link add net1 mtu 1400 type veth peer name pnv0123456789 mtu 1400 netns 4242'],
      ['host', 'link set pnv0123456789 master pn-blue up'],
      ['pod', 'link set net1 up'],
      ['pod', 'addr add 198.18.80.2/24 dev net1'],
    ],
  );
  t.same(p.next, attachedApplied);
  t.same(p.problems, []);
  t.ok(p.steps.filter((s) => s.line.startsWith('link add') || s.line.startsWith('addr add')).every((s) => s.undo), 'every creation has its undo');
});

t.test('applying the same desired state again plans nothing', async (t) => {
  const p = plan(input({ attachments: [blue], observed: attachedObserved, applied: attachedApplied }));
  t.same(p.steps, []);
  t.same(p.next, attachedApplied);
});

t.test('an attachment no longer wanted: its host end goes, which takes the pair', async (t) => {
  const p = plan(input({ observed: attachedObserved, applied: attachedApplied }));
  t.same(p.steps.map((s) => s.line), ['link del pnv0123456789']);
  t.same(p.next.attachments, []);
});

t.test('drift: a pod end without its host end is made anew; a removed address comes back', async (t) => {
  const observed = { pod: attachedObserved.pod, host: new Map([attachedObserved.host.entries().next().value!]) };
  const p = plan(input({ attachments: [blue], observed, applied: attachedApplied }));
  t.same(p.steps.map((s) => s.line).slice(0, 2), ['link del net1', 'link add net1 mtu 1400 type veth peer name pnv0123456789 mtu 1400 netns 4242']);
  const flushed = { pod: new Map([link('eth0'), link('net1', { mtu: 1400 })]), host: attachedObserved.host };
  t.same(plan(input({ attachments: [blue], observed: flushed, applied: attachedApplied })).steps.map((s) => s.line), ['addr add 198.18.80.2/24 dev net1']);
});

t.test('an interface podnet did not make is never taken over', async (t) => {
  const observed = { pod: new Map([link('eth0'), link('net1')]), host: new Map() };
  const p = plan(input({ attachments: [blue], observed }));
  t.same(p.steps, []);
  t.match(p.problems, [{ reason: /net1 already exists in the pod and podnet did not make it/ }]);
});

t.test('tuning remembers each original and restores it', async (t) => {
  const settings = { mtu: 1300, txqueuelen: 500, mac: '02:00:00:00:00:aa', promisc: true };
  const eth0 = link('eth0', { txqueuelen: 1000, mac: '02:11:22:33:44:55', promisc: false });
  const first = plan(input({ tuning: [{ interface: 'eth0', settings }], observed: { pod: new Map([eth0]), host: new Map() } }));
  t.same(first.steps.map((s) => [s.line, s.undo?.line]), [
    ['link set eth0 mtu 1300', 'link set eth0 mtu 1500'],
    ['link set eth0 txqueuelen 500', 'link set eth0 txqueuelen 1000'],
    ['link set eth0 address 02:00:00:00:00:aa', 'link set eth0 address 02:11:22:33:44:55'],
    ['link set eth0 promisc on', 'link set eth0 promisc off'],
  ]);
  t.same(first.next.tuning, [{ interface: 'eth0', original: { mtu: 1500, txqueuelen: 1000, mac: '02:11:22:33:44:55', promisc: false } }]);

  const tuned = { pod: new Map([link('eth0', { mtu: 1300, txqueuelen: 500, mac: '02:00:00:00:00:aa', promisc: true })]), host: new Map() };
  const again = plan(input({ tuning: [{ interface: 'eth0', settings }], observed: tuned, applied: first.next }));
  t.same(again.steps, [], 'nothing to do once applied');
  t.same(again.next.tuning, first.next.tuning, 'the originals survive passes');

  const fewer = plan(input({ tuning: [{ interface: 'eth0', settings: { mtu: 1300 } }], observed: tuned, applied: first.next }));
  t.same(fewer.steps.map((s) => s.line), ['link set eth0 txqueuelen 1000', 'link set eth0 address 02:11:22:33:44:55', 'link set eth0 promisc off'], 'settings no longer asked for go back');
  t.same(fewer.next.tuning, [{ interface: 'eth0', original: { mtu: 1500 } }]);

  const undone = plan(input({ observed: tuned, applied: first.next }));
  t.same(undone.steps.map((s) => s.line), ['link set eth0 mtu 1500', 'link set eth0 txqueuelen 1000', 'link set eth0 address 02:11:22:33:44:55', 'link set eth0 promisc off']);
  t.same(undone.next.tuning, []);
});

t.test('up and down', async (t) => {
  const down = plan(input({ tuning: [{ interface: 'eth0', settings: { up: false } }] }));
  t.same(down.steps.map((s) => [s.line, s.undo?.line]), [['link set eth0 down', 'link set eth0 up']]);
});

t.test('tuning an interface this pass makes waits for the next pass', async (t) => {
  const p = plan(input({ attachments: [blue], tuning: [{ interface: 'net1', settings: { txqueuelen: 10 } }] }));
  t.ok(p.deferred);
  t.same(p.problems, []);
  t.notOk(p.steps.some((s) => s.line.includes('txqueuelen')));
});

t.test('tuning an interface the pod does not have is a problem, not a step', async (t) => {
  const p = plan(input({ tuning: [{ interface: 'net7', settings: { mtu: 1300 } }] }));
  t.same(p.steps, []);
  t.match(p.problems, [{ reason: /the pod has no interface net7/ }]);
});
