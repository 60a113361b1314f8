// How podnet names what it makes on the host. A pod's attachment has a veth end (pnv) and, when its
// egress is shaped, an ifb (pnb); both are named from the sandbox and the pod's interface, so a
// pass finds them again without reading anything back. Only links whose name starts with pn are
// ever changed or removed by a plan (bridges an admin named otherwise are kept in host-objects).
import { createHash } from 'node:crypto';

export type HostLinkPrefix = 'pnv' | 'pnb';

/** A host link of one pod's attachment: a prefix and a hash of (container, interface), 13 characters. */
export function hostInterfaceName(containerId: string, podInterface: string, prefix: HostLinkPrefix = 'pnv'): string {
  return `${prefix}${createHash('sha256').update(`${containerId}/${podInterface}`).digest('hex').slice(0, 10)}`;
}

/** Whether a host link carries podnet's prefix: the only host links a plan may change or remove. */
export function hasPodnetPrefix(name: string): boolean {
  return name.startsWith('pn');
}
