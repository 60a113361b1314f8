import t from 'tap';
import { markingFingerprint, markingLine, markingTable } from './marking.ts';

t.test("podnet's marking table is written whole in one line of three nft commands, each interface marked in IPv4 and IPv6", async (t) => {
  const entries = [{ interface: 'net2', dscp: 10 }, { interface: 'net1', dscp: 46 }];
  const fingerprint = markingFingerprint(entries);
  t.match(fingerprint, /^podnet\.[0-9a-f]{16}$/, 'a word nft reads unquoted');
  t.equal(markingFingerprint([...entries].reverse()), fingerprint, 'the order asked does not matter');
  t.not(markingFingerprint([{ interface: 'net1', dscp: 46 }, { interface: 'net2', dscp: 12 }]), fingerprint, 'a changed DSCP changes it');
  t.equal(
    markingLine(entries),
    `table ${markingTable}; delete table ${markingTable}; table ${markingTable} { chain postrouting { type filter hook postrouting priority mangle; policy accept; counter comment ${fingerprint}; ` +
      'oifname net1 ip dscp set 46; oifname net1 ip6 dscp set 46; oifname net2 ip dscp set 10; oifname net2 ip6 dscp set 10; }; }',
  );
  t.notMatch(markingLine(entries), /["'\\#]/, 'nothing the runner refuses');
  t.equal(markingLine([]), `table ${markingTable}; delete table ${markingTable}`, 'none: the table deleted, whether it was there or not');
});
