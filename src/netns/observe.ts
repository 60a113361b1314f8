// What is there now: links with their MTU, state, kind, master and addresses, from one
// `ip -d -json addr show` per namespace.
import type { ObservedLink } from '../model/state.ts';
import type { IpRunner, Where } from './ip.ts';

interface IpAddrEntry {
  ifname: string;
  mtu: number;
  txqlen?: number;
  address?: string;
  flags?: string[];
  master?: string;
  linkinfo?: { info_kind?: string };
  addr_info?: { local: string; prefixlen: number; scope?: string }[];
}

/** Links of `where`; on the host only those podnet names (prefix pn), which are all it may touch. */
export async function observeLinks(ip: IpRunner, where: Where): Promise<Map<string, ObservedLink>> {
  const entries = (await ip.json(where, ['-d', 'addr', 'show'])) as IpAddrEntry[];
  const links = new Map<string, ObservedLink>();
  for (const e of entries) {
    if (where === 'host' && !e.ifname.startsWith('pn')) continue;
    links.set(e.ifname, {
      name: e.ifname,
      mtu: e.mtu,
      up: e.flags?.includes('UP') ?? false,
      promisc: e.flags?.includes('PROMISC') ?? false,
      ...(e.txqlen !== undefined ? { txqueuelen: e.txqlen } : {}),
      ...(e.address ? { mac: e.address } : {}),
      ...(e.linkinfo?.info_kind ? { kind: e.linkinfo.info_kind } : {}),
      ...(e.master ? { master: e.master } : {}),
      // Link-local IPv6 addresses are the kernel's, not a request's.
      addresses: (e.addr_info ?? []).filter((a) => a.scope !== 'link').map((a) => `${a.local}/${a.prefixlen}`),
    });
  }
  return links;
}
