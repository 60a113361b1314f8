// Level-triggered reconcile: every pass makes each recorded sandbox match what the documents ask,
// takes back what podnet did to sandboxes that are gone, and removes bridges podnet made that
// nothing uses. Passes are serialized and coalesced (a request during a pass runs one more pass
// after it); a periodic pass repairs drift. One sandbox's failure does not stop the others.
import { PodnetError, toPodnetError } from '../errors.ts';
import { desiredWhole, documentName, generationOf, identityOf, selectingConfigs, type DesiredAttachment, type DesiredSandbox, type EarlierAttachment, type NodeLimits, type NodeRefusal, type Problem, type SandboxIdentity } from '../model/desired.ts';
import { addressOwner, resolveSandbox } from '../model/resolve.ts';
import { documentProblems } from '../model/document-problems.ts';
import { refusedMacs, refusedOwnAddresses } from '../model/macs.ts';
import { formatIp, parseCidr, parseIp } from '../ipam/cidr.ts';
import { overQuota } from '../model/quotas.ts';
import type { DelegatedLifecycle } from '../delegate/lifecycle.ts';
import type { DelegatedRecord } from '../delegate/store.ts';
import { emptyApplied, isEmptyApplied, type AppliedState, type Resolved } from '../model/state.ts';
import { host, type Step, type Tool, type Where } from '../model/step.ts';
import { bearsMark, ownerMark } from '../model/host-links.ts';
import { portSecurityTable, releasePortLine } from '../model/port-security.ts';
import { linkDelLine } from '../model/undo.ts';
import type { NetnsRunner } from '../netns/runner.ts';
import { linksOf, linksRead, type NetnsObserver } from '../netns/observe.ts';
import type { NamespaceSight } from '../netns/probe.ts';
import { plan } from '../planner/plan.ts';
import { planBridges } from '../planner/bridges.ts';
import { execute, runJournalUndo, type ReadBack, type Together } from '../executor/execute.ts';
import type { NodeIpam } from '../ipam/ipam.ts';
import type { AppliedConfig, AttachmentRecord, DiffResponse, Network, PodNetworkConfig, SandboxList } from '../protocol/validate.ts';
import type { AppliedStore } from '../registry/applied.ts';
import type { OnQuarantined } from '../registry/quarantine.ts';
import { withDocuments, type DesiredDocuments, type DesiredSource } from '../sources/source.ts';
import type { Logger } from '../log.ts';
import type { SandboxFacts } from '../status/status.ts';
import { retryWaitMs, type Clock, type Timer } from '../retry.ts';
import { coalesce } from './coalesce.ts';
import { mapLimited } from './map-limited.ts';
import { inStages } from './stages.ts';
import { noMetrics, type AttachmentState, type PassMetrics } from './metrics.ts';
import { asksThePlanner, covers, hostViewOf, linksAlone, observedWith, podNeeds, readHost, readPod, readsEnough, recordsKey, sightOfLinks, type HostReads, type HostView, type PodNeeds, type PodSight, type TableSeen } from './views.ts';

/** What the last pass made of one sandbox: what `podnet explain` shows (SandboxReport on the wire), and what status is published from. */
interface SandboxOutcome {
  /** The record the pass worked from. */
  record: AttachmentRecord;
  containerId: string;
  namespace: string;
  name: string;
  netns: string;
  desired: Resolved;
  applied: AppliedState | undefined;
  problems: Problem[];
  lastSteps: Step[];
  lastError?: string;
  /** Its delegated attachments that are there (their plugins' ADD answered), with their results. */
  delegated: DelegatedRecord[];
  /** What the documents ask of it, before names and addresses: which document asked for what. */
  wanted: DesiredSandbox;
  /** Whether its pod is known to the desired state's source (Kubernetes: the pod is on this node). */
  known: boolean;
}

/** Every side effect a reconciler has, given to it: the daemon and `podnet uninstall` wire real ones (wire.ts), tests fakes. */
export interface ReconcilerOptions {
  /** Where the journal of each pass is kept (its journal/ folder). */
  stateDir: string;
  /** The sandboxes the runtime recorded, oldest first. */
  records: { list(): AttachmentRecord[] };
  /** The documents, and who each sandbox is. */
  source: Pick<DesiredSource, 'documents' | 'identity' | 'synced' | 'namespaceLabels'>;
  /** Runs the plans' steps. */
  run: NetnsRunner;
  /** Reads the host and pods' netns. */
  observe: NetnsObserver;
  /** A probe of netns paths, made once per pass: whether each is a network namespace now. */
  sight: () => (path: string) => NamespaceSight;
  /** What podnet applied to each sandbox, and the host bridges it made. */
  applied: Pick<AppliedStore, 'get' | 'all' | 'put' | 'remove' | 'bridges' | 'hostPass' | 'setBridges'>;
  /** Addresses of Networks with ipam. */
  ipam: Pick<NodeIpam, 'allocate' | 'preview' | 'release' | 'holders'>;
  /** Attachments of cni Networks, run through their plugins. */
  delegated: DelegatedLifecycle;
  /** What this node's admin bounds per pod (default: defaultLimits). */
  limits?: NodeLimits;
  /** Told of a journal that cannot be read, set aside at start instead of run. */
  quarantined?: OnQuarantined;
  clock: Clock;
  /** Sets the timer of the next retry. */
  timer: Timer;
  log: Logger;
  /** Called after every pass, with the reports of that pass: where the status is published from. */
  afterPass?: () => void;
  /** Told how each pass went (none: metrics are off). */
  metrics?: PassMetrics;
}

/** Sandboxes reconciled at once: each runs a few short ip processes, mostly waiting on the kernel. */
const sandboxConcurrency = 8;

/** The journal of a pass's host steps (bridges); '@' is in no container id. */
const hostJournalKey = '@host';

/** What the reconciler keeps of a sandbox between passes, to tell whether the next pass needs it. */
interface SandboxTrack {
  /** The desired state it was last reconciled to, as JSON. */
  desired: string;
  /** What its last plan found it cannot do now; reported until it is reconciled again. */
  planProblems: Problem[];
  /** What its delegated plugins answered when their ADD failed; reported as long. */
  delegateProblems: Problem[];
  /** Failed passes in a row, and when the next try is due. */
  failures: number;
  retryAt: number;
  /** Its last plan left part of the desired state to the pass after (tuning a link being made). */
  deferred: boolean;
  /** What the node lacked for its last plan (Plan.unavailable): the pass then fails with it, after the rest. */
  unavailable?: string;
  /** Its last pass failed for that alone: it waits for the port security table. */
  waitsForTable: boolean;
  /** Whether its last pass's steps stand: it applied them all, whether it then failed for want of a plugin or of port security or not. */
  committed: boolean;
  /**
   * Its netns as its last pass left it: read back after that pass changed it, or the view the
   * pass planned from when it changed nothing there. A pass that is not a resync plans from this
   * instead of reading the netns on the request's path (docs/adr/0007): what else changes a netns
   * (a new ADD or DEL, a node agent, a pod given NET_ADMIN, a host device going) is seen at the
   * next resync, or sooner when a plan from this view fails and is made again from a fresh read.
   */
  sight?: PodSight;
}

