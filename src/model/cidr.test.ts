import t from 'tap';
import {
  contains,
  formatCidr,
  formatIp,
  lastAddress,
  networkAddress,
  nthAddress,
  parseCidr,
  parseIp,
  sameIp,
  sizeOf,
  type Cidr,
} from './cidr.ts';

const cidr = (text: string): Cidr => {
  const parsed = parseCidr(text);
  if (!parsed) throw new Error(`test setup: ${text} is no CIDR`);
  return parsed;
};
const ip = (text: string) => {
  const parsed = parseIp(text);
  if (!parsed) throw new Error(`test setup: ${text} is no address`);
  return parsed;
};

t.test('IPv4 addresses parse to their 32-bit value and format back', async (t) => {
  const cases: [string, bigint][] = [
    ['0.0.0.0', 0n],
    ['198.18.5.2', 0xc6120502n],
    ['255.255.255.255', 0xffffffffn],
    ['10.0.0.1', 0x0a000001n],
  ];
  for (const [text, value] of cases) {
    t.strictSame(parseIp(text), { family: 4, value }, `parses ${text}`);
    t.equal(formatIp({ family: 4, value }), text, `formats ${text}`);
  }
});

t.test('IPv6 addresses parse, and format as `ip` prints them (glibc inet_ntop)', async (t) => {
  // [input, its canonical text, the value's hex]
  const cases: [string, string, string][] = [
    ['::', '::', '0'],
    ['::1', '::1', '1'],
    ['2001:db8::2', '2001:db8::2', '20010db8000000000000000000000002'],
    ['2001:DB8:0:0:0:0:0:2', '2001:db8::2', '20010db8000000000000000000000002'],
    ['2001:0db8:0000:0000:0000:0000:0000:0002', '2001:db8::2', '20010db8000000000000000000000002'],
    // One zero group is not compressed; of two equal runs the first is.
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1', '20010db8000000010001000100010001'],
    ['2001:0:0:1:0:0:0:1', '2001:0:0:1::1', '20010000000000010000000000000001'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1', '20010db8000000000001000000000001'],
    ['1:2:3:4:5:6:7::', '1:2:3:4:5:6:7:0', '00010002000300040005000600070000'],
    ['::2:3:4:5:6:7:8', '0:2:3:4:5:6:7:8', '00000002000300040005000600070008'],
    ['fe80::', 'fe80::', 'fe800000000000000000000000000000'],
    ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'ffffffffffffffffffffffffffffffff'],
    // IPv4-mapped and IPv4-compatible addresses keep the dotted quad, as inet_ntop prints them.
    ['::ffff:198.18.5.2', '::ffff:198.18.5.2', 'ffffc6120502'],
    ['::ffff:c612:502', '::ffff:198.18.5.2', 'ffffc6120502'],
    ['::198.18.5.2', '::198.18.5.2', 'c6120502'],
    ['64:ff9b::198.18.5.2', '64:ff9b::c612:502', '0064ff9b0000000000000000c6120502'],
    ['::ffff:0:0', '::ffff:0.0.0.0', 'ffff00000000'],
  ];
  for (const [text, canonical, hex] of cases) {
    const parsed = parseIp(text);
    t.strictSame(parsed, { family: 6, value: BigInt(`0x${hex}`) }, `parses ${text}`);
    if (parsed) t.equal(formatIp(parsed), canonical, `${text} formats as ${canonical}`);
  }
});

t.test('anything else is no address', async (t) => {
  const refused = [
    '',
    '1.2.3',
    '1.2.3.4.5',
    '256.1.1.1',
    '01.2.3.4',
    '1.2.3.04',
    '1.2.3.-1',
    '1.2.3.4 ',
    ' 1.2.3.4',
    '0x1.2.3.4',
    '1.2.3.4/24',
    ':',
    ':::',
    '1:::2',
    '1::2::3',
    ':1::2',
    '1::2:',
    '1:2:3:4:5:6:7:8:9',
    '1:2:3:4:5:6:7',
    '1:2:3:4:5:6:7:8::',
    '::1:2:3:4:5:6:7:8',
    '12345::',
    'g::',
    '::1.2.3.256',
    '::1.2.3.4:5',
    '1:2:3:4:5:6:7:1.2.3.4',
    '::ffff:01.2.3.4',
    'fe80::1%eth0',
    '2001:db8::/64',
    '1.2.3.4\n',
    `${'0:'.repeat(40)}1`,
  ];
  for (const text of refused) t.equal(parseIp(text), undefined, `refuses ${JSON.stringify(text)}`);
});

