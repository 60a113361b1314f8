// Node-local IPAM for runtime networks: which addresses of a Network's ranges are held, and by whom.
// Each Network's state is a log under <stateDir>/ipam, <network>.log: a header line, then one line
// per hold or release (IpamLogEntry in schemas/state.schema.json), each appended in one write
// before the allocation or release returns, so a daemon restart never hands out an address twice
// and a change costs the same whether the Network holds ten addresses or a million. When the log
// has grown to twice the lines its holders need, it is rewritten whole (temp file and rename):
// the cost of that is spread over the changes that grew it.
//
// Like the reference host-local plugin, allocation is round robin: the search for a free address
// starts after the one handed out last in the range, so an address just released rests while the
// rest of the pool is used. Unlike it, an allocation across several ranges (IPv4 and IPv6) is one
// line, on disk all at once or not at all.
//
// Synchronous, like the rest of podnet's state writes (registry/atomic-file.ts says why): no two
// calls interleave, so no call can see a half-made change. One NodeIpam per state directory: the
// files are read once and then trusted, and only the daemon, which holds the state-dir lock,
// writes them.
import { createHash } from 'node:crypto';
import { closeSync, fstatSync, ftruncateSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { PodnetError } from '../errors.ts';
import { parseBoundedJson } from '../protocol/bounded-json.ts';
import { stateLayout } from '../protocol/paths.ts';
import { isDocument, parseDocument, type IpamLogEntry, type IpamState, type IpRange } from '../protocol/validate.ts';
import { ensurePrivateDir, namesIn, removeFile, writeFileAtomic } from '../registry/atomic-file.ts';
import { kernelState } from '../registry/boot.ts';
import { formatVersion, parseStateDocument, type Unversioned } from '../registry/state-document.ts';
import { formatCidr, formatIp, parseCidr, sameIp, type Ip } from '../model/cidr.ts';
import { checkDisjoint, invalid, ipOf, poolOf, poolOfStatic, quoted, staticAddressOf, type Pool } from '../model/pools.ts';
import type { Allocation } from '../model/resolve.ts';


/** IpamOwner in schemas/state.schema.json: checked before an owner is written, as on reading. */
const isOwner = (owner: unknown) => isDocument('IpamOwner', owner);
/**
 * A Network name this long or shorter is its own file name. A longer one (up to 253) would not fit
 * once writeFileAtomic's temp name adds its 34 or so characters to the 255 a file name may have:
 * it is cut and a hash of it added, after a '~' no name holds. The file names its Network inside.
 */
const plainFileNameMax = 200;
/** Lines a log may hold beyond two per holder before it is rewritten: a small Network's log is not rewritten at every change. */
const logSlack = 64;
const logSuffix = '.log';
/** The whole-state file of a podnet before the log (IpamState): read when a Network has no log yet. */
const snapshotSuffix = '.json';

/** What the log of one Network says, in memory. */
interface NetworkState {
  /** Per range (its subnet's key), the address handed out last: the round robin's position. */
  lastHandedOut: Map<string, string>;
  /** What each owner holds, in the order handed out. */
  owners: Map<string, Allocation[]>;
  /** Who holds each address, by its canonical text: what an allocation looks up. */
  holders: Map<string, string>;
  /** Lines in the log, header included; 0 when the Network has no log yet (none, or only an older podnet's file). */
  logLines: number;
  /** A line cut short at the log's end (the process died inside its write): the next change rewrites the log. */
  tornTail: boolean;
}

/** One change to a Network: an owner takes addresses (moving the round robin), or gives back what it holds. */
type Change = { hold: string; addresses: Allocation[]; lastHandedOut: Map<string, string> } | { release: string };

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

  /** Allocations live in <stateDir>/ipam/<network>.log, one log per Network, loaded on first use. */
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
    const { granted, change } = this.decide(network, ranges, owner, requested);
    if (change) this.commit(network, change);
    return copies(granted);
  }

  /** What allocate would give, without taking it: for `podnet diff`. */
  preview(network: string, ranges: readonly IpRange[], owner: string, requested: readonly string[] = []): Allocation[] {
    return copies(this.decide(network, ranges, owner, requested).granted);
  }

  /** The addresses for `owner`, and the change to make when they are new; reads the state, never changes it. */
  private decide(network: string, ranges: readonly IpRange[], owner: string, requested: readonly string[]): { granted: Allocation[]; change?: Change } {
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

    // What this call takes, apart from the state until it is committed: a refusal leaves nothing.
    const taken = new Set<string>();
    const isFree = (text: string) => !state.holders.has(text) && !taken.has(text);
    const lastHandedOut = new Map<string, string>();
    const granted =
      wanted.length > 0
        ? wanted.map((w) => claim(network, pools, isFree, taken, w))
        : pools.map((pool) => handOutNext(network, pool, isFree, taken, lastHandedOut.get(pool.key) ?? state.lastHandedOut.get(pool.key), lastHandedOut));
    return { granted, change: { hold: owner, addresses: granted, lastHandedOut } };
  }

  /** Releases everything `owner` holds on `network`; durable; a no-op when it holds nothing. */
  release(network: string, owner: string): void {
    checkNames(network, owner);
    // The round robin's position stays: it is what keeps the released addresses resting.
    if (this.load(network).owners.has(owner)) this.commit(network, { release: owner });
  }

  /** Every (network, owner) holding addresses on this node: what a sweep checks against the desired state. */
  holders(): { network: string; owner: string }[] {
    const out: { network: string; owner: string }[] = [];
    const bases = new Set(
      namesIn(this.dir)
        .filter((n) => !n.startsWith('.') && (n.endsWith(logSuffix) || n.endsWith(snapshotSuffix)))
        .map((n) => n.slice(0, n.lastIndexOf('.'))),
    );
    for (const base of bases) {
      const network = this.networkOfFile.get(base) ?? this.networkNamedIn(base);
      if (network === undefined) continue;
      this.networkOfFile.set(base, network);
      for (const owner of this.load(network).owners.keys()) out.push({ network, owner });
    }
    return out;
  }

  /** What `owner` holds on `network`. */
  held(network: string, owner: string): Allocation[] {
    checkNames(network, owner);
    return copies(this.load(network).owners.get(owner) ?? []);
  }

  /** The file name of `network`'s files, without the suffix. */
  private baseOf(network: string): string {
    return network.length <= plainFileNameMax ? network : `${network.slice(0, 180)}~${createHash('sha256').update(network).digest('hex').slice(0, 16)}`;
  }

  private logOf(network: string): string {
    return join(this.dir, `${this.baseOf(network)}${logSuffix}`);
  }

  private snapshotOf(network: string): string {
    return join(this.dir, `${this.baseOf(network)}${snapshotSuffix}`);
  }

  /** The Network a file names inside (a long name's file name is shortened): the log's header, or an older podnet's whole-state file. */
  private networkNamedIn(base: string): string | undefined {
    for (const suffix of [logSuffix, snapshotSuffix]) {
      const text = readIfThere(join(this.dir, `${base}${suffix}`));
      if (text === undefined) continue;
      const end = suffix === logSuffix ? text.indexOf('\n') : -1;
      const first = end < 0 ? text : text.slice(0, end);
      try {
        const network = (JSON.parse(first) as { network?: unknown }).network;
        if (typeof network === 'string') return network;
      } catch {
        // load() names what is wrong with the file when the Network is used.
      }
    }
    return undefined;
  }

  private load(network: string): NetworkState {
    const cached = this.networks.get(network);
    if (cached) return cached;
    const log = this.logOf(network);
    const text = readIfThere(log, network);
    let state: NetworkState;
    if (text !== undefined) {
      state = parseLog(network, log, text);
    } else {
      const snapshot = this.snapshotOf(network);
      const older = readIfThere(snapshot, network);
      state = older === undefined ? emptyState() : parseSnapshot(network, snapshot, older);
    }
    this.networks.set(network, state);
    return state;
  }

  /**
   * Puts `change` on file, then in memory: on failure neither changed. Appended to the log as
   * one line, or, when there is no log yet or it has grown past its holders' need, the log is
   * rewritten whole with the change in it.
   */
  private commit(network: string, change: Change): void {
    const state = this.load(network);
    const log = this.logOf(network);
    try {
      ensurePrivateDir(this.dir);
      if (state.logLines === 0 || state.tornTail || state.logLines + 1 > 2 * (state.owners.size + 1) + logSlack) {
        const next = cloneState(state);
        applyChange(next, change);
        const lines = logLinesOf(network, next);
        writeFileAtomic(log, lines.join(''), kernelState);
        next.logLines = lines.length;
        next.tornTail = false;
        this.networks.set(network, next);
        // An older podnet's whole-state file is in the log now (a crash before this line leaves
        // both; the log is read first, and the next rewrite removes the file).
        removeFile(this.snapshotOf(network), kernelState);
        return;
      }
      appendLine(log, lineOf(entryOf(change)));
    } catch (err) {
      // What is on disk is no longer sure (a write cut short that could not be cut back off): the
      // next change rewrites the log whole from memory, which did not change.
      state.tornTail = true;
      throw new PodnetError('IO_FAILURE', `network ${network}: cannot write ${log}: ${(err as Error).message}`);
    }
    applyChange(state, change);
    state.logLines++;
  }
}