/** A live sandbox and what it should have, decided at the start of a pass. */
interface SandboxWork {
  record: AttachmentRecord;
  identity: SandboxIdentity;
  desired: Resolved;
  /** `desired` as JSON: what tells a pass whether it changed since the sandbox was last reconciled. */
  desiredJson: string;
  problems: Problem[];
  wanted: DesiredSandbox;
  known: boolean;
  /** Its records as this pass found them (recordsKey): whether a kept view of its netns still holds. */
  records: string;
}

/** A sandbox's work before its names and addresses are decided. */
type WantedWork = Pick<SandboxWork, 'record' | 'identity' | 'wanted' | 'records' | 'known'>;

/** A recorded sandbox whose netns is there: the record a pass works from, and all of its records' key. */
interface LiveSandbox {
  record: AttachmentRecord;
  records: string;
}

/** Failures whose steps could not all be taken back: a fresh plan would meet podnet's own leftovers as someone else's. */
const undoFailed = new WeakSet<Error>();

export class Reconciler {
  private readonly reports = new Map<string, SandboxOutcome>();
  private readonly opts: ReconcilerOptions;
  private readonly tracks = new Map<string, SandboxTrack>();
  /** Passes, one at a time; requests during a pass merge into one more pass. */
  private readonly passes = coalesce(() => this.pass().catch((err: Error) => this.opts.log.error('reconcile pass failed', { error: err.message })));
  /** Whether the next pass takes every sandbox (a resync), not only those whose desired state changed. */
  private resyncNext = false;
  private cancelRetry: () => void = () => undefined;
  /**
   * The host as the last pass left it: read after that pass's host changes, or the view it used
   * when it made none. Only podnet changes its own host links, so a pass that is not a resync
   * starts from this instead of reading the host again; a resync reads it anew and repairs drift.
   */
  private hostCache: HostView | undefined;
  /** The port security table as a pass last read the host (observeHost); undefined until one has. */
  private tableSeen: TableSeen | undefined;
  /** Whether this pass changed a host link (its view is then stale for the next one). */
  private hostChanged = false;
  /** The documents the last pass read: what the socket's list judges. */
  private documents: DesiredDocuments = { networks: new Map(), configs: [], problems: [] };
  private readonly judged = new WeakMap<DesiredDocuments, Problem[]>();
  /** The document problems the log has told, as lines: each is told once, when it appears. */
  private loggedProblems = new Set<string>();
  /** Steps the pass under way ran, for its metrics. */
  private stepsRun = 0;
  private readonly metrics: PassMetrics;

  constructor(opts: ReconcilerOptions) {
    this.opts = opts;
    this.metrics = opts.metrics ?? noMetrics;
  }

  /** The port security table as a pass last read the host, for `podnet status`; undefined until one has. */
  portSecuritySeen(): TableSeen | undefined {
    return this.tableSeen;
  }

  /** Every sandbox's report, for `podnet explain`. */
  list(): SandboxList {
    return { documentProblems: this.judge(this.documents), items: [...this.reports.values()].map(({ record: _r, wanted: _w, known: _k, ...report }) => report) as SandboxList['items'] };
  }

  /** What is wrong with each document (documentProblems), with this node's namespace labels and limits: what the socket and the status tell. */
  judge(docs: DesiredDocuments): Problem[] {
    // Judged once per view of the documents: the socket's list is read far more often than passes run.
    let problems = this.judged.get(docs);
    if (!problems) {
      const { source } = this.opts;
      problems = documentProblems(docs, (namespace) => source.namespaceLabels?.(namespace), this.opts.limits);
      this.judged.set(docs, problems);
    }
    return problems;
  }

  /** Tells the log of each document problem once, when it appears (a file dropped in the dir, an edit that broke one). */
  private logDocumentProblems(docs: DesiredDocuments): void {
    const now = new Set(this.judge(docs).map((p) => `${p.document} ${p.field}: ${p.reason}`));
    for (const problem of now) if (!this.loggedProblems.has(problem)) this.opts.log.warn('a document podnet cannot use', { problem });
    this.loggedProblems = now;
  }

  /** The sandboxes whose pod the source knows, as the last pass left them: what their status is made from. */
  facts(): SandboxFacts[] {
    return [...this.reports.values()]
      .filter((report) => report.known)
      .map((report) => ({
        record: report.record,
        namespace: report.namespace,
        name: report.name,
        wanted: report.wanted,
        applied: report.applied,
        delegated: report.delegated,
        problems: report.problems,
        ...(report.lastError ? { lastError: report.lastError } : {}),
        // The pod's links as its last pass read them (MAC, MTU, addresses); none when it did not read back.
        links: this.tracks.get(report.containerId)?.sight?.view.pod,
      }));
  }

  /** Takes back the passes a crash cut short; before the first pass. */
  async recover(): Promise<void> {
    const committed = (key: string, pass: string) => (key === hostJournalKey ? this.opts.applied.hostPass() : this.opts.applied.get(key)?.pass) === pass;
    const netnsOf = (key: string) => (key === hostJournalKey ? undefined : (this.opts.applied.get(key)?.netns ?? this.opts.records.list().find((r) => r.containerId === key)?.netns));
    const undone = await runJournalUndo(this.opts.run, this.opts.stateDir, { committed, netnsOf, ...(this.opts.quarantined ? { onQuarantined: this.opts.quarantined } : {}) });
    if (undone.length > 0) this.opts.log.warn('undid passes a crash cut short', { sandboxes: undone });
  }

  /**
   * Runs a pass now, or one more after the pass under way; resolves when that pass is done. A
   * pass takes the sandboxes whose desired state changed, new ones, and failed ones whose retry
   * is due; `resync` takes every sandbox, which repairs drift.
   */
  schedule(scope: 'changed' | 'resync' = 'changed'): Promise<void> {
    if (scope === 'resync') this.resyncNext = true;
    return this.passes();
  }

  /** Waits for the pass under way; no retry runs after. */
  async close(): Promise<void> {
    this.cancelRetry();
    await this.passes.idle();
    this.cancelRetry();
  }

