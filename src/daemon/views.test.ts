import t from 'tap';
import { emptyApplied, type ObservedLink, type Resolved } from '../model/state.ts';
import { PodnetError } from '../errors.ts';
import { FakeObserver } from '../testing/fakes.ts';
import { asksThePlanner, covers, hostViewOf, podNeeds, readHost, type PodSight } from './views.ts';
import { guardTable } from '../model/wireguard-guard.ts';

const nothing: Resolved = { attachments: [], delegated: [], vrfs: [], tuning: [], routes: [], rules: [], sysctls: [] };
const link = (name: string): ObservedLink => ({ name, mtu: 1500, up: true, addresses: [] });
const sight = (families: ('4' | '6')[], paths: string[], marking = false, guards: string[] = [], wireguard: string[] = []): PodSight => ({
  families: new Set(families.map((f) => Number(f) as 4 | 6)),
  paths: new Set(paths),
  marking,
  guards: new Set(guards),
  wireguard: new Set(wireguard),
  records: '',
  view: { pod: new Map(), routes: [], rules: [], sysctls: new Map() },
});

t.test('a netns is read for what the desired or the applied state has: routes of their families, their sysctls', async (t) => {
  const desired: Resolved = { ...nothing, routes: [{ family: 6, to: '2001:db8::/64', table: 100 }], sysctls: [{ name: 'net.ipv4.ip_forward', path: 'net/ipv4/ip_forward', value: '1' }] };
  const applied = { ...emptyApplied('c1', '/run/netns/x'), rules: [{ family: 4 as const, priority: 100, table: 100 }] };
  const needs = podNeeds(desired, applied);
  t.same([...needs.families].sort(), [4, 6]);
  t.same([...needs.paths], ['net/ipv4/ip_forward']);
  t.same(podNeeds(nothing, undefined), { families: new Set(), paths: new Set(), marking: false, guards: new Set(), wireguard: new Set() }, 'nothing asked, nothing but the links read');
  const wg = { ...emptyApplied('c1', '/run/netns/x'), attachments: [{ interface: 'wg0', network: 'wg', kind: 'wireguard' as const, addresses: [], wireguard: { publicKey: 'k', listenPort: 51871, peers: [], remoteRanges: ['198.18.0.0/24'] } }] };
  t.same([...podNeeds(nothing, wg).guards], [guardTable('c1', 'wg0')], "a WireGuard port guarded: its guard table read on the host, to write it again if it went");
  t.same([...podNeeds(nothing, wg).wireguard], ['wg0'], 'and the interface read back, to set again what was changed by hand');
  t.equal(podNeeds({ ...nothing, attachments: [{ dscp: 46 } as unknown as Resolved['attachments'][number]] }, undefined).marking, true, 'a DSCP asked: the marking table read');
  t.equal(podNeeds(nothing, { ...emptyApplied('c1', '/run/netns/x'), marking: [{ interface: 'net1', dscp: 46 }] }).marking, true, 'a DSCP marked: read, to take it back');
});

t.test('a kept view serves the next pass only when it read all that pass needs', async (t) => {
  const needs = { families: new Set<4 | 6>([4]), paths: new Set(['net/ipv4/ip_forward']), marking: false, guards: new Set<string>(), wireguard: new Set<string>() };
  t.ok(covers(sight(['4', '6'], ['net/ipv4/ip_forward', 'net/core/somaxconn']), needs));
  t.notOk(covers(sight(['4'], ['net/ipv4/ip_forward']), { ...needs, marking: true }), 'the marking table was not read');
  t.ok(covers(sight(['4'], ['net/ipv4/ip_forward'], true), { ...needs, marking: true }));
  t.notOk(covers(sight(['6'], ['net/ipv4/ip_forward']), needs), 'IPv4 routes were not read');
  t.notOk(covers(sight(['4'], []), needs), 'the sysctl was not read');
  t.notOk(covers(sight(['4'], ['net/ipv4/ip_forward']), { ...needs, guards: new Set(['inet pnw0123456789']) }), 'the guard was not read');
  t.ok(covers(sight(['4'], ['net/ipv4/ip_forward'], false, ['inet pnw0123456789']), { ...needs, guards: new Set(['inet pnw0123456789']) }));
  t.notOk(covers(sight(['4'], ['net/ipv4/ip_forward']), { ...needs, wireguard: new Set(['wg0']) }), 'the WireGuard interface was not read back');
  t.ok(covers(sight(['4'], ['net/ipv4/ip_forward'], false, [], ['wg0']), { ...needs, wireguard: new Set(['wg0']) }));
});

t.test('a sandbox with nothing wanted and nothing applied asks nothing of the planner', async (t) => {
  t.notOk(asksThePlanner(nothing, undefined));
  t.notOk(asksThePlanner(nothing, emptyApplied('c1', '/run/netns/x')));
  t.ok(asksThePlanner({ ...nothing, tuning: [{ interface: 'eth0', settings: { mtu: 1400 } }] }, undefined));
  t.ok(asksThePlanner(nothing, { ...emptyApplied('c1', '/run/netns/x'), sysctls: [{ path: 'net/ipv4/ip_forward', value: '1', original: '0' }] }), 'what was applied must be taken back');
});

t.test('of the host\'s links, a plan may touch only podnet\'s (prefix pn); it sees every name, to avoid them', async (t) => {
  const view = hostViewOf(new Map([['eth0', link('eth0')], ['cni0', link('cni0')], ['pnv1234', link('pnv1234')], ['pn-blue', link('pn-blue')]]), new Map(), { shaped: false, secured: false });
  t.same([...view.podnetLinks.keys()].sort(), ['pn-blue', 'pnv1234']);
  t.same([...view.names].sort(), ['cni0', 'eth0', 'pn-blue', 'pnv1234']);
});

t.test('a port security table that cannot be read is taken as not there, and why is kept for the pods that would secure a port', async (t) => {
  const observe = new FakeObserver();
  observe.securedPortsFailure = new PodnetError('NOT_AVAILABLE', 'nft (Debian package nftables) is not installed on this node');
  const view = await readHost(observe, { shaped: false, secured: true });
  t.equal(view.securedPorts, undefined);
  t.equal(view.portSecurityUnavailable, 'nft (Debian package nftables) is not installed on this node');
  observe.securedPortsFailure = undefined;
  observe.securedPortNames = new Set(['pnva']);
  const read = await readHost(observe, { shaped: false, secured: true });
  t.same(read.securedPorts, new Set(['pnva']), 'read: its ports');
  t.equal(read.portSecurityUnavailable, undefined, 'and no reason');
  t.equal((await readHost(observe, { shaped: false, secured: false })).securedPorts, undefined, 'not asked: not read');
});
