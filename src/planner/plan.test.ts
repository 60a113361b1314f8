import t from 'tap';
import { hostInterfaceName } from '../model/host-links.ts';
import { linkDigest } from '../model/kinds/index.ts';
import { markingFingerprint, markingLine } from '../model/marking.ts';
import { emptyApplied, type AppliedState, type Observed, type ObservedLink, type Resolved, type ResolvedAttachment } from '../model/state.ts';
import type { Step } from '../model/step.ts';
import { renderUndo } from '../model/undo.ts';
import { portSecurityRuleset } from '../model/port-security.ts';
import { guardFingerprint } from '../model/wireguard-guard.ts';
import type { ObservedWireguard } from '../model/wireguard-config.ts';
import { parseDocument } from '../protocol/validate.ts';
import { plan as planOf, type PlanInput, type Plan } from './plan.ts';
import { planGoneSandbox } from './leftovers.ts';

/** The plan, whose undo actions every test also checks are a journal the next start reads back. */
function plan(i: PlanInput): Plan {
  const p = planOf(i);
  parseDocument('Journal', { version: 1, pass: 'p', undo: p.steps.flatMap((s) => (s.undo ? [s.undo] : [])) }, 'the journal of a plan');
  parseDocument('AppliedState', p.next, 'the applied state of a plan');
  return p;
}

/** The line that takes a step back. */
const undoLine = (s: Step) => (s.undo ? renderUndo(s.undo).line : undefined);

const netns = '/run/netns/pod-a';
const blue: ResolvedAttachment = {
  interface: 'net1',
  network: 'blue',
  link: { kind: 'bridge', bridge: 'pn-blue', bridgeAddresses: ['198.18.80.1/24'], portSecurity: false },
  hostIf: 'pnv0123456789',
  ifb: 'pnb0123456789',
  mtu: 1400,
  addresses: ['198.18.80.2/24'],
};

function link(name: string, extra: Partial<ObservedLink> = {}): [string, ObservedLink] {
  return [name, { name, mtu: 1500, up: true, addresses: [], ...extra }];
}

function observed(extra: Partial<Observed> = {}): Observed {
  return { pod: new Map([link('eth0')]), host: new Map(), hostLinks: new Map([link('eth0')]), routes: [], rules: [], sysctls: new Map(), qdiscs: new Map(), ...extra };
}

function input(desired: Partial<Resolved>, extra: Partial<PlanInput> = {}): PlanInput {
  return {
    containerId: 'c1',
    netns,
    desired: { attachments: [], delegated: [], vrfs: [], tuning: [], routes: [], rules: [], sysctls: [], ...desired },
    observed: observed(),
    applied: undefined,
    ...extra,
  };
}

const lines = (p: { steps: { where: unknown; line: string; tool: string }[] }) => p.steps.map((s) => [s.where === 'host' ? 'host' : 'pod', s.tool, s.line]);

/** The MAC podnet gives net1 of sandbox c1 (podMacOf). */
const podMac = '02:3f:8e:07:a5:15';

/** What the kernel shows once `blue` is in place. */
const attachedObserved = observed({
  pod: new Map([link('eth0'), link('net1', { mtu: 1400, mac: podMac, addresses: ['198.18.80.2/24'] })]),
  host: new Map([link('pn-blue', { mtu: 1400, kind: 'bridge', addresses: ['198.18.80.1/24'] }), link('pnv0123456789', { mtu: 1400, kind: 'veth', master: 'pn-blue', alias: 'podnet:c1/net1' })]),
});
const attachedApplied: AppliedState = {
  ...emptyApplied('c1', netns),
  attachments: [{ interface: 'net1', network: 'blue', kind: 'bridge', bridge: 'pn-blue', hostIf: 'pnv0123456789', mac: podMac, addresses: ['198.18.80.2/24'] }],
};

const withBridge = observed({ host: new Map([attachedObserved.host.entries().next().value!]) });

t.test('a fresh attachment: veth made from the host, on the bridge and up; the pod end up with its address', async (t) => {
  const p = plan(input({ attachments: [blue] }, { observed: withBridge }));
  t.same(lines(p), [
    ['host', 'ip', 'link add name pnv0123456789 mtu 1400 master pn-blue up type veth peer name net1 address 02:3f:8e:07:a5:15 mtu 1400 netns /run/netns/pod-a'],
    ['host', 'ip', 'link set dev pnv0123456789 alias podnet:c1/net1'],
    ['pod', 'ip', 'link set dev net1 up'],
    ['pod', 'ip', 'addr add 198.18.80.2/24 dev net1'],
  ]);
  t.same(p.steps[0]?.undo, { where: 'host', action: 'link-del', dev: 'pnv0123456789', mark: 'podnet:c1/net1' }, 'its undo deletes it only while it bears the mark');
  t.same(p.next, attachedApplied);
  t.same(p.problems, []);
  t.ok(p.steps.filter((s) => s.line.startsWith('link add') || s.line.startsWith('addr add')).every((s) => s.undo), 'every creation has its undo');
});

t.test('applying the same desired state again plans nothing', async (t) => {
  const p = plan(input({ attachments: [blue] }, { observed: attachedObserved, applied: attachedApplied }));
  t.same(p.steps, []);
  t.same(p.next, attachedApplied);
});

t.test('without its bridge, an attachment is a problem and what was applied stays recorded', async (t) => {
  const p = plan(input({ attachments: [blue] }, { observed: observed({ pod: attachedObserved.pod }), applied: attachedApplied }));
  t.same(p.steps, []);
  t.match(p.problems, [{ reason: 'the host has no bridge pn-blue' }]);
  t.same(p.next.attachments, attachedApplied.attachments);
});

t.test('an attachment no longer wanted: its host end goes, which takes the pair', async (t) => {
  const p = plan(input({}, { observed: attachedObserved, applied: attachedApplied }));
  t.same(p.steps.map((s) => s.line), ['link del dev pnv0123456789']);
  t.same(p.next.attachments, []);
});

t.test('drift: a pod end without its host end is made anew; a removed address comes back', async (t) => {
  const halfGone = { ...attachedObserved, host: new Map([attachedObserved.host.entries().next().value!]) };
  const p = plan(input({ attachments: [blue] }, { observed: halfGone, applied: attachedApplied }));
  t.same(p.steps.map((s) => s.line).slice(0, 2), ['link del dev net1', 'link add name pnv0123456789 mtu 1400 master pn-blue up type veth peer name net1 address 02:3f:8e:07:a5:15 mtu 1400 netns /run/netns/pod-a']);
  const flushed = { ...attachedObserved, pod: new Map([link('eth0'), link('net1', { mtu: 1400 })]) };
  t.same(plan(input({ attachments: [blue] }, { observed: flushed, applied: attachedApplied })).steps.map((s) => s.line), ['addr add 198.18.80.2/24 dev net1']);
});

t.test('a host end podnet made whose pod end is gone is made anew; a host link of that name podnet did not make is left alone', async (t) => {
  const podEndGone = { ...attachedObserved, pod: new Map([link('eth0')]) };
  t.same(plan(input({ attachments: [blue] }, { observed: podEndGone, applied: attachedApplied })).steps.map((s) => s.line).slice(0, 2), [
    'link del dev pnv0123456789',
    'link add name pnv0123456789 mtu 1400 master pn-blue up type veth peer name net1 address 02:3f:8e:07:a5:15 mtu 1400 netns /run/netns/pod-a',
  ], 'podnet\'s own, by its records');
  // Another pod's host end, or a hand-made link, that happens to have the name: no record of it here.
  for (const alias of [undefined, 'podnet:c9/net1', 'uplink']) {
    const squatted = { ...podEndGone, host: new Map([...podEndGone.host, link('pnv0123456789', { kind: 'veth', ...(alias ? { alias } : {}) })]) };
    const p = plan(input({ attachments: [blue] }, { observed: squatted }));
    t.same(p.steps, [], `nothing deleted, nothing made (alias ${alias})`);
    t.match(p.problems, [{ field: 'interface', reason: /the host already has an interface pnv0123456789, which podnet did not make for this attachment; it is left alone/ }]);
    t.same(p.next.attachments, []);
  }
});

t.test("a host link of the recorded name that someone else marked is not podnet's: never deleted, used or taken back", async (t) => {
  const remarked = (alias: string | undefined) =>
    observed({ pod: attachedObserved.pod, host: new Map([...attachedObserved.host].map(([name, l]) => [name, name === 'pnv0123456789' ? { ...l, alias } : l])) });
  const taken = remarked('podnet:c9/net1');
  const p = plan(input({ attachments: [blue] }, { observed: taken, applied: attachedApplied }));
  t.same(p.steps, [], 'not used');
  t.match(p.problems, [{ reason: /the host already has an interface pnv0123456789, which podnet did not make for this attachment/ }]);
  t.same(p.next.attachments, attachedApplied.attachments, 'what was applied stays recorded');
  t.same(plan(input({}, { observed: taken, applied: attachedApplied })).steps.map((s) => s.line), ['link del dev net1'], 'taken back: the pod end goes, the host link stays');

  const older = remarked(undefined);
  t.same(
    plan(input({ attachments: [blue] }, { observed: older, applied: attachedApplied })).steps.map((s) => s.line),
    ['link set dev pnv0123456789 alias podnet:c1/net1'],
    "one an older podnet made without a mark, by podnet's records, gets the mark",
  );
  t.same(plan(input({}, { observed: older, applied: attachedApplied })).steps.map((s) => s.line), ['link del dev pnv0123456789'], 'and is taken back like a marked one');
});

t.test('an ifb of the name podnet would shape egress with, not made by podnet, is neither used nor deleted', async (t) => {
  const shaped = { ...blue, bandwidth: { egressRate: 2_000_000, egressBurst: 200_000 } };
  const withForeignIfb = observed({ host: new Map([...attachedObserved.host, link('pnb0123456789', { kind: 'ifb' })]), pod: attachedObserved.pod });
  const p = plan(input({ attachments: [shaped] }, { observed: withForeignIfb, applied: attachedApplied }));
  t.notOk(p.steps.some((s) => s.line.includes('pnb0123456789')), 'no mirred to it, no delete of it');
  t.match(p.problems, [{ reason: /the host already has an interface pnb0123456789/ }]);
  t.same(p.next.attachments, attachedApplied.attachments, 'what was applied stays recorded');
});