  /**
   * The recorded sandboxes whose netns is still there, one record each: the latest live ADD's (the
   * registry lists records oldest first), which names the netns as the runtime last made it; with
   * the key of all the sandbox's records. And those whose netns could not be looked at: neither
   * reconciled nor taken back by this pass.
   */
  private liveSandboxes(): { live: Map<string, LiveSandbox>; unsure: Set<string> } {
    const latest = new Map<string, AttachmentRecord>();
    const all = new Map<string, AttachmentRecord[]>();
    const unsure = new Set<string>();
    const sight = this.opts.sight();
    for (const record of this.opts.records.list()) {
      const seen = sight(record.netns);
      if (seen === 'net') latest.set(record.containerId, record);
      else if (seen === 'unsure') unsure.add(record.containerId);
      all.set(record.containerId, [...(all.get(record.containerId) ?? []), record]);
    }
    for (const cid of latest.keys()) unsure.delete(cid);
    if (unsure.size > 0) this.opts.log.warn('cannot tell whether these sandboxes\' netns are there; they are left as they are until a look succeeds', { containerIds: [...unsure] });
    const live = new Map([...latest].map(([cid, record]) => [cid, { record, records: recordsKey(all.get(cid)!) }]));
    return { live, unsure };
  }

  /**
   * What each sandbox should have, and its JSON: what tells a pass whether it changed. What the
   * node refuses is checked across the sandboxes first (quotas, own addresses, static MACs). A
   * PodNetworkConfig's generation the node refuses any part of gives the pod nothing, as one with
   * a problem of its own (ADR 17): the wanted states are made again without it, and checked again,
   * until the node refuses no config's part; then what it refused and would not refuse now is given
   * back (givenBack) and checked again, within the same rounds. An annotation's refused part alone
   * is left out.
   */
  private workOf(sandboxes: Iterable<LiveSandbox>, docs: DesiredDocuments, addresses: 'allocate' | 'preview'): SandboxWork[] {
    const live = [...sandboxes];
    const refusedByNode = new Map<string, NodeRefusal[]>();
    const wanted = live.map((sandbox) => this.wantedOf(sandbox, docs));
    let refused = this.nodeRefusals(wanted);
    // Each round refuses at least one generation more, of at most two per config (the one asked,
    // the one had); once none is new, it gives back those that no longer hold. Only the sandboxes
    // whose refusals changed are made again.
    for (let round = 0; ; round++) {
      let changed = refusedConfigs(wanted, refused, refusedByNode);
      const refusing = changed.size > 0;
      if (!refusing) changed = this.givenBack(live, wanted, docs, refusedByNode);
      if (changed.size === 0) break;
      if (round === maxRefusalRounds) {
        // Not seen in practice: each round refuses one generation more, or gives some back.
        if (refusing) this.opts.log.warn('the node refused parts of configs past the rounds that judge them whole; those parts alone are left out this pass', { containerIds: [...changed] });
        else this.opts.log.warn('the node\'s refusals of configs did not settle within the rounds that judge them; some stay refused this pass though they may no longer hold', { containerIds: [...changed] });
        break;
      }
      for (const [i, sandbox] of live.entries()) {
        const cid = sandbox.record.containerId;
        if (changed.has(cid)) wanted[i] = this.wantedOf(sandbox, docs, refusedByNode.get(cid));
      }
      refused = this.nodeRefusals(wanted);
    }
    const kept = withoutRefused(withoutRefused(wanted, refused.quotas), refused.addresses);
    const work = this.withMacsChecked(kept.map((w) => this.resolved(w, docs, addresses)));
    return work.map((w) => ({ ...w, desiredJson: JSON.stringify(w.desired) }));
  }

  /**
   * Gives back the generations the node refused that it would not refuse now (workOf): a refusal
   * another sandbox's claim caused (a quota place it took, a MAC or address it asked too) does not
   * hold once that sandbox lost the config that claimed it. Each refused generation is judged
   * alone, given back to its sandbox against what every other sandbox wants now; those it would
   * not refuse alone are judged again together (two that ask one MAC are refused together again;
   * of two a quota has one place for, the first keeps it), and those it would not refuse together
   * are given back. One it still refuses is told its reasons of now. Adds and removes in
   * `refusedByNode`; returns the sandboxes whose refusals changed.
   */
  private givenBack(live: readonly LiveSandbox[], wanted: readonly WantedWork[], docs: DesiredDocuments, refusedByNode: Map<string, NodeRefusal[]>): Set<string> {
    const changed = new Set<string>();
    const sameGeneration = (a: NodeRefusal, b: NodeRefusal) => a.config === b.config && a.generation === b.generation;
    const candidates: { index: number; refusal: NodeRefusal }[] = [];
    for (const [index, sandbox] of live.entries()) {
      const cid = sandbox.record.containerId;
      const mine = refusedByNode.get(cid) ?? [];
      for (const refusal of mine.filter((r, i) => mine.findIndex((o) => sameGeneration(o, r)) === i)) {
        const alone = [...wanted];
        alone[index] = this.wantedOf(sandbox, docs, mine.filter((r) => !sameGeneration(r, refusal)));
        const now = nodeRefusalsOf(alone[index]!, this.nodeRefusals(alone)).filter((r) => sameGeneration(r, refusal));
        if (now.length === 0) candidates.push({ index, refusal });
        else if (JSON.stringify(now.map((r) => r.problem)) !== JSON.stringify(mine.filter((r) => sameGeneration(r, refusal)).map((r) => r.problem))) {
          refusedByNode.set(cid, [...(refusedByNode.get(cid) ?? []).filter((r) => !sameGeneration(r, refusal)), ...now]);
          changed.add(cid);
        }
      }
    }
    if (candidates.length === 0) return changed;
    const together = [...wanted];
    for (const index of new Set(candidates.map((c) => c.index))) {
      const sandbox = live[index]!;
      const mine = refusedByNode.get(sandbox.record.containerId) ?? [];
      together[index] = this.wantedOf(sandbox, docs, mine.filter((r) => !candidates.some((c) => c.index === index && sameGeneration(c.refusal, r))));
    }
    const refused = this.nodeRefusals(together);
    for (const { index, refusal } of candidates) {
      if (nodeRefusalsOf(together[index]!, refused).some((r) => sameGeneration(r, refusal))) continue;
      const cid = live[index]!.record.containerId;
      const rest = (refusedByNode.get(cid) ?? []).filter((r) => !sameGeneration(r, refusal));
      if (rest.length > 0) refusedByNode.set(cid, rest);
      else refusedByNode.delete(cid);
      changed.add(cid);
    }
    return changed;
  }

  /**
   * What the node refuses of what the sandboxes want, each told at its field: attachments past
   * their Network's quota per namespace (model/quotas.ts), counted across every sandbox before any
   * address is taken; then of the rest, attachments whose own addresses (brought on a Network
   * without ipam) another pod on the node has, the node itself has, or another pod asks in the
   * same pass (model/macs.ts), since ipam never gives one address twice and neither does this;
   * and static MACs alike.
   */
  private nodeRefusals(wanted: WantedWork[]): NodeRefusals {
    const quotas = overQuota(
      wanted.map((w) => ({
        containerId: w.record.containerId,
        namespace: w.identity.namespace,
        attachments: w.wanted.attachments,
        has: new Set(this.earlierOf(w.record.containerId).map((e) => `${e.network}/${e.interface}`)),
      })),
    );
    const addresses = this.ownAddressRefusals(withoutRefused(wanted.map((w) => ({ ...w })), quotas));
    return { quotas, addresses, macs: this.macRefusals(wanted) };
  }

