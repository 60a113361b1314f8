import t from 'tap';
import { desiredFor } from '../model/desired.ts';
import { identityOf, type ClaimAttachments } from '../model/identity.ts';
import { emptyApplied } from '../model/state.ts';
import type { AttachmentRecord, Network } from '../protocol/validate.ts';
import type { SandboxFacts } from '../status/status.ts';
import { claimDeviceStatuses } from './claim-status.ts';
import type { PreparedClaim } from './prepared.ts';

const blue: Network = { apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'Network', metadata: { name: 'blue' }, spec: { type: 'bridge', namespaceSelector: {}, ipam: { ranges: [{ subnet: '198.18.7.0/24' }] } } };
const record: AttachmentRecord = { containerId: 'c-web', ifname: 'eth0', network: 'k8s', netns: '/var/run/netns/x', cniVersion: '1.0.0', createdAt: '2026-01-01T00:00:00Z', pod: { namespace: 'shop', name: 'web-0', uid: 'pod-uid' } };
const claim: PreparedClaim = { claim: { namespace: 'shop', name: 'net', uid: 'claim-uid' }, pods: ['pod-uid'], devices: [{ request: 'net', pool: 'node-a', device: 'blue', network: 'blue', shareId: 'share-1' }] };
const asks: ClaimAttachments = { document: 'ResourceClaim shop/net', attachments: [{ network: 'blue', field: 'spec.devices.requests[net]' }] };

function facts(made: boolean, extra: Partial<SandboxFacts> = {}): SandboxFacts {
  const identity = { ...identityOf(record), claims: [asks] };
  const wanted = desiredFor(identity, new Map([['blue', blue]]), []);
  const applied = { ...emptyApplied('c-web', '/var/run/netns/x'), attachments: made ? [{ kind: 'bridge' as const, interface: 'net1', network: 'blue', addresses: ['198.18.7.2/24'], mac: '02:00:00:00:00:07' }] : [] };
  return { record, namespace: 'shop', name: 'web-0', wanted, applied, problems: wanted.problems, ...extra };
}

t.test("an attached claim: Ready, with its interface, its addresses in CIDR form and its MAC (the pod's link's when read)", async (t) => {
  const [status] = claimDeviceStatuses(claim, facts(true), [], '2026-11-28T10:00:00Z');
  t.strictSame(status, {
    driver: 'dra.podnetwork.opdev.io',
    pool: 'node-a',
    device: 'blue',
    shareID: 'share-1',
    conditions: [{ type: 'Ready', status: 'True', reason: 'Attached', message: 'net1 of pod shop/web-0 is on Network blue', lastTransitionTime: '2026-11-28T10:00:00Z' }],
    networkData: { interfaceName: 'net1', ips: ['198.18.7.2/24'], hardwareAddress: '02:00:00:00:00:07' },
  });
  const read = claimDeviceStatuses(claim, facts(true, { links: new Map([['net1', { name: 'net1', mtu: 1500, up: true, addresses: [], mac: '02:00:00:00:00:99' }]]) }), [], 'now');
  t.equal(read[0]!.networkData!.hardwareAddress, '02:00:00:00:00:99');
});

t.test('not attached: Ready False with why; no pod yet: PodNotStarted; a condition keeps its transition time while it holds', async (t) => {
  const failing = claimDeviceStatuses(claim, facts(false, { lastError: 'ResourceClaim shop/net spec.devices.requests[net]: no address left in 198.18.7.0/24' }), [], 't1');
  t.match(failing[0], { conditions: [{ type: 'Ready', status: 'False', reason: 'NotAttached', message: /no address left/ }] });
  t.notOk(failing[0]!.networkData, 'no network data while nothing is attached');
  const waiting = claimDeviceStatuses(claim, undefined, [], 't1');
  t.match(waiting[0]!.conditions[0], { status: 'False', reason: 'PodNotStarted' });
  const later = claimDeviceStatuses(claim, facts(false), failing, 't2');
  t.equal(later[0]!.conditions[0]!.lastTransitionTime, 't1', 'still not Ready: the time it became so stays');
  const ready = claimDeviceStatuses(claim, facts(true), failing, 't3');
  t.equal(ready[0]!.conditions[0]!.lastTransitionTime, 't3');
});