t.test('an interface podnet did not make is never taken over', async (t) => {
  const p = plan(input({ attachments: [blue] }, { observed: observed({ pod: new Map([link('eth0'), link('net1')]) }) }));
  t.same(p.steps, []);
  t.match(p.problems, [{ reason: /net1 already exists in the pod and podnet did not make it/ }]);
});

t.test('a pod interface is only ever named after name or dev: one named like an ip keyword (up, nomaster) is not read as one', async (t) => {
  // net9 stands for any name: where it appears, a keyword-like name would appear the same way.
  const name = 'net9';
  for (const spec of [blue.link, { kind: 'vxlan', vni: 7, remote: '198.18.0.2', port: 4789, device: 'eth0' } as const, { kind: 'macvlan', parent: 'eth0', mode: 'bridge' } as const]) {
    const made = plan(input({ attachments: [{ ...blue, interface: name, link: spec }], tuning: [{ interface: name, settings: { mtu: 1300, txqueuelen: 10 } }] }, { observed: withBridge }));
    const taken = plan(input({}, { observed: observed({ pod: new Map([link('eth0'), link(name)]) }), applied: made.next }));
    const all = [...made.steps, ...taken.steps].flatMap((s) => [s.line, ...(s.undo ? [renderUndo(s.undo).line] : [])]);
    t.ok(all.some((l) => l.includes(name)), `${spec.kind}: the lines name it`);
    for (const line of all) {
      const words = line.split(' ');
      const misplaced = words.filter((w, i) => w === name && !['name', 'dev'].includes(words[i - 1] ?? ''));
      t.same(misplaced, [], `${spec.kind}: ${line}`);
    }
  }
});

t.test('macvlan, ipvlan, vlan and vxlan links are made from the host straight into the pod', async (t) => {
  const kinds: [ResolvedAttachment['link'], string][] = [
    [{ kind: 'macvlan', parent: 'eth0', mode: 'private' }, 'link add link eth0 name net1 netns /run/netns/pod-a mtu 1400 type macvlan mode private'],
    [{ kind: 'ipvlan', parent: 'eth0', mode: 'l3s' }, 'link add link eth0 name net1 netns /run/netns/pod-a mtu 1400 type ipvlan mode l3s'],
    [{ kind: 'vlan', parent: 'eth0', id: 42 }, 'link add link eth0 name net1 netns /run/netns/pod-a mtu 1400 type vlan id 42'],
    [{ kind: 'vxlan', vni: 7, remote: '198.18.0.2', port: 4789, device: 'eth0' }, 'link add name net1 netns /run/netns/pod-a mtu 1400 type vxlan id 7 remote 198.18.0.2 dstport 4789 dev eth0'],
    [{ kind: 'vxlan', vni: 7, group: '239.1.1.1', port: 8472, device: 'eth0' }, 'link add name net1 netns /run/netns/pod-a mtu 1400 type vxlan id 7 group 239.1.1.1 dstport 8472 dev eth0'],
  ];
  for (const [spec, line] of kinds) {
    const p = plan(input({ attachments: [{ ...blue, link: spec }] }));
    t.same(lines(p), [
      ['host', 'ip', line],
      ['pod', 'ip', 'link set dev net1 up'],
      ['pod', 'ip', 'addr add 198.18.80.2/24 dev net1'],
    ]);
    t.same(p.steps[0]!.undo, { where: { netns }, action: 'link-del', dev: 'net1' });
    t.same(p.next.attachments, [{ interface: 'net1', network: 'blue', kind: spec.kind, addresses: ['198.18.80.2/24'], made: linkDigest(spec) }], `${spec.kind}: recorded with the digest of its spec`);
    const undo = plan(input({}, { observed: observed({ pod: new Map([link('eth0'), link('net1')]) }), applied: p.next }));
    t.same(lines(undo), [['pod', 'ip', 'link del dev net1']], `${spec.kind}: undo deletes it in the pod`);
  }
});

t.test('a gre link is made on the host under its pnt name, marked, and moved into the pod under the pod\'s name', async (t) => {
  const tmp = hostInterfaceName('c1', 'net1', 'pnt');
  const gre = { ...blue, link: { kind: 'gre', remote: '198.18.100.2', device: 'eth0', key: 7 } as const };
  const made = [
    ['host', 'ip', `link add name ${tmp} mtu 1400 type gre remote 198.18.100.2 key 7 dev eth0`],
    ['host', 'ip', `link set dev ${tmp} alias podnet:c1/net1`],
    ['host', 'ip', `link set dev ${tmp} netns ${netns} name net1`],
    ['pod', 'ip', 'link set dev net1 up'],
    ['pod', 'ip', 'addr add 198.18.80.2/24 dev net1'],
  ];
  const p = plan(input({ attachments: [gre] }));
  t.same(lines(p), made);
  t.same(p.steps.slice(0, 3).map((s) => s.undo), [{ where: 'host', action: 'link-del', dev: tmp, mark: 'podnet:c1/net1' }, undefined, { where: { netns }, action: 'link-del', dev: 'net1' }], 'taken back: the host link while it is there and bears the mark, the pod\'s after the move');
  t.same(p.next.attachments, [{ interface: 'net1', network: 'blue', kind: 'gre', addresses: ['198.18.80.2/24'], made: linkDigest(gre.link) }]);

  const left = (alias?: string) => observed({ host: new Map([link('eth0'), link(tmp, { kind: 'gre', ...(alias ? { alias } : {}) })]) });
  for (const alias of [undefined, 'podnet:c1/net1']) {
    t.same(lines(plan(input({ attachments: [gre] }, { observed: left(alias) }))), [['host', 'ip', `link del dev ${tmp}`], ...made], `one an interrupted pass left (alias ${alias}) is deleted first`);
  }
  const squatted = plan(input({ attachments: [gre] }, { observed: left('uplink') }));
  t.same(squatted.steps, [], 'a link of the name someone else marked is left alone');
  t.match(squatted.problems, [{ field: 'interface', reason: `the host already has an interface ${tmp}, which podnet did not make for this attachment; it is left alone` }]);

  const undo = plan(input({}, { observed: observed({ pod: new Map([link('eth0'), link('net1')]) }), applied: p.next }));
  t.same(lines(undo), [['pod', 'ip', 'link del dev net1']], 'undo deletes it in the pod');
  // A pnt link an interrupted pass left on the host goes when the pod has its link, and when the attachment goes.
  const leftBeside = observed({ pod: new Map([link('eth0'), link('net1', { mtu: 1400, up: true, addresses: ['198.18.80.2/24'] })]), host: new Map([link(tmp, { alias: 'podnet:c1/net1' })]) });
  t.same(lines(plan(input({ attachments: [gre] }, { observed: leftBeside, applied: p.next }))), [['host', 'ip', `link del dev ${tmp}`]], 'the pod has net1: only the leftover goes');
  t.same(lines(plan(input({}, { observed: leftBeside, applied: p.next }))), [['pod', 'ip', 'link del dev net1'], ['host', 'ip', `link del dev ${tmp}`]], 'taken back: the pod\'s link and the leftover');
  const theirs = observed({ ...leftBeside, host: new Map([link(tmp, { alias: 'uplink' })]) });
  t.same(lines(plan(input({}, { observed: theirs, applied: p.next }))), [['pod', 'ip', 'link del dev net1']], 'one someone else marked is never deleted');

  const v6 = { ...gre, link: { kind: 'gre', remote: '2001:db8:100::2', device: 'eth0' } as const };
  const underlay = (addresses: string[]) => observed({ hostLinks: new Map([link('eth0', { addresses })]) });
  t.same(lines(plan(input({ attachments: [v6] }, { observed: underlay(['198.18.100.1/24', '2001:db8:100::1/64']) })))[0], ['host', 'ip', `link add name ${tmp} mtu 1400 type ip6gre remote 2001:db8:100::2 local 2001:db8:100::1 dev eth0`], "over IPv6, its local end is the underlay's IPv6 address");
  const noV6 = plan(input({ attachments: [v6] }, { observed: underlay(['198.18.100.1/24']) }));
  t.same(noV6.steps, [], 'nothing made without one');
  t.match(noV6.problems, [{ document: 'Network blue', field: 'spec.gre', reason: "the host's interface eth0 has no IPv6 address for the local end of a gre tunnel to 2001:db8:100::2" }]);
});

