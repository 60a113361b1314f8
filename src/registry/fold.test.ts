import t from 'tap';
import type { AttachmentKey, AttachmentRecord, SpoolEntry } from '../protocol/validate.ts';
import { applyChanges, changesFor, keyOf } from './fold.ts';

function record(containerId: string, ifname: string, network: string): AttachmentRecord {
  return {
    containerId,
    ifname,
    network,
    netns: `/var/run/netns/cni-${containerId}`,
    cniVersion: '1.0.0',
    pod: { namespace: 'shop', name: `pod-${containerId}` },
    createdAt: '2026-03-01T12:00:00.000Z',
  };
}

const key = (containerId: string, ifname: string): AttachmentKey => ({ containerId, ifname });

function mapOf(...records: AttachmentRecord[]): Map<string, AttachmentRecord> {
  return new Map(records.map((r) => [keyOf(r), r]));
}

/** changesFor, then applyChanges on a copy: the outcome and the keys left, sorted. */
function fold(records: Map<string, AttachmentRecord>, entry: SpoolEntry) {
  const changes = changesFor(records, entry);
  const after = new Map(records);
  applyChanges(after, changes);
  return { changes, left: [...after.keys()].sort() };
}

const a = record('aaa', 'eth0', 'kindnet');
const aNet1 = record('aaa', 'net1', 'vlan100');
const b = record('bbb', 'eth0', 'kindnet');
const c = record('ccc', 'eth0', 'kindnet');

t.test('keyOf is container@ifname', async (t) => {
  t.equal(keyOf(key('abc', 'eth0')), 'abc@eth0');
  t.equal(keyOf(a), 'aaa@eth0', 'a record is its own key');
});

t.test('add puts the record, new or replacing', async (t) => {
  const added = fold(mapOf(b), { op: 'add', record: a });
  t.strictSame(added.changes, { put: [a], removed: [] });
  t.strictSame(added.left, ['aaa@eth0', 'bbb@eth0']);

  const newer = { ...a, netns: '/var/run/netns/cni-other' };
  const records = mapOf(a);
  applyChanges(records, changesFor(records, { op: 'add', record: newer }));
  t.equal(records.get('aaa@eth0')?.netns, '/var/run/netns/cni-other', 'the later ADD wins');
  t.equal(records.size, 1);
});

t.test('del of a present record removes it', async (t) => {
  const deleted = fold(mapOf(a, aNet1), { op: 'del', key: key('aaa', 'eth0') });
  t.strictSame(deleted.changes, { put: [], removed: [key('aaa', 'eth0')] });
  t.strictSame(deleted.left, ['aaa@net1'], 'the same container\'s other interface stays');
});

t.test('del of an absent record changes nothing', async (t) => {
  const deleted = fold(mapOf(a), { op: 'del', key: key('zzz', 'eth0') });
  t.strictSame(deleted.changes, { put: [], removed: [] });
  t.strictSame(deleted.left, ['aaa@eth0']);
});

t.test('gc removes the unlisted records of its own network only', async (t) => {
  const collected = fold(mapOf(a, aNet1, b, c), {
    op: 'gc',
    gc: { network: 'kindnet', validAttachments: [key('bbb', 'eth0'), key('never-seen', 'eth0')] },
  });
  t.strictSame(collected.changes.put, []);
  t.strictSame(
    [...collected.changes.removed].sort((x, y) => keyOf(x).localeCompare(keyOf(y))),
    [key('aaa', 'eth0'), key('ccc', 'eth0')],
    'removed keys carry containerId and ifname only',
  );
  t.strictSame(collected.left, ['aaa@net1', 'bbb@eth0'], 'listed records and other networks\' records stay');
});

t.test('gc listing a key on another interface does not save this one', async (t) => {
  const collected = fold(mapOf(a), { op: 'gc', gc: { network: 'kindnet', validAttachments: [key('aaa', 'net1')] } });
  t.strictSame(collected.changes.removed, [key('aaa', 'eth0')]);
});

t.test('gc of a network with no records removes nothing', async (t) => {
  const collected = fold(mapOf(a, b), { op: 'gc', gc: { network: 'macvlan-lab', validAttachments: [] } });
  t.strictSame(collected.changes, { put: [], removed: [] });
  t.strictSame(collected.left, ['aaa@eth0', 'bbb@eth0']);
});

t.test('changesFor does not touch the map it reads', async (t) => {
  const records = mapOf(a, b);
  changesFor(records, { op: 'gc', gc: { network: 'kindnet', validAttachments: [] } });
  changesFor(records, { op: 'del', key: key('aaa', 'eth0') });
  t.strictSame([...records.keys()].sort(), ['aaa@eth0', 'bbb@eth0']);
});