function emptyState(): NetworkState {
  return { lastHandedOut: new Map(), owners: new Map(), holders: new Map(), logLines: 0, tornTail: false };
}

function cloneState(state: NetworkState): NetworkState {
  return { ...state, lastHandedOut: new Map(state.lastHandedOut), owners: new Map(state.owners), holders: new Map(state.holders) };
}

/** The text of `path`, or undefined when there is none; any other failure to read is an IO_FAILURE naming the Network. */
function readIfThere(path: string, network?: string): string | undefined {
  try {
    return readFileSync(path, 'utf8');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw new PodnetError('IO_FAILURE', `${network === undefined ? '' : `network ${network}: `}cannot read ${path}: ${(err as Error).message}`);
  }
}

/**
 * Appends `line` in one write. A write cut short (a full disk) is cut back off, so the next line
 * does not start inside it.
 */
function appendLine(path: string, line: string): void {
  const fd = openSync(path, 'a', 0o600);
  try {
    const size = fstatSync(fd).size;
    try {
      writeFileSync(fd, line);
    } catch (err) {
      ftruncateSync(fd, size);
      throw err;
    }
  } finally {
    closeSync(fd);
  }
}

function applyChange(state: NetworkState, change: Change): void {
  if ('release' in change) {
    for (const a of state.owners.get(change.release) ?? []) state.holders.delete(addressOf(a));
    state.owners.delete(change.release);
    return;
  }
  state.owners.set(change.hold, change.addresses);
  for (const a of change.addresses) state.holders.set(addressOf(a), change.hold);
  for (const [range, address] of change.lastHandedOut) state.lastHandedOut.set(range, address);
}

