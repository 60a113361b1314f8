import t from 'tap';
import type { Network } from '../protocol/validate.ts';
import { addressesOf, deviceNameOf, driverName, maxDevicesPerSlice, networkDevices, poolSlices, sliceName } from './devices.ts';

const network = (name: string, spec: Partial<Network['spec']> = {}): Network => ({ apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'Network', metadata: { name }, spec: { type: 'bridge', ...spec } });

t.test('a device is named after its Network when that is a DNS label, else net- and a hash of it', async (t) => {
  t.equal(deviceNameOf('blue'), 'blue');
  t.equal(deviceNameOf('a'.repeat(63)), 'a'.repeat(63));
  const dotted = deviceNameOf('blue.example.com');
  t.match(dotted, /^net-[0-9a-f]{20}$/);
  t.not(deviceNameOf('blue.example.org'), dotted, 'two names, two devices');
  t.match(deviceNameOf('a'.repeat(64)), /^net-/, 'longer than a label');
  t.equal(deviceNameOf('blue.example.com'), dotted, 'the same every time');
});

t.test("a Network's addresses: its smallest range less network, broadcast and gateway; unbounded without IPAM, nothing with a broken range", async (t) => {
  t.equal(addressesOf(network('n', { ipam: { ranges: [{ subnet: '198.18.0.0/24' }] } })), 253);
  t.equal(addressesOf(network('n', { ipam: { ranges: [{ subnet: '198.18.0.0/24', rangeStart: '198.18.0.10', rangeEnd: '198.18.0.19' }] } })), 10, 'bounds that leave out what is reserved');
  t.equal(addressesOf(network('n', { ipam: { ranges: [{ subnet: '198.18.0.0/29' }, { subnet: '2001:db8::/120' }] } })), 5, 'the smallest of the ranges: an attachment takes one of each');
  t.equal(addressesOf(network('n', { ipam: { ranges: [{ subnet: '2001:db8::/64' }] } })), Number.MAX_SAFE_INTEGER, 'bounded');
  t.equal(addressesOf(network('n')), undefined);
  t.equal(addressesOf(network('n', { ipam: { ranges: [{ subnet: 'nope' }] } })), 0, 'a broken range gives nothing, and no claim is allocated on it');
});

t.test('devices: one per served Network, shared; capacity of addresses left to claims on a Network with IPAM; a tunnel not shared', async (t) => {
  const devices = networkDevices(
    [network('red', { ipam: { ranges: [{ subnet: '198.18.0.0/29' }] }, mtu: 1400 }), network('blue', { type: 'vxlan' }), network('green', { type: 'macvlan' })],
    new Map([['red', 2], ['blue', 7]]),
  );
  t.strictSame(devices, [
    { name: 'blue', attributes: { network: { string: 'blue' }, type: { string: 'vxlan' } } },
    { name: 'green', attributes: { network: { string: 'green' }, type: { string: 'macvlan' } }, allowMultipleAllocations: true },
    {
      name: 'red',
      attributes: { network: { string: 'red' }, type: { string: 'bridge' }, mtu: { int: 1400 } },
      allowMultipleAllocations: true,
      capacity: { addresses: { value: '3', requestPolicy: { default: '1', validValues: ['1'] } } },
    },
  ]);
  const full = networkDevices([network('red', { ipam: { ranges: [{ subnet: '198.18.0.0/30' }] } }), network('broken', { ipam: { ranges: [{ subnet: 'nope' }] } })], new Map([['red', 5]]));
  t.strictSame(full, [], 'no address left, or a range that gives none: no device (a capacity of 0 is refused by the API server, and would fail the pool)');
  t.strictSame(networkDevices([network('a'.repeat(65))], new Map()), [], 'a name longer than an attribute value may be is no device');
  const taken = networkDevices([network('blue', { type: 'vxlan' }), network('green', { type: 'macvlan' })], new Map(), new Set(['blue', 'green']));
  t.strictSame(taken.map((d) => d.name), ['green'], "a tunnel an annotation's or a config's attachment has on the node is offered no more; a shared Network still is");
  const ranged = networkDevices([network('chosen', { type: 'geneve', geneve: { vni: 7, remoteRanges: ['198.18.100.0/24'] } }), network('fixed', { type: 'geneve', geneve: { vni: 8, remote: '198.18.100.2' } })], new Map(), new Set(['chosen', 'fixed']));
  t.strictSame(ranged, [{ name: 'chosen', attributes: { network: { string: 'chosen' }, type: { string: 'geneve' } }, allowMultipleAllocations: true }], 'a tunnel whose attachments choose their remotes: one a node per remote, so shared, and held outside claims it is still offered');
});

t.test("a node's pool: slices of at most 128 devices, owned by the Node, one empty slice when it serves nothing", async (t) => {
  const node = { name: 'node-a', uid: 'uid-a' };
  const devices = networkDevices(Array.from({ length: maxDevicesPerSlice + 1 }, (_, i) => network(`n${String(i).padStart(3, '0')}`)), new Map());
  const slices = poolSlices(node, devices, 7);
  t.equal(slices.length, 2);
  t.strictSame(slices.map((s) => [s.metadata.name, s.spec.devices.length, s.spec.pool]), [
    ['node-a-podnet-0', 128, { name: 'node-a', generation: 7, resourceSliceCount: 2 }],
    ['node-a-podnet-1', 1, { name: 'node-a', generation: 7, resourceSliceCount: 2 }],
  ]);
  t.strictSame(slices[0]!.metadata.ownerReferences, [{ apiVersion: 'v1', kind: 'Node', name: 'node-a', uid: 'uid-a', controller: true }]);
  t.equal(slices[0]!.spec.driver, driverName);
  t.equal(slices[0]!.spec.nodeName, 'node-a');
  const empty = poolSlices(node, [], 1);
  t.strictSame(empty.map((s) => [s.metadata.name, s.spec.devices]), [['node-a-podnet-0', []]]);
});

t.test("a slice's name fits an object name whatever the node's, and differs between nodes", async (t) => {
  const long = `${'a'.repeat(250)}`;
  const other = `${'a'.repeat(249)}b`;
  t.ok(sliceName(long, 0).length <= 253);
  t.not(sliceName(long, 0), sliceName(other, 0));
  t.match(sliceName(long, 3), /^podnet-[0-9a-f]{32}-3$/);
  t.equal(sliceName('node-a', 3), 'node-a-podnet-3');
});
