// The plugin's hints of pods that ask for nothing (ADR 28), as files in the state dir.
import t, { type Test } from 'tap';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { dir } from 'tmp-promise';
import { silentLogger } from '../log.ts';
import { identityOf, podNameLabel } from '../model/identity.ts';
import type { Network, PodNetworkConfig } from '../protocol/validate.ts';
import type { DesiredDocuments } from '../sources/source.ts';
import { QuietPods } from './quiet-pods.ts';

const blue: Network = { apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'Network', metadata: { name: 'blue' }, spec: { type: 'bridge', namespaceSelector: {} } };
const selecting = (pod: string): PodNetworkConfig => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'PodNetworkConfig',
  metadata: { name: `for-${pod}`, namespace: 'default' },
  spec: { podSelector: { matchLabels: { [podNameLabel]: pod } }, attachments: [{ network: 'blue', interface: 'net1' }] },
});
const docs = (...configs: PodNetworkConfig[]): DesiredDocuments => ({ networks: new Map([['blue', blue]]), configs, permissions: [], problems: [] });
const pod = (uid: string, name: string) => ({ uid, identity: identityOf({ containerId: uid, ifname: 'eth0', network: 'k8s', netns: '/run/netns/x', cniVersion: '1.0.0', createdAt: '2026-01-01T00:00:00Z', pod: { namespace: 'default', name } }) });

/** A state dir of the test's own, its hints, and what is in their folder. */
async function hinted(t: Test) {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  return { stateDir: tmp.path, quiet: new QuietPods(tmp.path, silentLogger), hints: () => readdirSync(join(tmp.path, 'quiet-pods')).sort() };
}

t.test('a pod of the node that asks nothing has a hint; once a config selects it, the hint goes', async (t) => {
  const { stateDir, quiet, hints } = await hinted(t);
  const pods = [pod('uid-a', 'a'), pod('uid-b', 'b')];
  quiet.update(docs(selecting('a')), pods);
  t.same(hints(), ['uid-b'], 'b asks nothing; a asks net1');
  quiet.update(docs(selecting('a'), selecting('b')), pods);
  t.same(hints(), [], 'b is selected now');
  quiet.update(docs(), [pod('uid-a', 'a')]);
  t.same(hints(), ['uid-a'], 'a asks nothing any more, b is gone');
  new QuietPods(stateDir, silentLogger);
  t.same(hints(), [], 'a new daemon starts from no hint: what an earlier one left may not hold');
});

t.test('without pods known ahead (standalone), every pod is quiet while no config exists', async (t) => {
  const { quiet, hints } = await hinted(t);
  quiet.update(docs(), undefined);
  t.same(hints(), ['_all']);
  quiet.update(docs(selecting('a')), undefined);
  t.same(hints(), [], 'a config may select any new pod');
});

t.test('a pod is quiet only when nothing asks: a config selecting it asks, whatever the node would grant; a UID not of a UID\'s shape gets no file', async (t) => {
  const { quiet, hints } = await hinted(t);
  const primaryMac: PodNetworkConfig = { ...selecting('a'), spec: { podSelector: { matchLabels: { [podNameLabel]: 'a' } }, interfaces: [{ name: 'eth0', mac: '02:00:00:00:00:0a' }] } };
  const annotated = { ...pod('uid-c', 'c'), identity: { ...pod('uid-c', 'c').identity, annotation: { selections: [{ name: 'blue' }] } } };
  quiet.update(docs(primaryMac), [pod('uid-a', 'a'), pod('../uid-b', 'b'), pod('_all', 'd'), annotated]);
  t.same(hints(), [], "a asks eth0's MAC (the node may refuse it: its pass tells); c asks by its annotation; b's and d's UIDs name no file");
});
