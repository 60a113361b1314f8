// Node-local IPAM for runtime networks: which addresses of a Network's ranges are held, and by whom.
// One JSON file per Network under <stateDir>/ipam, written whole and atomically before an
// allocation or release returns, so a daemon restart never hands out an address twice.
//
// Like the reference host-local plugin, allocation is round robin: the search for a free address
// starts after the one handed out last in the range, so an address just released rests while the
// rest of the pool is used. Unlike it, the whole state of a Network is one file, so an allocation
// across several ranges (IPv4 and IPv6) lands on disk all at once or not at all.
//
// Synchronous, like the rest of podnet's state writes (registry/atomic-file.ts says why): no two
// calls interleave, so no call can see a half-made change. One NodeIpam per state directory: the
// files are read once and then trusted, and only the daemon, which holds the state-dir lock,
// writes them.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PodnetError } from '../errors.ts';
import { stateLayout } from '../protocol/paths.ts';
import { isDocument, type IpamState, type IpRange } from '../protocol/validate.ts';
import { ensurePrivateDir, namesIn, writeFileAtomic } from '../registry/atomic-file.ts';
import { kernelState } from '../registry/boot.ts';
import { parseStateDocument, stateDocumentText, type Unversioned } from '../registry/state-document.ts';
import { contains, formatCidr, formatIp, parseCidr, sameIp, type Ip } from './cidr.ts';
import { checkDisjoint, invalid, ipOf, poolOf, quoted, type Pool } from './pools.ts';
import type { Allocation } from '../model/resolve.ts';


/** IpamOwner in schemas/state.schema.json: checked before an owner is written, as on reading. */
const isOwner = (owner: unknown) => isDocument('IpamOwner', owner);
/**
 * A Network name this long or shorter is its own file name. A longer one (up to 253) would not fit
 * once writeFileAtomic's temp name adds its 34 or so characters to the 255 a file name may have:
 * it is cut and a hash of it added, after a '~' no name holds. The file names its Network inside.
 */
const plainFileNameMax = 200;

/** What the state file holds for one Network, in memory. */
interface NetworkState {
  /** Per range (its subnet's key), the address handed out last: the round robin's position. */
  lastHandedOut: Map<string, string>;
  /** What each owner holds, in the order handed out. */
  owners: Map<string, Allocation[]>;
}

/** An address a caller asked for, with the prefix length it gave, if any. */
interface Wanted {
  ip: Ip;
  prefix: number | undefined;
}

export class NodeIpam {
  private readonly dir: string;
  private readonly networks = new Map<string, NetworkState>();
  /** The network each state file is of (a long name's file name is shortened): read once, as only this daemon writes them. */
  private readonly networkOfFile = new Map<string, string>();

  private constructor(stateDir: string) {
    this.dir = join(stateDir, stateLayout.ipam);
  }

  /** Allocations live in <stateDir>/ipam/<network>.json, one file per Network, loaded on first use. */
  static open(stateDir: string): NodeIpam {
    return new NodeIpam(stateDir);
  }

  /**
   * One address from each range (several ranges: e.g. one IPv4 and one IPv6), or exactly the
   * requested static addresses (each "ip/prefix" or plain ip, which must fall inside one of the ranges and not be taken by another owner).
   * Idempotent per owner: an owner that already holds addresses on this network gets the same ones back.
   * On file before it returns, for this boot (docs/adr/0006). Never hands out an address twice, also across a new NodeIpam.open of the same dir (daemon restart).
   */
  allocate(network: string, ranges: readonly IpRange[], owner: string, requested: readonly string[] = []): Allocation[] {
    const { granted, next } = this.decide(network, ranges, owner, requested);
    if (next) this.save(network, next);
    return copies(granted);
  }

  /** What allocate would give, without taking it: for `podnet diff`. */
  preview(network: string, ranges: readonly IpRange[], owner: string, requested: readonly string[] = []): Allocation[] {
    return copies(this.decide(network, ranges, owner, requested).granted);
  }

  /** The addresses for `owner`, and the state to save when they are new. */
  private decide(network: string, ranges: readonly IpRange[], owner: string, requested: readonly string[]): { granted: Allocation[]; next?: NetworkState } {
    checkNames(network, owner);
    if (ranges.length === 0) throw invalid(network, 'no IP ranges to allocate from');
    const pools = ranges.map((range) => poolOf(network, range));
    checkDisjoint(network, pools);
    const wanted = wantedOf(network, requested);
    const state = this.load(network);

    const holding = state.owners.get(owner);
    if (holding) {
      if (wanted.length > 0 && !sameAddresses(holding, wanted)) {
        const held = holding.map((a) => a.address).join(', ');
        throw invalid(network, `${owner} already holds ${held}, not ${wanted.map((w) => formatIp(w.ip)).join(', ')}; release it first`);
      }
      return { granted: holding };
    }

    const holders = holdersOf(state);
    const lastHandedOut = new Map(state.lastHandedOut);
    const granted =
      wanted.length > 0
        ? wanted.map((w) => claim(network, pools, holders, w, owner))
        : pools.map((pool) => handOutNext(network, pool, holders, lastHandedOut, owner));
    return { granted, next: { lastHandedOut, owners: new Map(state.owners).set(owner, granted) } };
  }

