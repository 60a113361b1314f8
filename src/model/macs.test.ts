import t from 'tap';
import { refusedMacs, refusedOwnAddresses, type MacClaims } from './macs.ts';

const ask = (iface: string, mac: string, from = 'PodNetworkConfig tenant-a/mac') => ({ interface: iface, mac, from, field: 'spec.interfaces[0].mac' });
const claims = (containerId: string, asked: MacClaims['asked'], has: string[] = []): MacClaims => ({ containerId, asked, has });
const reasons = (r: ReturnType<typeof refusedMacs>, cid: string) => (r.get(cid) ?? []).map((x) => `${x.interface}: ${x.problem.reason}`);

t.test('a MAC another pod\'s interface has is refused to the one asking it, in any spelling; the holder keeps it', async (t) => {
  const r = refusedMacs([claims('a', [ask('net2', '02:00:00:00:00:0B')]), claims('b', [], ['02:00:00:00:00:0b'])], new Set());
  t.same(reasons(r, 'a'), ['net2: MAC 02:00:00:00:00:0B is in use by another pod\'s interface on this node: a MAC shared on a network takes another\'s traffic']);
  t.same(reasons(r, 'b'), []);
  t.match(r.get('a')?.[0]?.problem, { document: 'PodNetworkConfig tenant-a/mac', field: 'spec.interfaces[0].mac' });
});

t.test('two pods asking one MAC that neither has: neither gets it; one that has it already keeps it', async (t) => {
  const both = refusedMacs([claims('a', [ask('net1', '02:00:00:00:00:01')]), claims('b', [ask('net1', '02:00:00:00:00:01', 'PodNetworkConfig tenant-b/mac')])], new Set());
  t.same(reasons(both, 'a'), ['net1: MAC 02:00:00:00:00:01 is asked for another pod on this node too; neither gets it: a MAC shared on a network takes another\'s traffic']);
  t.equal(both.get('b')?.[0]?.problem.document, 'PodNetworkConfig tenant-b/mac');
  const first = refusedMacs([claims('a', [ask('net1', '02:00:00:00:00:01')], ['02:00:00:00:00:01']), claims('b', [ask('net1', '02:00:00:00:00:01')])], new Set());
  t.same(reasons(first, 'a'), [], 'the pod that has it keeps it');
  t.match(reasons(first, 'b'), [/in use by another pod's interface/]);
});

t.test('a MAC of the node\'s own interfaces is refused; a pod\'s own MAC asked again is not', async (t) => {
  const r = refusedMacs([claims('a', [ask('net1', '02:00:00:00:00:01'), ask('net2', '0a:58:0a:00:00:01')], ['02:00:00:00:00:01'])], new Set(['0a:58:0a:00:00:01']));
  t.same(reasons(r, 'a'), ['net2: MAC 0a:58:0a:00:00:01 is the MAC of one of the node\'s own interfaces: a MAC shared on a network takes another\'s traffic']);
});

t.test('an address a pod brings on a Network without ipam: never another pod\'s on that Network, nor the node\'s, nor asked twice', async (t) => {
  const bring = (iface: string, value: string) => ({ interface: iface, value, from: 'PodNetworkConfig tenant-a/own', field: 'spec.attachments[0].ips' });
  const r = refusedOwnAddresses(
    [
      { containerId: 'a', asked: [bring('net1', 'plain 198.18.0.7'), bring('net2', 'plain 198.18.0.1'), bring('net3', 'other 198.18.0.9')], has: [] },
      { containerId: 'b', asked: [], has: ['plain 198.18.0.7'] },
      { containerId: 'c', asked: [bring('net1', 'other 198.18.0.7')], has: [] },
    ],
    new Set(['plain 198.18.0.1']),
  );
  t.same(
    (r.get('a') ?? []).map((x) => `${x.interface}: ${x.problem.reason}`),
    [
      "net1: address 198.18.0.7 is in use by another pod's interface on this node: an address shared on a network takes another's traffic",
      "net2: address 198.18.0.1 is an address of one of the node's own interfaces: an address shared on a network takes another's traffic",
    ],
  );
  t.same(r.get('c'), undefined, 'the same address on another Network is another address');
});

t.test('the all-zero MAC is refused to whoever asks it: the kernel gives it to no interface', async (t) => {
  const r = refusedMacs([claims('a', [ask('net1', '00:00:00:00:00:00')])], new Set());
  t.same(reasons(r, 'a'), ["net1: MAC 00:00:00:00:00:00 is no interface's: the kernel refuses an all-zero MAC"]);
});
