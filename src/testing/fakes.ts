// Fakes of the side-effect interfaces the reconciler and the delegated lifecycle are given, for
// unit tests of their rules without root: each records what it received. The real parts are
// tested on the real kernel in e2e/. Test code only: nothing in src/ outside tests imports this.
import { PodnetError } from '../errors.ts';
import type { DelegatedPlugins, DelegatedRecords } from '../delegate/lifecycle.ts';
import type { PluginTarget, ValidAttachment } from '../delegate/plugin.ts';
import type { DelegatedRecord } from '../delegate/store.ts';
import type { CniResult, DelegatedConfig } from '../model/cni-config.ts';
import type { AppliedState, Family, ObservedLink, ObservedRoute, ObservedRule } from '../model/state.ts';
import type { ObservedTable } from '../model/port-security.ts';
import type { ObservedWireguard } from '../model/wireguard-config.ts';
import { describeWhere, type Tool, type Where } from '../model/step.ts';
import type { NetnsObserver } from '../netns/observe.ts';
import type { NamespaceSight } from '../netns/probe.ts';
import type { BatchResult, NetnsRunner, ReadAfter, StartedBatch } from '../netns/runner.ts';
import type { Timer } from '../retry.ts';

/** A clock tests move by hand, and timers that run only when a test says: each set one is kept, with when it is due. */
export function fakeClock(start = 1_000_000): { now: () => number; advance: (ms: number) => void; timer: Timer; timers: { at: number; run: () => void }[] } {
  let at = start;
  const timers: { at: number; run: () => void }[] = [];
  const timer: Timer = (ms, run) => {
    const entry = { at: at + ms, run };
    timers.push(entry);
    return () => {
      const i = timers.indexOf(entry);
      if (i >= 0) timers.splice(i, 1);
    };
  };
  return { now: () => at, advance: (ms) => void (at += ms), timer, timers };
}

export interface RanBatch {
  where: string;
  tool: Tool;
  lines: string[];
}

/**
 * A runner that runs nothing: it records every batch (where, tool, lines) and succeeds, except a
 * line `failing` matches, which fails as ip would (the lines before it done). A batch that ends
 * with a read (ReadAfter) answers it with `readAfter`'s answers, when it gives some. It keeps the
 * host links its ip lines made, marked, moved away and deleted, which is all it answers a query
 * of (`ip -json link show` on the host, as an undo asks before a host link's delete).
 */
export class RecordingRunner implements NetnsRunner {
  readonly ran: RanBatch[] = [];
  failing: (line: string) => boolean = () => false;
  readAfter: (where: Where, read: ReadAfter) => unknown[] | undefined = () => undefined;
  /** The reads batches ended with, by where. */
  readonly readsAfter: string[] = [];
  /** The host's links as the lines run so far left them: name and alias. */
  readonly hostLinks = new Map<string, { ifname: string; ifalias?: string }>();

  lines(): string[] {
    return this.ran.flatMap((b) => b.lines.map((l) => `${b.where} ${b.tool} ${l}`));
  }

  async query(where: Where, tool: Tool, _options: readonly string[], commands: readonly string[]): Promise<unknown[]> {
    if (where === 'host' && tool === 'ip' && commands.length === 1 && commands[0] === 'link show') return [[...this.hostLinks.values()]];
    throw new Error('RecordingRunner reads only the host\'s links: give the code under test a FakeObserver');
  }

  /** A host ip line's effect on the host's links: `link add name X` (unless made in a netns: `netns` before `type`), `link del dev X`, `link set dev X alias A | netns N`. */
  private track(line: string): void {
    const words = line.split(' ');
    if (words[0] !== 'link') return;
    const operands = words.indexOf('type') < 0 ? words : words.slice(0, words.indexOf('type'));
    if (words[1] === 'add') {
      const name = words[words.indexOf('name') + 1]!;
      if (!operands.includes('netns')) this.hostLinks.set(name, { ifname: name });
      return;
    }
    const dev = words[words.indexOf('dev') + 1]!;
    if (words[1] === 'del' || (words[1] === 'set' && words.includes('netns'))) this.hostLinks.delete(dev);
    else if (words[1] === 'set' && words[4] === 'alias') this.hostLinks.set(dev, { ifname: dev, ifalias: words.slice(5).join(' ') });
  }

  async batch(where: Where, tool: Tool, lines: readonly string[]): Promise<BatchResult> {
    return lines.length === 0 ? { done: 0 } : this.start(where, tool).run(lines);
  }

