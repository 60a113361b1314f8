// Address arithmetic, the model's and IPAM's: IPv4 and IPv6 addresses as BigInt, CIDRs, and the
// canonical text form. Pure; no node:net, so the rules are the ones written here whatever Node
// version runs.
//
// Parsing is as strict as inet_pton: dotted quads without leading zeros (01.2.3.4 could be read as
// octal elsewhere), IPv6 with at most one "::" and an optional dotted quad in the last 32 bits, no
// zone index. Formatting is what `ip` prints (glibc's inet_ntop): lowercase hex, no leading zeros,
// the longest run of two or more zero groups (the first of equal runs) compressed to "::", and
// ::a.b.c.d / ::ffff:a.b.c.d for the IPv4-compatible and IPv4-mapped ranges.

export type IpFamily = 4 | 6;

export interface Ip {
  readonly family: IpFamily;
  readonly value: bigint;
}

/** An address with a prefix length; `ip` is as written, host bits and all. */
export interface Cidr {
  readonly ip: Ip;
  readonly prefix: number;
}

export function bitsOf(family: IpFamily): number {
  return family === 4 ? 32 : 128;
}

const dottedQuad = /^(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})\.(0|[1-9][0-9]{0,2})$/;
const hexGroup = /^[0-9a-fA-F]{1,4}$/;
const prefixDigits = /^(0|[1-9][0-9]{0,2})$/;

function parseIpv4(text: string): bigint | undefined {
  const m = dottedQuad.exec(text);
  if (!m) return undefined;
  let value = 0n;
  for (const octet of m.slice(1).map(Number)) {
    if (octet > 255) return undefined;
    value = (value << 8n) | BigInt(octet);
  }
  return value;
}

function parseIpv6(text: string): bigint | undefined {
  // The longest form is 45 characters (six full groups and a dotted quad); this also bounds the work.
  if (text.length > 45 || !text.includes(':')) return undefined;
  let hex = text;
  const lastColon = text.lastIndexOf(':');
  const tail = text.slice(lastColon + 1);
  if (tail.includes('.')) {
    const v4 = parseIpv4(tail);
    if (v4 === undefined) return undefined;
    hex = `${text.slice(0, lastColon + 1)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const halves = hex.split('::');
  if (halves.length > 2) return undefined;
  const groupsOf = (part: string): string[] => (part === '' ? [] : part.split(':'));
  const left = groupsOf(halves[0] ?? '');
  const right = halves.length === 2 ? groupsOf(halves[1] ?? '') : [];
  if (![...left, ...right].every((g) => hexGroup.test(g))) return undefined;
  // Without "::" all eight groups are written; with it, "::" stands for at least one.
  if (halves.length === 1 ? left.length !== 8 : left.length + right.length > 7) return undefined;
  const groups = [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
  return groups.reduce((value, g) => (value << 16n) | BigInt(parseInt(g, 16)), 0n);
}

/** An IPv4 or IPv6 address; undefined when `text` is not one. */
export function parseIp(text: string): Ip | undefined {
  const v4 = parseIpv4(text);
  if (v4 !== undefined) return { family: 4, value: v4 };
  const v6 = parseIpv6(text);
  if (v6 !== undefined) return { family: 6, value: v6 };
  return undefined;
}

/** "address/prefix"; undefined when `text` is not one or the prefix is too long for the family. */
export function parseCidr(text: string): Cidr | undefined {
  const slash = text.indexOf('/');
  if (slash === -1) return undefined;
  const ip = parseIp(text.slice(0, slash));
  const digits = text.slice(slash + 1);
  if (!ip || !prefixDigits.test(digits)) return undefined;
  const prefix = Number(digits);
  if (prefix > bitsOf(ip.family)) return undefined;
  return { ip, prefix };
}

function formatIpv4(value: bigint): string {
  return [24n, 16n, 8n, 0n].map((shift) => String((value >> shift) & 0xffn)).join('.');
}

function formatIpv6(value: bigint): string {
  const words = Array.from({ length: 8 }, (_, i) => Number((value >> BigInt(112 - 16 * i)) & 0xffffn));
  // The longest run of zero words, the first of equal ones; a single zero word is not compressed.
  let best = { base: -1, len: 0 };
  for (let i = 0; i < 8; ) {
    if (words[i] !== 0) {
      i++;
      continue;
    }
    let end = i;
    while (end < 8 && words[end] === 0) end++;
    if (end - i > best.len) best = { base: i, len: end - i };
    i = end;
  }
  if (best.len < 2) best = { base: -1, len: 0 };
  if (best.base === 0 && (best.len === 6 || (best.len === 5 && words[5] === 0xffff))) {
    return `${best.len === 5 ? '::ffff:' : '::'}${formatIpv4(value & 0xffffffffn)}`;
  }
  const hex = (from: number, to: number) => words.slice(from, to).map((w) => w.toString(16)).join(':');
  if (best.base === -1) return hex(0, 8);
  return `${hex(0, best.base)}::${hex(best.base + best.len, 8)}`;
}

/** The canonical text of an address, as `ip` prints it. */
export function formatIp(ip: Ip): string {
  return ip.family === 4 ? formatIpv4(ip.value) : formatIpv6(ip.value);
}

export function formatCidr(cidr: Cidr): string {
  return `${formatIp(cidr.ip)}/${cidr.prefix}`;
}

function hostMask(cidr: Cidr): bigint {
  return (1n << BigInt(bitsOf(cidr.ip.family) - cidr.prefix)) - 1n;
}

/** The first address of the subnet (host bits clear). */
export function networkAddress(cidr: Cidr): Ip {
  return { family: cidr.ip.family, value: cidr.ip.value & ~hostMask(cidr) };
}

/** "address/prefix" as the subnet it names, host bits clear, as ip prints it ("2001:db8:0::5/64" is "2001:db8::/64"); undefined when `text` is not one. */
export function subnetOf(text: string): string | undefined {
  const cidr = parseCidr(text);
  return cidr && formatCidr({ ip: networkAddress(cidr), prefix: cidr.prefix });
}

/** The last address of the subnet (host bits set): IPv4's broadcast address. */
export function lastAddress(cidr: Cidr): Ip {
  return { family: cidr.ip.family, value: cidr.ip.value | hostMask(cidr) };
}

/** How many addresses the subnet spans. */
export function sizeOf(cidr: Cidr): bigint {
  return hostMask(cidr) + 1n;
}

export function contains(cidr: Cidr, ip: Ip): boolean {
  return ip.family === cidr.ip.family && (ip.value & ~hostMask(cidr)) === networkAddress(cidr).value;
}

/** The address `n` places after the subnet's first (0: the network address, 1: the first host); undefined past its end. */
export function nthAddress(cidr: Cidr, n: bigint): Ip | undefined {
  if (n < 0n || n >= sizeOf(cidr)) return undefined;
  return { family: cidr.ip.family, value: networkAddress(cidr).value + n };
}

export function sameIp(a: Ip, b: Ip): boolean {
  return a.family === b.family && a.value === b.value;
}