t.test("a DSCP is marked by podnet's table in the pod: written whole when its fingerprint is not the wanted one, deleted when none is wanted", async (t) => {
  const marked = { ...blue, dscp: 46 };
  const there = observed({ pod: new Map([link('eth0'), link('net1', { up: true, addresses: ['198.18.80.2/24'] })]) });
  const applied = { ...emptyApplied('c1', netns), attachments: [{ interface: 'net1', network: 'blue', kind: 'bridge' as const, bridge: 'pn-blue', hostIf: blue.hostIf, addresses: ['198.18.80.2/24'] }] };
  const wanted = [{ interface: 'net1', dscp: 46 }];
  const nftOf = (p: Plan) => p.steps.filter((s) => s.tool === 'nft').map((s) => [s.where === 'host' ? 'host' : 'pod', s.line, s.undo]);
  const made = plan(input({ attachments: [marked] }, { observed: there, applied }));
  t.same(nftOf(made), [['pod', markingLine(wanted), { where: { netns }, action: 'marking', entries: [] }]], 'no table yet: written; undone, deleted');
  t.same(made.next.marking, wanted);

  const kept = plan(input({ attachments: [marked] }, { observed: { ...there, marking: markingFingerprint(wanted) }, applied: made.next }));
  t.same(nftOf(kept), [], 'the table holds what is wanted: nothing to do');
  const drifted = plan(input({ attachments: [marked] }, { observed: { ...there, marking: 'podnet.0000000000000000' }, applied: made.next }));
  t.same(nftOf(drifted), [['pod', markingLine(wanted), { where: { netns }, action: 'marking', entries: wanted }]], 'someone changed it: written again whole');
  const changed = plan(input({ attachments: [{ ...blue, dscp: 10 }] }, { observed: { ...there, marking: markingFingerprint(wanted) }, applied: made.next }));
  t.same(nftOf(changed), [['pod', markingLine([{ interface: 'net1', dscp: 10 }]), { where: { netns }, action: 'marking', entries: wanted }]], 'changed in place; undone, back to 46');

  const gone = plan(input({ attachments: [blue] }, { observed: { ...there, marking: markingFingerprint(wanted) }, applied: made.next }));
  t.same(nftOf(gone), [['pod', markingLine([]), { where: { netns }, action: 'marking', entries: wanted }]], 'none wanted: the table deleted');
  t.equal(gone.next.marking, undefined);
  t.same(nftOf(plan(input({ attachments: [blue] }, { observed: there, applied: made.next }))), [], 'no table there: nothing to delete');

  // Never an interface podnet does not hold: one the pod has that podnet did not make.
  const foreign = plan(input({ attachments: [marked] }, { observed: there }));
  t.same(nftOf(foreign), [], 'net1 is not podnet\'s: not marked');
  t.equal(foreign.next.marking, undefined);
  // nft not there: nothing changes, told on the interface, and what was marked stays recorded.
  const unreadable = plan(input({ attachments: [{ ...blue, dscp: 10 }] }, { observed: { ...there, markingUnavailable: 'nft is not installed' }, applied: made.next }));
  t.same(nftOf(unreadable), []);
  t.same(unreadable.next.marking, wanted);
  t.equal(unreadable.unavailable, "DSCP marking needs nft in the pod's network namespace: nft is not installed");
  t.match(unreadable.problems.filter((p) => p.field === 'dscp'), [{ document: 'pod interface net1', reason: /nft is not installed/ }], 'told on the interface');

  // A cni Network's interface, once its plugins made it, is marked as podnet's own links are.
  const sriov = { interface: 'net2', network: 'vf', config: { cniVersion: '1.0.0', name: 'vf', plugins: [{ type: 'host-device' }] }, dscp: 26 };
  const both = [{ interface: 'net1', dscp: 46 }, { interface: 'net2', dscp: 26 }];
  const withPlugins = plan(input({ attachments: [marked], delegated: [sriov] }, { observed: there, applied, pluginsMade: new Set(['net2']) }));
  t.same(nftOf(withPlugins), [['pod', markingLine(both), { where: { netns }, action: 'marking', entries: [] }]], 'both in one table');
  t.same(withPlugins.next.marking, both);
  const notYet = plan(input({ attachments: [marked], delegated: [sriov] }, { observed: there, applied }));
  t.same(notYet.next.marking, wanted, 'not before its ADD answered: the pod may have an interface of that name of its own');
});

t.test('a parent the host does not have is a problem, not a failing step', async (t) => {
  const p = plan(input({ attachments: [{ ...blue, link: { kind: 'macvlan', parent: 'ens9', mode: 'bridge' } }] }));
  t.same(p.steps, []);
  t.match(p.problems, [{ document: 'Network blue', field: 'spec.macvlan', reason: 'the host has no interface ens9' }]);
});

t.test('bandwidth: tbf on the host end for ingress; ifb, ingress qdisc, mirred and tbf for egress', async (t) => {
  const bandwidth = { ingressRate: 1_000_000, ingressBurst: 100_000, egressRate: 2_000_000, egressBurst: 200_000 };
  const p = plan(input({ attachments: [{ ...blue, bandwidth }] }, { observed: attachedObserved, applied: attachedApplied }));
  t.same(lines(p), [
    ['host', 'tc', 'qdisc replace dev pnv0123456789 root tbf rate 1000000bit burst 12500 latency 25ms'],
    ['host', 'ip', 'link add name pnb0123456789 type ifb'],
    ['host', 'ip', 'link set dev pnb0123456789 alias podnet:c1/net1'],
    ['host', 'ip', 'link set dev pnb0123456789 up'],
    ['host', 'tc', 'qdisc add dev pnv0123456789 handle ffff: ingress'],
    ['host', 'tc', 'filter add dev pnv0123456789 parent ffff: protocol all u32 match u32 0 0 action mirred egress redirect dev pnb0123456789'],
    ['host', 'tc', 'qdisc replace dev pnb0123456789 root tbf rate 2000000bit burst 25000 latency 25ms'],
  ]);
  t.match(p.next.attachments[0], { ifb: 'pnb0123456789', bandwidth });

  const shaped = observed({
    pod: attachedObserved.pod,
    host: new Map([...attachedObserved.host, link('pnb0123456789', { kind: 'ifb', alias: 'podnet:c1/net1' })]),
    qdiscs: new Map([['pnv0123456789', { root: 'tbf', ingress: true }], ['pnb0123456789', { root: 'tbf', ingress: false }]]),
  });
  t.same(plan(input({ attachments: [{ ...blue, bandwidth }] }, { observed: shaped, applied: p.next })).steps, [], 'in place: nothing to do');

  const slower = plan(input({ attachments: [{ ...blue, bandwidth: { ...bandwidth, ingressRate: 500_000 } }] }, { observed: shaped, applied: p.next }));
  t.same(lines(slower), [['host', 'tc', 'qdisc replace dev pnv0123456789 root tbf rate 500000bit burst 12500 latency 25ms']], 'a change is made in place');
  t.equal(undoLine(slower.steps[0]!), 'qdisc replace dev pnv0123456789 root tbf rate 1000000bit burst 12500 latency 25ms');

  const none = plan(input({ attachments: [blue] }, { observed: shaped, applied: p.next }));
  t.same(lines(none), [
    ['host', 'tc', 'qdisc del dev pnv0123456789 root'],
    ['host', 'tc', 'qdisc del dev pnv0123456789 ingress'],
    ['host', 'ip', 'link del dev pnb0123456789'],
  ]);
  t.notOk(none.next.attachments[0]!.ifb);

  const detached = plan(input({}, { observed: shaped, applied: p.next }));
  t.same(detached.steps.map((s) => s.line), ['link del dev pnv0123456789', 'link del dev pnb0123456789'], 'detaching takes the ifb too');

});

t.test('tuning remembers each original and restores it', async (t) => {
  const settings = { mtu: 1300, txqueuelen: 500, mac: '02:00:00:00:00:aa', promisc: true };
  const eth0 = link('eth0', { txqueuelen: 1000, mac: '02:11:22:33:44:55', promisc: false });
  const first = plan(input({ tuning: [{ interface: 'eth0', settings }] }, { observed: observed({ pod: new Map([eth0]) }) }));
  t.same(first.steps.map((s) => [s.line, undoLine(s)]), [
    ['link set dev eth0 mtu 1300', 'link set dev eth0 mtu 1500'],
    ['link set dev eth0 txqueuelen 500', 'link set dev eth0 txqueuelen 1000'],
    ['link set dev eth0 address 02:00:00:00:00:aa', 'link set dev eth0 address 02:11:22:33:44:55'],
    ['link set dev eth0 promisc on', 'link set dev eth0 promisc off'],
  ]);
  t.same(first.next.tuning, [{ interface: 'eth0', original: { mtu: 1500, txqueuelen: 1000, mac: '02:11:22:33:44:55', promisc: false } }]);

  const tuned = observed({ pod: new Map([link('eth0', { mtu: 1300, txqueuelen: 500, mac: '02:00:00:00:00:aa', promisc: true })]) });
  const again = plan(input({ tuning: [{ interface: 'eth0', settings }] }, { observed: tuned, applied: first.next }));
  t.same(again.steps, [], 'nothing to do once applied');
  t.same(again.next.tuning, first.next.tuning, 'the originals survive passes');

  const fewer = plan(input({ tuning: [{ interface: 'eth0', settings: { mtu: 1300 } }] }, { observed: tuned, applied: first.next }));
  t.same(fewer.steps.map((s) => s.line), ['link set dev eth0 txqueuelen 1000', 'link set dev eth0 address 02:11:22:33:44:55', 'link set dev eth0 promisc off'], 'settings no longer asked for go back');
  t.same(fewer.next.tuning, [{ interface: 'eth0', original: { mtu: 1500 } }]);

  const undone = plan(input({}, { observed: tuned, applied: first.next }));
  t.same(undone.steps.map((s) => s.line), ['link set dev eth0 mtu 1500', 'link set dev eth0 txqueuelen 1000', 'link set dev eth0 address 02:11:22:33:44:55', 'link set dev eth0 promisc off']);
  t.same(undone.next.tuning, []);
});

t.test('up and down', async (t) => {
  const down = plan(input({ tuning: [{ interface: 'eth0', settings: { up: false } }] }));
  t.same(down.steps.map((s) => [s.line, undoLine(s)]), [['link set dev eth0 down', 'link set dev eth0 up']]);
});

t.test('an interface this pass makes is tuned right after, in the same pass', async (t) => {
  const p = plan(input({ attachments: [blue], tuning: [{ interface: 'net1', settings: { txqueuelen: 10, mtu: 1300 } }] }, { observed: withBridge }));
  t.notOk(p.deferred);
  t.same(p.problems, []);
  t.same(p.steps.slice(-2).map((s) => s.line), ['link set dev net1 mtu 1300', 'link set dev net1 txqueuelen 10'], 'after the address');
  t.same(p.next.tuning, [{ interface: 'net1', original: { mtu: 1400 } }], "its original MTU is the Network's");
  const down = plan(input({ attachments: [blue], tuning: [{ interface: 'net1', settings: { up: false } }] }, { observed: withBridge }));
  t.notOk(down.steps.some((s) => s.line === 'link set dev net1 up'), 'an interface tuned down is not also set up');
});

t.test('tuning an interface the pod does not have is a problem, not a step', async (t) => {
  const p = plan(input({ tuning: [{ interface: 'net7', settings: { mtu: 1300 } }] }));
  t.same(p.steps, []);
  t.match(p.problems, [{ reason: /the pod has no interface net7/ }]);
});