/** The line of one change, as IpamLogEntry words it. */
function entryOf(change: Change): IpamLogEntry {
  if ('release' in change) return { release: change.release };
  const moved = change.lastHandedOut.size > 0 ? { lastHandedOut: Object.fromEntries(change.lastHandedOut) } : {};
  return { hold: change.hold, addresses: change.addresses, ...moved };
}

const lineOf = (entry: IpamLogEntry | object) => `${JSON.stringify(entry)}\n`;

/** The whole log of a Network's state: its header, then one hold per owner. */
function logLinesOf(network: string, state: NetworkState): string[] {
  const header = { version: formatVersion, network, lastHandedOut: Object.fromEntries(state.lastHandedOut) };
  return [lineOf(header), ...[...state.owners].map(([owner, addresses]) => lineOf({ hold: owner, addresses }))];
}

/** The address of an allocation without its prefix length, canonical: the key of `holders`. */
const addressOf = (allocation: Allocation) => allocation.address.slice(0, allocation.address.indexOf('/'));

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
    const asked = staticAddressOf(text);
    if (!asked) throw invalid(network, `requested address ${quoted(text)} is not an IP address (ip or ip/prefix)`);
    return asked;
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

function grant(pool: Pool, ip: Ip): Allocation {
  return { address: `${formatIp(ip)}/${pool.subnet.prefix}`, gateway: formatIp(pool.gateway) };
}

