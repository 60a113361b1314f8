import t from 'tap';
import { networkStatusAnnotation, networksAnnotation } from '../model/annotation.ts';
import type { NetworkStatusEntry } from '../protocol/validate.ts';
import { explainText, getText, kubectlError } from '../cli/kubectl.ts';
import { PodnetError } from '../errors.ts';
import { namespaceConfigs, podNetworkView, viewEvents, type EventObject } from './pod-view.ts';
import type { ApiObject, PodObject } from './resources.ts';

const status: NetworkStatusEntry[] = [
  { name: 'primary', interface: 'eth0', ips: ['10.0.0.5'], mac: '0a:58:0a:00:00:05', mtu: 1400, default: true },
  { name: 'blue', interface: 'net1', ips: ['198.18.5.2'], mac: '02:00:00:00:00:01', mtu: 1500, madeAfterStart: true },
  { name: 'red', interface: 'net2', problem: 'no Network named red' },
];
const pod = (annotations: Record<string, string> = {}, labels: Record<string, string> = { app: 'cnf' }): PodObject => ({
  apiVersion: 'v1',
  kind: 'Pod',
  metadata: { name: 'cnf-0', namespace: 'tenant-a', uid: 'u1', labels, annotations },
  spec: { nodeName: 'node-a' },
});
const config = (name: string, spec: object, conditions: object[] = [{ type: 'Ready', status: 'True' }]): ApiObject =>
  ({ apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'PodNetworkConfig', metadata: { name, namespace: 'tenant-a' }, spec: { podSelector: { matchLabels: { app: 'cnf' } }, ...spec }, status: { conditions } }) as ApiObject;