const toBlue = { family: 4 as const, to: '198.18.90.0/24', via: '198.18.80.1', table: 100 };
const srv6 = { family: 6 as const, to: '2001:db8:90::/64', dev: 'net1', table: 100, seg6: { mode: 'encap' as const, segments: ['2001:db8::a', '2001:db8::b'] } };
const fromBlue = { family: 4 as const, priority: 100, from: '198.18.80.0/24', table: 100 };
const v6mark = { family: 6 as const, priority: 101, fwmark: 7, table: 100 };

t.test('routes in their own table and rules: added after the links, undone by delete', async (t) => {
  const p = plan(input({ attachments: [blue], routes: [toBlue, srv6], rules: [fromBlue, v6mark] }, { observed: withBridge }));
  t.same(lines(p).slice(-4), [
    ['pod', 'ip', 'route add 198.18.90.0/24 via 198.18.80.1 table 100'],
    ['pod', 'ip', 'route add 2001:db8:90::/64 encap seg6 mode encap segs 2001:db8::a,2001:db8::b dev net1 table 100'],
    ['pod', 'ip', 'rule add priority 100 from 198.18.80.0/24 table 100'],
    ['pod', 'ip6', 'rule add priority 101 fwmark 7 table 100'],
  ]);
  t.same(p.steps.slice(-4).map((s) => undoLine(s)), [
    'route del 198.18.90.0/24 table 100',
    'route del 2001:db8:90::/64 table 100',
    'rule del priority 100 from 198.18.80.0/24 table 100',
    'rule del priority 101 fwmark 7 table 100',
  ]);
  t.same(p.next.routes, [toBlue, srv6]);
  t.same(p.next.rules, [fromBlue, v6mark]);

  const there = observed({
    pod: attachedObserved.pod,
    routes: [
      { family: 4, to: '198.18.90.0/24', via: '198.18.80.1', dev: 'net1', table: 100, metric: 0 },
      { family: 6, to: '2001:db8:90::/64', dev: 'net1', table: 100, metric: 1024, seg6Mode: 'encap', segments: ['2001:db8::a', '2001:db8::b'] },
    ],
    rules: [
      { family: 4, priority: 100, from: '198.18.80.0/24', table: 100 },
      { family: 6, priority: 101, fwmark: 7, table: 100 },
    ],
  });
  const applied = { ...p.next };
  const desired = { attachments: [blue], routes: [toBlue, srv6], rules: [fromBlue, v6mark] };
  t.same(plan(input(desired, { observed: { ...there, host: attachedObserved.host }, applied })).steps, [], 'in place: nothing to do');

  const drifted = { ...there, host: attachedObserved.host, routes: [{ ...there.routes[0]!, via: '198.18.80.9' }, there.routes[1]!], rules: [there.rules[1]!] };
  t.same(plan(input(desired, { observed: drifted, applied })).steps.map((s) => s.line), [
    'route replace 198.18.90.0/24 via 198.18.80.1 table 100',
    'rule add priority 100 from 198.18.80.0/24 table 100',
  ], 'a changed route is put back, a deleted rule comes back');

  const otherMode = { ...there, host: attachedObserved.host, routes: [there.routes[0]!, { ...there.routes[1]!, seg6Mode: 'inline' as const }, { ...there.routes[0]!, to: '198.18.91.0/24', src: '198.18.80.2' }] };
  const withSrc = { ...desired, routes: [toBlue, srv6, { ...toBlue, to: '198.18.91.0/24', src: '198.18.80.3' }] };
  t.same(plan(input(withSrc, { observed: otherMode, applied: { ...applied, routes: withSrc.routes } })).steps.map((s) => s.line), [
    'route replace 2001:db8:90::/64 encap seg6 mode encap segs 2001:db8::a,2001:db8::b dev net1 table 100',
    'route replace 198.18.91.0/24 via 198.18.80.1 src 198.18.80.3 table 100',
  ], 'an SRv6 mode or a source changed by hand is put back');

  const gone = plan(input({ attachments: [blue] }, { observed: { ...there, host: attachedObserved.host }, applied }));
  t.same(gone.steps.map((s) => s.line), [
    'rule del priority 100 from 198.18.80.0/24 table 100',
    'rule del priority 101 fwmark 7 table 100',
    'route del 198.18.90.0/24 table 100',
    'route del 2001:db8:90::/64 table 100',
  ], 'rules go before routes, both before links');
});

t.test('a changed route is replaced in place; a changed rule is deleted and added', async (t) => {
  const there = observed({ routes: [{ family: 4, to: '198.18.90.0/24', via: '198.18.80.1', table: 100, metric: 0 }], rules: [{ family: 4, priority: 100, from: '198.18.80.0/24', table: 100 }] });
  const applied = { ...emptyApplied('c1', netns), routes: [toBlue], rules: [fromBlue] };
  const p = plan(input({ routes: [{ ...toBlue, via: '198.18.80.254' }], rules: [{ ...fromBlue, table: 200 }] }, { observed: there, applied }));
  t.same(p.steps.map((s) => [s.line, undoLine(s)]), [
    ['rule del priority 100 from 198.18.80.0/24 table 100', 'rule add priority 100 from 198.18.80.0/24 table 100'],
    ['route replace 198.18.90.0/24 via 198.18.80.254 table 100', 'route replace 198.18.90.0/24 via 198.18.80.1 table 100'],
    ['rule add priority 100 from 198.18.80.0/24 table 200', 'rule del priority 100 from 198.18.80.0/24 table 200'],
  ]);
});

t.test("routes and rules podnet did not add are not taken over; a route's interface must exist", async (t) => {
  const theirs = observed({ routes: [{ family: 4, to: '198.18.90.0/24', dev: 'eth0', table: 100, metric: 0 }], rules: [{ family: 4, priority: 100, table: 50 }] });
  const p = plan(input({ routes: [toBlue, { family: 4, to: '198.18.91.0/24', dev: 'net9', table: 100 }], rules: [fromBlue] }, { observed: theirs }));
  t.same(p.steps, []);
  t.match(p.problems, [
    { reason: 'the pod already has a route to 198.18.90.0/24 in table 100 that podnet did not add' },
    { field: 'routes.dev', reason: 'the pod has no interface net9' },
    { reason: 'the pod already has an IPv4 rule at priority 100 that podnet did not add' },
  ]);
  t.same(p.next.routes, []);
});

t.test('sysctls: set, the first original kept, restored when no longer asked', async (t) => {
  const forward = { name: 'net.ipv4.ip_forward', path: 'net/ipv4/conf/all/forwarding', value: '1' };
  const p = plan(input({ sysctls: [forward] }, { observed: observed({ sysctls: new Map([['net/ipv4/conf/all/forwarding', '0']]) }) }));
  t.same(p.steps.map((s) => [s.tool, s.line, undoLine(s)]), [['sysctl', 'net/ipv4/conf/all/forwarding=1', 'net/ipv4/conf/all/forwarding=0']]);
  t.same(p.next.sysctls, [{ path: 'net/ipv4/conf/all/forwarding', value: '1', original: '0' }]);
  const set = observed({ sysctls: new Map([['net/ipv4/conf/all/forwarding', '1']]) });
  t.same(plan(input({ sysctls: [forward] }, { observed: set, applied: p.next })).steps, []);
  t.same(plan(input({}, { observed: set, applied: p.next })).steps.map((s) => s.line), ['net/ipv4/conf/all/forwarding=0']);
  // An older podnet kept ip_forward's original under its own spelling: the same knob, the same original.
  const older = { ...p.next, sysctls: [{ path: 'net/ipv4/ip_forward', value: '1', original: '0' }] };
  t.same(plan(input({ sysctls: [forward] }, { observed: set, applied: older })).steps, [], 'nothing to do for the other spelling');
  t.same(plan(input({ sysctls: [forward] }, { observed: set, applied: older })).next.sysctls, [{ path: 'net/ipv4/conf/all/forwarding', value: '1', original: '0' }], 'its original kept');

  const perNet1 = { name: 'net.ipv4.conf.net1.rp_filter', path: 'net/ipv4/conf/net1/rp_filter', value: '0' };
  const waiting = plan(input({ attachments: [blue], sysctls: [perNet1] }, { observed: withBridge }));
  t.ok(waiting.deferred, "a key of an interface this pass makes waits for the next pass");
  t.same(waiting.problems, []);
  const missing = plan(input({ sysctls: [{ ...perNet1, name: 'net.ipv4.conf.net7.rp_filter', path: 'net/ipv4/conf/net7/rp_filter' }] }));
  t.match(missing.problems, [{ reason: "the pod's network namespace has no sysctl net.ipv4.conf.net7.rp_filter" }]);
});

t.test('an attachment that cannot be done now stays recorded: its address is not released, nor its interface disowned', async (t) => {
  const macvlanApplied = { ...emptyApplied('c1', netns), attachments: [{ interface: 'net1', network: 'blue', kind: 'macvlan' as const, addresses: ['198.18.80.2/24'] }] };
  const there = observed({ pod: new Map([link('eth0'), link('net1')]) });
  const mv = { ...blue, link: { kind: 'macvlan' as const, parent: 'eth0', mode: 'bridge' } };
  const limited = plan(input({ attachments: [{ ...mv, bandwidth: { ingressRate: 8000, ingressBurst: 12000 } }] }, { observed: there, applied: macvlanApplied }));
  t.same(limited.next.attachments, [{ ...macvlanApplied.attachments[0], made: linkDigest(mv.link) }], "kept, its older podnet's record given the digest of the link as it is");
  const noParent = plan(input({ attachments: [{ ...mv, link: { ...mv.link, parent: 'ens9' } }] }, { observed: there, applied: macvlanApplied }));
  t.same(noParent.next.attachments, macvlanApplied.attachments);
  t.same(noParent.steps, []);
});

t.test('tuning waits for an interface only when this pass makes it, not for one it cannot make', async (t) => {
  const p = plan(input({ attachments: [{ ...blue, link: { kind: 'macvlan', parent: 'ens9', mode: 'bridge' } }], tuning: [{ interface: 'net1', settings: { mtu: 1300 } }] }));
  t.notOk(p.deferred);
  t.match(p.problems, [{ reason: 'the host has no interface ens9' }, { reason: 'the pod has no interface net1' }]);
});