  /** Releases everything `owner` holds on `network`; durable; a no-op when it holds nothing. */
  release(network: string, owner: string): void {
    checkNames(network, owner);
    const state = this.load(network);
    if (!state.owners.has(owner)) return;
    const owners = new Map(state.owners);
    owners.delete(owner);
    // The round robin's position stays: it is what keeps the released addresses resting.
    this.save(network, { lastHandedOut: state.lastHandedOut, owners });
  }

  /** Every (network, owner) holding addresses on this node: what a sweep checks against the desired state. */
  holders(): { network: string; owner: string }[] {
    const out: { network: string; owner: string }[] = [];
    for (const file of namesIn(this.dir).filter((n) => n.endsWith('.json') && !n.startsWith('.'))) {
      // The file names the network inside; its name may be a shortened one.
      const network = this.networkOfFile.get(file) ?? (JSON.parse(readFileSync(join(this.dir, file), 'utf8')) as { network?: unknown }).network;
      if (typeof network !== 'string') continue;
      this.networkOfFile.set(file, network);
      for (const owner of this.load(network).owners.keys()) out.push({ network, owner });
    }
    return out;
  }

  /** What `owner` holds on `network`. */
  held(network: string, owner: string): Allocation[] {
    checkNames(network, owner);
    return copies(this.load(network).owners.get(owner) ?? []);
  }

  private fileOf(network: string): string {
    const base = network.length <= plainFileNameMax ? network : `${network.slice(0, 180)}~${createHash('sha256').update(network).digest('hex').slice(0, 16)}`;
    return join(this.dir, `${base}.json`);
  }

  private load(network: string): NetworkState {
    const cached = this.networks.get(network);
    if (cached) return cached;
    const path = this.fileOf(network);
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') {
        throw new PodnetError('IO_FAILURE', `network ${network}: cannot read ${path}: ${(err as Error).message}`);
      }
      text = '';
    }
    const state = text === '' ? { lastHandedOut: new Map(), owners: new Map() } : parseState(network, path, text);
    this.networks.set(network, state);
    return state;
  }

  /** Writes the whole state of `network`, then makes it the one in memory: on failure nothing changed. */
  private save(network: string, state: NetworkState): void {
    const path = this.fileOf(network);
    const byKey = <T>(map: Map<string, T>) => Object.fromEntries([...map].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)));
    const document = { network, lastHandedOut: byKey(state.lastHandedOut), owners: byKey(state.owners) };
    try {
      ensurePrivateDir(this.dir);
      writeFileAtomic(path, stateDocumentText(document), kernelState);
    } catch (err) {
      throw new PodnetError('IO_FAILURE', `network ${network}: cannot write ${path}: ${(err as Error).message}`);
    }
    this.networks.set(network, state);
  }
}

function checkNames(network: string, owner: string): void {
  if (!isDocument('Name', network)) {
    throw new PodnetError(
      'INVALID_REQUEST',
      `network name ${quoted(network)} is not a Kubernetes name (lowercase alphanumerics, '-' and '.', at most 253 characters)`,
    );
  }
  if (!isOwner(owner)) {
    throw invalid(network, `owner ${quoted(owner)} is not 1 to 512 printable ASCII characters without spaces`);
  }
}

function wantedOf(network: string, requested: readonly string[]): Wanted[] {
  const wanted = requested.map((text): Wanted => {
    const cidr = typeof text === 'string' && text.includes('/') ? parseCidr(text) : undefined;
    const ip = cidr?.ip ?? ipOf(text);
    if (!ip) throw invalid(network, `requested address ${quoted(text)} is not an IP address (ip or ip/prefix)`);
    return { ip, prefix: cidr?.prefix };
  });
  wanted.forEach((w, i) => {
    if (wanted.slice(0, i).some((other) => sameIp(other.ip, w.ip))) throw invalid(network, `${formatIp(w.ip)} is requested twice`);
  });
  return wanted;
}

function sameAddresses(holding: readonly Allocation[], wanted: readonly Wanted[]): boolean {
  const held = new Set(holding.map((a) => a.address.slice(0, a.address.indexOf('/'))));
  return held.size === wanted.length && wanted.every((w) => held.has(formatIp(w.ip)));
}

/** Who holds each address of the Network, by its canonical text. */
function holdersOf(state: NetworkState): Map<string, string> {
  const holders = new Map<string, string>();
  for (const [owner, allocations] of state.owners) {
    for (const a of allocations) holders.set(a.address.slice(0, a.address.indexOf('/')), owner);
  }
  return holders;
}

