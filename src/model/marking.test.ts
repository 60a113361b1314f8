import t from 'tap';
import { markingFingerprint, markingFingerprintOf, markingLine, markingTable } from './marking.ts';

t.test("podnet's marking table is written whole in one line of three nft commands, each interface marked in IPv4 and IPv6", async (t) => {
  const entries = [{ interface: 'net2', dscp: 10 }, { interface: 'net1', dscp: 46 }];
  const fingerprint = markingFingerprint(entries);
  t.match(fingerprint, /^podnet\.[0-9a-f]{16}$/, 'a word nft reads unquoted');
  t.equal(markingFingerprint([...entries].reverse()), fingerprint, 'the order asked does not matter');
  t.not(markingFingerprint([{ interface: 'net1', dscp: 46 }, { interface: 'net2', dscp: 12 }]), fingerprint, 'a changed DSCP changes it');
  t.equal(
    markingLine(entries),
    `table ${markingTable}; delete table ${markingTable}; table ${markingTable} { chain postrouting { type filter hook postrouting priority mangle; policy accept; counter comment ${fingerprint}; ` +
      'oifname "net1" ip dscp set 46; oifname "net1" ip6 dscp set 46; oifname "net2" ip dscp set 10; oifname "net2" ip6 dscp set 10; }; }',
  );
  t.equal(markingLine([]), `table ${markingTable}; delete table ${markingTable}`, 'none: the table deleted, whether it was there or not');
});

t.test('names nft would read as numbers or keywords unquoted are quoted', async (t) => {
  t.match(markingLine([{ interface: '0x1', dscp: 1 }, { interface: 'counter', dscp: 2 }]), /oifname "0x1" ip dscp set 1; oifname "0x1" ip6 dscp set 1; oifname "counter" ip dscp set 2;/);
});

t.test("a table's fingerprint counts only when the table is whole as podnet writes it", async (t) => {
  const whole = { rules: new Map([['postrouting', 3]]), names: new Map(), hooks: new Map([['postrouting', 'filter postrouting -150 accept']]), flagged: false, comments: ['podnet.0123456789abcdef'] };
  t.equal(markingFingerprintOf(whole), 'podnet.0123456789abcdef');
  t.equal(markingFingerprintOf(undefined), undefined, 'no table');
  t.equal(markingFingerprintOf({ ...whole, flagged: true }), undefined, 'flagged (dormant: its chain sees nothing)');
  t.equal(markingFingerprintOf({ ...whole, hooks: new Map([['postrouting', 'filter output -150 accept']]) }), undefined, 'hooked elsewhere');
  t.equal(markingFingerprintOf({ ...whole, hooks: new Map([...whole.hooks, ['other', 'filter postrouting -200 accept']]) }), undefined, 'a chain of someone else beside it');
});