  /** What the documents want for one sandbox, before names and addresses are decided. */
  private wantedOf({ record, records }: LiveSandbox, docs: DesiredDocuments, refusedByNode: readonly NodeRefusal[] = []): WantedWork {
    const known = this.opts.source.identity(record);
    const identity = known ?? identityOf(record);
    const applied = this.opts.applied.get(record.containerId);
    // A state an older podnet wrote names no configs: the pod has those that select it now (ADR 17).
    const had = applied?.configs ?? (known && applied && !isEmptyApplied(applied) ? selectingConfigs(known, docs.configs).map((c) => ({ name: documentName(c), spec: c.spec })) : []);
    const wanted = known ? desiredWhole(known, docs.networks, docs.configs, this.earlierOf(record.containerId), this.opts.limits, had, refusedByNode) : nothingWanted();
    return { record, identity, wanted, records, known: known !== undefined };
  }

  /** The attachments a sandbox has: podnet's links and delegated ones alike. An annotation's unnamed selections keep the names they got. */
  private earlierOf(containerId: string): EarlierAttachment[] {
    return [...(this.opts.applied.get(containerId)?.attachments ?? []), ...this.opts.delegated.recordsOf(containerId)];
  }

  /** One sandbox's wanted state with its names and addresses decided (taken, or previewed for a diff). */
  private resolved(w: WantedWork, docs: DesiredDocuments, addresses: 'allocate' | 'preview'): Omit<SandboxWork, 'desiredJson'> {
    const { ipam } = this.opts;
    const allocate = addresses === 'allocate' ? ipam.allocate.bind(ipam) : ipam.preview.bind(ipam);
    const { desired, problems } = resolveSandbox(w.record.containerId, w.wanted, docs.networks, allocate);
    return { ...w, desired, problems };
  }

  /** The attachments whose own addresses the node refuses (nodeRefusals), told at their ips. */
  private ownAddressRefusals(wanted: WantedWork[]): Refusals {
    const plain = (address: string) => {
      const ip = parseCidr(address)?.ip ?? parseIp(address);
      return ip ? formatIp(ip) : address;
    };
    const brought = (a: DesiredAttachment) => a.ips !== undefined && a.network.spec.type !== 'cni' && !a.network.spec.ipam;
    const claims = wanted.map((w) => ({
      containerId: w.record.containerId,
      asked: w.wanted.attachments.filter(brought).flatMap((a) => a.ips!.map((ip) => ({ interface: a.interface, value: `${a.network.metadata.name} ${plain(ip)}`, from: a.from, field: `${a.field}.ips` }))),
      has: (this.opts.applied.get(w.record.containerId)?.attachments ?? []).flatMap((a) => a.addresses.map((ip) => `${a.network} ${plain(ip)}`)),
    }));
    if (!claims.some((c) => c.asked.length > 0)) return new Map();
    const networks = new Set(claims.flatMap((c) => c.asked.map((a) => a.value.slice(0, a.value.indexOf(' ')))));
    const hostIps = [...(this.hostCache?.links.values() ?? [])].flatMap((l) => l.addresses.map(plain));
    return refusedOwnAddresses(claims, new Set([...networks].flatMap((n) => hostIps.map((ip) => `${n} ${ip}`))));
  }

  /**
   * `work` without the static MACs a sandbox may not have (model/macs.ts): against what every
   * sandbox's interfaces had when last seen, what the others ask, and the host's links as the last
   * pass saw them. A refused MAC is told at its field; the rest of the sandbox's request stands.
   */
  private withMacsChecked<W extends Omit<SandboxWork, 'desiredJson'>>(work: W[]): W[] {
    const refused = this.macRefusals(work);
    for (const w of work) {
      const mine = refused.get(w.record.containerId);
      if (!mine) continue;
      const interfaces = new Set(mine.map((r) => r.interface));
      w.desired.tuning = w.desired.tuning.flatMap((t) => {
        if (!interfaces.has(t.interface)) return [t];
        const { mac: _refused, ...settings } = t.settings;
        return Object.keys(settings).length > 0 ? [{ ...t, settings }] : [];
      });
      w.problems.push(...mine.map((r) => r.problem));
    }
    return work;
  }

  /** The static MACs the node refuses (withMacsChecked), told at their fields. */
  private macRefusals(work: readonly WantedWork[]): Refusals {
    const claims = work.map((w) => ({
      containerId: w.record.containerId,
      asked: w.wanted.macs,
      // As last seen, and as podnet recorded giving them: a first pass after a start has seen nothing yet.
      has: [
        ...[...(this.tracks.get(w.record.containerId)?.sight?.view.pod.values() ?? [])].flatMap((l) => (l.mac ? [l.mac] : [])),
        ...(this.opts.applied.get(w.record.containerId)?.attachments ?? []).flatMap((a) => [a.mac, a.portSecurity?.mac].filter((m): m is string => m !== undefined)),
      ],
    }));
    const hostMacs = new Set([...(this.hostCache?.links.values() ?? [])].flatMap((l) => (l.mac ? [l.mac] : [])));
    return refusedMacs(claims, hostMacs);
  }

  /**
   * What a pass would do with `extra` documents on top of the followed ones, without doing it:
   * the same desired state, observation and plan, addresses previewed rather than taken; the
   * sandboxes are planned as if the host steps (bridges) had run.
   */
  async diff(extra: readonly (Network | PodNetworkConfig)[]): Promise<DiffResponse> {
    const docs = withDocuments(this.opts.source.documents(), extra);
    const work = this.workOf(this.liveSandboxes().live.values(), docs, 'preview');
    const hostView = await this.observeHost(work);
    const attachments = work.flatMap((w) => w.desired.attachments);
    const bridges = planBridges(attachments, hostView.links, hostView.securedPorts);
    const hostSteps = [...bridges.table, ...bridges.steps];
    const links = new Map(hostView.links);
    for (const a of attachments) {
      if (a.link.kind === 'bridge' && !links.has(a.link.bridge)) links.set(a.link.bridge, { name: a.link.bridge, mtu: a.mtu ?? 1500, up: true, kind: 'bridge', addresses: a.link.bridgeAddresses });
    }
    // The port security table too, when the pass would put it: empty, its ports' entries to come.
    const asIfMade = hostViewOf(links, hostView.qdiscs, hostView, bridges.table.length > 0 ? new Set<string>() : hostView.securedPorts);
    const view = (s: Step) => ({ where: s.where === 'host' ? 'host' : s.where.netns, tool: s.tool, line: s.line });
    const items = await mapLimited(work, sandboxConcurrency, async (w): Promise<DiffResponse['items'][number]> => {
      const applied = this.opts.applied.get(w.record.containerId);
      const sight = await this.readPod(w, podNeeds(w.desired, applied));
      const observed = observedWith(sight.view, asIfMade);
      const planned = plan({ containerId: w.record.containerId, netns: w.record.netns, desired: w.desired, observed, applied, ...originsOf(w.wanted) });
      return { containerId: w.record.containerId, namespace: w.identity.namespace, name: w.identity.name, steps: planned.steps.map(view), problems: [...w.problems, ...planned.problems] };
    });
    return { documentProblems: this.judge(docs), hostSteps: hostSteps.map(view), items };
  }

