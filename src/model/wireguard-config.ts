// What a WireGuard interface has as podnet compares it: its public key, listen port and peers, as
// wg shows them back (`wg show IF dump`) and as podnet set them (AppliedAttachment.wireguard).
// Both go through one canonical form, so that a request's prefix written otherwise
// ("fd00:0::/64", host bits set) is not taken for a change made by hand. A peer's endpoint is not
// compared: WireGuard moves it to wherever the peer last sent from (roaming), as it should. The
// private key is never here: the dump's first field is dropped where it is read.
import { subnetOf } from './cidr.ts';
import type { WireguardPeer } from '../protocol/validate.ts';
import { byCodeUnits } from '../order.ts';

/** A WireGuard interface as read back. */
export interface ObservedWireguard {
  publicKey: string;
  listenPort: number;
  /** Its first peers, up to maxPeersRead. */
  peers: WireguardPeer[];
  /** It has more peers than were read: podnet never sets so many, so it was changed by hand. */
  morePeers?: true;
}

/** What of a peer is compared, in canonical form: allowed IPs masked as ip prints them, sorted; no keepalive for 0. */
function canonicalPeer(peer: WireguardPeer): Omit<WireguardPeer, 'endpoint'> {
  const allowed = peer.allowedIPs.map((text) => subnetOf(text) ?? text);
  return {
    publicKey: peer.publicKey,
    allowedIPs: [...new Set(allowed)].sort(byCodeUnits),
    ...(peer.persistentKeepalive ? { persistentKeepalive: peer.persistentKeepalive } : {}),
  };
}

/** Peers in canonical form, by public key. */
function canonicalPeers(peers: readonly WireguardPeer[]): string {
  return JSON.stringify(peers.map(canonicalPeer).sort((a, b) => byCodeUnits(a.publicKey, b.publicKey)));
}

/**
 * Whether an interface read back has the key, port and peers podnet gave it. A peer with the
 * interface's own key is left out: the kernel ignores it (one list of peers given to every pod of
 * a mesh names each pod's own key too).
 */
export function hasWhatWasSet(seen: ObservedWireguard, set: { publicKey: string; listenPort: number; peers: readonly WireguardPeer[] }): boolean {
  const others = set.peers.filter((p) => p.publicKey !== set.publicKey);
  return !seen.morePeers && seen.publicKey === set.publicKey && seen.listenPort === set.listenPort && canonicalPeers(seen.peers) === canonicalPeers(others);
}

/**
 * The peers of a dump read, far more than a request may give (16): those added by hand beyond it
 * are removed by later passes, this many at each.
 */
export const maxPeersRead = 1024;

/**
 * `wg show IF dump`: the interface's line (private key, public key, listen port, fwmark), then a
 * line per peer (public key, preshared key, endpoint, allowed IPs, latest handshake, bytes
 * received, bytes sent, persistent keepalive), tab-separated; "(none)" and "off" for what is not set.
 */
export function wireguardDumpOf(text: string): ObservedWireguard {
  const lines = text.split('\n').filter((l) => l !== '');
  const head = lines[0]?.split('\t');
  if (!head || head.length !== 4 || !/^\d+$/.test(head[2]!)) throw new Error(`its first line is not an interface's (4 fields, a port third)`);
  const peers = lines.slice(1, 1 + maxPeersRead).map((line, i): WireguardPeer => {
    const fields = line.split('\t');
    if (fields.length !== 8) throw new Error(`its line ${i + 2} is not a peer's (8 fields)`);
    const [publicKey, , endpoint, allowed, , , , keepalive] = fields as [string, string, string, string, string, string, string, string];
    const port = endpoint.lastIndexOf(':');
    return {
      publicKey,
      ...(endpoint !== '(none)' && port > 0 ? { endpoint: { address: endpoint.slice(0, port).replace(/^\[(.*)\]$/, '$1'), port: Number(endpoint.slice(port + 1)) } } : {}),
      allowedIPs: allowed === '(none)' ? [] : allowed.split(','),
      ...(keepalive !== 'off' && /^\d+$/.test(keepalive) ? { persistentKeepalive: Number(keepalive) } : {}),
    };
  });
  return { publicKey: head[1]!, listenPort: Number(head[2]), peers, ...(lines.length - 1 > maxPeersRead ? { morePeers: true as const } : {}) };
}