  start(where: Where, tool: Tool, readAfter?: ReadAfter): StartedBatch {
    return {
      run: async (lines) => {
        const failed = lines.findIndex((l) => this.failing(l));
        const done = failed < 0 ? lines.length : failed;
        this.ran.push({ where: describeWhere(where), tool, lines: lines.slice(0, failed < 0 ? lines.length : failed + 1) });
        if (where === 'host' && tool === 'ip') for (const line of lines.slice(0, done)) this.track(line);
        if (failed >= 0) return { done, error: new PodnetError('IO_FAILURE', `${tool} ${lines[failed]} in ${describeWhere(where)}: RTNETLINK answers: Operation not permitted`) };
        if (readAfter) this.readsAfter.push(describeWhere(where));
        const read = readAfter && this.readAfter(where, readAfter);
        return read ? { done, read } : { done };
      },
      cancel: () => undefined,
    };
  }

  async readSysctls(): Promise<Map<string, string>> {
    throw new Error('RecordingRunner reads nothing: give the code under test a FakeObserver');
  }

  async readNftTable(): Promise<ObservedTable | undefined> {
    throw new Error('RecordingRunner reads nothing: give the code under test a FakeObserver');
  }

  async readWireguard(): Promise<ObservedWireguard | undefined> {
    throw new Error('RecordingRunner reads nothing: give the code under test a FakeObserver');
  }
}

/** The kernel as a test says it is: links of the host and of each netns, counted reads. */
export class FakeObserver implements NetnsObserver {
  readonly hostLinks = new Map<string, ObservedLink>();
  readonly podLinks = new Map<string, Map<string, ObservedLink>>();
  /** Reads of links, by where ("host" or the netns path). */
  readonly reads = new Map<string, number>();

  /** A link as ip shows one: up, MTU 1500, no addresses unless given. */
  static link(name: string, more: Partial<ObservedLink> = {}): ObservedLink {
    return { name, mtu: 1500, up: true, addresses: [], ...more };
  }

  pod(netns: string): Map<string, ObservedLink> {
    let links = this.podLinks.get(netns);
    if (!links) this.podLinks.set(netns, (links = new Map()));
    return links;
  }

  readsOf(where: string): number {
    return this.reads.get(where) ?? 0;
  }

  async links(where: Where): Promise<Map<string, ObservedLink>> {
    const key = where === 'host' ? 'host' : where.netns;
    this.reads.set(key, this.readsOf(key) + 1);
    return new Map(where === 'host' ? this.hostLinks : this.pod(where.netns));
  }

  async routing(_where: Where, _family: Family): Promise<{ routes: ObservedRoute[]; rules: ObservedRule[] }> {
    return { routes: [], rules: [] };
  }

  async qdiscs(): Promise<Map<string, { root?: string; ingress: boolean }>> {
    return new Map();
  }

  async sysctls(): Promise<Map<string, string>> {
    return new Map();
  }

  /** The fingerprint of podnet's marking table, by netns path; absent: no table. */
  readonly markings = new Map<string, string>();

  async marking(where: Where): Promise<string | undefined> {
    return where === 'host' ? undefined : this.markings.get(where.netns);
  }

  /** The guard tables of WireGuard ports on the host (model/wireguard-guard.ts) that are there, with the fingerprints they carry. */
  readonly guardTables = new Map<string, string | undefined>();

  async guards(tables: readonly string[]): Promise<Map<string, string | undefined>> {
    return new Map(tables.filter((t) => this.guardTables.has(t)).map((t) => [t, this.guardTables.get(t)]));
  }

  /** WireGuard interfaces as read back, by netns path and name; absent: not there. */
  readonly wireguards = new Map<string, Map<string, ObservedWireguard>>();

  async wireguard(where: Where, devs: readonly string[]): Promise<Map<string, ObservedWireguard>> {
    const there = where === 'host' ? undefined : this.wireguards.get(where.netns);
    return new Map(devs.flatMap((dev) => (there?.has(dev) ? [[dev, there.get(dev)!] as const] : [])));
  }

  /** The ports in podnet's port security table; undefined: no table. */
  securedPortNames: Set<string> | undefined;
  /** Why the table cannot be read (no nft on the node), when a test says so. */
  securedPortsFailure: Error | undefined;

  async securedPorts(): Promise<Set<string> | undefined> {
    if (this.securedPortsFailure) throw this.securedPortsFailure;
    return this.securedPortNames && new Set(this.securedPortNames);
  }
}