t.test('CIDRs: address as written and prefix length, bounded by the family', async (t) => {
  t.strictSame(parseCidr('198.18.5.7/24'), { ip: { family: 4, value: 0xc6120507n }, prefix: 24 });
  t.strictSame(parseCidr('2001:db8::/64'), { ip: { family: 6, value: 0x20010db8n << 96n }, prefix: 64 });
  t.strictSame(parseCidr('0.0.0.0/0'), { ip: { family: 4, value: 0n }, prefix: 0 });
  t.equal(parseCidr('::/128')?.prefix, 128);
  t.equal(formatCidr(cidr('2001:DB8:0::5/64')), '2001:db8::5/64');
  for (const text of ['198.18.5.0', '198.18.5.0/33', '2001:db8::/129', '198.18.5.0/024', '198.18.5.0/', '/24', '198.18.5.0/24/1', 'x/24', '198.18.5.0/-1', '198.18.5.0/ 24']) {
    t.equal(parseCidr(text), undefined, `refuses ${JSON.stringify(text)}`);
  }
});

t.test('subnet arithmetic', async (t) => {
  const v4 = cidr('198.18.5.77/24');
  t.equal(formatIp(networkAddress(v4)), '198.18.5.0');
  t.equal(formatIp(lastAddress(v4)), '198.18.5.255');
  t.equal(sizeOf(v4), 256n);
  t.equal(sizeOf(cidr('0.0.0.0/0')), 1n << 32n);
  t.equal(sizeOf(cidr('10.0.0.1/32')), 1n);

  const v6 = cidr('2001:db8:5::77/64');
  t.equal(formatIp(networkAddress(v6)), '2001:db8:5::');
  t.equal(formatIp(lastAddress(v6)), '2001:db8:5:0:ffff:ffff:ffff:ffff');
  t.equal(sizeOf(v6), 1n << 64n);

  t.ok(contains(v4, ip('198.18.5.0')), 'contains its network address');
  t.ok(contains(v4, ip('198.18.5.255')), 'contains its broadcast address');
  t.notOk(contains(v4, ip('198.18.6.0')), 'not the next subnet');
  t.notOk(contains(v4, ip('198.18.4.255')), 'not the previous one');
  t.notOk(contains(v4, ip('::ffff:198.18.5.1')), 'not an IPv6 address of the same low bits');
  t.ok(contains(cidr('0.0.0.0/0'), ip('255.255.255.255')));
  t.ok(contains(v6, ip('2001:db8:5::ffff:1')));
  t.notOk(contains(v6, ip('2001:db8:6::1')));
  t.notOk(contains(cidr('::/0'), ip('1.2.3.4')), 'families never mix');

  t.equal(formatIp(nthAddress(v4, 1n) ?? ip('0.0.0.0')), '198.18.5.1', 'the first host');
  t.equal(formatIp(nthAddress(v4, 255n) ?? ip('0.0.0.0')), '198.18.5.255');
  t.equal(nthAddress(v4, 256n), undefined, 'past the end');
  t.equal(nthAddress(v4, -1n), undefined, 'before the start');
  t.equal(formatIp(nthAddress(v6, 0x10000n) ?? ip('::')), '2001:db8:5::1:0');
  t.ok(sameIp(ip('2001:db8::1'), ip('2001:DB8:0::0:1')));
  t.notOk(sameIp(ip('0.0.0.1'), ip('::1')), 'same value, other family');
});
