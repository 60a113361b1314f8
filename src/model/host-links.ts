// How podnet names and marks what it makes on the host. A pod's attachment has a veth end (pnv)
// and, when its egress is shaped, an ifb (pnb); a tunnel that routes where it is made (gre) is
// made on the host as pnt before it moves into the pod. Each is named from the sandbox and the pod's
// interface, so a pass finds them again without reading anything back. Only links whose name
// starts with pn are ever changed or removed by a plan (bridges an admin named otherwise are kept
// in host-objects). A name is a hash, and anyone may make a link of any name: so each link podnet
// makes also carries its owner in its alias (ownerMark), read back before it is changed or deleted.
import { createHash } from 'node:crypto';

/** pnv, pnb, pnt: host links; pnw: a WireGuard attachment's guard table (model/wireguard-guard.ts), named alike. */
export type HostLinkPrefix = 'pnv' | 'pnb' | 'pnt' | 'pnw';

/** A host object of one pod's attachment: a prefix and a hash of (container, interface), 13 characters. */
export function hostInterfaceName(containerId: string, podInterface: string, prefix: HostLinkPrefix = 'pnv'): string {
  return `${prefix}${createHash('sha256').update(`${containerId}/${podInterface}`).digest('hex').slice(0, 10)}`;
}

/** Whether a host link carries podnet's prefix: the only host links a plan may change or remove. */
export function hasPodnetPrefix(name: string): boolean {
  return name.startsWith('pn');
}

/** The alias of a host link podnet made for a sandbox's interface ("c1/net1"), or for a Network's bridge. */
export function ownerMark(owner: { containerId: string; podInterface: string } | 'bridge'): string {
  return owner === 'bridge' ? 'podnet:bridge' : `podnet:${owner.containerId}/${owner.podInterface}`;
}

/**
 * Whether a host link is the one podnet made under `mark`: its alias is the mark, or it has none
 * (made by a podnet before marks, or by a pass that died between making and marking it; podnet's
 * records say it made the link of that name). A link someone else marked is never podnet's.
 */
export function bearsMark(link: { alias?: string }, mark: string): boolean {
  return link.alias === undefined || link.alias === mark;
}
