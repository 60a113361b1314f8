import t from 'tap';
import { hostInterfaceName } from '../model/host-links.ts';
import { emptyApplied, type ObservedLink } from '../model/state.ts';
import { planGoneSandbox } from './leftovers.ts';

const link = (name: string, alias?: string): [string, ObservedLink] => [name, { name, mtu: 1500, up: true, addresses: [], ...(alias ? { alias } : {}) }];

t.test("a gone sandbox's host links go while they bear its mark: veth ends, ifbs, and a gre link an interrupted pass left before its move", async (t) => {
  const state = {
    ...emptyApplied('c1', '/run/netns/p'),
    attachments: [
      { interface: 'net1', network: 'blue', kind: 'bridge' as const, bridge: 'pn-blue', hostIf: 'pnv1', ifb: 'pnb1', addresses: [] },
      { interface: 'net2', network: 'tun', kind: 'gre' as const, addresses: [] },
      { interface: 'net3', network: 'tun2', kind: 'gre' as const, addresses: [] },
    ],
  };
  const unmoved = hostInterfaceName('c1', 'net2', 'pnt');
  const theirs = hostInterfaceName('c1', 'net3', 'pnt');
  const links = new Map([link('pnv1', 'podnet:c1/net1'), link('pnb1'), link(unmoved, 'podnet:c1/net2'), link(theirs, 'uplink')]);
  t.same(planGoneSandbox(state, links).map((s) => s.line), ['link del dev pnv1', 'link del dev pnb1', `link del dev ${unmoved}`], 'its own (marked, or unmarked under its name); never one someone else marked');
});
