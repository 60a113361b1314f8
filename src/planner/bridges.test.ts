import t from 'tap';
import type { ObservedLink, ResolvedAttachment } from '../model/state.ts';
import { planBridges } from './bridges.ts';

const attachment = (name: string, bridge: string): ResolvedAttachment => ({
  interface: name,
  network: 'blue',
  link: { kind: 'bridge', bridge, bridgeAddresses: ['198.18.80.1/24'], portSecurity: false },
  hostIf: `pnv-${name}`,
  ifb: `pnb-${name}`,
  mtu: 1400,
  addresses: [],
});

t.test('each bridge once, made with its MTU, up, gateway address; only what differs', async (t) => {
  const { steps, created } = planBridges([attachment('net1', 'pn-blue'), attachment('net2', 'pn-blue'), { ...attachment('net3', 'pn-x'), link: { kind: 'macvlan', parent: 'eth0', mode: 'bridge' } }], new Map());
  t.same(steps.map((s) => s.line), ['link add name pn-blue type bridge no_linklocal_learn 1', 'link set dev pn-blue alias podnet:bridge', 'link set dev pn-blue mtu 1400', 'link set dev pn-blue up', 'addr add 198.18.80.1/24 dev pn-blue']);
  t.same(created, ['pn-blue']);
  const there: ObservedLink = { name: 'pn-blue', mtu: 1400, up: true, kind: 'bridge', addresses: ['198.18.80.1/24'] };
  t.same(planBridges([attachment('net1', 'pn-blue')], new Map([['pn-blue', there]])).steps, [], 'nothing when it is as wanted');
  const down = planBridges([attachment('net1', 'pn-blue')], new Map([['pn-blue', { ...there, up: false, addresses: [] }]]));
  t.same(down.steps.map((s) => s.line), ['link set dev pn-blue up', 'addr add 198.18.80.1/24 dev pn-blue']);
  t.same(down.created, [], 'a bridge that was there is not one podnet made now');
});

t.test("podnet's port security table is put when a secured port needs it and it is not there", async (t) => {
  const there: ObservedLink = { name: 'pn-blue', mtu: 1400, up: true, kind: 'bridge', addresses: ['198.18.80.1/24'] };
  const bridges = new Map([['pn-blue', there]]);
  const secured = { ...attachment('net1', 'pn-blue'), link: { kind: 'bridge' as const, bridge: 'pn-blue', bridgeAddresses: ['198.18.80.1/24'], portSecurity: true } };
  t.same(planBridges([secured], bridges).steps, [], 'no bridge step: the table is apart');
  const made = planBridges([secured], bridges).table;
  t.ok(made.length > 10 && made.every((s) => s.tool === 'nft' && s.where === 'host' && !s.undo), 'the ruleset, in one nft batch');
  t.same(made[0]?.line, 'add table bridge podnet');
  t.ok(made.some((s) => s.line === 'add rule bridge podnet prerouting iifname @ports goto port'));
  t.same(planBridges([secured], bridges, new Set()).table, [], 'nothing when it is there, even empty');
  t.same(planBridges([attachment('net1', 'pn-blue')], bridges).table, [], 'nothing when no port asks it');
});