/** What every port's nft line starts with: the table and its sets, put where they are missing. */
const tableAndSets = `${portSecurityRuleset().filter((l) => l.startsWith('add table') || l.startsWith('add set')).join('; ')}; `;

t.test('port security: the port admits its pod\'s MAC and addresses before the veth exists, and follows what the pod is', async (t) => {
  const secure = { ...blue, link: { ...blue.link, portSecurity: true } as ResolvedAttachment['link'], addresses: ['198.18.80.2/24', '2001:db8:80::2/64'] };
  const secured = { mac: podMac, addresses: ['198.18.80.2', '2001:db8:80::2'] };
  const withTable = { ...withBridge, securedPorts: new Set<string>() };
  const fresh = plan(input({ attachments: [secure] }, { observed: withTable }));
  t.same(lines(fresh).slice(0, 2), [
    ['host', 'nft', `${tableAndSets}add element bridge podnet macs { pnv0123456789 . ${podMac} }; add element bridge podnet ndll { pnv0123456789 . 0x023f8e07a515 }; add element bridge podnet addr4 { pnv0123456789 . ${podMac} . 198.18.80.2 }; add element bridge podnet addr6 { pnv0123456789 . ${podMac} . 2001:db8:80::2 }; add element bridge podnet addr6 { pnv0123456789 . ${podMac} . fe80::3f:8eff:fe07:a515 }; add element bridge podnet nd6 { pnv0123456789 . ${podMac} . 0x20010db8008000000000000000000002 }; add element bridge podnet nd6 { pnv0123456789 . ${podMac} . 0xfe80000000000000003f8efffe07a515 }; add element bridge podnet ports { pnv0123456789 }`],
    ['host', 'ip', `link add name pnv0123456789 mtu 1400 master pn-blue up type veth peer name net1 address ${podMac} mtu 1400 netns /run/netns/pod-a`],
  ], 'its entries first, in one transaction, then the veth with the MAC they admit');
  t.same(fresh.steps[0]?.undo, { where: 'host', action: 'port-release', port: 'pnv0123456789', secured });
  const podLines = fresh.steps.filter((s) => s.where !== 'host').map((s) => s.line);
  t.ok(podLines.indexOf('link set dev net1 addrgenmode eui64') < podLines.indexOf('link set dev net1 up'), 'its link-local address from its MAC, set before it is up');
  t.same(fresh.next.attachments[0]?.portSecurity, secured);

  const applied = fresh.next;
  const inPlace = observed({ pod: new Map([link('eth0'), link('net1', { mtu: 1400, mac: podMac, addresses: secure.addresses })]), host: attachedObserved.host, securedPorts: new Set(['pnv0123456789']) });
  t.same(plan(input({ attachments: [secure] }, { observed: inPlace, applied })).steps, [], 'in place: nothing to do');
  const tableGone = { ...inPlace, securedPorts: new Set<string>() };
  const putBack = plan(input({ attachments: [secure] }, { observed: tableGone, applied }));
  t.same(putBack.steps.map((s) => s.tool), ['nft'], 'entries gone from the table (flushed by hand): put back');
  t.equal(putBack.steps[0]?.undo, undefined, 'and not taken out again if the pass fails: that would open a port that was secured');

  const notWhole = plan(input({ attachments: [secure] }, { observed: withBridge }));
  t.same(notWhole.steps, [], 'a table that does not read whole (nft could not put it): no veth, no entries');
  t.match(notWhole.problems, [{ document: 'Network blue', field: 'spec.bridge.portSecurity', reason: "port security cannot secure the port of net1 on this node: podnet's table (bridge podnet) is not whole" }], 'and the pod is told why');
  t.equal(notWhole.unavailable, notWhole.problems[0]?.reason, 'which the sandbox fails with');
  const noNft = plan(input({ attachments: [secure] }, { observed: { ...withBridge, portSecurityUnavailable: 'nft (Debian package nftables) is not installed on this node' } }));
  t.equal(noNft.unavailable, 'port security cannot secure the port of net1 on this node: nft (Debian package nftables) is not installed on this node', 'why the table is not there, when the pass knows');
  const notWholeApplied = plan(input({ attachments: [secure] }, { observed: { ...inPlace, securedPorts: undefined }, applied }));
  t.same(notWholeApplied.steps, [], 'an attachment made before is left as it is');
  t.same(notWholeApplied.next.attachments, applied.attachments, 'and kept recorded');
  t.match(notWholeApplied.unavailable, /^port security cannot secure the port of net1/, 'and its sandbox fails all the same: podnet cannot tell its port is filtered');
  t.equal(plan(input({ attachments: [secure] }, { observed: inPlace, applied })).unavailable, undefined, 'a whole table lacks nothing');

  const moved = plan(input({ attachments: [{ ...secure, addresses: ['198.18.80.9/24'] }] }, { observed: inPlace, applied }));
  t.same(moved.steps.map((s) => s.tool).slice(0, 2), ['nft', 'nft'], 'a new address: the old entries out and the new in, one batch, before the address changes');
  t.match(moved.steps[0]?.line, /delete element bridge podnet addr4 \{ pnv0123456789 \. 02:3f:8e:07:a5:15 \. 198\.18\.80\.2 \}/);
  t.match(moved.steps[1]?.line, /add element bridge podnet addr4 \{ pnv0123456789 \. 02:3f:8e:07:a5:15 \. 198\.18\.80\.9 \}/);
  t.same(
    moved.steps.slice(0, 2).map((s) => s.undo?.action),
    ['port-secure', 'port-release'],
    'taken back (a later step fails), the new entries go and the old come back, last first: a secured port never ends up open',
  );
  t.same(moved.steps[0]?.undo, { where: 'host', action: 'port-secure', port: 'pnv0123456789', secured });

  const tuned = plan(input({ attachments: [secure], tuning: [{ interface: 'net1', settings: { mac: '02:00:00:00:00:AB' } }] }, { observed: inPlace, applied }));
  t.same(tuned.next.attachments[0]?.portSecurity?.mac, '02:00:00:00:00:ab', "a MAC a config asks is the one the port admits");
  t.same(tuned.next.attachments[0]?.mac, podMac, 'and the one podnet gave it is kept, for when the config goes');

  const madeTuned = plan(input({ attachments: [secure], tuning: [{ interface: 'net1', settings: { mac: '02:00:00:00:00:ab' } }] }, { observed: withTable }));
  t.match(madeTuned.steps.find((s) => s.line.startsWith('link add'))?.line, /peer name net1 address 02:00:00:00:00:ab /, 'made with the MAC a config asks: its link-local address is that MAC\'s');
  t.same(madeTuned.next.tuning, [{ interface: 'net1', original: { mac: podMac } }], 'and its original is the MAC podnet gives, put back when the config goes');

  const opened = plan(input({ attachments: [blue] }, { observed: inPlace, applied }));
  t.match(lines(opened), [['host', 'nft', /^add table .*; delete element bridge podnet ports \{ pnv0123456789 \}/]], 'turned off: the entries go');
  t.equal(opened.next.attachments[0]?.portSecurity, undefined);
  t.match(plan(input({}, { observed: inPlace, applied })).steps.map((s) => s.line), [/^link del dev pnv0123456789$/, /delete element bridge podnet ports \{ pnv0123456789 \}/], 'taken back: the link and its entries');
});

t.test('each step names the document and field that asked for it, when the desired state says', async (t) => {
  const route = { family: 4 as const, to: '198.18.9.0/24', dev: 'eth0', table: 100, metric: 0 };
  const origins = new Map([
    ['route 4 100 198.18.9.0/24 0', 'PodNetworkConfig ns/r spec.routes[0]'],
    ['attach net1', 'PodNetworkConfig ns/a spec.attachments[0]'],
    ['tune eth0', 'PodNetworkConfig ns/t spec.interfaces[0]'],
    ['sysctl net/ipv4/conf/all/forwarding', 'PodNetworkConfig ns/s spec.sysctls[0]'],
  ]);
  const p = plan(
    input(
      { attachments: [blue], tuning: [{ interface: 'eth0', settings: { mtu: 1400 } }], routes: [route], sysctls: [{ name: 'net.ipv4.ip_forward', path: 'net/ipv4/conf/all/forwarding', value: '1' }] },
      { observed: observed({ ...withBridge, sysctls: new Map([['net/ipv4/conf/all/forwarding', '0']]) }), origins },
    ),
  );
  const causeOf = (pattern: RegExp) => p.steps.find((s) => pattern.test(s.line))?.cause;
  t.equal(causeOf(/^link add name pnv/), 'PodNetworkConfig ns/a spec.attachments[0]');
  t.equal(causeOf(/^addr add 198\.18\.80\.2/), 'PodNetworkConfig ns/a spec.attachments[0]', "the attachment's address too");
  t.equal(causeOf(/^link set dev eth0 mtu 1400/), 'PodNetworkConfig ns/t spec.interfaces[0]');
  t.equal(causeOf(/^route add 198\.18\.9\.0\/24/), 'PodNetworkConfig ns/r spec.routes[0]');
  t.equal(causeOf(/^net\/ipv4\/conf\/all\/forwarding=1/), 'PodNetworkConfig ns/s spec.sysctls[0]');
});

