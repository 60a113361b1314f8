import t from 'tap';
import { PodnetError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { DelegatedConfig } from '../model/cni-config.ts';
import type { DesiredSandbox } from '../model/desired.ts';
import type { ObservedLink } from '../model/state.ts';
import type { NamespaceSight } from '../netns/probe.ts';
import type { AttachmentRecord, Network } from '../protocol/validate.ts';
import { fakeClock, fakeSight, MemoryDelegatedRecords, RecordingPlugins } from '../testing/fakes.ts';
import { DelegatedLifecycle, maxFailedDels, pluginTimePerPassMs, type DelegatedSandbox } from './lifecycle.ts';

const listOf = (name: string, cniVersion = '1.0.0'): DelegatedConfig => ({ name, cniVersion, plugins: [{ type: 'bridge', bridge: `br-${name}` }] });
const record: AttachmentRecord = {
  containerId: 'c1',
  ifname: 'eth0',
  network: 'k8s',
  netns: '/run/netns/pod-a',
  cniVersion: '1.0.0',
  createdAt: '2026-01-01T00:00:00Z',
  pod: { namespace: 'tenant-a', name: 'pod-a', uid: 'u-1' },
};
const cniNetwork = (name: string): Network => ({ apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'Network', metadata: { name }, spec: { type: 'cni', cni: { config: { cniVersion: '1.0.0', plugins: [{ type: 'bridge' }] } } } });

/** A sandbox asking for `configs` on net1, net2, ... through PodNetworkConfig tenant-a/cfg. */
function sandbox(configs: DelegatedConfig[], more: Partial<DelegatedSandbox> = {}): DelegatedSandbox {
  const desired = configs.map((config, i) => ({ interface: `net${i + 1}`, network: config.name, config }));
  const wanted: DesiredSandbox = {
    configs: ['PodNetworkConfig tenant-a/cfg'],
    attachments: desired.map((d, i) => ({ network: cniNetwork(d.network), interface: d.interface, from: 'PodNetworkConfig tenant-a/cfg', field: `spec.attachments[${i}]` })),
    vrfs: [],
    tuning: [],
    routes: [],
    rules: [],
    sysctls: [],
    macs: [],
    problems: [],
  };
  return { record, pod: 'tenant-a/pod-a', desired, wanted, tuned: new Set(), ...more };
}

function setup(opts: { links?: Map<string, ObservedLink> | 'unreadable'; sight?: Map<string, NamespaceSight>; recorded?: () => boolean } = {}) {
  const records = new MemoryDelegatedRecords();
  const plugins = new RecordingPlugins();
  const clock = fakeClock();
  const warnings: string[] = [];
  const log: Logger = { info: () => undefined, warn: (msg) => void warnings.push(msg), error: (msg) => void warnings.push(msg) };
  const lifecycle = new DelegatedLifecycle({
    records,
    plugins,
    sight: fakeSight(opts.sight ?? new Map()),
    podLinks: async () => {
      if (opts.links === 'unreadable') throw new Error('cannot enter the netns');
      return opts.links ?? new Map();
    },
    recorded: opts.recorded ?? (() => true),
    clock: clock.now,
    log,
  });
  return { records, plugins, clock, warnings, lifecycle };
}

t.test('ADD once for what is asked, with the pod in CNI_ARGS; nothing again while it is there; DEL once it is not asked', async (t) => {
  const { lifecycle, plugins, records } = setup();
  const first = await lifecycle.sync(sandbox([listOf('plugged')]), false);
  t.same(first, { changed: true, problems: [], takenBack: [], tried: [], spentMs: 0 });
  t.same(plugins.commands(), ['ADD plugged c1/net1']);
  t.equal(records.all()[0]!.args, 'IgnoreUnknown=1;K8S_POD_NAMESPACE=tenant-a;K8S_POD_NAME=pod-a;K8S_POD_INFRA_CONTAINER_ID=c1;K8S_POD_UID=u-1');
  t.same(lifecycle.attachedTo('c1').map((r) => r.result?.ips?.[0]?.address), ['198.18.9.2/24'], 'the result is on record');

  t.same(await lifecycle.sync(sandbox([listOf('plugged')]), false), { changed: false, problems: [], takenBack: [], tried: [], spentMs: 0 }, 'nothing to do the second time');
  t.same(plugins.commands(), ['ADD plugged c1/net1']);

  t.same(await lifecycle.sync(sandbox([]), false), { changed: true, problems: [], takenBack: [], tried: [], spentMs: 0 });
  t.same(plugins.commands(), ['ADD plugged c1/net1', 'DEL plugged c1/net1']);
  t.same(records.all(), [], 'the record goes with the DEL');
});

t.test('a changed config: DEL with the old one, ADD with the new', async (t) => {
  const { lifecycle, plugins, records } = setup();
  await lifecycle.sync(sandbox([listOf('plugged')]), false);
  const changed = { ...listOf('plugged'), plugins: [{ type: 'bridge', bridge: 'br-other' }] };
  await lifecycle.sync(sandbox([changed]), false);
  t.same(plugins.commands(), ['ADD plugged c1/net1', 'DEL plugged c1/net1', 'ADD plugged c1/net1']);
  t.same(records.all()[0]!.config, changed);
});

t.test('a failed ADD is taken back with DEL at once and is the problem of the document that asked, naming its field', async (t) => {
  const { lifecycle, plugins, records } = setup();
  plugins.answers.ADD = new PodnetError('IO_FAILURE', 'plugin bridge: failed to set bridge addr');
  const out = await lifecycle.sync(sandbox([listOf('plugged')]), false);
  t.equal(out.failed?.message, 'plugin bridge: failed to set bridge addr', 'the failure goes to the sandbox\'s retry');
  t.same(out.problems, [{ document: 'PodNetworkConfig tenant-a/cfg', field: 'spec.attachments[0]', reason: 'plugin bridge: failed to set bridge addr' }]);
  t.same(plugins.commands(), ['ADD plugged c1/net1', 'DEL plugged c1/net1']);
  t.same(records.all(), [], 'nothing is left on record');
});

t.test(`a failed ADD whose DEL fails ${maxFailedDels} times is held: told, never run again, until its config changes`, async (t) => {
  const { lifecycle, plugins, records } = setup();
  plugins.answers.ADD = new PodnetError('IO_FAILURE', 'ADD broke');
  plugins.answers.DEL = new PodnetError('IO_FAILURE', 'DEL broke');
  const outs = [];
  for (let pass = 0; pass < 6; pass++) outs.push(await lifecycle.sync(sandbox([listOf('plugged')]), pass % 2 === 1));
  t.same(plugins.commands(), ['ADD plugged c1/net1', 'DEL plugged c1/net1', 'DEL plugged c1/net1', 'DEL plugged c1/net1'], `one ADD, ${maxFailedDels} DELs, then nothing`);
  t.match(outs[1]!.problems[0]!.reason, /ADD broke; its DEL failed too \(DEL broke\) and is tried again/);
  t.ok(outs[1]!.failed, 'a DEL still to be tried again fails the sandbox (its retry)');
  t.same(outs[5]!.problems.map((p) => p.reason), [`ADD broke; its DEL failed ${maxFailedDels} times, so the Network's plugins are not run for this pod again until the Network's config changes`]);
  t.notOk(outs[5]!.failed, 'a held attachment does not keep the sandbox retrying');
  t.equal(records.all()[0]!.failedDels, maxFailedDels, 'the hold is on file (it survives a restart)');

  delete plugins.answers.ADD;
  delete plugins.answers.DEL;
  const changed = { ...listOf('plugged'), plugins: [{ type: 'bridge', bridge: 'br-fixed' }] };
  const fixed = await lifecycle.sync(sandbox([changed]), false);
  t.same(fixed.problems, []);
  t.same(plugins.commands().slice(4), ['ADD plugged c1/net1'], 'the held record goes without a DEL; the new config is run once');
});

t.test('a hold is the pod\'s and the Network\'s: renaming the attachment runs no plugin again, and the hold stays until the Network is no longer asked', async (t) => {
  const { lifecycle, plugins, records } = setup();
  plugins.answers.ADD = new PodnetError('IO_FAILURE', 'ADD broke');
  plugins.answers.DEL = new PodnetError('IO_FAILURE', 'DEL broke');
  for (let pass = 0; pass < 4; pass++) await lifecycle.sync(sandbox([listOf('plugged')]), false);
  const before = plugins.commands().length;
  // The tenant renames net1 to net9: the same Network, its same config.
  const renamed = (): DelegatedSandbox => {
    const s = sandbox([listOf('plugged')]);
    return { ...s, desired: s.desired.map((d) => ({ ...d, interface: 'net9' })), wanted: { ...s.wanted, attachments: s.wanted.attachments.map((a) => ({ ...a, interface: 'net9' })) } };
  };
  const out = await lifecycle.sync(renamed(), false);
  t.same(plugins.commands().length, before, 'no ADD for net9, no DEL');
  t.match(out.problems, [{ field: 'spec.attachments[0]', reason: /DEL failed 3 times.*\(held as net1\)/ }]);
  t.equal(records.all().length, 1, 'the hold stays on file');
  await lifecycle.sync(sandbox([]), false);
  t.same(records.all(), [], 'once the Network is not asked for the pod, the hold goes (without a DEL)');
  t.same(plugins.commands().length, before);
});

t.test('a list whose plugin is missing, or whose STATUS says not ready (1.1), is not started: no record, no ADD', async (t) => {
  const { lifecycle, plugins, records } = setup();
  plugins.missing.add('bridge');
  const missing = await lifecycle.sync(sandbox([listOf('plugged')]), false);
  t.match(missing.problems, [{ field: 'spec.attachments[0]', reason: /plugin bridge is not in the CNI bin dirs/ }]);
  plugins.missing.clear();
  plugins.answers.STATUS = new PodnetError('NOT_AVAILABLE', 'plugin not available');
  const notReady = await lifecycle.sync(sandbox([listOf('plugged', '1.1.0')]), false);
  t.match(notReady.problems, [{ reason: 'plugin not available' }]);
  t.same(plugins.commands(), ['STATUS plugged'], 'STATUS only for the 1.1 list, no ADD for either');
  t.same(records.all(), []);
  delete plugins.answers.STATUS;
  await lifecycle.sync(sandbox([listOf('plugged', '1.1.0')]), false);
  t.same(plugins.commands(), ['STATUS plugged', 'STATUS plugged', 'ADD plugged c1/net1'], 'started once STATUS passes');
});

t.test("no ADD once the runtime's DEL took the sandbox off record during the pass", async (t) => {
  const { lifecycle, plugins, records } = setup({ recorded: () => false });
  await lifecycle.sync(sandbox([listOf('plugged')]), false);
  t.same(plugins.commands(), []);
  t.same(records.all(), []);
});

t.test('CHECK on a resync only: a failure with the interface as made keeps it (told once); with the interface gone, it is made again', async (t) => {
  const made = new Map<string, ObservedLink>();
  const { lifecycle, plugins, warnings } = setup({ links: made });
  await lifecycle.sync(sandbox([listOf('plugged')]), false);
  // What its ADD made, as the pod shows it.
  made.set('net1', { name: 'net1', mtu: 1500, up: true, mac: '02:00:00:00:00:01', addresses: ['198.18.9.2/24'] });
  await lifecycle.sync(sandbox([listOf('plugged')]), false);
  t.same(plugins.commands(), ['ADD plugged c1/net1'], 'no CHECK outside a resync');

  plugins.answers.CHECK = new PodnetError('IO_FAILURE', 'bridge br-plugged has the wrong MAC');
  await lifecycle.sync(sandbox([listOf('plugged')]), true);
  await lifecycle.sync(sandbox([listOf('plugged')]), true);
  t.same(plugins.commands().slice(1), ['CHECK plugged c1/net1', 'CHECK plugged c1/net1'], 'kept: no DEL, no ADD');
  t.same(warnings, ["CHECK failed, but the pod's interface is as the plugins made it; kept"], 'told once for the same message');

  made.delete('net1');
  await lifecycle.sync(sandbox([listOf('plugged')]), true);
  t.same(plugins.commands().slice(3), ['CHECK plugged c1/net1', 'DEL plugged c1/net1', 'ADD plugged c1/net1'], 'gone from the pod: attached again');
});

t.test('CHECK: try again later keeps the attachment; an interface podnet tunes, or a list without CHECK, is not checked', async (t) => {
  const { lifecycle, plugins } = setup();
  await lifecycle.sync(sandbox([listOf('plugged')]), false);
  plugins.answers.CHECK = new PodnetError('TRY_AGAIN_LATER', 'busy');
  await lifecycle.sync(sandbox([listOf('plugged')]), true);
  t.same(plugins.commands(), ['ADD plugged c1/net1', 'CHECK plugged c1/net1']);
  await lifecycle.sync(sandbox([listOf('plugged')], { tuned: new Set(['net1']) }), true);
  t.same(plugins.commands().length, 2, 'a tuned interface is not checked (its MAC differs from the result)');

  const { lifecycle: old, plugins: oldPlugins } = setup();
  await old.sync(sandbox([listOf('plugged', '0.3.1')]), false);
  await old.sync(sandbox([listOf('plugged', '0.3.1')]), true);
  t.same(oldPlugins.commands(), ['ADD plugged c1/net1'], 'CHECK came with 0.4.0');
});

t.test('a config that cannot be had now (its definition gone) while still asked keeps what is there', async (t) => {
  const { lifecycle, plugins } = setup();
  const asked = sandbox([listOf('plugged')]);
  await lifecycle.sync(asked, false);
  await lifecycle.sync({ ...asked, desired: [] }, true);
  t.same(plugins.commands(), ['ADD plugged c1/net1'], 'no DEL: the attachment is still asked by the same document');
});

t.test("a gone sandbox's attachments: DEL with its netns while there, without once gone, none while unsure; a failing DEL backs off", async (t) => {
  const sight = new Map<string, NamespaceSight>([['/run/netns/pod-a', 'unsure']]);
  const { lifecycle, plugins, records, clock } = setup({ sight });
  await lifecycle.sync(sandbox([listOf('plugged')]), false);
  const gone = () => true;

  await lifecycle.forgetGone(gone);
  t.same(plugins.commands(), ['ADD plugged c1/net1'], 'a netns that cannot be looked at: its DEL waits');

  sight.set('/run/netns/pod-a', 'not-net');
  plugins.answers.DEL = new PodnetError('IO_FAILURE', 'plugin hung');
  await lifecycle.forgetGone(gone);
  await lifecycle.forgetGone(gone);
  t.same(plugins.commands().slice(1), ['DEL plugged c1/net1'], 'tried again only once its wait is over');
  t.equal(plugins.calls[1]!.netns, '', 'the netns went with the sandbox: DEL without it');

  delete plugins.answers.DEL;
  clock.advance(499);
  await lifecycle.forgetGone(gone);
  t.equal(plugins.calls.length, 2, 'not before half a second');
  clock.advance(1);
  await lifecycle.forgetGone(gone);
  t.same(plugins.commands().slice(2), ['DEL plugged c1/net1']);
  t.same(records.all(), [], 'the record goes with the DEL');
});

t.test("an interface the pod has that no record gives the attachment is someone else's: no ADD, no DEL, told and refused; an unreadable netns runs no plugin", async (t) => {
  const theirs = new Map<string, ObservedLink>([['net1', { name: 'net1', mtu: 1500, up: true, mac: '02:00:00:00:00:07', addresses: [] }]]);
  const { lifecycle, plugins, records } = setup({ links: theirs });
  const sync = await lifecycle.sync(sandbox([listOf('plugged')]), false);
  t.same(plugins.commands(), [], 'no plugin ran');
  t.same(records.all(), [], 'no record');
  t.match(sync.takenBack, [{ reason: 'net1 already exists in the pod and podnet did not make it' }], 'a problem that refuses its config whole');
  t.equal(sync.failed, undefined, 'not a failure to retry: the pod has what it had');

  const blind = setup({ links: 'unreadable' });
  const unread = await blind.lifecycle.sync(sandbox([listOf('plugged')]), false);
  t.same(blind.plugins.commands(), []);
  t.match(unread.failed?.message, /cannot enter the netns/);
  t.same(unread.takenBack, [], 'tried again, not refused');
});

t.test('GC for each 1.1 list: every record of the network is valid but a held one; a failing GC is only logged', async (t) => {
  const { lifecycle, plugins, records, warnings } = setup();
  const list = listOf('plugged', '1.1.0');
  await lifecycle.sync(sandbox([list]), false);
  records.put({ containerId: 'c2', interface: 'net1', network: 'plugged', config: list, netns: '/run/netns/pod-b', args: '' });
  records.put({ containerId: 'c3', interface: 'net1', network: 'plugged', config: list, netns: '/run/netns/pod-c', args: '', failedDels: maxFailedDels });
  plugins.answers.GC = new PodnetError('IO_FAILURE', 'gc broke');
  await lifecycle.collect([list, listOf('old', '1.0.0')]);
  const gc = plugins.calls.filter((c) => c.command === 'GC');
  t.same(gc.map((c) => [c.network, c.valid]), [['plugged', [{ containerID: 'c1', ifname: 'net1' }, { containerID: 'c2', ifname: 'net1' }]]], 'an ADD not yet answered is valid; a held one is GC\'s to take');
  t.same(warnings, ['GC of a delegated network failed; trying again at the next resync']);
});

t.test("an ADD of an interface podnet's own link holds waits for the plan to take it back; one this pass tried is not tried again", async (t) => {
  const { lifecycle, plugins } = setup({ links: new Map([['net1', { name: 'net1', mtu: 1500, up: true, mac: '02:00:00:00:00:01', addresses: [] }]]) });
  const waiting = await lifecycle.sync(sandbox([listOf('plugged')], { native: new Set(['net1']) }), false);
  t.same(plugins.commands(), [], 'no ADD while podnet\'s own net1 is there');
  t.equal(waiting.waiting, true, 'the sandbox is told to pass again');
  t.same(waiting.problems, [], 'nothing to tell: it is on its way');
  const tried = await lifecycle.sync(sandbox([listOf('plugged')], { tried: new Set(['net1']) }), false);
  t.same(plugins.commands(), [], 'tried already in this pass');
  t.equal(tried.waiting, undefined);
});

t.test('runsPlugins: a sync runs plugins for what its records do not say was made, and for CHECKs on a resync', async (t) => {
  const { lifecycle } = setup();
  const asked = sandbox([listOf('plugged')]);
  t.equal(lifecycle.runsPlugins('c1', asked.desired, false), true, 'an ADD to make');
  await lifecycle.sync(asked, false);
  t.equal(lifecycle.runsPlugins('c1', asked.desired, false), false, 'made as asked: nothing');
  t.equal(lifecycle.runsPlugins('c1', asked.desired, true), true, 'a resync CHECKs it');
  t.equal(lifecycle.runsPlugins('c1', [], false), true, 'a DEL to run');
  t.equal(lifecycle.runsPlugins('c1', sandbox([{ ...listOf('plugged'), plugins: [{ type: 'bridge', bridge: 'br-other' }] }]).desired, false), true, 'another config: DEL and ADD');
});

t.test("a pass's plugin time: no new ADD or DEL once it is spent, the rest in the next pass; a resync's CHECKs in turn", async (t) => {
  const made = new Map<string, ObservedLink>();
  const { lifecycle, plugins, clock } = setup({ links: made });
  // Each call takes 0.3 s: two a pass, the second starting before the pass's time is spent.
  plugins.during = () => clock.advance(0.6 * pluginTimePerPassMs);
  const five = sandbox(['a', 'b', 'c', 'd', 'e'].map((n) => listOf(n)));
  const passes = [];
  for (let pass = 0; pass < 3; pass++) passes.push(await lifecycle.sync(five, false));
  t.same(
    passes.map((p) => p.cut ?? false),
    [true, true, false],
    'left for the next pass until all are made',
  );
  t.same(plugins.commands(), ['ADD a c1/net1', 'ADD b c1/net2', 'ADD c c1/net3', 'ADD d c1/net4', 'ADD e c1/net5']);
  for (const name of ['net1', 'net2', 'net3', 'net4', 'net5']) made.set(name, { name, mtu: 1500, up: true, mac: '02:00:00:00:00:01', addresses: ['198.18.9.2/24'] });

  for (let resync = 0; resync < 3; resync++) t.notOk((await lifecycle.sync(five, true)).cut, 'CHECKs not run wait for the next resync, not for a pass');
  t.same(
    plugins.commands().slice(5),
    ['CHECK a c1/net1', 'CHECK b c1/net2', 'CHECK c c1/net3', 'CHECK d c1/net4', 'CHECK e c1/net5', 'CHECK a c1/net1'],
    'each resync starts where the last stopped',
  );

  // A CHECK that finds the interface gone, its pass's time spent: made again by the next pass.
  made.delete('net2');
  plugins.answers.CHECK = new PodnetError('IO_FAILURE', 'no net2');
  plugins.during = () => clock.advance(pluginTimePerPassMs);
  t.ok((await lifecycle.sync(five, true)).cut, 'its remaking waits for the next pass');
  t.same(plugins.commands().slice(11), ['CHECK b c1/net2']);
  delete plugins.answers.CHECK;
  plugins.during = () => clock.advance(0.6 * pluginTimePerPassMs);
  t.notOk((await lifecycle.sync(five, false)).cut);
  t.same(plugins.commands().slice(11), ['CHECK b c1/net2', 'DEL b c1/net2', 'ADD b c1/net2'], 'remade, though that pass was no resync');

  // Taking back (a refused generation) is not cut short, however little time is left; its ADDs are.
  const takeBack = await lifecycle.sync(sandbox([listOf('z')]), false, { ms: 0, takingBack: true });
  t.same(plugins.commands().slice(14).sort(), ['DEL a c1/net1', 'DEL b c1/net2', 'DEL c c1/net3', 'DEL d c1/net4', 'DEL e c1/net5'], 'every DEL in one sync');
  t.ok(takeBack.cut, 'the ADD of what stays asked waits for the next pass');
  t.equal(takeBack.spentMs, 5 * 0.6 * pluginTimePerPassMs);
});

t.test("one attachment whose calls fail slowly does not spend every pass's time: it is tried after the sandbox's others", async (t) => {
  const { lifecycle, plugins, clock } = setup();
  plugins.during = () => clock.advance(pluginTimePerPassMs);
  const two = sandbox([listOf('a'), listOf('b')]);
  plugins.answers.ADD = new PodnetError('IO_FAILURE', 'timed out');
  const first = await lifecycle.sync(two, false);
  t.ok(first.failed && first.cut, 'a failed and the time is spent');
  delete plugins.answers.ADD;
  await lifecycle.sync(two, false);
  t.same(plugins.commands(), ['ADD a c1/net1', 'DEL a c1/net1', 'ADD b c1/net2'], 'the next pass starts with b, not the one that failed');
});

t.test("gone sandboxes' DELs: their namespaces in turn, within a pass's plugin time; the rest left for the next pass", async (t) => {
  const { lifecycle, plugins, clock } = setup({ sight: new Map([['/run/netns/pod-a', 'not-net'], ['/run/netns/pod-b', 'not-net']]) });
  await lifecycle.sync(sandbox(['a', 'b', 'c'].map((n) => listOf(n))), false);
  const other = { ...record, containerId: 'c2', netns: '/run/netns/pod-b', pod: { namespace: 'tenant-b', name: 'pod-b', uid: 'u-2' } };
  await lifecycle.sync(sandbox([listOf('z')], { record: other }), false);
  plugins.during = () => clock.advance(0.6 * pluginTimePerPassMs);
  t.ok(await lifecycle.forgetGone(() => true), 'some left');
  t.same(plugins.commands().slice(4), ['DEL a c1/net1', 'DEL z c2/net1'], "the other namespace's among the first");
  t.notOk(await lifecycle.forgetGone(() => true), 'the rest by the next pass');
  t.same(plugins.commands().slice(6), ['DEL b c1/net2', 'DEL c c1/net3']);
});
