// A Network's IP ranges made ready to allocate from, and what is wrong with them whatever the pod:
// pure, so that a Network's status can tell a bad range before any pod asks (model/document-problems.ts).
import { PodnetError } from '../errors.ts';
import type { IpRange } from '../protocol/validate.ts';
import { bitsOf, contains, formatCidr, formatIp, lastAddress, networkAddress, parseCidr, parseIp, sameIp, type Cidr, type Ip } from './cidr.ts';

/** A range made ready to allocate from. */
export interface Pool {
  /** The subnet as the message and the round robin's position name it: "198.18.5.0/24". */
  key: string;
  /** For messages: the subnet, and the pool's bounds when they are narrower. */
  label: string;
  /** The subnet, host bits clear. */
  subnet: Cidr;
  /** The pool's bounds, inclusive. */
  start: bigint;
  end: bigint;
  gateway: Ip;
  /** Addresses of the pool never handed out, with the reason. */
  reserved: Map<bigint, string>;
}

export function invalid(network: string, reason: string): PodnetError {
  return new PodnetError('INVALID_REQUEST', `network ${network}: ${reason}`);
}

/** Untrusted text in a message: quoted, one line, bounded. */
export function quoted(value: unknown): string {
  if (typeof value === 'string') return value.length > 80 ? `${JSON.stringify(value.slice(0, 80))}...` : JSON.stringify(value);
  const text = JSON.stringify(value) ?? String(value);
  return text.length > 80 ? `${text.slice(0, 80)}...` : text;
}

export function ipOf(text: unknown): Ip | undefined {
  return typeof text === 'string' ? parseIp(text) : undefined;
}

export function poolOf(network: string, range: IpRange): Pool {
  const given = typeof range.subnet === 'string' ? parseCidr(range.subnet) : undefined;
  if (!given) throw invalid(network, `subnet ${quoted(range.subnet)} is not a CIDR (an IPv4 or IPv6 address/prefix length)`);
  const subnet: Cidr = { ip: networkAddress(given), prefix: given.prefix };
  const key = formatCidr(subnet);
  if (!sameIp(given.ip, subnet.ip)) throw invalid(network, `subnet ${formatCidr(given)} has host bits set; the subnet is ${key}`);
  const v4 = subnet.ip.family === 4;
  // Point-to-point subnets are refused: with the gateway (and IPv4's network and broadcast
  // addresses) kept out, they leave one address at most. A small pool is a bounded larger subnet.
  if (subnet.prefix > bitsOf(subnet.ip.family) - 2) {
    throw invalid(network, `subnet ${key} is too small to allocate from (at most /30 for IPv4, /126 for IPv6; bound a larger subnet with rangeStart and rangeEnd for a small pool)`);
  }
  const first = subnet.ip.value;
  const last = lastAddress(subnet).value;

  const addressIn = (field: 'rangeStart' | 'rangeEnd' | 'gateway', text: string | undefined): Ip | undefined => {
    if (text === undefined) return undefined;
    const ip = ipOf(text);
    if (!ip) throw invalid(network, `${field} ${quoted(text)} is not an IP address`);
    if (!contains(subnet, ip)) throw invalid(network, `${field} ${formatIp(ip)} is outside subnet ${key}`);
    return ip;
  };
  const start = addressIn('rangeStart', range.rangeStart)?.value ?? first;
  const end = addressIn('rangeEnd', range.rangeEnd)?.value ?? last;
  if (start > end) throw invalid(network, `rangeStart ${formatIp({ family: subnet.ip.family, value: start })} is after rangeEnd ${formatIp({ family: subnet.ip.family, value: end })}`);
  const label = start === first && end === last ? key : `${key} (${formatIp({ family: subnet.ip.family, value: start })}-${formatIp({ family: subnet.ip.family, value: end })})`;

  const gateway = addressIn('gateway', range.gateway) ?? { family: subnet.ip.family, value: first + 1n };
  if (v4 && (gateway.value === first || gateway.value === last)) {
    throw invalid(network, `gateway ${formatIp(gateway)} is the ${gateway.value === first ? 'network' : 'broadcast'} address of ${key}`);
  }
  const reserved = new Map<bigint, string>([[first, v4 ? 'the network address' : 'the subnet-router anycast address']]);
  if (v4) reserved.set(last, 'the broadcast address');
  reserved.set(gateway.value, 'the gateway');

  const inPool = [...reserved].filter(([value]) => value >= start && value <= end);
  if (end - start + 1n <= BigInt(inPool.length)) {
    throw invalid(network, `range ${label} holds no address to hand out (only ${inPool.map(([, why]) => why).join(', ')})`);
  }
  return { key, label, subnet, start, end, gateway, reserved };
}

