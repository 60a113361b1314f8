import t from 'tap';
import { hasWhatWasSet, maxPeersRead, wireguardDumpOf } from './wireguard-config.ts';

const privateKey = 'yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=';
const publicKey = 'HIgo9xNzJMWLKASShiTqIybxZ0U3wGLiUeJ1PKf8ykw=';
const peerA = 'xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=';
const peerB = 'TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0=';

t.test('wg show IF dump: the interface\'s public key and port, each peer; never its private key', async (t) => {
  const dump = [
    [privateKey, publicKey, '51820', 'off'],
    [peerA, '(none)', '198.18.102.2:51820', '10.9.0.2/32,2001:db8::/64', '1700000000', '1024', '2048', '25'],
    [peerB, '(none)', '[2001:db8::2]:51821', '(none)', '0', '0', '0', 'off'],
    [peerB.replace('T', 'U'), '(none)', '(none)', '10.9.0.4/32', '0', '0', '0', 'off'],
  ].map((fields) => fields.join('\t')).join('\n');
  const seen = wireguardDumpOf(`${dump}\n`);
  t.same(seen, {
    publicKey,
    listenPort: 51820,
    peers: [
      { publicKey: peerA, endpoint: { address: '198.18.102.2', port: 51820 }, allowedIPs: ['10.9.0.2/32', '2001:db8::/64'], persistentKeepalive: 25 },
      { publicKey: peerB, endpoint: { address: '2001:db8::2', port: 51821 }, allowedIPs: [] },
      { publicKey: peerB.replace('T', 'U'), allowedIPs: ['10.9.0.4/32'] },
    ],
  });
  t.notMatch(JSON.stringify(seen), privateKey, 'the private key is not kept');
  t.same(wireguardDumpOf(`${privateKey}\t${publicKey}\t51820\toff\n`).peers, [], 'no peer');
});

t.test('a dump that is not one is refused, saying which line, and never quoting it (a private key is in it)', async (t) => {
  t.throws(() => wireguardDumpOf(''), /first line is not an interface's/);
  t.throws(() => wireguardDumpOf(`${privateKey}\t${publicKey}\toff`), /first line is not an interface's/);
  const bad = `${privateKey}\t${publicKey}\t51820\toff\n${peerA}\t(none)`;
  t.throws(() => wireguardDumpOf(bad), /line 2 is not a peer's/);
  let said = '';
  try {
    wireguardDumpOf(`${privateKey}\tnot a dump`);
  } catch (err) {
    said = (err as Error).message;
  }
  t.match(said, /first line is not an interface's/);
  t.notMatch(said, privateKey, 'the key is not in what it says');
});

t.test('a dump of more peers than a request gives: the first read, and the interface taken as changed', async (t) => {
  const many = [`${privateKey}\t${publicKey}\t51820\toff`, ...Array.from({ length: maxPeersRead + 1 }, () => `${peerA}\t(none)\t(none)\t(none)\t0\t0\t0\toff`)].join('\n');
  const seen = wireguardDumpOf(many);
  t.equal(seen.peers.length, maxPeersRead);
  t.equal(seen.morePeers, true);
  t.notOk(hasWhatWasSet(seen, { publicKey, listenPort: 51820, peers: seen.peers }), 'not as set, whatever its first peers');
});

t.test('as set or not: key, port, peers and their allowed IPs and keepalive count; endpoints and the form of a prefix do not', async (t) => {
  const set = { publicKey, listenPort: 51820, peers: [{ publicKey: peerA, endpoint: { address: '198.18.102.2', port: 51820 }, allowedIPs: ['10.9.0.2/32', '2001:db8:0:0::7/64'], persistentKeepalive: 0 }] };
  const seen = { publicKey, listenPort: 51820, peers: [{ publicKey: peerA, endpoint: { address: '198.18.7.7', port: 1 }, allowedIPs: ['2001:db8::/64', '10.9.0.2/32'] }] };
  t.ok(hasWhatWasSet(seen, set), 'a roamed endpoint, prefixes masked and reordered, keepalive 0 as off');
  t.notOk(hasWhatWasSet({ ...seen, publicKey: peerB }, set), 'another key');
  t.notOk(hasWhatWasSet({ ...seen, listenPort: 51821 }, set), 'another port');
  t.notOk(hasWhatWasSet({ ...seen, peers: [] }, set), 'a peer gone');
  t.notOk(hasWhatWasSet({ ...seen, peers: [...seen.peers, { publicKey: peerB, allowedIPs: [] }] }, set), 'a peer more');
  t.notOk(hasWhatWasSet({ ...seen, peers: [{ ...seen.peers[0]!, allowedIPs: ['10.9.0.2/32'] }] }, set), 'an allowed IP gone');
  t.notOk(hasWhatWasSet({ ...seen, peers: [{ ...seen.peers[0]!, persistentKeepalive: 25 }] }, set), 'a keepalive set');
  t.ok(hasWhatWasSet(seen, { ...set, peers: [...set.peers, { publicKey, allowedIPs: ['10.9.0.1/32'] }] }), "a peer with the interface's own key, which the kernel ignores, is not looked for");
});