/** A static address: inside a pool, not reserved (model/pools.ts poolOfStatic), free. */
function claim(network: string, pools: readonly Pool[], isFree: (text: string) => boolean, taken: Set<string>, wanted: Wanted): Allocation {
  const text = formatIp(wanted.ip);
  const pool = poolOfStatic(network, pools, wanted.ip, wanted.prefix);
  // The holder is not named: the message reaches the asking tenant (status, Events), and who else
  // is on the node is not theirs to learn; the log under ipam/ names it for an admin.
  if (!isFree(text)) throw invalid(network, `${text} is held by another attachment on this node`);
  taken.add(text);
  return grant(pool, wanted.ip);
}

/**
 * The lowest free address after `previous` (the one handed out last), wrapping around; records
 * the new position in `moved`. Ends within (held + reserved + 1) steps unless the pool is full: in
 * a pool used in order, at its first step.
 */
function handOutNext(
  network: string,
  pool: Pool,
  isFree: (text: string) => boolean,
  taken: Set<string>,
  previous: string | undefined,
  moved: Map<string, string>,
): Allocation {
  const family = pool.subnet.ip.family;
  const size = pool.end - pool.start + 1n;
  const last = ipOf(previous);
  const after = last && last.family === family && last.value >= pool.start && last.value <= pool.end ? last.value - pool.start + 1n : 0n;
  for (let step = 0n; step < size; step++) {
    const ip: Ip = { family, value: pool.start + ((after + step) % size) };
    if (pool.reserved.has(ip.value)) continue;
    const text = formatIp(ip);
    if (!isFree(text)) continue;
    taken.add(text);
    moved.set(pool.key, text);
    return grant(pool, ip);
  }
  throw new PodnetError('TRY_AGAIN_LATER', `network ${network}: range ${pool.label} has no free address`);
}

function copies(allocations: readonly Allocation[]): Allocation[] {
  return allocations.map((a) => ({ ...a }));
}

/** The refusal to use a state file that is not what podnet wrote: resetting it could hand out an address twice. */
function corruptFile(network: string, path: string, reason: string): PodnetError {
  return new PodnetError(
    'IO_FAILURE',
    `network ${network}: the IPAM state file ${path} is corrupt (${reason}); podnet will not reset it, which could hand out an address twice: repair or remove it by hand`,
  );
}

/**
 * A log's text, replayed whole: each line checked against IpamLogEntry, then what a schema cannot
 * say (the header first and only first, canonical addresses, each held once, a release only of
 * what is held). A last line without its newline is a write the process died in, whose change
 * never returned: it is left out, and the next change rewrites the log without it.
 */
