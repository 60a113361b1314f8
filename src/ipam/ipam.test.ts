import t, { type Test } from 'tap';
import { existsSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { dir } from 'tmp-promise';
import { NodeIpam } from './ipam.ts';
import type { IpRange } from '../protocol/validate.ts';

/** A fresh state directory, removed when the test ends however it ends. */
async function stateDir(t: Test): Promise<string> {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(tmp.cleanup);
  return tmp.path;
}

const v4: IpRange = { subnet: '198.18.5.0/24' };
const v6: IpRange = { subnet: '2001:db8:5::/64' };
/** One address to hand out: .0 is the network, .1 the gateway, .3 the broadcast address. */
const tiny: IpRange = { subnet: '198.18.5.0/30' };

const stateFile = (path: string, network = 'blue') => join(path, 'ipam', `${network}.log`);
/** An older podnet's whole-state file of a Network. */
const snapshotFile = (path: string, network = 'blue') => join(path, 'ipam', `${network}.json`);
/** The lines of a Network's log, parsed. */
const logOf = (path: string, network = 'blue') =>
  readFileSync(stateFile(path, network), 'utf8')
    .split('\n')
    .filter((line) => line !== '')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
const addresses = (allocations: { address: string }[]) => allocations.map((a) => a.address);
/** The error `fn` throws; fails the test when it throws none. */
function thrown(t: Test, fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  t.fail('expected an error');
  return undefined;
}
const refusal = (message: string | RegExp) => ({ name: 'PodnetError', code: 'INVALID_REQUEST', message });

t.test('hands out the subnet in order after the gateway, with the range prefix and gateway', async (t) => {
  const path = await stateDir(t);
  const ipam = NodeIpam.open(path);
  t.strictSame(ipam.allocate('blue', [v4], 'pod-a/net1'), [{ address: '198.18.5.2/24', gateway: '198.18.5.1' }]);
  t.strictSame(ipam.allocate('blue', [v4], 'pod-b/net1'), [{ address: '198.18.5.3/24', gateway: '198.18.5.1' }]);
  t.strictSame(ipam.held('blue', 'pod-a/net1'), [{ address: '198.18.5.2/24', gateway: '198.18.5.1' }]);
  t.strictSame(ipam.held('blue', 'pod-c/net1'), [], 'an owner holding nothing');
  t.strictSame(ipam.held('green', 'pod-a/net1'), [], 'networks are apart');
  t.notOk(existsSync(stateFile(path, 'green')), 'reading makes no file');

  t.strictSame(
    logOf(path),
    [
      { version: 1, network: 'blue', lastHandedOut: { '198.18.5.0/24': '198.18.5.2' } },
      { hold: 'pod-a/net1', addresses: [{ address: '198.18.5.2/24', gateway: '198.18.5.1' }] },
      { hold: 'pod-b/net1', addresses: [{ address: '198.18.5.3/24', gateway: '198.18.5.1' }], lastHandedOut: { '198.18.5.0/24': '198.18.5.3' } },
    ],
    'the log: a header, then a line of plain JSON per change',
  );
  t.equal(statSync(stateFile(path)).mode & 0o777, 0o600, 'the file is 0600');
  t.equal(statSync(join(path, 'ipam')).mode & 0o777, 0o700, 'its folder is 0700');
});

t.test('an explicit gateway and pool bounds', async (t) => {
  const ipam = NodeIpam.open(await stateDir(t));
  const range: IpRange = { subnet: '198.18.5.0/24', rangeStart: '198.18.5.1', rangeEnd: '198.18.5.3', gateway: '198.18.5.2' };
  t.strictSame(ipam.allocate('blue', [range], 'a'), [{ address: '198.18.5.1/24', gateway: '198.18.5.2' }]);
  t.strictSame(ipam.allocate('blue', [range], 'b'), [{ address: '198.18.5.3/24', gateway: '198.18.5.2' }], 'skips the gateway');
  t.match(thrown(t, () => ipam.allocate('blue', [range], 'c')), {
    code: 'TRY_AGAIN_LATER',
    message: 'network blue: range 198.18.5.0/24 (198.18.5.1-198.18.5.3) has no free address',
  });
  const top: IpRange = { subnet: '198.18.6.0/24', rangeStart: '198.18.6.250' };
  const handed = [0, 1, 2, 3, 4].map((i) => ipam.allocate('green', [top], `o${i}`)[0]?.address);
  t.strictSame(handed, ['198.18.6.250/24', '198.18.6.251/24', '198.18.6.252/24', '198.18.6.253/24', '198.18.6.254/24'], 'never the broadcast address');
  t.match(thrown(t, () => ipam.allocate('green', [top], 'o5')), { code: 'TRY_AGAIN_LATER' });
});

t.test('an exhausted range is TRY_AGAIN_LATER and changes nothing', async (t) => {
  const path = await stateDir(t);
  const ipam = NodeIpam.open(path);
  t.strictSame(addresses(ipam.allocate('blue', [tiny], 'pod-a/net1')), ['198.18.5.2/30']);
  const before = readFileSync(stateFile(path), 'utf8');
  const err = thrown(t, () => ipam.allocate('blue', [tiny], 'pod-b/net1'));
  t.match(err, { name: 'PodnetError', code: 'TRY_AGAIN_LATER', cniCode: 11, message: 'network blue: range 198.18.5.0/30 has no free address' });
  t.equal(readFileSync(stateFile(path), 'utf8'), before, 'the file is as it was');
  t.strictSame(ipam.held('blue', 'pod-b/net1'), []);

  ipam.release('blue', 'pod-a/net1');
  t.strictSame(addresses(ipam.allocate('blue', [tiny], 'pod-b/net1')), ['198.18.5.2/30'], 'free again once released');
});

t.test('several ranges: one address each, all or none', async (t) => {
  const path = await stateDir(t);
  const ipam = NodeIpam.open(path);
  t.strictSame(ipam.allocate('blue', [tiny, v6], 'a'), [
    { address: '198.18.5.2/30', gateway: '198.18.5.1' },
    { address: '2001:db8:5::2/64', gateway: '2001:db8:5::1' },
  ]);
  const before = readFileSync(stateFile(path), 'utf8');
  t.match(thrown(t, () => ipam.allocate('blue', [v6, tiny], 'b')), { code: 'TRY_AGAIN_LATER', message: /range 198\.18\.5\.0\/30 has no free address/ });
  t.equal(readFileSync(stateFile(path), 'utf8'), before, 'the IPv6 range did not move either');
  t.strictSame(ipam.held('blue', 'b'), []);
  t.strictSame(addresses(ipam.allocate('blue', [v6], 'b')), ['2001:db8:5::3/64'], 'the IPv6 address the failed call would have taken is still free');
});

t.test('no address is handed out twice across a reopen (daemon restart)', async (t) => {
  const path = await stateDir(t);
  const first = NodeIpam.open(path);
  first.allocate('blue', [v4, v6], 'a');
  first.allocate('blue', [v4, v6], 'b');

  const second = NodeIpam.open(path);
  t.strictSame(second.held('blue', 'a'), [
    { address: '198.18.5.2/24', gateway: '198.18.5.1' },
    { address: '2001:db8:5::2/64', gateway: '2001:db8:5::1' },
  ]);
  t.strictSame(addresses(second.allocate('blue', [v4, v6], 'c')), ['198.18.5.4/24', '2001:db8:5::4/64']);
  t.strictSame(addresses(second.allocate('blue', [v4, v6], 'a')), ['198.18.5.2/24', '2001:db8:5::2/64'], 'idempotent after the reopen');

  const third = NodeIpam.open(path);
  const seen = new Set<string>();
  for (const owner of ['a', 'b', 'c', 'd', 'e']) {
    for (const address of addresses(third.allocate('blue', [v4, v6], owner))) {
      t.notOk(seen.has(address), `${address} once`);
      seen.add(address);
    }
  }
  t.equal(seen.size, 10);
});

t.test('idempotent per owner', async (t) => {
  const path = await stateDir(t);
  const ipam = NodeIpam.open(path);
  const got = ipam.allocate('blue', [v4], 'a');
  const file = readFileSync(stateFile(path), 'utf8');
  t.strictSame(ipam.allocate('blue', [v4], 'a'), got, 'the same address again');
  t.strictSame(ipam.allocate('blue', [v4, v6], 'a'), got, 'what it holds, even when the ranges changed');
  t.equal(readFileSync(stateFile(path), 'utf8'), file, 'and nothing written');
  got[0]!.address = 'changed by the caller';
  t.strictSame(addresses(ipam.held('blue', 'a')), ['198.18.5.2/24'], 'callers get copies');

  t.strictSame(addresses(ipam.allocate('blue', [v4], 's', ['198.18.5.9'])), ['198.18.5.9/24']);
  t.strictSame(addresses(ipam.allocate('blue', [v4], 's', ['198.18.5.9/24'])), ['198.18.5.9/24'], 'the same static request');
  t.strictSame(addresses(ipam.allocate('blue', [v4], 's')), ['198.18.5.9/24'], 'or no request');
  t.match(
    thrown(t, () => ipam.allocate('blue', [v4], 's', ['198.18.5.10'])),
    refusal('network blue: s already holds 198.18.5.9/24, not 198.18.5.10; release it first'),
  );
});

t.test('static addresses', async (t) => {
  const path = await stateDir(t);
  const ipam = NodeIpam.open(path);
  const pool: IpRange = { subnet: '198.18.5.0/24', rangeStart: '198.18.5.10', rangeEnd: '198.18.5.20' };

  t.strictSame(ipam.allocate('blue', [pool, v6], 'pod-a/net1', ['198.18.5.9/24'].slice(1).concat('198.18.5.12')), [
    { address: '198.18.5.12/24', gateway: '198.18.5.1' },
  ], 'exactly what was asked: no IPv6 address');
  t.strictSame(addresses(ipam.allocate('blue', [pool, v6], 'pod-b/net1', ['2001:DB8:5:0::abc/64', '198.18.5.20'])), ['2001:db8:5::abc/64', '198.18.5.20/24'], 'canonical form, in the order asked');
  t.strictSame(addresses(ipam.allocate('blue', [pool], 'pod-c/net1')), ['198.18.5.10/24'], 'dynamic allocation steps around static ones');

  const before = readFileSync(stateFile(path), 'utf8');
  const refused: [string[], string | RegExp][] = [
    [['198.18.5.12'], 'network blue: 198.18.5.12 is held by another attachment on this node'],
    [['2001:db8:5::abc'], 'network blue: 2001:db8:5::abc is held by another attachment on this node'],
    [['198.18.5.15', '198.18.5.12'], 'network blue: 198.18.5.12 is held by another attachment on this node'],
    [['198.18.5.9'], 'network blue: 198.18.5.9 is outside every range (198.18.5.0/24 (198.18.5.10-198.18.5.20), 2001:db8:5::/64)'],
    [['10.0.0.1'], /10\.0\.0\.1 is outside every range/],
    [['198.18.5.15/16'], 'network blue: 198.18.5.15/16 does not have the prefix length of range 198.18.5.0/24'],
    [['198.18.5.15', '198.18.5.15/24'], 'network blue: 198.18.5.15 is requested twice'],
    [['2001:db8:5::'], 'network blue: 2001:db8:5:: is the subnet-router anycast address of range 2001:db8:5::/64'],
    [['2001:db8:5::1'], 'network blue: 2001:db8:5::1 is the gateway of range 2001:db8:5::/64'],
    [['198.18.5.300'], 'network blue: requested address "198.18.5.300" is not an IP address (ip or ip/prefix)'],
    [['198.18.5.15/33'], /requested address "198\.18\.5\.15\/33" is not an IP address/],
  ];
  for (const [requested, message] of refused) {
    t.match(thrown(t, () => ipam.allocate('blue', [pool, v6], 'pod-d/net1', requested)), refusal(message), `refuses ${requested.join(', ')}`);
  }
  t.equal(readFileSync(stateFile(path), 'utf8'), before, 'no refusal wrote anything');
  t.strictSame(ipam.held('blue', 'pod-d/net1'), []);

  const full: IpRange = { subnet: '198.18.7.0/24' };
  for (const [address, why] of [['198.18.7.0', 'the network address'], ['198.18.7.255', 'the broadcast address'], ['198.18.7.1', 'the gateway']]) {
    t.match(thrown(t, () => ipam.allocate('blue', [full], 'x', [address!])), refusal(`network blue: ${address} is ${why} of range 198.18.7.0/24`));
  }
});

t.test('round robin: a released address rests until the pool wraps around', async (t) => {
  const path = await stateDir(t);
  const pool: IpRange = { subnet: '198.18.5.0/24', rangeStart: '198.18.5.10', rangeEnd: '198.18.5.13' };
  const ipam = NodeIpam.open(path);
  const take = (owner: string) => ipam.allocate('blue', [pool], owner)[0]?.address;

  t.equal(take('a'), '198.18.5.10/24');
  t.equal(take('b'), '198.18.5.11/24');
  ipam.release('blue', 'a');
  t.strictSame(ipam.held('blue', 'a'), [], 'released');
  t.equal(take('c'), '198.18.5.12/24', 'not the address just released');
  ipam.release('blue', 'b');

  const reopened = NodeIpam.open(path);
  t.equal(reopened.allocate('blue', [pool], 'd')[0]?.address, '198.18.5.13/24', 'the position survives a restart');
  t.equal(reopened.allocate('blue', [pool], 'e')[0]?.address, '198.18.5.10/24', 'wraps to the lowest free address');
  t.equal(reopened.allocate('blue', [pool], 'f')[0]?.address, '198.18.5.11/24');
  t.match(thrown(t, () => reopened.allocate('blue', [pool], 'g')), { code: 'TRY_AGAIN_LATER' }, 'all four held');

  const wider: IpRange = { subnet: '198.18.5.0/24', rangeStart: '198.18.5.100' };
  t.equal(reopened.allocate('blue', [wider], 'h')[0]?.address, '198.18.5.100/24', 'a position outside a changed pool starts it from its bottom');
});

t.test('release', async (t) => {
  const path = await stateDir(t);
  const ipam = NodeIpam.open(path);
  ipam.release('blue', 'nobody');
  t.notOk(existsSync(stateFile(path)), 'releasing nothing writes nothing');

  ipam.allocate('blue', [v4, v6], 'a');
  ipam.allocate('blue', [v4, v6], 'b');
  ipam.release('blue', 'a');
  ipam.release('blue', 'a');
  const lines = logOf(path);
  t.strictSame(lines.at(-1), { release: 'a' }, 'durable: a line in the log');
  t.equal(lines.filter((line) => 'release' in line).length, 1, 'releasing what is not held writes nothing');
  t.strictSame(addresses(NodeIpam.open(path).allocate('blue', [v4, v6], 'c')), ['198.18.5.4/24', '2001:db8:5::4/64'], 'the position stays');
  t.strictSame(NodeIpam.open(path).held('blue', 'a'), [], 'and after a reopen');
});

t.test('IPv6', async (t) => {
  const ipam = NodeIpam.open(await stateDir(t));
  t.strictSame(ipam.allocate('blue', [v6], 'a'), [{ address: '2001:db8:5::2/64', gateway: '2001:db8:5::1' }], 'never the anycast address nor the gateway');

  const small: IpRange = { subnet: 'fd00:1:2:3::/126' };
  t.strictSame(addresses(ipam.allocate('green', [small], 'a')), ['fd00:1:2:3::2/126']);
  t.strictSame(addresses(ipam.allocate('green', [small], 'b')), ['fd00:1:2:3::3/126'], 'the last address is a host in IPv6');
  t.match(thrown(t, () => ipam.allocate('green', [small], 'c')), { code: 'TRY_AGAIN_LATER', message: 'network green: range fd00:1:2:3::/126 has no free address' });

  const top: IpRange = { subnet: '2001:db8:5::/64', rangeStart: '2001:0db8:0005:0000:ffff:ffff:ffff:fffe', gateway: '2001:db8:5::fe' };
  t.strictSame(ipam.allocate('red', [top], 'a'), [{ address: '2001:db8:5:0:ffff:ffff:ffff:fffe/64', gateway: '2001:db8:5::fe' }]);
  t.strictSame(addresses(ipam.allocate('red', [top], 'b')), ['2001:db8:5:0:ffff:ffff:ffff:ffff/64']);
  t.match(thrown(t, () => ipam.allocate('red', [top], 'c')), { code: 'TRY_AGAIN_LATER' });

  const mapped: IpRange = { subnet: '::ffff:198.18.0.0/120' };
  t.strictSame(ipam.allocate('mapped', [mapped], 'a'), [{ address: '::ffff:198.18.0.2/120', gateway: '::ffff:198.18.0.1' }], 'printed as ip prints it');
});

t.test('point-to-point and single-address subnets are refused', async (t) => {
  const ipam = NodeIpam.open(await stateDir(t));
  for (const subnet of ['198.18.5.0/31', '198.18.5.1/32', '2001:db8::/127', '2001:db8::1/128']) {
    t.match(thrown(t, () => ipam.allocate('blue', [{ subnet }], 'a')), refusal(/is too small to allocate from \(at most \/30 for IPv4, \/126 for IPv6; bound a larger subnet with rangeStart and rangeEnd/), subnet);
  }
  const one: IpRange = { subnet: '198.18.5.0/24', rangeStart: '198.18.5.7', rangeEnd: '198.18.5.7' };
  t.strictSame(addresses(ipam.allocate('blue', [one], 'a')), ['198.18.5.7/24'], 'a one-address pool in a larger subnet');
});

t.test('bad ranges are refused, naming the network and the value', async (t) => {
  const path = await stateDir(t);
  const ipam = NodeIpam.open(path);
  const refused: [IpRange[], string | RegExp][] = [
    [[], 'network blue: no IP ranges to allocate from'],
    [[{ subnet: '198.18.5.0' }], 'network blue: subnet "198.18.5.0" is not a CIDR (an IPv4 or IPv6 address/prefix length)'],
    [[{ subnet: 'blue' }], /subnet "blue" is not a CIDR/],
    [[{ subnet: '198.18.5.0/33' }], /subnet "198\.18\.5\.0\/33" is not a CIDR/],
    [[{ subnet: '198.18.5.7/24' }], 'network blue: subnet 198.18.5.7/24 has host bits set; the subnet is 198.18.5.0/24'],
    [[{ subnet: '198.18.5.0/24', rangeStart: '198.18.6.1' }], 'network blue: rangeStart 198.18.6.1 is outside subnet 198.18.5.0/24'],
    [[{ subnet: '198.18.5.0/24', rangeEnd: '2001:db8::1' }], 'network blue: rangeEnd 2001:db8::1 is outside subnet 198.18.5.0/24'],
    [[{ subnet: '198.18.5.0/24', rangeStart: 'x' }], 'network blue: rangeStart "x" is not an IP address'],
    [[{ subnet: '198.18.5.0/24', rangeStart: '198.18.5.9', rangeEnd: '198.18.5.8' }], 'network blue: rangeStart 198.18.5.9 is after rangeEnd 198.18.5.8'],
    [[{ subnet: '198.18.5.0/24', gateway: '198.18.4.1' }], 'network blue: gateway 198.18.4.1 is outside subnet 198.18.5.0/24'],
    [[{ subnet: '198.18.5.0/24', gateway: '198.18.5.255' }], 'network blue: gateway 198.18.5.255 is the broadcast address of 198.18.5.0/24'],
    [[{ subnet: '198.18.5.0/24', rangeStart: '198.18.5.0', rangeEnd: '198.18.5.1' }], 'network blue: range 198.18.5.0/24 (198.18.5.0-198.18.5.1) holds no address to hand out (only the network address, the gateway)'],
    [[v4, { subnet: '198.18.0.0/16' }], 'network blue: ranges 198.18.5.0/24 and 198.18.0.0/16 overlap'],
    [[v6, v6], 'network blue: ranges 2001:db8:5::/64 and 2001:db8:5::/64 overlap'],
  ];
  for (const [ranges, message] of refused) {
    t.match(thrown(t, () => ipam.allocate('blue', ranges, 'a')), refusal(message), JSON.stringify(ranges));
  }
  t.notOk(existsSync(stateFile(path)), 'nothing written');
});

t.test('network names and owners must be safe as file names and keys', async (t) => {
  const path = await stateDir(t);
  const ipam = NodeIpam.open(path);
  for (const network of ['', 'Blue', '../blue', 'blue/x', '.blue', 'blue.', '-blue', 'blue-', 'a..b', 'blue net', 'blue\n', 'a'.repeat(254)]) {
    const err = thrown(t, () => ipam.allocate(network, [v4], 'a'));
    t.match(err, refusal(/^network name ".*"(\.\.\.)? is not a Kubernetes name \(lowercase alphanumerics, '-' and '\.', at most 253 characters\)$/), `refuses ${JSON.stringify(network.slice(0, 20))}`);
    t.match(thrown(t, () => ipam.release(network, 'a')), { code: 'INVALID_REQUEST' });
    t.match(thrown(t, () => ipam.held(network, 'a')), { code: 'INVALID_REQUEST' });
  }
  for (const owner of ['', 'pod a', 'pod\n', 'pod\u0000', 'pöd', 'a'.repeat(513)]) {
    t.match(thrown(t, () => ipam.allocate('blue', [v4], owner)), refusal(/^network blue: owner ".*"(\.\.\.)? is not 1 to 512 printable ASCII characters without spaces$/), `refuses owner ${JSON.stringify(owner.slice(0, 20))}`);
  }
  t.notOk(existsSync(join(path, 'ipam')), 'nothing written');

  const long = `${'a'.repeat(63)}.${'b'.repeat(63)}.${'c'.repeat(63)}.${'d'.repeat(61)}`;
  t.equal(long.length, 253);
  const twin = `${long.slice(0, 252)}e`;
  t.strictSame(addresses(ipam.allocate(long, [v4], '__proto__')), ['198.18.5.2/24'], 'a 253-character name; an owner that is an Object key');
  t.strictSame(addresses(ipam.allocate(twin, [v4], '__proto__')), ['198.18.5.2/24'], 'a name that differs only at its end is another network');
  t.strictSame(addresses(NodeIpam.open(path).held(long, '__proto__')), ['198.18.5.2/24']);
  t.strictSame(addresses(NodeIpam.open(path).allocate(twin, [v4], 'other')), ['198.18.5.3/24']);
  const files = readdirSync(join(path, 'ipam'));
  t.equal(files.length, 2, 'one file each');
  for (const file of files) t.match(file, /^a{63}\.b{63}\.c{52}~[0-9a-f]{16}\.log$/, 'a long name is cut and hashed to fit a file name');
  t.strictSame(addresses(ipam.allocate('blue.example-1', [v4], 'ns/pod@net1:x')), ['198.18.5.2/24']);
});

/** Each corrupt text in `file` of network blue is refused by every call, naming the file and why, and left as it was. */
function refusesEach(t: Test, path: string, file: string, corrupt: [string, RegExp][]): void {
  for (const [text, reason] of corrupt) {
    writeFileSync(file, text);
    const ipam = NodeIpam.open(path);
    const message = new RegExp(`^network blue: the IPAM state file ${file} is corrupt \\(.*${reason.source}.*\\); podnet will not reset it`);
    t.match(thrown(t, () => ipam.allocate('blue', [v4], 'c')), { name: 'PodnetError', code: 'IO_FAILURE', message }, `allocate: ${reason.source}`);
    t.match(thrown(t, () => ipam.held('blue', 'a')), { code: 'IO_FAILURE', message }, 'held');
    t.match(thrown(t, () => ipam.release('blue', 'a')), { code: 'IO_FAILURE', message }, 'release');
    t.equal(readFileSync(file, 'utf8'), text, 'the file is left as it was');
    t.strictSame(addresses(ipam.allocate('green', [v4], 'c')), ['198.18.5.2/24'], 'other networks still work');
    rmSync(stateFile(path, 'green'));
  }
  rmSync(file);
}

t.test('a corrupt log is an IO_FAILURE naming the file and line, and is left alone', async (t) => {
  const path = await stateDir(t);
  await mkdir(join(path, 'ipam'));
  const header = JSON.stringify({ version: 1, network: 'blue', lastHandedOut: {} });
  const log = (...lines: unknown[]) => [header, ...lines.map((line) => JSON.stringify(line))].join('\n') + '\n';
  const a2 = { hold: 'a', addresses: [{ address: '198.18.5.2/24' }] };
  refusesEach(t, path, stateFile(path), [
    ['{"version": 1, "network": "bl\n', /line 1: the line is not JSON|line 1: .*JSON/],
    ['[]\n', /line 1: .*must be object/],
    [`${JSON.stringify({ version: 2, network: 'blue', lastHandedOut: {} })}\n`, /line 1: .*at \/version: must be equal to constant/],
    [`${JSON.stringify({ version: 1, network: 'green', lastHandedOut: {} })}\n`, /line 1: it is the log of network "green"/],
    [`${JSON.stringify(a2)}\n`, /line 1: the log does not start with its header/],
    [log({ version: 1, network: 'blue', lastHandedOut: {} }), /line 2: a second header/],
    [log({ release: 'x' }), /line 2: x is released but holds nothing/],
    [log(a2, a2), /line 3: a holds addresses twice/],
    [log(a2, { hold: 'b', addresses: [{ address: '198.18.5.2/24' }] }), /line 3: 198\.18\.5\.2 is held by both a and b/],
    [log({ hold: 'b', addresses: [{ address: '198.18.5.2/24' }, { address: '198.18.5.2/24' }] }), /line 2: 198\.18\.5\.2 is held by both b and b/],
    [log({ hold: 'b', addresses: [{ address: '198.18.5.2' }] }), /line 2: .*must be /],
    [log({ hold: 'a b', addresses: [{ address: '198.18.5.2/24' }] }), /line 2: .*must be /],
    [log({ hold: 'b', addresses: [{ address: '198.18.5.2/24' }], lastHandedOut: { x: '1.2.3.4' } }), /line 2: lastHandedOut "x"/],
    ['{"version":1,"network":"bl', /the log has no header/],
  ]);
});

t.test("an older podnet's whole-state file is read, refused when corrupt, and becomes a log at the first change", async (t) => {
  const path = await stateDir(t);
  await mkdir(join(path, 'ipam'));
  const owned = (owners: unknown) => JSON.stringify({ version: 1, network: 'blue', lastHandedOut: {}, owners });
  refusesEach(t, path, snapshotFile(path), [
    ['{"version": 1, "network": "bl', /not JSON/],
    [JSON.stringify({ version: 1, network: 'green', lastHandedOut: {}, owners: {} }), /it is the file of network "green"/],
    [JSON.stringify({ version: 1, network: 'blue', owners: {} }), /must have required property 'lastHandedOut'/],
    [JSON.stringify({ version: 1, network: 'blue', lastHandedOut: { x: '1.2.3.4' }, owners: {} }), /lastHandedOut "x"/],
    [owned({ a: [] }), /at \/owners\/a: must NOT have fewer than 1 items/],
    [owned({ a: [{ address: '198.18.5.2/24', gateway: 'x' }] }), /at \/owners\/a\/0\/gateway: must be /],
    [owned({ a: [{ address: '198.18.5.2/24' }], b: [{ address: '198.18.5.2/24' }] }), /198\.18\.5\.2 is held by both a and b/],
  ]);

  writeFileSync(
    snapshotFile(path),
    JSON.stringify({ version: 1, network: 'blue', lastHandedOut: { '198.18.5.0/24': '198.18.5.3' }, owners: { a: [{ address: '198.18.5.2/24' }], b: [{ address: '2001:DB8:5:0::2/64' }] } }),
  );
  const ipam = NodeIpam.open(path);
  t.strictSame(ipam.held('blue', 'b'), [{ address: '2001:db8:5::2/64' }], 'an address in another spelling is read in canonical form');
  t.strictSame(ipam.holders(), [{ network: 'blue', owner: 'a' }, { network: 'blue', owner: 'b' }], 'its holders are listed');
  t.notOk(existsSync(stateFile(path)), 'reading writes nothing');
  t.strictSame(addresses(ipam.allocate('blue', [v4], 'c')), ['198.18.5.4/24'], 'the first change goes on from its position');
  t.notOk(existsSync(snapshotFile(path)), 'the file is gone');
  t.strictSame(
    logOf(path).slice(1).map((line) => line['hold']),
    ['a', 'b', 'c'],
    'its holders are in the log',
  );
  t.strictSame(NodeIpam.open(path).holders().map((h) => h.owner), ['a', 'b', 'c'], 'and after a reopen');
});

t.test('the log: bounded by its holders, and a line cut short is left out', async (t) => {
  const path = await stateDir(t);
  const ipam = NodeIpam.open(path);
  ipam.allocate('blue', [v4], 'kept');
  for (let i = 0; i < 500; i++) {
    ipam.allocate('blue', [v4], `o${i}`);
    ipam.release('blue', `o${i}`);
  }
  const lines = logOf(path);
  t.ok(lines.length <= 2 * 2 + 64 + 1, `1001 changes, ${lines.length} lines: rewritten as it grows`);
  const next = addresses(ipam.preview('blue', [v4], 'next'));
  t.strictSame(next, ['198.18.5.251/24'], '500 handed out round robin after .2, through the /24 and on');
  const reopened = NodeIpam.open(path);
  t.strictSame(reopened.holders(), [{ network: 'blue', owner: 'kept' }], 'what is held survives the rewrites');
  t.strictSame(addresses(reopened.allocate('blue', [v4], 'next')), next, 'and so does the round robin');

  // A process that died inside its append leaves the line's first part, with no newline.
  writeFileSync(stateFile(path), '{"hold":"ghost","addre', { flag: 'a' });
  const afterCrash = NodeIpam.open(path);
  t.strictSame(afterCrash.holders().map((h) => h.owner), ['kept', 'next'], 'the cut line is no change');
  t.strictSame(addresses(afterCrash.allocate('blue', [v4], 'after')), ['198.18.5.252/24']);
  t.notMatch(readFileSync(stateFile(path), 'utf8'), /ghost/, 'the next change rewrote the log without it');
  t.strictSame(NodeIpam.open(path).holders().map((h) => h.owner), ['kept', 'next', 'after']);
});

t.test('a failed write changes nothing in memory either', async (t) => {
  const path = await stateDir(t);
  const ipam = NodeIpam.open(path);
  t.strictSame(addresses(ipam.allocate('blue', [v4], 'a')), ['198.18.5.2/24']);
  // A file where the ipam folder should be: the write fails whoever runs the test (root included).
  renameSync(join(path, 'ipam'), join(path, 'ipam.kept'));
  writeFileSync(join(path, 'ipam'), '');
  t.match(thrown(t, () => ipam.allocate('blue', [v4], 'b')), { name: 'PodnetError', code: 'IO_FAILURE', message: new RegExp(`^network blue: cannot write ${stateFile(path)}: `) });
  t.match(thrown(t, () => ipam.release('blue', 'a')), { code: 'IO_FAILURE' });
  t.strictSame(ipam.held('blue', 'b'), [], 'not held');
  t.strictSame(addresses(ipam.held('blue', 'a')), ['198.18.5.2/24'], 'still held');
  rmSync(join(path, 'ipam'));
  renameSync(join(path, 'ipam.kept'), join(path, 'ipam'));
  t.strictSame(addresses(ipam.allocate('blue', [v4], 'c')), ['198.18.5.3/24'], 'the round robin did not move');
  t.strictSame(NodeIpam.open(path).holders(), [{ network: 'blue', owner: 'a' }, { network: 'blue', owner: 'c' }], 'on file: a and c');
});

t.test('preview: what allocate would give, nothing taken', async (t) => {
  const path = await stateDir(t);
  const ipam = NodeIpam.open(path);
  t.same(addresses(ipam.preview('blue', [v4], 'c1/net1')), ['198.18.5.2/24']);
  t.notOk(existsSync(stateFile(path)), 'nothing written');
  t.same(addresses(ipam.allocate('blue', [v4], 'c2/net1')), ['198.18.5.2/24'], 'the previewed address is still free');
  t.same(addresses(ipam.preview('blue', [v4], 'c2/net1')), ['198.18.5.2/24'], 'a holder previews what it holds');
  t.same(addresses(ipam.preview('blue', [v4], 'c3/net1')), ['198.18.5.3/24']);
  t.same(ipam.held('blue', 'c3/net1'), []);
});

t.test('holders: every network and owner with addresses, across a reopen', async (t) => {
  const path = await stateDir(t);
  const ipam = NodeIpam.open(path);
  t.same(ipam.holders(), [], 'none before the first allocation');
  ipam.allocate('blue', [v4], 'c1/net1');
  ipam.allocate('red', [{ subnet: '198.18.6.0/24' }], 'c2/net2');
  ipam.allocate('red', [{ subnet: '198.18.6.0/24' }], 'c3/net2');
  ipam.release('red', 'c3/net2');
  t.same(NodeIpam.open(path).holders(), [{ network: 'blue', owner: 'c1/net1' }, { network: 'red', owner: 'c2/net2' }]);
});
