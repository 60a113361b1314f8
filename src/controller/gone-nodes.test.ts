import t from 'tap';
import type { NetworkStatus, PodNetworkConfigStatus } from '../protocol/validate.ts';
import { goneManagerLines, unknownNodes, withoutNodes } from './gone-nodes.ts';

const now = '2026-11-28T08:00:00Z';
const before = '2026-11-28T07:00:00Z';

t.test("a config's status without a gone node: its entry out, READY and the conditions summed from the rest", async (t) => {
  const current: PodNetworkConfigStatus = {
    observedGeneration: 3,
    ready: '2/4',
    conditions: [
      { type: 'Ready', status: 'False', reason: 'NotApplied', message: '2 of 4 selected pods lack part of the config', lastTransitionTime: before, observedGeneration: 3 },
      { type: 'Degraded', status: 'True', reason: 'ApplyFailed', message: 'pod cnf-x: no parent eth9', lastTransitionTime: before, observedGeneration: 3 },
    ],
    nodes: [
      { name: 'node-a', selected: 2, ready: 2 },
      { name: 'node-gone', selected: 2, ready: 0, failingPods: [{ name: 'cnf-x', reason: 'no parent eth9' }] },
    ],
  };
  t.same(unknownNodes({ status: current }, (n) => n === 'node-a'), ['node-gone']);
  const after = withoutNodes('PodNetworkConfig', current, new Set(['node-gone']), now) as PodNetworkConfigStatus;
  t.same(after.nodes, [{ name: 'node-a', selected: 2, ready: 2 }]);
  t.equal(after.ready, '2/2', 'READY counts only the pods that remain');
  t.same(after.conditions, [
    { type: 'Ready', status: 'True', reason: 'Applied', message: '2 selected pods have what the config asks', lastTransitionTime: now, observedGeneration: 3 },
    { type: 'Degraded', status: 'False', reason: 'AsExpected', message: '', lastTransitionTime: now, observedGeneration: 3 },
  ]);
  t.equal(after.observedGeneration, 3, 'the generation the nodes reported on stays');
});

t.test("a spec with problems keeps its conditions for the daemons, who judge it; READY is summed again", async (t) => {
  const conditions: PodNetworkConfigStatus['conditions'] = [
    { type: 'Ready', status: 'False', reason: 'NotApplied', message: 'the spec cannot be applied as it is (see Degraded)', lastTransitionTime: before },
    { type: 'Degraded', status: 'True', reason: 'InvalidSpec', message: 'spec.attachments[0].network: no Network named red', lastTransitionTime: before },
  ];
  const current: PodNetworkConfigStatus = { ready: '0/3', conditions, nodes: [{ name: 'node-a', selected: 1, ready: 0 }, { name: 'node-gone', selected: 2, ready: 0 }] };
  const after = withoutNodes('PodNetworkConfig', current, new Set(['node-gone']), now);
  t.equal(after.ready, '0/1');
  t.same(after.conditions, conditions);
});

t.test("a Network's status without a gone node: served on the nodes that remain", async (t) => {
  const current: NetworkStatus = {
    ready: '1/2',
    conditions: [{ type: 'Degraded', status: 'True', reason: 'NodesNotReady', message: 'node-gone: no parent eth9', lastTransitionTime: before }],
    nodes: [
      { name: 'node-a', ready: true, attachedPods: 3 },
      { name: 'node-gone', ready: false, attachedPods: 0, message: 'no parent eth9' },
    ],
  };
  const after = withoutNodes('Network', current, new Set(['node-gone']), now) as NetworkStatus;
  t.same(after.nodes, [{ name: 'node-a', ready: true, attachedPods: 3 }]);
  t.equal(after.ready, '1/1');
  t.match(after.conditions, [{ type: 'Degraded', status: 'False', reason: 'AsExpected', lastTransitionTime: now }]);
  t.same(unknownNodes({}, () => false), [], 'no status, nothing to look at');
});

t.test("a Network whose spec has problems keeps its conditions; READY is summed again", async (t) => {
  const conditions: NetworkStatus['conditions'] = [{ type: 'Degraded', status: 'True', reason: 'InvalidSpec', message: 'spec.ipam.ranges[0]: overlaps ranges[1]', lastTransitionTime: before }];
  const after = withoutNodes('Network', { ready: '1/2', conditions, nodes: [{ name: 'node-a', ready: true, attachedPods: 0 }, { name: 'node-gone', ready: false, attachedPods: 0 }] }, new Set(['node-gone']), now);
  t.equal(after.ready, '1/1');
  t.same(after.conditions, conditions);
});

t.test("the nodes an object names by its field managers count too, and their lines are found last first", async (t) => {
  const managedFields = [{ manager: 'kubectl-client-side-apply' }, { manager: 'podnet/node-gone' }, { manager: 'podnet-controller' }, { manager: 'podnet/node-a' }, { manager: 'podnet/node-gone-too' }];
  t.same(unknownNodes({ managedFields }, (n) => n === 'node-a').sort(), ['node-gone', 'node-gone-too'], "the controller's own manager is no node's");
  t.same(goneManagerLines(managedFields, new Set(['node-gone', 'node-gone-too'])), [4, 1]);
  t.same(goneManagerLines(undefined, new Set(['node-gone'])), []);
});
