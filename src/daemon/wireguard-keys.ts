// The private keys of the pods' WireGuard interfaces (docs/adr/0037): made on the node, one per
// attachment, kept in the state dir (root's alone: the folder 0700, each file 0600) under its
// owner's name (sandbox and pod interface), and deleted when the attachment goes; a key that
// leaked is replaced by taking the attachment back and asking it again. wg reads a key by its
// path (`wg set IF private-key FILE`); the daemon reads one back only to derive its public key,
// and never writes it to a log, an annotation or a status.
import { createHash, createPrivateKey, createPublicKey, generateKeyPairSync } from 'node:crypto';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { PodnetError } from '../errors.ts';
import { ensurePrivateDir, removeTempFiles, tempPrefix, writeFileAtomic } from '../registry/atomic-file.ts';

/** An interface's key: the file wg reads, and its public key (undefined while not made: a preview). */
export interface WireguardKey {
  file: string;
  publicKey?: string;
}

export interface WireguardKeys {
  /** The key of `owner` (model/resolve.ts addressOwner: sandbox/interface) on `network`, made on first ask when `make`. */
  keyOf(network: string, owner: string, make: boolean): WireguardKey;
  /** Deletes the key of `owner` on `network`, when it has one. */
  release(network: string, owner: string): void;
  /** Deletes the keys not in `keep` (`<network> <owner>`), and what an interrupted write left: those an attachment took and a crash kept from recording. */
  sweep(keep: ReadonlySet<string>): void;
}

/** PKCS#8's wrapping of a raw X25519 private key (RFC 8410): the 32 bytes follow it. */
const x25519Pkcs8Prefix = Buffer.from('302e020100300506032b656e04220420', 'hex');

/** A key as wg writes one: base64 of 32 bytes, in the one spelling wg reads back. */
const keyPattern = /^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$/;

/** The public key of a private key as wg writes both: base64 of 32 bytes. */
export function publicKeyOf(privateKey: string): string {
  // Nothing of what is wrong is said: it may be most of a key.
  if (!keyPattern.test(privateKey.trim())) throw new PodnetError('IO_FAILURE', 'a WireGuard private key is not 32 bytes of base64 as wg writes it');
  const raw = Buffer.from(privateKey.trim(), 'base64');
  const key = createPrivateKey({ key: Buffer.concat([x25519Pkcs8Prefix, raw]), format: 'der', type: 'pkcs8' });
  const x = createPublicKey(key).export({ format: 'jwk' }).x;
  return Buffer.from(x!, 'base64url').toString('base64');
}

/** A new private key, base64 of 32 bytes as `wg genkey` prints it. */
function newPrivateKey(): string {
  const d = generateKeyPairSync('x25519').privateKey.export({ format: 'jwk' }).d;
  return Buffer.from(d!, 'base64url').toString('base64');
}

/**
 * An owner's key file on a Network: a hash of the Network (whose name may be 253 characters), the
 * sandbox and the interface, joined by + (in none of their names); within a file name's 255 bytes.
 */
const fileName = (network: string, owner: string) => `${createHash('sha256').update(network).digest('hex').slice(0, 16)}+${owner.replace('/', '+')}.key`;

/** The keys kept in `dir` (the state dir's wireguard folder). */
export function wireguardKeys(dir: string): WireguardKeys {
  return {
    keyOf(network, owner, make) {
      const file = join(dir, fileName(network, owner));
      // wg's line is split on whitespace: a key path must hold none.
      if (/\s/.test(file)) throw new PodnetError('INVALID_CONFIG', `WireGuard keys are kept under ${dir}, whose path holds whitespace: wg could not be given it; run the daemon with a --state-dir without`);
      let held: string | undefined;
      try {
        held = readFileSync(file, 'utf8');
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
      }
      // One that is not a key as podnet writes it (cut short, edited) is never given to wg, which
      // would echo it in its error: a new one replaces it, as for a key that leaked.
      if (held !== undefined && keyPattern.test(held.trim())) return { file, publicKey: publicKeyOf(held) };
      if (!make) return { file };
      ensurePrivateDir(dir);
      const privateKey = newPrivateKey();
      writeFileAtomic(file, `${privateKey}\n`, { mode: 0o600 });
      return { file, publicKey: publicKeyOf(privateKey) };
    },
    release(network, owner) {
      rmSync(join(dir, fileName(network, owner)), { force: true });
    },
    sweep(keep) {
      let files: string[];
      try {
        files = readdirSync(dir);
      } catch {
        return;
      }
      removeTempFiles(dir);
      const kept = new Set([...keep].map((held) => fileName(held.slice(0, held.indexOf(' ')), held.slice(held.indexOf(' ') + 1))));
      for (const file of files) if (file.endsWith('.key') && !file.startsWith(tempPrefix) && !kept.has(file)) rmSync(join(dir, file), { force: true });
    },
  };
}
