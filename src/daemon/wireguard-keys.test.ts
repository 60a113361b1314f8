import t from 'tap';
import { readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createHash } from 'node:crypto';
import { publicKeyOf, wireguardKeys } from './wireguard-keys.ts';

t.test("a private key's public key, as wg derives it (RFC 7748's X25519 test vector); what is no key as wg writes one is refused without saying it", async (t) => {
  const alice = Buffer.from('77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a', 'hex').toString('base64');
  t.equal(publicKeyOf(alice), Buffer.from('8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a', 'hex').toString('base64'));
  for (const bad of ['c2hvcnQ=', alice.replace('=', ''), `-${alice.slice(1)}`]) {
    const said = (() => {
      try {
        publicKeyOf(bad);
        return 'taken';
      } catch (err) {
        return (err as Error).message;
      }
    })();
    t.match(said, /not 32 bytes of base64 as wg writes it/);
    t.notOk(said.includes(bad.slice(0, 8)), 'refused, the content unsaid');
  }
});

t.test("an attachment's key: made on first ask, root's alone, the same after; none made by a preview; one per Network; deleted with the attachment", async (t) => {
  const dir = join(t.testdir(), 'wireguard');
  const keys = wireguardKeys(dir);
  const preview = keys.keyOf('wg', 'c1/net1', false);
  t.same(preview, { file: join(dir, `${createHash('sha256').update('wg').digest('hex').slice(0, 16)}+c1+net1.key`) }, 'a preview: the file it would be (named by a hash of its Network, the sandbox and the interface), no key');
  const made = keys.keyOf('wg', 'c1/net1', true);
  t.match(made.publicKey, /^[A-Za-z0-9+/]{43}=$/);
  t.equal(statSync(made.file).mode & 0o777, 0o600, 'the key file is 0600');
  t.equal(statSync(dir).mode & 0o777, 0o700, 'its folder 0700');
  const privateKey = readFileSync(made.file, 'utf8').trim();
  t.not(privateKey, made.publicKey);
  t.equal(publicKeyOf(privateKey), made.publicKey);
  t.same(keys.keyOf('wg', 'c1/net1', true), made, 'asked again: the same key');
  const moved = keys.keyOf('wg2', 'c1/net1', true);
  t.not(moved.publicKey, made.publicKey, 'the same interface on another Network: a key of its own');
  keys.release('wg', 'c1/net1');
  t.same(keys.keyOf('wg2', 'c1/net1', true), moved, "releasing the first Network's leaves the other's");
  const other = keys.keyOf('wg', 'c2/net1', true);
  writeFileSync(join(dir, '.tmp-wg+c3+net1.key.1.2'), 'half a key');
  keys.sweep(new Set(['wg c2/net1']));
  t.same(readdirSync(dir), [other.file.slice(dir.length + 1)], "swept: the keys no attachment holds and an interrupted write's temp file");
  t.ok(keys.keyOf('n'.repeat(253), `${'c'.repeat(128)}/net1`, true).publicKey, "the longest Network and sandbox names still name a file");
  keys.release('wg', 'c2/net1');
  t.same(keys.keyOf('wg', 'c2/net1', false), { file: other.file }, 'released');
  keys.release('wg', 'c9/net1');
  t.pass('releasing a key never made is nothing');
});

t.test('a key file that is no key as podnet writes it is made anew, never handed to wg', async (t) => {
  const dir = join(t.testdir(), 'wireguard');
  const keys = wireguardKeys(dir);
  const made = keys.keyOf('wg', 'c1/net1', true);
  writeFileSync(made.file, 'not a key\n');
  t.same(keys.keyOf('wg', 'c1/net1', false), { file: made.file }, 'a preview sees none');
  const again = keys.keyOf('wg', 'c1/net1', true);
  t.match(again.publicKey, /^[A-Za-z0-9+/]{43}=$/);
  t.not(again.publicKey, made.publicKey);
});

t.test('a key folder whose path holds whitespace is refused (wg reads its line as words)', async (t) => {
  const dir = join(t.testdir(), 'podnet keys', 'wireguard');
  t.throws(() => wireguardKeys(dir).keyOf('wg', 'c1/net1', true), /holds whitespace/);
});