t.test("a pod's view: its network-status, who asks each attachment, its configs' state, each problem with who asked, and its Events", async (t) => {
  const view = podNetworkView(
    pod({ [networkStatusAnnotation]: JSON.stringify(status), [networksAnnotation]: '[{"name": "blue", "interface": "net1", "required": true}]' }),
    namespaceConfigs([
      config('fast', { attachments: [{ network: 'red', interface: 'net2' }], interfaces: [{ name: 'eth0', mtu: 1400 }], routes: [{ to: '10.1.0.0/16', via: '198.18.5.1', table: 100 }] }, [
        { type: 'Ready', status: 'False', message: 'not ready' },
        { type: 'Degraded', status: 'True', message: 'spec.attachments[0].network: no Network named red' },
      ]),
      config('elsewhere', { podSelector: { matchLabels: { app: 'db' } }, attachments: [{ network: 'blue' }] }),
    ]),
    [{ type: 'Normal', reason: 'Attached', message: 'attached net1', lastTimestamp: '2026-11-28T10:00:00Z', count: 2 }],
  );
  t.equal(view.node, 'node-a');
  t.same(view.interfaces, status);
  t.same(view.askedBy, [
    { document: 'Pod tenant-a/cnf-0', field: 'metadata.annotations["podnetwork.opdev.io/networks"][0]', network: 'blue', interface: 'net1', required: true },
    { document: 'PodNetworkConfig tenant-a/fast', field: 'spec.attachments[0]', network: 'red', interface: 'net2' },
  ]);
  t.same(view.configs, [{ name: 'fast', ready: 'False', message: 'spec.attachments[0].network: no Network named red', also: ['eth0: mtu 1400', '1 route'] }], 'only the configs that select the pod');
  t.same(view.problems, [
    { document: 'PodNetworkConfig tenant-a/fast', reason: 'spec.attachments[0].network: no Network named red' },
    { document: 'PodNetworkConfig tenant-a/fast', field: 'spec.attachments[0]', interface: 'net2', reason: 'no Network named red' },
  ]);
  t.same(view.events, [{ type: 'Normal', reason: 'Attached', message: 'attached net1', count: 2, lastSeen: '2026-11-28T10:00:00Z' }]);

  const text = explainText(view, Date.parse('2026-11-28T10:02:00Z'));
  t.match(text, /net1 +blue +198\.18\.5\.2 +02:00:00:00:00:01 +1500 +made after the pod's containers started/);
  t.match(text, /net2 +red +- +- +- +not made: no Network named red/);
  t.match(text, /Pod tenant-a\/cnf-0 metadata\.annotations\["podnetwork\.opdev\.io\/networks"\]\[0\]: net1 on Network blue, required/);
  t.match(text, /fast: Ready False \(spec\.attachments\[0\]\.network: no Network named red\)\n    also eth0: mtu 1400\n    also 1 route/);
  t.match(text, /2m +Normal +Attached +attached net1/);
});

t.test("a view of a pod podnet has not told of yet, one whose annotations are not readable, and one with many Events", async (t) => {
  const bare = podNetworkView(pod({}, {}), namespaceConfigs([]), []);
  t.same({ ...bare, node: undefined }, { namespace: 'tenant-a', name: 'cnf-0', node: undefined, interfaces: [], askedBy: [], configs: [], problems: [], events: [] });
  t.match(explainText(bare, 0), /Interfaces:\n  <none told yet>\nAsked by:\n  <nothing asks podnet for an attachment>\nConfigs:\n  <none selects the pod>\nProblems:\n  <none>\nEvents:\n  <none>/);

  const unreadable = podNetworkView(pod({ [networkStatusAnnotation]: '{"not": "a list"}', [networksAnnotation]: '[{"name": 7}]' }), namespaceConfigs([config('bad', { attachments: 'all' })]), []);
  t.same(unreadable.interfaces, []);
  t.match(unreadable.problems, [
    { document: 'Pod tenant-a/cnf-0', field: 'metadata.annotations["podnetwork.opdev.io/networks"]', reason: /name/ },
    { document: 'PodNetworkConfig tenant-a/bad', field: 'spec' },
    { document: 'Pod tenant-a/cnf-0', field: 'metadata.annotations["podnetwork.opdev.io/network-status"]', reason: /not one podnet wrote/ },
  ]);

  const many: EventObject[] = Array.from({ length: viewEvents + 5 }, (_, i) => ({ reason: `E${i}`, message: '', lastTimestamp: `2026-11-28T10:${String(i).padStart(2, '0')}:00Z` })).reverse();
  const events = podNetworkView(pod(), namespaceConfigs([]), many).events;
  t.equal(events.length, viewEvents);
  t.equal(events.at(-1)?.reason, `E${viewEvents + 4}`, 'the newest last');
});

t.test('get: a row per pod with its podnet interfaces; wide adds MTU, node and configs; all namespaces a column', async (t) => {
  const view = podNetworkView(pod({ [networkStatusAnnotation]: JSON.stringify(status) }), namespaceConfigs([config('fast', { attachments: [{ network: 'blue', interface: 'net1' }] })]), []);
  t.equal(getText({ items: [view] }, false, false), 'NAME    INTERFACES             ASKED   PROBLEMS\ncnf-0   net1=blue:198.18.5.2   1       1\n');
  t.match(getText({ items: [view] }, true, true), /^NAMESPACE +NAME +INTERFACES +ASKED +PROBLEMS +NODE +CONFIGS\ntenant-a +cnf-0 +net1=blue:198\.18\.5\.2\/mtu 1500 +1 +1 +node-a +fast\n$/);
});

t.test('a tenant who may not list the namespace\'s configs is told so, not told that none selects the pod', async (t) => {
  const view = podNetworkView(pod(), namespaceConfigs({ unlisted: 'you may not list them (Forbidden)' }), []);
  t.same(view.problems, [{ document: 'PodNetworkConfigs of namespace tenant-a', reason: 'you may not list them (Forbidden): which of them select the pod is not known' }]);
});

t.test("errors are told as kubectl tells them: the server's reason and message when it has one", async (t) => {
  t.equal(kubectlError(new PodnetError('NOT_FOUND', 'GET /api/v1/namespaces/a/pods/x: 404 pods "x" not found', 'NotFound')), 'Error from server (NotFound): pods "x" not found\n');
  t.equal(kubectlError(new PodnetError('INVALID_CONFIG', 'context "x" does not exist')), 'error: context "x" does not exist\n');
});

t.test("explain: a WireGuard interface's public key, which its peers name, in its note", async (t) => {
  const wg = [{ name: 'wg', interface: 'wg0', ips: ['10.99.0.1'], mtu: 1420, publicKey: 'xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=' }];
  const text = explainText(podNetworkView(pod({ [networkStatusAnnotation]: JSON.stringify(wg) }), namespaceConfigs([]), []), Date.parse('2026-11-28T10:02:00Z'));
  t.match(text, /wg0 +wg +10\.99\.0\.1 +- +1420 +public key xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=/);
});