/**
 * What allocate would refuse in a Network's ranges whatever the pod (a subnet that is not a
 * CIDR, has host bits set or is too small, a bound outside it, ranges that overlap): the range's
 * index and why, or undefined when they are sound.
 */
export function rangesProblem(network: string, ranges: readonly IpRange[]): { index: number; reason: string } | undefined {
  const pools: Pool[] = [];
  for (const [index, range] of ranges.entries()) {
    try {
      pools.push(poolOf(network, range));
      checkDisjoint(network, pools);
    } catch (err) {
      // The status that tells it names the Network already.
      return { index, reason: (err as Error).message.replace(`network ${network}: `, '') };
    }
  }
  return undefined;
}

export function checkDisjoint(network: string, pools: readonly Pool[]): void {
  pools.forEach((a, i) => {
    for (const b of pools.slice(i + 1)) {
      if (contains(a.subnet, b.subnet.ip) || contains(b.subnet, a.subnet.ip)) throw invalid(network, `ranges ${a.key} and ${b.key} overlap`);
    }
  });
}


/** A static address as an attachment asks it: "ip" or "ip/prefix"; undefined when it is neither. */
export function staticAddressOf(text: unknown): { ip: Ip; prefix: number | undefined } | undefined {
  const cidr = typeof text === 'string' && text.includes('/') ? parseCidr(text) : undefined;
  const ip = cidr?.ip ?? ipOf(text);
  return ip ? { ip, prefix: cidr?.prefix } : undefined;
}

/**
 * The pool a static address asks to be given from: one that holds it, at the pool's own prefix
 * length when it names one, and not an address the pool keeps back (the gateway, the network or
 * broadcast address). Throws saying which it is not. Whether another holds it is the IPAM's to say.
 */
export function poolOfStatic(network: string, pools: readonly Pool[], ip: Ip, prefix: number | undefined): Pool {
  const text = formatIp(ip);
  const pool = pools.find((p) => contains(p.subnet, ip) && ip.value >= p.start && ip.value <= p.end);
  if (!pool) throw invalid(network, `${text} is outside every range (${pools.map((p) => p.label).join(', ')})`);
  if (prefix !== undefined && prefix !== pool.subnet.prefix) throw invalid(network, `${text}/${prefix} does not have the prefix length of range ${pool.key}`);
  const why = pool.reserved.get(ip.value);
  if (why) throw invalid(network, `${text} is ${why} of range ${pool.key}`);
  return pool;
}

/**
 * Why a Network's ranges cannot give one of these static addresses ("ip" or "ip/prefix"), with
 * its index; undefined when each could be given (unless another holds it) or the ranges
 * themselves are wrong, which is the Network's problem. What a config asks is judged by it before
 * any pod is planned: `podnet apply -f` and the config's status say it.
 */
export function staticAddressProblem(network: string, ranges: readonly IpRange[], ips: readonly string[]): { index: number; reason: string } | undefined {
  let pools: Pool[];
  try {
    pools = ranges.map((range) => poolOf(network, range));
  } catch {
    return undefined;
  }
  for (const [index, text] of ips.entries()) {
    const wanted = staticAddressOf(text);
    if (!wanted) return { index, reason: `${quoted(text)} is not an IP address (ip or ip/prefix)` };
    try {
      poolOfStatic(network, pools, wanted.ip, wanted.prefix);
    } catch (err) {
      return { index, reason: (err as Error).message };
    }
  }
  return undefined;
}
