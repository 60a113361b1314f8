// An attachment record as a kubelet's pod leaves it, in a live netns of the test's own: what the
// socket's tests put, list and take back.
import type { AttachmentRecord } from '../protocol/validate.ts';
import { podNetns } from './netns.ts';

export function liveRecord(containerId: string, overrides: Partial<AttachmentRecord> = {}): AttachmentRecord {
  return {
    containerId,
    ifname: 'eth0',
    network: 'kindnet',
    netns: podNetns(),
    cniVersion: '1.1.0',
    pod: { namespace: 'shop', name: `pod-${containerId}` },
    prevResult: { cniVersion: '1.1.0', ips: [{ address: '10.244.0.5/24' }] },
    createdAt: '2026-03-01T12:00:00.000Z',
    ...overrides,
  };
}