function grant(pool: Pool, ip: Ip): Allocation {
  return { address: `${formatIp(ip)}/${pool.subnet.prefix}`, gateway: formatIp(pool.gateway) };
}

/** A static address: inside a pool, not reserved, not held. */
function claim(network: string, pools: readonly Pool[], holders: Map<string, string>, wanted: Wanted, owner: string): Allocation {
  const text = formatIp(wanted.ip);
  const pool = pools.find((p) => contains(p.subnet, wanted.ip) && wanted.ip.value >= p.start && wanted.ip.value <= p.end);
  if (!pool) throw invalid(network, `${text} is outside every range (${pools.map((p) => p.label).join(', ')})`);
  if (wanted.prefix !== undefined && wanted.prefix !== pool.subnet.prefix) {
    throw invalid(network, `${text}/${wanted.prefix} does not have the prefix length of range ${pool.key}`);
  }
  const why = pool.reserved.get(wanted.ip.value);
  if (why) throw invalid(network, `${text} is ${why} of range ${pool.key}`);
  const holder = holders.get(text);
  // The holder is not named: the message reaches the asking tenant (status, Events), and who else
  // is on the node is not theirs to learn; the state file under ipam/ names it for an admin.
  if (holder !== undefined) throw invalid(network, `${text} is held by another attachment on this node`);
  holders.set(text, owner);
  return grant(pool, wanted.ip);
}

/** The lowest free address after the one handed out last, wrapping around; moves the position. */
function handOutNext(network: string, pool: Pool, holders: Map<string, string>, lastHandedOut: Map<string, string>, owner: string): Allocation {
  const family = pool.subnet.ip.family;
  const size = pool.end - pool.start + 1n;
  const previous = ipOf(lastHandedOut.get(pool.key));
  const after = previous && previous.family === family && previous.value >= pool.start && previous.value <= pool.end ? previous.value - pool.start + 1n : 0n;
  // Ends within (held + reserved + 1) steps unless the pool is full; a full pool is that small.
  for (let step = 0n; step < size; step++) {
    const ip: Ip = { family, value: pool.start + ((after + step) % size) };
    if (pool.reserved.has(ip.value)) continue;
    const text = formatIp(ip);
    if (holders.has(text)) continue;
    holders.set(text, owner);
    lastHandedOut.set(pool.key, text);
    return grant(pool, ip);
  }
  throw new PodnetError('TRY_AGAIN_LATER', `network ${network}: range ${pool.label} has no free address`);
}

function copies(allocations: readonly Allocation[]): Allocation[] {
  return allocations.map((a) => ({ ...a }));
}

/**
 * The state file's text, checked whole (IpamState in schemas/state.schema.json, then what a schema
 * cannot say: canonical addresses, each held once): a file that is not what podnet wrote is never
 * reset, which could hand out an address twice.
 */
function parseState(network: string, path: string, text: string): NetworkState {
  const corrupt = (reason: string) =>
    new PodnetError(
      'IO_FAILURE',
      `network ${network}: the IPAM state file ${path} is corrupt (${reason}); podnet will not reset it, which could hand out an address twice: repair or remove it by hand`,
    );
  let document: Unversioned<IpamState>;
  try {
    document = parseStateDocument('IpamState', text, 'state');
  } catch (err) {
    throw corrupt((err as Error).message);
  }
  if (document.network !== network) throw corrupt(`it is the file of network ${quoted(document.network)}`);

  const lastHandedOut = new Map<string, string>();
  for (const [subnet, address] of Object.entries(document.lastHandedOut)) {
    const cidr = parseCidr(subnet);
    const ip = ipOf(address);
    if (!cidr || !ip) throw corrupt(`lastHandedOut ${quoted(subnet)}: ${quoted(address)} is not an address of a subnet`);
    lastHandedOut.set(formatCidr(cidr), formatIp(ip));
  }

  const owners = new Map<string, Allocation[]>();
  const holders = new Map<string, string>();
  for (const [owner, list] of Object.entries(document.owners)) {
    owners.set(
      owner,
      list.map((entry): Allocation => {
        const cidr = parseCidr(entry.address);
        if (!cidr) throw corrupt(`owner ${owner}: ${quoted(entry.address)} is not an ip/prefix address`);
        const gateway = entry.gateway === undefined ? undefined : ipOf(entry.gateway);
        if (entry.gateway !== undefined && !gateway) throw corrupt(`owner ${owner}: gateway ${quoted(entry.gateway)} is not an IP address`);
        const ip = formatIp(cidr.ip);
        const other = holders.get(ip);
        if (other !== undefined) throw corrupt(`${ip} is held by both ${other} and ${owner}`);
        holders.set(ip, owner);
        return gateway ? { address: formatCidr(cidr), gateway: formatIp(gateway) } : { address: formatCidr(cidr) };
      }),
    );
  }
  return { lastHandedOut, owners };
}