function parseLog(network: string, path: string, text: string): NetworkState {
  const lines = text.split('\n');
  const tail = lines.pop();
  const state = emptyState();
  state.tornTail = tail !== '';
  for (const [index, line] of lines.entries()) {
    const corrupt = (reason: string) => corruptFile(network, path, `line ${index + 1}: ${reason}`);
    let entry: IpamLogEntry;
    try {
      entry = parseDocument('IpamLogEntry', parseBoundedJson(line, 'the line', { maxBytes: 64 * 1024 }, 'IO_FAILURE'), 'the line', 'IO_FAILURE');
    } catch (err) {
      throw corrupt((err as Error).message);
    }
    if ((index === 0) !== ('network' in entry)) throw corrupt(index === 0 ? 'the log does not start with its header' : 'a second header');
    if ('network' in entry) {
      if (entry.network !== network) throw corrupt(`it is the log of network ${quoted(entry.network)}`);
      state.lastHandedOut = positionsOf(entry.lastHandedOut, corrupt);
    } else if ('release' in entry) {
      if (!state.owners.has(entry.release)) throw corrupt(`${entry.release} is released but holds nothing`);
      applyChange(state, { release: entry.release });
    } else {
      if (state.owners.has(entry.hold)) throw corrupt(`${entry.hold} holds addresses twice`);
      holdAsRead(state, entry.hold, entry.addresses, positionsOf(entry.lastHandedOut ?? {}, corrupt), corrupt);
    }
  }
  if (lines.length === 0) throw corruptFile(network, path, 'the log has no header');
  state.logLines = lines.length;
  return state;
}

/**
 * An older podnet's whole-state file, checked whole (IpamState, then what a schema cannot say:
 * canonical addresses, each held once). Its first change turns it into a log.
 */
function parseSnapshot(network: string, path: string, text: string): NetworkState {
  const corrupt = (reason: string) => corruptFile(network, path, reason);
  let document: Unversioned<IpamState>;
  try {
    document = parseStateDocument('IpamState', text, 'state');
  } catch (err) {
    throw corrupt((err as Error).message);
  }
  if (document.network !== network) throw corrupt(`it is the file of network ${quoted(document.network)}`);
  const state = emptyState();
  state.lastHandedOut = positionsOf(document.lastHandedOut, corrupt);
  for (const [owner, list] of Object.entries(document.owners)) holdAsRead(state, owner, list, new Map(), corrupt);
  return state;
}

/** The round robin's positions as read, in canonical form. */
function positionsOf(written: Record<string, string>, corrupt: (reason: string) => PodnetError): Map<string, string> {
  const positions = new Map<string, string>();
  for (const [subnet, address] of Object.entries(written)) {
    const cidr = parseCidr(subnet);
    const ip = ipOf(address);
    if (!cidr || !ip) throw corrupt(`lastHandedOut ${quoted(subnet)}: ${quoted(address)} is not an address of a subnet`);
    positions.set(formatCidr(cidr), formatIp(ip));
  }
  return positions;
}

/** An owner's addresses as read, in canonical form, put in `state`; refused when any is held already, by another owner or twice by this one. */
function holdAsRead(state: NetworkState, owner: string, written: readonly Allocation[], lastHandedOut: Map<string, string>, corrupt: (reason: string) => PodnetError): void {
  const addresses = written.map((entry): Allocation => {
    const cidr = parseCidr(entry.address);
    if (!cidr) throw corrupt(`owner ${owner}: ${quoted(entry.address)} is not an ip/prefix address`);
    const gateway = entry.gateway === undefined ? undefined : ipOf(entry.gateway);
    if (entry.gateway !== undefined && !gateway) throw corrupt(`owner ${owner}: gateway ${quoted(entry.gateway)} is not an IP address`);
    return gateway ? { address: formatCidr(cidr), gateway: formatIp(gateway) } : { address: formatCidr(cidr) };
  });
  for (const [index, allocation] of addresses.entries()) {
    const address = addressOf(allocation);
    const other = state.holders.get(address) ?? (addresses.slice(0, index).some((a) => addressOf(a) === address) ? owner : undefined);
    if (other !== undefined) throw corrupt(`${address} is held by both ${other} and ${owner}`);
  }
  applyChange(state, { hold: owner, addresses, lastHandedOut });
}