t.test('VRFs: made up with their table; an interface placed in one gets its IPv6 addresses back, and podnet\'s routes by it are added again', async (t) => {
  const dual = { ...blue, addresses: ['198.18.80.2/24', '2001:db8:80::2/64'] };
  const seen = observed({
    pod: new Map([link('eth0'), link('net1', { mtu: 1400, mac: podMac, addresses: ['198.18.80.2/24', '2001:db8:80::2/64'] })]),
    host: attachedObserved.host,
    routes: [
      { family: 4, to: '198.18.80.0/24', table: 254, metric: 0, dev: 'net1', kernel: true },
      { family: 4, to: '198.18.99.0/24', table: 254, metric: 0, dev: 'net1' },
    ],
  });
  // A route of the main table by net1 alone (a gateway in the main table would not be reached by a VRF's port).
  const route = { family: 4 as const, to: '198.18.99.0/24', table: 254, dev: 'net1' };
  const before = plan(input({ attachments: [dual], routes: [route] }, { observed: seen }));
  const p = plan(input({ attachments: [dual], vrfs: [{ name: 'red', table: 100 }], tuning: [{ interface: 'net1', settings: { vrf: 'red' } }], routes: [route] }, { observed: seen, applied: before.next }));
  t.same(lines(p), [
    ['pod', 'ip', 'link add name red up type vrf table 100'],
    ['pod', 'ip', 'addr replace 2001:db8:80::2/64 dev net1'],
    ['pod', 'ip', 'link set dev net1 master red'],
    ['pod', 'ip', 'addr replace 2001:db8:80::2/64 dev net1'],
    ['pod', 'ip', 'route add 198.18.99.0/24 dev net1 table 254'],
  ]);
  // Undone, the move is taken back before the address it flushed is put back.
  t.same(p.steps.map(undoLine), ['link del dev red', 'addr replace 2001:db8:80::2/64 dev net1', 'link set dev net1 nomaster', undefined, 'route del 198.18.99.0/24 table 254']);
  t.same(p.next.vrfs, [{ name: 'red', table: 100 }]);
  t.same(p.next.tuning, [{ interface: 'net1', original: { vrf: '' } }], 'net1 was in no VRF, and dropped no route of anyone else');

  // Made in the same pass as net1: placed after it is, its IPv6 address from its Network given again.
  const fresh = plan(input({ attachments: [dual], vrfs: [{ name: 'red', table: 100 }], tuning: [{ interface: 'net1', settings: { vrf: 'red' } }] }, { observed: attachedObserved }));
  t.ok(lines(fresh).findIndex((l) => l[2] === 'link set dev net1 master red') > lines(fresh).findIndex((l) => l[2] === 'addr add 2001:db8:80::2/64 dev net1'), 'placed after its addresses are added');
  t.ok(lines(fresh).some((l) => l[2] === 'addr replace 2001:db8:80::2/64 dev net1'), 'and its IPv6 address put back');
});

t.test("VRFs: eth0 leaves the main table's routes of its primary behind; they are kept and put back as it leaves, before the VRF goes", async (t) => {
  const eth0Routes = [
    { family: 4 as const, to: '0.0.0.0/0', table: 254, metric: 0, via: '169.254.1.1', dev: 'eth0' },
    { family: 4 as const, to: '169.254.1.1/32', table: 254, metric: 0, dev: 'eth0' },
    { family: 4 as const, to: '10.88.0.0/24', table: 254, metric: 0, dev: 'eth0', kernel: true },
    { family: 6 as const, to: '::/0', table: 254, metric: 1024, via: 'fe80::1', dev: 'eth0' },
  ];
  const inMain = observed({ pod: new Map([link('eth0', { addresses: ['10.88.0.5/24', '2001:db8:88::5/64'] })]), routes: eth0Routes });
  const placed = plan(input({ vrfs: [{ name: 'mgmt', table: 10 }], tuning: [{ interface: 'eth0', settings: { vrf: 'mgmt' } }] }, { observed: inMain }));
  t.same(lines(placed), [
    ['pod', 'ip', 'link add name mgmt up type vrf table 10'],
    // Change nothing: their undo puts back what the move drops, should the pass be undone.
    ['pod', 'ip', 'route replace 0.0.0.0/0 via 169.254.1.1 dev eth0 table 254 metric 0'],
    ['pod', 'ip', 'route replace 169.254.1.1/32 dev eth0 table 254 metric 0'],
    ['pod', 'ip', 'route replace ::/0 via fe80::1 dev eth0 table 254 metric 1024'],
    ['pod', 'ip', 'addr replace 2001:db8:88::5/64 dev eth0'],
    ['pod', 'ip', 'link set dev eth0 master mgmt'],
    ['pod', 'ip', 'addr replace 2001:db8:88::5/64 dev eth0'],
  ]);
  t.same(placed.steps.map(undoLine).slice(1, 6), [...lines(placed).slice(1, 5).map((l) => l[2]), 'link set dev eth0 nomaster'], 'undone, eth0 leaves the VRF and gets its routes and address back');
  t.same(placed.next.tuning, [{ interface: 'eth0', original: { vrf: '' }, dropped: [eth0Routes[0], eth0Routes[1], eth0Routes[3]] }], 'the routes that were not the kernel\'s are kept');

  const inVrf = observed({ pod: new Map([link('eth0', { master: 'mgmt', addresses: ['10.88.0.5/24', '2001:db8:88::5/64'] }), link('mgmt', { kind: 'vrf', vrfTable: 10 })]) });
  const again = plan(input({ vrfs: [{ name: 'mgmt', table: 10 }], tuning: [{ interface: 'eth0', settings: { vrf: 'mgmt' } }] }, { observed: inVrf, applied: placed.next }));
  t.same([again.steps, again.next.tuning], [[], placed.next.tuning], 'in place: nothing to do, the routes still kept');

  const taken = plan(input({}, { observed: inVrf, applied: placed.next }));
  t.same(lines(taken), [
    ['pod', 'ip', 'addr replace 2001:db8:88::5/64 dev eth0'],
    ['pod', 'ip', 'link set dev eth0 nomaster'],
    ['pod', 'ip', 'addr replace 2001:db8:88::5/64 dev eth0'],
    ['pod', 'ip', 'route replace 169.254.1.1/32 dev eth0 table 254 metric 0'],
    ['pod', 'ip', 'route replace 0.0.0.0/0 via 169.254.1.1 dev eth0 table 254 metric 0'],
    ['pod', 'ip', 'route replace ::/0 via fe80::1 dev eth0 table 254 metric 1024'],
    ['pod', 'ip', 'link del dev mgmt'],
  ], 'out of the VRF, its routes back (the gateway\'s own route first), then the VRF deleted');
  t.same(taken.next.tuning, []);
  t.equal(taken.next.vrfs, undefined);

  // Let go some other way (the VRF deleted by hand), then taken back: the routes still go back.
  const released = observed({ pod: new Map([link('eth0', { addresses: ['10.88.0.5/24'] })]) });
  const after = plan(input({}, { observed: released, applied: placed.next }));
  t.same(lines(after).map((l) => l[2]), [
    'route replace 169.254.1.1/32 dev eth0 table 254 metric 0',
    'route replace 0.0.0.0/0 via 169.254.1.1 dev eth0 table 254 metric 0',
    'route replace ::/0 via fe80::1 dev eth0 table 254 metric 1024',
  ]);
});

t.test('VRFs: one deleted by hand is made again and its interfaces placed again; a new table makes it again; a name podnet did not make is refused', async (t) => {
  const applied: AppliedState = { ...emptyApplied('c1', netns), vrfs: [{ name: 'red', table: 100 }], tuning: [{ interface: 'eth0', original: { vrf: '' } }] };
  const want = { vrfs: [{ name: 'red', table: 100 }], tuning: [{ interface: 'eth0', settings: { vrf: 'red' } }] };
  const gone = plan(input(want, { observed: observed(), applied }));
  t.same(lines(gone), [['pod', 'ip', 'link add name red up type vrf table 100'], ['pod', 'ip', 'link set dev eth0 master red']]);

  const inRed = observed({ pod: new Map([link('eth0', { master: 'red' }), link('red', { kind: 'vrf', vrfTable: 100 })]) });
  const moved = plan(input({ ...want, vrfs: [{ name: 'red', table: 200 }] }, { observed: inRed, applied }));
  t.same(lines(moved), [['pod', 'ip', 'link del dev red'], ['pod', 'ip', 'link add name red up type vrf table 200'], ['pod', 'ip', 'link set dev eth0 master red']], 'a VRF made again lets eth0 go: it is placed again');

  const foreign = observed({ pod: new Map([link('eth0'), link('red', { kind: 'vrf', vrfTable: 100 })]) });
  const refused = plan(input(want, { observed: foreign }));
  t.same(lines(refused), []);
  t.match(refused.problems, [
    { document: 'VRF red', field: 'vrfs', reason: 'the pod has an interface red that podnet did not make' },
    { document: 'pod interface eth0', field: 'interfaces.vrf', reason: 'the pod has no VRF red: podnet could not make it' },
  ]);
  const port = observed({ pod: new Map([link('eth0', { master: 'br0' }), link('br0', { kind: 'bridge' })]) });
  t.match(plan(input(want, { observed: port })).problems, [{ reason: 'eth0 is a port of br0, which is not a VRF: podnet does not take it out' }]);
});

t.test("VRFs: a table a VRF of someone else's has is refused; a name an attachment frees in this pass waits for the next; a placement that fails names only who asked it", async (t) => {
  const foreign = observed({ pod: new Map([link('eth0'), link('blue', { kind: 'vrf', vrfTable: 100 })]) });
  const shared = plan(input({ vrfs: [{ name: 'red', table: 100 }] }, { observed: foreign }));
  t.same(lines(shared), []);
  t.match(shared.problems, [{ document: 'VRF red', reason: "the pod's VRF blue, which podnet did not make, has table 100" }]);

  const renamed = plan(input({ vrfs: [{ name: 'net1', table: 100 }] }, { observed: attachedObserved, applied: attachedApplied }));
  t.same([renamed.problems, renamed.deferred], [[], true], 'net1 is deleted in this pass; the VRF is made in the next');
  t.notOk(lines(renamed).some((l) => String(l[2]).includes('type vrf')));

  const origins = new Map([['tune eth0', 'PodNetworkConfig ns/mtu spec.interfaces[0], PodNetworkConfig ns/vrf spec.interfaces[0]'], ['vrf-of eth0', 'PodNetworkConfig ns/vrf spec.interfaces[0]']]);
  const port = observed({ pod: new Map([link('eth0', { master: 'br0' }), link('br0', { kind: 'bridge' })]) });
  const refused = plan(input({ vrfs: [{ name: 'red', table: 100 }], tuning: [{ interface: 'eth0', settings: { mtu: 1400, vrf: 'red' } }] }, { observed: port, origins }));
  t.same(refused.refused.map((r) => r.cause), ['PodNetworkConfig ns/vrf spec.interfaces[0]'], 'the config that set the MTU is not refused for it');
  t.ok(lines(refused).some((l) => l[2] === 'link set dev eth0 mtu 1400'), 'and its MTU is set');
});