  /**
   * A pass: every sandbox's desired state (addresses taken), then the bridges they need, made once,
   * then the sandboxes side by side, a few at a time (each touches only its own netns and its
   * own host links; in a large pass the host steps their plans start with run together, once every
   * sandbox of a wave of them has planned: stages.ts); then what gone sandboxes and unused bridges
   * leave. A pass that is not a resync starts from the host as the last pass left it (hostCache)
   * and reads only the netns of the sandboxes it takes; when it must read the host, the first
   * sandboxes read their netns meanwhile.
   */
  private async pass(): Promise<void> {
    if (!this.opts.source.synced) return;
    const started = performance.now();
    this.stepsRun = 0;
    const resync = this.resyncNext;
    this.resyncNext = false;
    try {
      await this.passOver(resync);
    } finally {
      // Also a pass an error cut short: its time and the steps it ran count.
      this.metrics.passEnded({ seconds: (performance.now() - started) / 1000, steps: this.stepsRun, resync });
    }
    this.opts.afterPass?.();
  }

  private async passOver(resync: boolean): Promise<void> {
    const docs = this.opts.source.documents();
    this.documents = docs;
    this.logDocumentProblems(docs);
    const { live, unsure } = this.liveSandboxes();
    const work = this.workOf(live.values(), docs, 'allocate');
    const now = this.opts.clock();
    const due: SandboxWork[] = [];
    for (const w of work) {
      if (this.isDue(w, resync, now)) due.push(w);
      else this.refreshReport(w);
    }
    const cached = resync ? undefined : this.hostCache;
    // Until this pass ends well: a pass cut short by an error leaves no view behind.
    this.hostCache = undefined;
    const host = this.hostWithBridges(work, cached);
    // Awaited below in every case; this keeps a failure before then from counting as unhandled.
    host.catch(() => undefined);
    // A small pass (a request) reads back the netns it changed, for the next request to plan from;
    // in a large one those reads would hold up the other sandboxes: they come after all (readBackChanged).
    const readBack = due.length <= sandboxConcurrency;
    if (readBack) await mapLimited(due, sandboxConcurrency, (w) => this.reconcileSandbox(w, host, { resync, readBack }));
    else {
      // A large pass: the host steps its plans start with run together, wave by wave (stages.ts).
      await inStages(due, sandboxConcurrency, this.opts.timer, (w, together) => this.reconcileSandbox(w, host, { resync, readBack, together }));
      await this.readBackChanged(due);
    }
    const hostView = await host;
    const gone = (cid: string) => !live.has(cid) && !unsure.has(cid);
    for (const state of this.opts.applied.all()) if (gone(state.containerId)) await this.forget(state, hostView);
    await this.opts.delegated.forgetGone(gone);
    if (resync) await this.opts.delegated.collect(work.flatMap((w) => w.desired.delegated.map((d) => d.config)));
    for (const cid of [...this.reports.keys()]) if (gone(cid)) this.reports.delete(cid);
    for (const cid of [...this.tracks.keys()]) if (gone(cid)) this.tracks.delete(cid);
    this.sweepAddresses();
    // Sandboxes make and remove only their own veth ends and ifbs: the view still holds the bridges.
    await this.collectBridges(hostView);
    this.hostCache = this.hostChanged ? await this.observeHost(work).catch(() => undefined) : hostView;
    this.hostChanged = false;
    this.scheduleRetry();
  }

  /**
   * Each attachment the sandboxes want or have, with its Network and state, as the last pass left
   * them: ready (there, and its sandbox's last pass did not fail), failing, or pending (wanted, not
   * there yet). What the metrics count.
   */
  attachmentStates(): { network: string; state: AttachmentState }[] {
    return [...this.reports.values()].flatMap((r) => {
      const there = new Set([...(r.applied?.attachments ?? []), ...r.delegated].map((a) => `${a.network}/${a.interface}`));
      const wanted = [...r.desired.attachments, ...r.desired.delegated];
      const extra = [...(r.applied?.attachments ?? []), ...r.delegated].filter((a) => !wanted.some((w) => w.network === a.network && w.interface === a.interface));
      return [...wanted, ...extra].map(({ network, interface: name }) => ({
        network,
        state: r.lastError !== undefined ? 'failing' : there.has(`${network}/${name}`) ? 'ready' : 'pending',
      }));
    });
  }

  /**
   * Reads the netns of a large pass's sandboxes that it changed, once every sandbox's steps ran:
   * what the status then tells of them (each link's MTU and MAC) is what they have. Without it a
   * pod's network-status lost its MTU after every large pass and got it back at the next resync,
   * two writes for nothing (bench/kube-scale); and the next request plans from this view.
   */
  private async readBackChanged(due: readonly SandboxWork[]): Promise<void> {
    const changed = due.filter((w) => {
      const report = this.reports.get(w.record.containerId);
      const track = this.tracks.get(w.record.containerId);
      return report !== undefined && report.lastSteps.length > 0 && track?.committed === true && track.sight === undefined;
    });
    await mapLimited(changed, sandboxConcurrency, async (w) => {
      const track = this.tracks.get(w.record.containerId);
      const applied = this.reports.get(w.record.containerId)?.applied;
      // A read that fails leaves no view: the next pass reads, as before.
      if (track) track.sight = await this.readPod(w, podNeeds(w.desired, applied)).catch(() => undefined);
    });
  }

  /** Whether a pass takes this sandbox: see schedule. */
  private isDue(work: SandboxWork, resync: boolean, now: number): boolean {
    const track = this.tracks.get(work.record.containerId);
    if (!track || track.deferred || track.desired !== work.desiredJson) return true;
    // One that waits for the port security table, at each resync too, to be tried soon after the
    // table can be put whole again (nft installed, a chain in its way gone): any pass that finds it
    // not whole puts it again.
    if (track.failures > 0) return now >= track.retryAt || (resync && track.waitsForTable);
    return resync;
  }

  /** A sandbox a pass does not take keeps its report, with the documents' problems of now. */
  private refreshReport(work: SandboxWork): void {
    const report = this.reports.get(work.record.containerId);
    if (!report) return;
    const track = this.tracks.get(work.record.containerId);
    report.problems = [...work.problems, ...(track?.delegateProblems ?? []), ...(track?.planProblems ?? [])];
    report.wanted = work.wanted;
    report.known = work.known;
  }

