import t from 'tap';
import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { publicKeyOf, wireguardKeys } from './wireguard-keys.ts';

t.test("a private key's public key, as wg derives it (RFC 7748's X25519 test vector)", async (t) => {
  const alice = Buffer.from('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a', 'hex').toString('base64');
  t.equal(publicKeyOf(alice), Buffer.from('8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a', 'hex').toString('base64'));
  t.throws(() => publicKeyOf('c2hvcnQ='), /not 32 bytes/);
});

t.test("an attachment's key: made on first ask, root's alone, the same after; none made by a preview; deleted with the attachment", async (t) => {
  const dir = join(t.testdir(), 'wireguard');
  const keys = wireguardKeys(dir);
  t.same(keys.keyOf('c1/net1', false), { file: join(dir, 'c1+net1.key') }, 'a preview: the file it would be, no key');
  const made = keys.keyOf('c1/net1', true);
  t.match(made.publicKey, /^[A-Za-z0-9+/]{43}=$/);
  t.equal(statSync(made.file).mode & 0o777, 0o600, 'the key file is 0600');
  t.equal(statSync(dir).mode & 0o777, 0o700, 'its folder 0700');
  const privateKey = readFileSync(made.file, 'utf8').trim();
  t.not(privateKey, made.publicKey);
  t.equal(publicKeyOf(privateKey), made.publicKey);
  t.same(keys.keyOf('c1/net1', true), made, 'asked again: the same key');
  const other = keys.keyOf('c2/net1', true);
  t.not(other.publicKey, made.publicKey, 'each attachment its own');
  keys.sweep(new Set(['c2/net1']));
  t.same(keys.keyOf('c1/net1', false), { file: made.file }, 'swept: an owner no longer held has no key');
  keys.release('c2/net1');
  t.same(keys.keyOf('c2/net1', false), { file: other.file }, 'released');
  keys.release('c9/net1');
  t.pass('releasing a key never made is nothing');
});

t.test('a key folder whose path holds whitespace is refused (wg reads its line as words)', async (t) => {
  const dir = join(t.testdir(), 'podnet keys', 'wireguard');
  t.throws(() => wireguardKeys(dir).keyOf('c1/net1', true), /holds whitespace/);
});