/** A probe whose answers a test sets: every path is a network namespace unless said otherwise. */
export function fakeSight(answers: Map<string, NamespaceSight>): () => (path: string) => NamespaceSight {
  return () => (path) => answers.get(path) ?? 'net';
}

/** Applied states and host bridges in memory. */
export class MemoryApplied {
  readonly states = new Map<string, AppliedState>();
  private hostObjects: { bridges: string[]; pass?: string } = { bridges: [] };

  get(containerId: string): AppliedState | undefined {
    return this.states.get(containerId);
  }

  all(): AppliedState[] {
    return [...this.states.values()];
  }

  put(state: AppliedState): void {
    this.states.set(state.containerId, state);
  }

  remove(containerId: string): void {
    this.states.delete(containerId);
  }

  bridges(): string[] {
    return this.hostObjects.bridges;
  }

  hostPass(): string | undefined {
    return this.hostObjects.pass;
  }

  setBridges(bridges: readonly string[], pass = this.hostPass()): void {
    this.hostObjects = { bridges: [...new Set(bridges)].sort(), ...(pass ? { pass } : {}) };
  }
}

/** Delegated records in memory, by container and interface. */
export class MemoryDelegatedRecords implements DelegatedRecords {
  readonly records = new Map<string, DelegatedRecord>();

  all(): DelegatedRecord[] {
    return [...this.records.values()];
  }

  of(containerId: string): DelegatedRecord[] {
    return this.all().filter((r) => r.containerId === containerId);
  }

  put(record: DelegatedRecord): void {
    this.records.set(`${record.containerId}@${record.interface}`, record);
  }

  remove(record: DelegatedRecord): void {
    this.records.delete(`${record.containerId}@${record.interface}`);
  }
}

export interface PluginCall {
  command: 'ADD' | 'DEL' | 'CHECK' | 'GC' | 'STATUS';
  network: string;
  /** container/ifname for ADD, DEL and CHECK; netns empty when it was gone. */
  target?: string;
  netns?: string;
  valid?: ValidAttachment[];
}

/**
 * A list's plugins that record every call. Each command answers with `answers[command]`: nothing
 * (success; ADD then returns a result with one address), or the error to throw.
 */
export class RecordingPlugins implements DelegatedPlugins {
  readonly calls: PluginCall[] = [];
  readonly answers: Partial<Record<PluginCall['command'], PodnetError>> = {};
  /** Plugin types requirePlugins finds missing. */
  readonly missing = new Set<string>();
  /** Run at each ADD, DEL and CHECK: a test's slow plugin advances its clock here, or makes the link. */
  during?: (command: PluginCall['command'], target: PluginTarget) => void;

  commands(): string[] {
    return this.calls.map((c) => `${c.command} ${c.network}${c.target ? ` ${c.target}` : ''}`);
  }

  requirePlugins(config: DelegatedConfig): void {
    const type = config.plugins.map((p) => String(p['type'])).find((t) => this.missing.has(t));
    if (type) throw new PodnetError('NOT_AVAILABLE', `plugin ${type} is not in the CNI bin dirs`);
  }

  async add(config: DelegatedConfig, target: PluginTarget): Promise<CniResult> {
    this.record('ADD', config, target);
    return { cniVersion: config.cniVersion, interfaces: [{ name: target.ifname, mac: '02:00:00:00:00:01', sandbox: target.netns }], ips: [{ address: '198.18.9.2/24', interface: 0 }] };
  }

  async del(config: DelegatedConfig, target: PluginTarget): Promise<void> {
    this.record('DEL', config, target);
  }

  async check(config: DelegatedConfig, target: PluginTarget): Promise<void> {
    this.record('CHECK', config, target);
  }

  async gc(config: DelegatedConfig, valid: readonly ValidAttachment[]): Promise<void> {
    this.calls.push({ command: 'GC', network: config.name, valid: [...valid] });
    this.throwIfAsked('GC');
  }

  async status(config: DelegatedConfig): Promise<void> {
    this.calls.push({ command: 'STATUS', network: config.name });
    this.throwIfAsked('STATUS');
  }

  private record(command: PluginCall['command'], config: DelegatedConfig, target: PluginTarget): void {
    this.calls.push({ command, network: config.name, target: `${target.containerId}/${target.ifname}`, netns: target.netns });
    this.during?.(command, target);
    this.throwIfAsked(command);
  }

  private throwIfAsked(command: PluginCall['command']): void {
    const error = this.answers[command];
    if (error) throw error;
  }
}