t.test("a Network's changed link spec makes its pods' links again, with their tuning and routes; a new MTU is set in place", async (t) => {
  const old = { kind: 'macvlan' as const, parent: 'eth0', mode: 'bridge' as const };
  const mv = { ...blue, link: { ...old, mode: 'private' as const } };
  const route = { family: 4 as const, to: '198.18.99.0/24', table: 100, dev: 'net1' };
  const applied: AppliedState = {
    ...emptyApplied('c1', netns),
    attachments: [{ interface: 'net1', network: 'blue', kind: 'macvlan', addresses: ['198.18.80.2/24'], made: linkDigest(old) }],
    tuning: [{ interface: 'net1', original: { mtu: 1400 } }],
    routes: [route],
  };
  const seen = observed({ pod: new Map([link('eth0'), link('net1', { mtu: 1300, addresses: ['198.18.80.2/24'] })]), routes: [{ ...route, metric: 0 }] });
  const p = plan(input({ attachments: [mv], tuning: [{ interface: 'net1', settings: { mtu: 1300 } }], routes: [route] }, { observed: seen, applied }));
  const beside = hostInterfaceName('c1', 'net1', 'pnt');
  t.same(lines(p), [
    ['host', 'ip', `link add link eth0 name ${beside} netns /run/netns/pod-a mtu 1400 type macvlan mode private`],
    ['pod', 'ip', 'link del dev net1'],
    ['pod', 'ip', `link set dev ${beside} name net1`],
    ['pod', 'ip', 'link set dev net1 up'],
    ['pod', 'ip', 'addr add 198.18.80.2/24 dev net1'],
    ['pod', 'ip', 'link set dev net1 mtu 1300'],
    ['pod', 'ip', 'route add 198.18.99.0/24 dev net1 table 100'],
  ], 'made again in private mode; its MTU tuned and its route added again on the new link');
  t.equal(p.next.attachments[0]?.made, linkDigest(mv.link));
  t.same(
    p.steps.slice(0, 3).map((step) => step.undo),
    [{ where: { netns }, action: 'link-del', dev: beside }, undefined, { where: { netns }, action: 'link-del', dev: 'net1' }],
    'made beside the old link, which goes only once the kernel made the new one; undone, the new one goes under whichever name it has',
  );
  const leftBeside = plan(input({ attachments: [mv] }, { observed: observed({ ...seen, pod: new Map([...seen.pod, link(beside)]) }), applied }));
  t.same(lines(leftBeside).filter((l) => l[2]!.includes(beside)).map((l) => l[2]!.split(' netns')[0]), [`link del dev ${beside}`, `link add link eth0 name ${beside}`, `link set dev ${beside} name net1`], 'one an undo could not delete goes first');
  const keptWithLeft = plan(input({ attachments: [{ ...mv, link: old }] }, { observed: observed({ ...seen, pod: new Map([...seen.pod, link(beside)]) }), applied }));
  t.same(lines(keptWithLeft).filter((l) => l[2]!.includes(beside)), [['pod', 'ip', `link del dev ${beside}`]], 'seen while its link is kept: deleted');
  const takenWithLeft = plan(input({}, { observed: observed({ ...seen, pod: new Map([...seen.pod, link(beside)]) }), applied }));
  t.same(lines(takenWithLeft).filter((l) => l[2]!.includes('link del')), [['pod', 'ip', 'link del dev net1'], ['pod', 'ip', `link del dev ${beside}`]], 'and when the attachment is taken back');
  for (const [what, to, from] of [['to passthru', 'passthru', 'bridge'], ['from passthru', 'private', 'passthru']] as const) {
    const pass = plan(input({ attachments: [{ ...mv, link: { ...old, mode: to } }], tuning: [{ interface: 'net1', settings: { mtu: 1300 } }], routes: [route] }, { observed: observed({ ...seen, pod: new Map([link('eth0'), link('net1', { mtu: 1300, addresses: ['198.18.80.2/24'], mode: from })]) }), applied }));
    t.same(lines(pass).slice(0, 2).map((l) => l[2]!.split(' netns')[0]), ['link del dev net1', 'link add link eth0 name net1'], `a macvlan ${what}: the old one goes first (the kernel takes no macvlan beside a passthru one)`);
  }
  const vxlan = { kind: 'vxlan' as const, vni: 42, remote: '198.18.100.2', port: 4789 };
  const held = plan(input({ attachments: [{ ...blue, link: { ...vxlan, remote: '198.18.100.3' } }] }, { observed: observed({ pod: new Map([link('eth0'), link('net1', { mtu: 1400, addresses: ['198.18.80.2/24'] })]) }), applied: { ...emptyApplied('c1', netns), attachments: [{ interface: 'net1', network: 'blue', kind: 'vxlan', addresses: ['198.18.80.2/24'], made: linkDigest(vxlan) }] } }));
  t.same(lines(held).slice(0, 2), [
    ['pod', 'ip', 'link del dev net1'],
    ['host', 'ip', 'link add name net1 netns /run/netns/pod-a mtu 1400 type vxlan id 42 remote 198.18.100.3 dstport 4789'],
  ], 'a vxlan whose VNI and port the host socket of the old link holds: the old one goes first');

  const same = plan(input({ attachments: [{ ...mv, link: old, mtu: 1500 }] }, { observed: observed({ pod: new Map([link('eth0'), link('net1', { mtu: 1400, addresses: ['198.18.80.2/24'] })]) }), applied: { ...applied, tuning: [], routes: [] } }));
  t.same(lines(same), [['pod', 'ip', 'link set dev net1 mtu 1500']], 'the same spec: kept; the MTU changed in place');
  t.same(same.steps[0]?.undo, { where: { netns }, action: 'link-set', dev: 'net1', setting: 'mtu', value: 1400 });

  const gre = { ...blue, link: { kind: 'gre' as const, remote: '198.18.100.2', key: 8 } };
  const greApplied: AppliedState = { ...emptyApplied('c1', netns), attachments: [{ interface: 'net1', network: 'blue', kind: 'gre', addresses: ['198.18.80.2/24'], made: linkDigest({ ...gre.link, key: 7 }) }] };
  const tmp = hostInterfaceName('c1', 'net1', 'pnt');
  const greSeen = observed({ pod: new Map([link('eth0'), link('net1', { mtu: 1400, addresses: ['198.18.80.2/24'] })]) });
  t.same(lines(plan(input({ attachments: [gre] }, { observed: greSeen, applied: greApplied }))).slice(0, 4), [
    ['pod', 'ip', 'link del dev net1'],
    ['host', 'ip', `link add name ${tmp} mtu 1400 type gre remote 198.18.100.2 key 8`],
    ['host', 'ip', `link set dev ${tmp} alias podnet:c1/net1`],
    ['host', 'ip', `link set dev ${tmp} netns ${netns} name net1`],
  ], "a gre key changed: the old link goes first (it stays in the host's tunnel table, where the same ends and key would be refused)");
  t.equal(plan(input({ attachments: [{ ...gre, remote: '198.18.100.2' }] })).next.attachments[0]?.remote, '198.18.100.2', 'a remote the attachment chose is recorded: what holds its endpoint on the node');
  const theirs = observed({ ...greSeen, host: new Map([link('eth0'), link(tmp, { alias: 'uplink' })]) });
  const blocked = plan(input({ attachments: [gre] }, { observed: theirs, applied: greApplied }));
  t.same([lines(blocked), blocked.next.attachments], [[], greApplied.attachments], "a pnt name someone else holds: the old link stays, with its old digest");
});