  /** One timer, for the failed sandbox whose retry is due first. */
  private scheduleRetry(): void {
    this.cancelRetry();
    const next = Math.min(...[...this.tracks.values()].filter((t) => t.failures > 0).map((t) => t.retryAt));
    if (next === Infinity) return;
    // A few ms late rather than early: the pass checks the time against retryAt.
    this.cancelRetry = this.opts.timer(Math.max(0, next - this.opts.clock()) + 5, () => void this.passes());
  }

  /**
   * The host as the sandboxes of a pass see it: the last pass's view when there is one that holds
   * what they need, else read; read again after making the bridges they need.
   */
  private async hostWithBridges(work: readonly SandboxWork[], cached: HostView | undefined): Promise<HostView> {
    const hostView = cached && readsEnough(cached, this.hostReads(work)) ? cached : await this.observeHost(work);
    const { steps, created, table } = planBridges(work.flatMap((w) => w.desired.attachments), hostView.links, hostView.securedPorts);
    if (steps.length === 0 && table.length === 0) return hostView;
    this.hostChanged = true;
    // Made again whole when missing, nothing to undo: a failure leaves the secured ports' passes
    // to fail, saying why (planLinks); the bridges and every other pod go on.
    const made = table.length > 0 ? await this.batch(host, 'nft', table) : undefined;
    if (made?.error) this.opts.log.warn('could not make the port security table; pods with secured ports wait for it', { error: made.error.message });
    if (steps.length > 0) {
      const result = await this.execute(hostJournalKey, steps, (pass) => this.opts.applied.setBridges([...this.opts.applied.bridges(), ...created], pass));
      if (result.error) this.opts.log.warn('could not make the bridges this pass needs; what it took was undone', { error: result.error.message });
    }
    const after = await this.observeHost(work);
    if (!made || after.securedPorts !== undefined) return after;
    // nft took the ruleset, and yet the table does not read whole (a chain of that name that is not
    // podnet's, an nft that lists the rules otherwise): said, as no port is secured in it, and
    // every pass puts the table again.
    if (!made.error && after.portSecurityUnavailable === undefined) this.opts.log.warn('the port security table was put but does not read whole; no port is secured in it', { table: portSecurityTable });
    const why = made.error ? `nft could not put ${portSecurityTable}: ${made.error.message}` : (after.portSecurityUnavailable ?? `${portSecurityTable} was put but does not read whole`);
    return { ...after, portSecurityUnavailable: why };
  }

  /**
   * Releases addresses neither desired nor applied: those a pass took for an attachment and then
   * could not record (a crash between the two, or a desired state that changed before it applied).
   */
  private sweepAddresses(): void {
    const keep = new Set<string>();
    for (const report of this.reports.values()) for (const a of report.desired.attachments) keep.add(`${a.network} ${addressOwner(report.containerId, a.interface)}`);
    for (const state of this.opts.applied.all()) for (const a of state.attachments) keep.add(`${a.network} ${addressOwner(state.containerId, a.interface)}`);
    for (const { network, owner } of this.opts.ipam.holders()) {
      if (keep.has(`${network} ${owner}`)) continue;
      this.opts.ipam.release(network, owner);
      this.opts.log.info('released an address nothing asks for', { network, owner });
    }
  }

  /** What of the host a pass reads beyond its links: the qdiscs when any sandbox has or wants a rate limit, the port security table when any has or wants a secured port. */
  private hostReads(work: readonly SandboxWork[]): HostReads {
    const wanted = work.flatMap((w) => w.desired.attachments);
    const applied = this.opts.applied.all().flatMap((s) => s.attachments);
    return {
      shaped: wanted.some((a) => a.bandwidth) || applied.some((a) => a.bandwidth),
      secured: wanted.some((a) => a.link.kind === 'bridge' && a.link.portSecurity) || applied.some((a) => a.portSecurity),
    };
  }

  /** The host as it is now; a read that covers the port security table is kept for `podnet status` (tableSeen), a failed one too. */
  private async observeHost(work: readonly SandboxWork[]): Promise<HostView> {
    const reads = this.hostReads(work);
    if (!reads.secured) return readHost(this.opts.observe, reads);
    // The secured ports made before the read starts: those it can tell filtered or not.
    const judged = new Set(this.opts.applied.all().flatMap((s) => s.attachments.flatMap((a) => (a.portSecurity && a.hostIf ? [a.hostIf] : []))));
    try {
      const view = await readHost(this.opts.observe, reads);
      this.tableSeen = { ...(view.securedPorts ? { filtered: view.securedPorts } : {}), judged };
      return view;
    } catch (err) {
      this.tableSeen = { judged };
      throw err;
    }
  }

  private readPod({ record, records }: SandboxWork, needs: PodNeeds): Promise<PodSight> {
    return readPod(this.opts.observe, record.netns, records, needs);
  }

  /**
   * One sandbox's part of a pass: observe (or take the view its last pass left), plan, apply; a
   * failure is reported, the pass goes on.
   */
  private async reconcileSandbox(work: SandboxWork, host: Promise<HostView>, pass: { resync: boolean; readBack: boolean; together?: Together }): Promise<void> {
    const { log } = this.opts;
    const { record, identity, desired, problems } = work;
    const report: SandboxOutcome = {
      record,
      containerId: record.containerId,
      namespace: identity.namespace,
      name: identity.name,
      netns: record.netns,
      desired,
      applied: this.opts.applied.get(record.containerId),
      problems: [...problems],
      lastSteps: [],
      delegated: this.opts.delegated.attachedTo(record.containerId),
      wanted: work.wanted,
      known: work.known,
    };
    this.reports.set(record.containerId, report);
    const pod = `${identity.namespace}/${identity.name}`;
    const previous = this.tracks.get(record.containerId);
    const track: SandboxTrack = { desired: work.desiredJson, planProblems: [], delegateProblems: [], failures: 0, retryAt: 0, deferred: false, committed: false, waitsForTable: false };
    this.tracks.set(record.containerId, track);
    try {
      // The plugins first: what the plan tunes or routes through may be an interface they make.
      const tuned = new Set(desired.tuning.map((t) => t.interface));
      const delegation = await this.opts.delegated.sync({ record, pod, desired: desired.delegated, wanted: work.wanted, tuned }, pass.resync);
      track.delegateProblems = delegation.problems;
      report.problems.push(...delegation.problems);
      report.delegated = this.opts.delegated.attachedTo(record.containerId);
      if (!asksThePlanner(desired, report.applied)) {
        // Most pods on a node: nothing of podnet's own wanted or there, so nothing to read or plan.
        report.problems = [...work.problems, ...track.delegateProblems];
        report.lastSteps = [];
        // Its configs may still give it delegated attachments: which generation it has is kept.
        if (!delegation.failed) this.keepConfigs(record, report, work.wanted.whole ?? []);
        // What its other plugins made stands.
        track.committed = true;
        if (delegation.failed) throw delegation.failed;
        return;
      }
      const needs = podNeeds(desired, report.applied);
      const last = previous?.sight;
      const kept = !pass.resync && !delegation.changed && last && last.records === work.records && covers(last, needs) ? last : undefined;
      try {
        track.sight = await this.planAndApply(work, report, track, kept ?? this.readPod(work, needs), host, pass);
      } catch (err) {
        const e = toPodnetError(err);
        // Made again only when a step failed and was taken back whole: anything else would fail alike.
        if (!kept || e.code !== 'IO_FAILURE' || undoFailed.has(e)) throw err;
        log.warn('a plan from the view the last pass left failed; planning again from the netns and host as they are', { pod, error: e.message });
        report.lastSteps = [];
        track.planProblems = [];
        this.hostChanged = true;
        track.sight = await this.planAndApply(work, report, track, this.readPod(work, needs), this.observeHost([work]), pass);
      }
      track.committed = true;
      // The rest applied; a plugin that failed, or a port that waits for the port security table,
      // is tried again with the sandbox's backoff.
      if (delegation.failed) throw delegation.failed;
      if (track.unavailable !== undefined) {
        track.waitsForTable = true;
        throw new PodnetError('NOT_AVAILABLE', track.unavailable);
      }
    } catch (err) {
      const e: PodnetError = toPodnetError(err);
      report.lastError = e.message;
      this.metrics.sandboxFailed(e.code);
      track.failures = (previous?.failures ?? 0) + 1;
      track.retryAt = this.opts.clock() + retryWaitMs(track.failures);
      const outcome = track.committed ? 'the rest of its config was applied' : undoFailed.has(e) ? 'taking back what this pass took failed too' : 'what this pass took was undone';
      log.warn(`reconcile failed; ${outcome}`, { pod, error: e.message, retryInMs: track.retryAt - this.opts.clock() });
    }
  }