t.test('wireguard: made into the pod, then given its port, key file and peers by wg; given again only what changes', async (t) => {
  const key = 'xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=';
  const peer = { publicKey: key, endpoint: { address: '198.18.102.2', port: 51820 }, allowedIPs: ['10.9.0.2/32'] };
  const wg: ResolvedAttachment = { ...blue, interface: 'wg0', link: { kind: 'wireguard', listenPort: 51820 }, mtu: 1420, addresses: ['10.9.0.1/24'], wireguard: { privateKeyFile: '/var/lib/podnet/wireguard/c1+wg0.key', publicKey: 'pub', peers: [peer], remoteRanges: ['198.18.102.0/24'] } };
  const made = plan(input({ attachments: [wg] }));
  const table = 'inet pnwf3305300a9';
  const guard = `table ${table}; delete table ${table}; table ${table} { chain input { type filter hook input priority filter; policy accept; counter comment ${guardFingerprint(51820, ['198.18.102.0/24'])}; udp dport 51820 ip saddr != { 198.18.102.0/24 } drop; meta nfproto ipv6 udp dport 51820 drop; }; chain output { type filter hook output priority filter; policy accept; udp sport 51820 ip daddr != { 198.18.102.0/24 } drop; meta nfproto ipv6 udp sport 51820 drop; }; }`;
  t.same(lines(made), [
    ['host', 'ip', `link add name wg0 netns ${netns} mtu 1420 type wireguard`],
    ['pod', 'ip', 'link set dev wg0 up'],
    ['pod', 'ip', 'addr add 10.9.0.1/24 dev wg0'],
    ['pod', 'wg', 'set wg0 listen-port 51820'],
    ['host', 'nft', guard],
    ['pod', 'wg', `set wg0 listen-port 51820 private-key /var/lib/podnet/wireguard/c1+wg0.key peer ${key} endpoint 198.18.102.2:51820 allowed-ips 10.9.0.2/32 persistent-keepalive 0`],
  ]);
  t.equal(undoLine(made.steps[4]!), `table ${table}; delete table ${table}`, 'the port claimed, then guarded before the interface has a key; undone, the guard deleted');
  t.equal(made.steps[5]?.undo, undefined, "made in this pass: the link's own undo takes wg's settings with it");
  const moved = plan(input({ attachments: [{ ...wg, link: { kind: 'wireguard', listenPort: 51871 } }] }, { observed: observed({ pod: new Map([link('eth0'), link('wg0', { mtu: 1420, addresses: ['10.9.0.1/24'] })]) }), applied: made.next }));
  const guardStep = moved.steps.find((step) => step.tool === 'nft')!;
  t.match(guardStep.line, /udp dport 51871/);
  t.equal(undoLine(guardStep), guard, "a new port makes the link again: undone, the old link's guard is written back, not deleted");
  const ranged = plan(input({ attachments: [{ ...wg, wireguard: { ...wg.wireguard!, remoteRanges: ['198.18.103.0/24', '2001:db8:103::/64'] } }] }, { observed: observed({ pod: new Map([link('eth0'), link('wg0', { mtu: 1420, addresses: ['10.9.0.1/24'] })]) }), applied: made.next }));
  t.same(lines(ranged).map((l) => l[1]), ['nft'], 'the ranges changed: the guard alone written again');
  t.match(lines(ranged)[0]![2], /ip saddr != \{ 198\.18\.103\.0\/24 \} drop; udp dport 51820 ip6 saddr != \{ 2001:db8:103::\/64 \} drop/);
  t.equal(undoLine(ranged.steps[0]!), guard, 'undone: written back as it was');
  const taken = plan(input({}, { observed: observed({ pod: new Map([link('eth0'), link('wg0')]) }), applied: made.next }));
  t.same(lines(taken), [['pod', 'ip', 'link del dev wg0'], ['host', 'nft', `table ${table}; delete table ${table}`]], 'taken back: the interface, then its guard');
  t.same(planGoneSandbox(made.next, new Map()).map((s) => s.line), [`table ${table}; delete table ${table}`], "a gone sandbox's guard goes too");
  t.same(made.next.attachments[0]?.wireguard, { publicKey: 'pub', listenPort: 51820, peers: [peer], remoteRanges: ['198.18.102.0/24'] }, 'recorded: its public key, what wg was given and what its guard admits, not its private key');
  const there = observed({ pod: new Map([link('eth0'), link('wg0', { mtu: 1420, addresses: ['10.9.0.1/24'] })]) });
  t.same(plan(input({ attachments: [wg] }, { observed: there, applied: made.next })).steps, [], 'as given: nothing');
  t.same(plan(input({ attachments: [wg] }, { observed: { ...there, guards: new Map([[table, guardFingerprint(51820, ['198.18.102.0/24'])]]) }, applied: made.next })).steps, [], 'its guard read there as written: nothing');
  for (const [what, fingerprint] of [['changed by hand (another port or ranges)', guardFingerprint(51820, ['0.0.0.0/0'])], ['not whole as written (a chain unhooked, flags)', undefined]] as const) {
    const changed = plan(input({ attachments: [wg] }, { observed: { ...there, guards: new Map([[table, fingerprint]]) }, applied: made.next }));
    t.same(lines(changed), [['host', 'nft', guard]], `its guard ${what}: written again, nothing else`);
  }
  const flushed = plan(input({ attachments: [wg] }, { observed: { ...there, guards: new Map() }, applied: made.next }));
  t.same(lines(flushed), [['host', 'nft', guard]], "its guard read gone (the node's ruleset flushed): written again, nothing else");
  const other = 'TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0=';
  const changed = plan(input({ attachments: [{ ...wg, wireguard: { ...wg.wireguard!, peers: [{ publicKey: other, allowedIPs: ['10.9.0.3/32'] }] } }] }, { observed: there, applied: made.next }));
  t.same(lines(changed), [['pod', 'wg', `set wg0 listen-port 51820 private-key /var/lib/podnet/wireguard/c1+wg0.key peer ${other} allowed-ips 10.9.0.3/32 persistent-keepalive 0 peer ${key} remove`]], 'a peer replaced: the new given, the old removed, the link kept');
  t.equal(undoLine(changed.steps[0]!), `set wg0 listen-port 51820 private-key /var/lib/podnet/wireguard/c1+wg0.key peer ${key} endpoint 198.18.102.2:51820 allowed-ips 10.9.0.2/32 persistent-keepalive 0 peer ${other} remove`, 'undone: the old peer back, the new one removed');
  const noEndpoint = plan(input({ attachments: [{ ...wg, wireguard: { ...wg.wireguard!, peers: [{ publicKey: key, allowedIPs: ['10.9.0.2/32'] }] } }] }, { observed: there, applied: made.next }));
  t.same(lines(noEndpoint).map((l) => l[2]), [
    `set wg0 listen-port 51820 private-key /var/lib/podnet/wireguard/c1+wg0.key peer ${key} remove`,
    `set wg0 listen-port 51820 private-key /var/lib/podnet/wireguard/c1+wg0.key peer ${key} allowed-ips 10.9.0.2/32 persistent-keepalive 0`,
  ], 'an endpoint no longer asked: the peer removed and given again (wg keeps an endpoint otherwise)');
});

t.test('wireguard: the interface read back; a peer, key or port changed by hand is set again, a roamed endpoint or a prefix written otherwise is not a change', async (t) => {
  const key = 'xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=';
  const other = 'TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0=';
  const peer = { publicKey: key, endpoint: { address: '198.18.102.2', port: 51820 }, allowedIPs: ['10.9.0.2/32', '2001:db8:0::5/64'] };
  const wg: ResolvedAttachment = { ...blue, interface: 'wg0', link: { kind: 'wireguard', listenPort: 51820 }, mtu: 1420, addresses: ['10.9.0.1/24'], wireguard: { privateKeyFile: '/var/lib/podnet/wireguard/c1+wg0.key', publicKey: 'pub', peers: [peer], remoteRanges: ['198.18.102.0/24'] } };
  const made = plan(input({ attachments: [wg] }));
  const there = observed({ pod: new Map([link('eth0'), link('wg0', { mtu: 1420, addresses: ['10.9.0.1/24'] })]) });
  const readBack = (seen: ObservedWireguard) => plan(input({ attachments: [wg] }, { observed: { ...there, wireguard: new Map([['wg0', seen]]) }, applied: made.next }));
  const asSet = { publicKey: 'pub', listenPort: 51820, peers: [{ publicKey: key, endpoint: { address: '198.18.102.9', port: 40000 }, allowedIPs: ['2001:db8::/64', '10.9.0.2/32'] }] };
  t.same(readBack(asSet).steps, [], "as set: nothing (the endpoint roamed where the peer last sent from; wg's form of the prefixes)");
  const setAgain = `set wg0 listen-port 51820 private-key /var/lib/podnet/wireguard/c1+wg0.key peer ${key} endpoint 198.18.102.2:51820 allowed-ips 10.9.0.2/32,2001:db8:0::5/64 persistent-keepalive 0`;
  const removed = readBack({ ...asSet, peers: [] });
  t.same(lines(removed), [['pod', 'wg', setAgain]], 'its peer removed by hand: given again');
  t.equal(undoLine(removed.steps[0]!), setAgain, "undone: as podnet had given it (a later pass would set it again anyway)");
  const added = readBack({ ...asSet, peers: [...asSet.peers, { publicKey: other, allowedIPs: ['0.0.0.0/0'] }] });
  t.same(lines(added), [['pod', 'wg', `${setAgain} peer ${other} remove`]], 'a peer added by hand: removed');
  t.same(lines(readBack({ ...asSet, peers: [{ ...asSet.peers[0]!, allowedIPs: ['0.0.0.0/0'] }] })), [['pod', 'wg', setAgain]], 'its allowed IPs changed by hand: given again');
  t.same(lines(readBack({ ...asSet, publicKey: 'another' })), [['pod', 'wg', setAgain]], 'another private key set by hand: its key file given again');
  t.same(lines(readBack({ ...asSet, listenPort: 40001 })), [['pod', 'wg', setAgain]], 'another port: its own again');
  t.same(plan(input({ attachments: [wg] }, { observed: there, applied: made.next })).steps, [], 'not read back (no wg on the node): nothing set again');
});

t.test("a Network's MTU in place: not above a parent's (told on the Network), not on a veth's ends; a remake keeps what the pod had; a kind changed is made anew at once", async (t) => {
  const old = { kind: 'macvlan' as const, parent: 'eth0', mode: 'bridge' as const };
  const applied: AppliedState = { ...emptyApplied('c1', netns), attachments: [{ interface: 'net1', network: 'blue', kind: 'macvlan', addresses: ['198.18.80.2/24'], made: linkDigest(old) }] };
  const seen = observed({ pod: new Map([link('eth0'), link('net1', { mtu: 1400, addresses: ['198.18.80.2/24'] })]), hostLinks: new Map([link('eth0', { mtu: 1500 })]) });
  const high = plan(input({ attachments: [{ ...blue, link: old, mtu: 9000 }] }, { observed: seen, applied }));
  t.same(lines(high), []);
  t.match(high.problems, [{ document: 'Network blue', field: 'spec.mtu', reason: '9000 is above the MTU of its parent eth0 (1500): net1 keeps 1400' }]);
  const bridged = plan(input({ attachments: [{ ...blue, mtu: 9000 }] }, { observed: attachedObserved, applied: attachedApplied }));
  t.notOk(lines(bridged).some((l) => String(l[2]).includes('mtu 9000')), "a veth's ends keep their MTU");

  const tuned: AppliedState = { ...applied, tuning: [{ interface: 'net1', original: { mtu: 1400, txqueuelen: 1000, promisc: false } }] };
  const remade = plan(input({ attachments: [{ ...blue, link: { ...old, mode: 'private' } }], tuning: [{ interface: 'net1', settings: { mtu: 1300 } }] }, { observed: seen, applied: tuned }));
  t.same(remade.next.tuning, [{ interface: 'net1', original: { mtu: 1400, txqueuelen: 1000, promisc: false } }], 'made again: what the pod had before podnet tuned it is still what is put back');

  const kindChanged = plan(input({ attachments: [{ ...blue, link: { kind: 'ipvlan', parent: 'eth0', mode: 'l2' } }] }, { observed: seen, applied }));
  t.same(kindChanged.problems, []);
  t.same(lines(kindChanged).slice(0, 2), [['pod', 'ip', 'link del dev net1'], ['host', 'ip', `link add link eth0 name net1 netns ${netns} mtu 1400 type ipvlan mode l2`]], 'the old link goes and the new one is made in the same pass');
});