  /**
   * Plans from `sight` and the host and applies the plan; throws when a step fails (the steps
   * taken were undone). Resolves with the netns as the plan left it: `sight` when the plan had
   * no steps; else its links as the plan's last batch read them back, when links are all the next
   * plan needs and that batch was ip's in the netns (no process of its own); else read back when
   * `readBack` says so; none otherwise, or when that read fails (the next pass reads). `together`:
   * how a large pass runs the plan's leading host steps (stages.ts).
   */
  private async planAndApply(
    work: SandboxWork,
    report: SandboxOutcome,
    track: SandboxTrack,
    sight: PodSight | Promise<PodSight>,
    host: Promise<HostView>,
    { readBack, together }: { readBack: boolean; together?: Together },
  ): Promise<PodSight | undefined> {
    const { record, identity, desired } = work;
    const [seen, hostView] = await Promise.all([sight, host]);
    const planned = plan({ containerId: record.containerId, netns: record.netns, desired, observed: observedWith(seen.view, hostView), applied: report.applied, ...originsOf(work.wanted) });
    report.problems = [...work.problems, ...track.delegateProblems, ...planned.problems];
    report.lastSteps = planned.steps;
    track.unavailable = planned.unavailable;
    track.planProblems = planned.problems;
    const next = withConfigs(planned.next, work.wanted.whole ?? []);
    if (planned.steps.length === 0 && sameApplied(report.applied, next)) return seen;
    const before = report.applied;
    if (planned.steps.some((step) => step.where === 'host')) this.hostChanged = true;
    const needsAfter = podNeeds(desired, next);
    const linksBack: ReadBack | undefined = linksAlone(needsAfter) ? { where: { netns: record.netns }, read: linksRead } : undefined;
    const result = await this.execute(record.containerId, planned.steps, (pass) => this.commit(before, { ...next, pass }), linksBack, together);
    if (result.error) {
      if (result.undoErrors.length === 0) throw result.error;
      const e = new PodnetError('IO_FAILURE', `${result.error.message}; taking back this pass's steps also failed: ${result.undoErrors.map((u) => u.message).join('; ')}`);
      undoFailed.add(e);
      throw e;
    }
    report.applied = this.opts.applied.get(record.containerId);
    this.countChanges(before, report.applied);
    // Level-triggered: what had to wait for this pass's changes gets the next pass at once.
    if (planned.deferred) {
      track.deferred = true;
      void this.passes();
    }
    if (planned.steps.length > 0) this.opts.log.info('applied', { pod: `${identity.namespace}/${identity.name}`, steps: planned.steps.length });
    if (planned.steps.length === 0) return seen;
    const readTogether = result.read && this.linksReadBack(result.read);
    if (readTogether) return sightOfLinks(needsAfter, work.records, readTogether);
    if (!readBack) return undefined;
    // Host steps change the netns too: a veth made from the host puts its end there, deleting the host end takes it away.
    return this.readPod(work, needsAfter).catch(() => undefined);
  }

  /** The links a pass's last batch read back; none when ip's answer was not links (the pass then reads on its own): the steps stand either way. */
  private linksReadBack(answers: readonly unknown[]): ReturnType<typeof linksOf> | undefined {
    try {
      return linksOf(answers);
    } catch (err) {
      this.opts.log.warn('the links read back after a pass could not be read; reading the netns again', { error: toPodnetError(err).message });
      return undefined;
    }
  }

  /** Records which generation of each config a sandbox podnet plans nothing for has whole, when it changed. */
  private keepConfigs(record: AttachmentRecord, report: SandboxOutcome, whole: readonly AppliedConfig[]): void {
    const next = withConfigs(report.applied ?? emptyApplied(record.containerId, record.netns), whole);
    if (sameApplied(report.applied, next)) return;
    this.opts.applied.put(next);
    report.applied = this.opts.applied.get(record.containerId);
  }

  /** Records the new applied state and releases addresses no longer held. */
  private commit(before: AppliedState | undefined, after: AppliedState): void {
    this.opts.applied.put(after);
    for (const was of before?.attachments ?? []) {
      if (!after.attachments.some((a) => a.interface === was.interface && a.network === was.network)) {
        this.opts.ipam.release(was.network, addressOwner(after.containerId, was.interface));
      }
    }
  }

  /** Runs `steps` through a journaled pass (executor/execute.ts), counting them for the pass's metrics. */
  private execute(key: string, steps: readonly Step[], commit: (pass: string) => void, readBack?: ReadBack, together?: Together): ReturnType<typeof execute> {
    this.countSteps(steps);
    return execute(this.opts.run, this.opts.stateDir, key, steps, commit, readBack, together);
  }

  /** Runs `steps`, all of `tool` at `where`, as one batch with no journal (nothing to undo: the port security table), counting them as execute does. */
  private batch(where: Where, tool: Tool, steps: readonly Step[]): ReturnType<NetnsRunner['batch']> {
    this.countSteps(steps);
    return this.opts.run.batch(where, tool, steps.map((s) => s.line));
  }

  /** Counts steps a pass runs, for its metrics: every step, whichever way it runs, counted here. */
  private countSteps(steps: readonly Step[]): void {
    this.stepsRun += steps.length;
  }

  /** Tells the metrics which of podnet's own attachments a change made and removed, by Network. */
  private countChanges(before: AppliedState | undefined, after: AppliedState | undefined): void {
    const keys = (s: AppliedState | undefined) => new Map((s?.attachments ?? []).map((a) => [`${a.network}/${a.interface}`, a.network]));
    const [was, is] = [keys(before), keys(after)];
    for (const [key, network] of is) if (!was.has(key)) this.metrics.attachmentsChanged(network, 'attached');
    for (const [key, network] of was) if (!is.has(key)) this.metrics.attachmentsChanged(network, 'detached');
  }

  /**
   * A sandbox that is gone: its pod ends went with its netns; host ends, ifbs and addresses go
   * now, through a journaled pass like any other change (a crash in it is taken back at start).
   */
  private async forget(state: AppliedState, hostView: HostView): Promise<void> {
    // Only the links that bear this sandbox's mark: one of the recorded name that someone else
    // marked is left alone.
    const names = state.attachments.flatMap((a) => {
      const mark = ownerMark({ containerId: state.containerId, podInterface: a.interface });
      return [a.hostIf, a.ifb].filter((n): n is string => n !== undefined && hostView.podnetLinks.has(n) && bearsMark(hostView.podnetLinks.get(n)!, mark));
    });
    // Its ports' entries in the port security table go too: they are keyed by a name the next
    // sandbox with the same container and interface would get.
    const ports = state.attachments.flatMap((a): Step[] => (a.hostIf && a.portSecurity ? [{ where: host, tool: 'nft', line: releasePortLine(a.hostIf, a.portSecurity) }] : []));
    const steps = [...ports, ...names.map((name): Step => ({ where: host, tool: 'ip', line: linkDelLine(name) }))];
    if (steps.length > 0) this.hostChanged = true;
    const result = await this.execute(state.containerId, steps, () => {
      for (const a of state.attachments) this.opts.ipam.release(a.network, addressOwner(state.containerId, a.interface));
      this.opts.applied.remove(state.containerId);
    });
    if (result.error) {
      this.opts.log.warn('could not remove the host ends of a gone sandbox; retrying next pass', { containerId: state.containerId, error: result.error.message });
      return;
    }
    this.countChanges(state, undefined);
    this.opts.log.info('took back a gone sandbox', { containerId: state.containerId, attachments: state.attachments.length });
  }

  /** Removes bridges podnet made that no attachment uses any more, through a journaled pass. */
  private async collectBridges(hostView: HostView): Promise<void> {
    const { applied } = this.opts;
    const inUse = new Set(applied.all().flatMap((s) => s.attachments.flatMap((a) => (a.bridge ? [a.bridge] : []))));
    const known = applied.bridges();
    const unused = known.filter((b) => !inUse.has(b));
    if (unused.length === 0) return;
    const bridgeMark = ownerMark('bridge');
    const steps = unused.filter((b) => hostView.links.has(b) && bearsMark(hostView.links.get(b)!, bridgeMark)).map((b): Step => ({ where: host, tool: 'ip', line: linkDelLine(b) }));
    if (steps.length > 0) this.hostChanged = true;
    const result = await this.execute(hostJournalKey, steps, (pass) => applied.setBridges(known.filter((b) => inUse.has(b)), pass));
    if (result.error) this.opts.log.warn('could not remove an unused bridge; retrying next pass', { error: result.error.message });
  }
}

/** `state` with the generation of each config the sandbox has whole (none: the key left out). */
function withConfigs(state: AppliedState, whole: readonly AppliedConfig[]): AppliedState {
  const { configs: _was, ...rest } = state;
  return whole.length > 0 ? { ...rest, configs: [...whole] } : rest;
}

/** Who asked each desired thing, for the plan to stamp on its steps. */
function originsOf(wanted: DesiredSandbox): { origins?: ReadonlyMap<string, string> } {
  return wanted.origins ? { origins: wanted.origins } : {};
}

/** `wanted` without the attachments `refused` names, each sandbox told why at its field. */
/** Per sandbox, the interfaces whose part the node refuses, each with the problem to tell. */
type Refusals = ReadonlyMap<string, readonly { interface: string; problem: Problem }[]>;

interface NodeRefusals {
  quotas: Refusals;
  addresses: Refusals;
  macs: Refusals;
}

/** Rounds of node checks after which what is still refused is left out alone, as an annotation's part is. */
const maxRefusalRounds = 8;

/**
 * Adds to `refusedByNode` each generation of a config a sandbox would have whole whose part the
 * node refuses; the sandboxes it added one for.
 */
function refusedConfigs(wanted: readonly WantedWork[], refused: NodeRefusals, refusedByNode: Map<string, NodeRefusal[]>): Set<string> {
  const changed = new Set<string>();
  for (const w of wanted) {
    const cid = w.record.containerId;
    for (const refusal of nodeRefusalsOf(w, refused)) {
      const known = refusedByNode.get(cid) ?? [];
      if (known.some((r) => r.config === refusal.config && r.generation === refusal.generation && r.problem.field === refusal.problem.field)) continue;
      refusedByNode.set(cid, [...known, refusal]);
      changed.add(cid);
    }
  }
  return changed;
}

/** The generations of configs a sandbox would have whole whose part the node refuses, each with why. */
function nodeRefusalsOf(w: WantedWork, refused: NodeRefusals): NodeRefusal[] {
  const cid = w.record.containerId;
  const problems = [refused.quotas, refused.addresses, refused.macs].flatMap((r) => (r.get(cid) ?? []).map((x) => x.problem));
  return problems.flatMap((problem) => {
    const config = w.wanted.whole?.find((c) => c.name === problem.document);
    return config === undefined ? [] : [{ config: config.name, generation: generationOf(config.spec), problem }];
  });
}

function withoutRefused(wanted: WantedWork[], refused: Refusals): WantedWork[] {
  for (const w of wanted) {
    const mine = refused.get(w.record.containerId);
    if (!mine) continue;
    const interfaces = new Set(mine.map((r) => r.interface));
    w.wanted = { ...w.wanted, attachments: w.wanted.attachments.filter((a) => !interfaces.has(a.interface)), problems: [...w.wanted.problems, ...mine.map((r) => r.problem)] };
  }
  return wanted;
}

/** What a sandbox whose pod the source does not know should have: nothing of podnet's. */
function nothingWanted(): DesiredSandbox {
  return { configs: [], attachments: [], tuning: [], routes: [], rules: [], sysctls: [], macs: [], problems: [] };
}

/** Whether `b` records what `a` does; which pass wrote a record does not count. */
function sameApplied(a: AppliedState | undefined, b: AppliedState): boolean {
  if (a === undefined) return isEmptyApplied(b);
  const { pass: _a, ...left } = a;
  const { pass: _b, ...right } = b;
  return JSON.stringify(left) === JSON.stringify(right);
}
