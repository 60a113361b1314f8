// Level-triggered reconcile: every pass makes each recorded sandbox match what the documents ask,
// takes back what podnet did to sandboxes that are gone, and removes bridges podnet made that
// nothing uses. Passes are serialized and coalesced (a request during a pass runs one more pass
// after it); a periodic pass repairs drift. One sandbox's failure does not stop the others.
import { join } from 'node:path';
import { PodnetError } from '../errors.ts';
import { toPodnetError } from '../errors.ts';
import { desiredFor, identityOf, type DesiredAttachment, type DesiredSandbox, type Problem, type SandboxIdentity } from '../model/desired.ts';
import { bridgeNameOf, sharedBridgeReason } from '../model/network.ts';
import { hasPodnetPrefix, hostInterfaceName } from '../model/host-links.ts';
import { delegatedConfigOf, isConfigProblem, resultFor, runsCheck, runsGc, runsStatus, type DelegatedConfig } from '../model/cni-config.ts';
import type { PluginRunner } from '../delegate/plugin.ts';
import { DelegatedStore, targetOf, type DelegatedRecord } from '../delegate/store.ts';
import { isEmptyApplied, type ResolvedDelegated, type AppliedState, type Family, type LinkSpec, type Observed, type ObservedLink, type Resolved, type ResolvedAttachment } from '../model/state.ts';
import type { Step } from '../model/step.ts';
import type { NetnsRunner } from '../netns/runner.ts';
import { observeLinks, observeQdiscs, observeRouting } from '../netns/observe.ts';
import { networkNamespaceSight } from '../netns/probe.ts';
import { plan } from '../planner/plan.ts';
import { planBridges } from '../planner/bridges.ts';
import { execute, runJournalUndo } from '../executor/execute.ts';
import type { NodeIpam } from '../ipam/ipam.ts';
import type { AttachmentRecord, DiffResponse, Network, PodNetworkConfig, SandboxList } from '../protocol/validate.ts';
import { AppliedStore } from '../registry/applied.ts';
import { removeTempFiles } from '../registry/atomic-file.ts';
import { kernelStateDirs } from '../registry/boot.ts';
import { stateLayout } from '../protocol/paths.ts';
import type { Registry } from '../registry/registry.ts';
import { withDocuments, type DesiredDocuments } from '../sources/config-dir.ts';
import type { Logger } from '../log.ts';
import { coalesce } from './coalesce.ts';
import { mapLimited } from './map-limited.ts';

export interface SandboxReport {
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

export interface ReconcilerOptions {
  stateDir: string;
  registry: Registry;
  documents: () => DesiredDocuments;
  run: NetnsRunner;
  ipam: NodeIpam;
  /** Runs the plugins of cni Networks. */
  plugins: PluginRunner;
  log: Logger;
  /**
   * Who a sandbox is: its labels and annotation (Kubernetes, from its pod object); undefined when
   * the source knows no such pod, and the sandbox then gets nothing. Standalone: from its record.
   */
  identity?: (record: AttachmentRecord) => SandboxIdentity | undefined;
  /** Called after every pass, with the reports of that pass: where the status is published from. */
  afterPass?: () => void;
  /** Whether the source's desired state is complete; a pass before would take back what it still asks. */
  ready?: () => boolean;
}

/**
 * DELs tried for a delegated ADD that did not answer before podnet gives up on it. Its record is
 * then held: no ADD again for that interface until its config changes or it is no longer asked
 * for, so a plugin whose DEL cannot take back its failed ADD does not leak once per retry.
 */
const maxFailedDels = 3;

/** A record of a failed ADD whose DEL podnet gave up on (see maxFailedDels). */
const isGivenUp = (r: DelegatedRecord) => r.result === undefined && (r.failedDels ?? 0) >= maxFailedDels;

/** Sandboxes reconciled at once: each runs a few short ip processes, mostly waiting on the kernel. */
const sandboxConcurrency = 8;

/** The journal of a pass's host steps (bridges); '@' is in no container id. */
const hostJournalKey = '@host';

/** The wait before a failed sandbox is tried again: doubling from the first, up to the cap. */
const retryFirstMs = 500;
const retryCapMs = 30_000;
const retryWaitMs = (failures: number) => Math.min(retryFirstMs * 2 ** (failures - 1), retryCapMs);

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

/** A recorded sandbox whose netns is there: the record a pass works from, and all of its records' key. */
interface LiveSandbox {
  record: AttachmentRecord;
  records: string;
}

/** Failures whose steps could not all be taken back: a fresh plan would meet podnet's own leftovers as someone else's. */
const undoFailed = new WeakSet<Error>();

/** What a pass sees inside one sandbox's netns. */
type PodView = Pick<Observed, 'pod' | 'routes' | 'rules' | 'sysctls'>;

/** What of a netns a plan needs read: its links always, routes and rules of these families, these sysctls. */
interface PodNeeds {
  families: ReadonlySet<Family>;
  paths: ReadonlySet<string>;
}

/** A netns as read, and what the read covered. */
interface PodSight extends PodNeeds {
  view: PodView;
  /** The sandbox's records when it was read (see recordsKey): an ADD or DEL since ran the runtime's plugins in the netns. */
  records: string;
}

/** A sandbox's records as one string: netns, interface and time of each ADD still recorded. */
function recordsKey(records: readonly AttachmentRecord[]): string {
  return records.map((r) => `${r.netns} ${r.ifname} ${r.createdAt}`).join('\n');
}

/** Routes, rules and sysctls are read only where the desired or the applied state has some. */
function podNeeds(desired: Resolved, applied: AppliedState | undefined): PodNeeds {
  const families = new Set<Family>();
  for (const r of [...desired.routes, ...desired.rules, ...(applied?.routes ?? []), ...(applied?.rules ?? [])]) families.add(r.family);
  return { families, paths: new Set([...desired.sysctls.map((s) => s.path), ...(applied?.sysctls ?? []).map((s) => s.path)]) };
}

/** Whether a sandbox has anything for the planner: podnet's own links, tuning, routes, rules or sysctls, wanted or applied. */
function asksThePlanner(desired: Resolved, applied: AppliedState | undefined): boolean {
  const wanted = desired.attachments.length + desired.tuning.length + desired.routes.length + desired.rules.length + desired.sysctls.length;
  return wanted > 0 || (applied !== undefined && !isEmptyApplied(applied));
}

function covers(sight: PodSight, needs: PodNeeds): boolean {
  return [...needs.families].every((f) => sight.families.has(f)) && [...needs.paths].every((p) => sight.paths.has(p));
}

/** What a plan sees: a sandbox's netns and the host. */
function observedWith(pod: PodView, host: HostView): Observed {
  return { ...pod, host: host.podnetLinks, hostLinkNames: host.names, qdiscs: host.qdiscs };
}

/** The host as one pass sees it, sorted once for every sandbox: its links, podnet's among them, their names, the qdiscs on podnet's links. */
interface HostView {
  links: ReadonlyMap<string, ObservedLink>;
  /** Whether the qdiscs were read (only when some sandbox has or wants a rate limit). */
  shaped: boolean;
  /** The links podnet names (prefix pn): the only host links a plan may change or remove. */
  podnetLinks: ReadonlyMap<string, ObservedLink>;
  names: ReadonlySet<string>;
  qdiscs: ReadonlyMap<string, { root?: string; ingress: boolean }>;
}

function hostViewOf(links: ReadonlyMap<string, ObservedLink>, qdiscs: ReadonlyMap<string, { root?: string; ingress: boolean }>, shaped: boolean): HostView {
  return { links, shaped, podnetLinks: new Map([...links].filter(([name]) => hasPodnetPrefix(name))), names: new Set(links.keys()), qdiscs };
}

export class Reconciler {
  readonly reports = new Map<string, SandboxReport>();
  private readonly opts: ReconcilerOptions;
  private readonly applied: AppliedStore;
  private readonly delegated: DelegatedStore;
  /** Gone sandboxes' delegated DELs that failed: when each is tried again (the same backoff as a sandbox's). */
  private readonly delRetries = new Map<string, { failures: number; retryAt: number }>();
  /** Delegated attachments (container@interface) kept after a failed CHECK, with what CHECK said: told once. */
  private readonly checkOverruled = new Map<string, string>();
  private readonly tracks = new Map<string, SandboxTrack>();
  /** Passes, one at a time; requests during a pass merge into one more pass. */
  private readonly passes = coalesce(() => this.pass().catch((err: Error) => this.opts.log.error('reconcile pass failed', { error: err.message })));
  /** Whether the next pass takes every sandbox (a resync), not only those whose desired state changed. */
  private resyncNext = false;
  private retryTimer: NodeJS.Timeout | undefined;
  /**
   * The host as the last pass left it: read after that pass's host changes, or the view it used
   * when it made none. Only podnet changes its own host links, so a pass that is not a resync
   * starts from this instead of reading the host again; a resync reads it anew and repairs drift.
   */
  private hostCache: HostView | undefined;
  /** Whether this pass changed a host link (its view is then stale for the next one). */
  private hostChanged = false;
  documentProblems: Problem[] = [];

  constructor(opts: ReconcilerOptions) {
    this.opts = opts;
    this.applied = new AppliedStore(opts.stateDir);
    this.delegated = new DelegatedStore(opts.stateDir, (file, quarantinedAs, reason) =>
      opts.log.warn('set aside a delegated record that cannot be read; what its plugins made is not taken back', { file, quarantinedAs, reason }),
    );
  }

  /** Every sandbox's report, for `podnet explain`. */
  list(): SandboxList {
    return { documentProblems: this.documentProblems, items: [...this.reports.values()].map(({ wanted: _w, known: _k, ...report }) => report) as SandboxList['items'] };
  }

  /** The pod's links as its last pass read them (MAC, MTU, addresses); none when the pass did not read back. */
  podLinks(containerId: string): ReadonlyMap<string, ObservedLink> | undefined {
    return this.tracks.get(containerId)?.sight?.view.pod;
  }

  /** Takes back the passes a crash cut short and the writes it cut short; before the daemon reports ready. */
  async recover(): Promise<void> {
    const { stateDir } = this.opts;
    for (const dir of [stateDir, ...[...kernelStateDirs, stateLayout.delegated].map((d) => join(stateDir, d))]) {
      const removed = removeTempFiles(dir);
      if (removed.length > 0) this.opts.log.info('removed the temp files of writes a crash cut short', { dir, files: removed.length });
    }
    const committed = (key: string, pass: string) => (key === hostJournalKey ? this.applied.hostPass() : this.applied.get(key)?.pass) === pass;
    const undone = await runJournalUndo(this.opts.run, this.opts.stateDir, committed);
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
    clearTimeout(this.retryTimer);
    await this.passes.idle();
    clearTimeout(this.retryTimer);
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
    const sight = networkNamespaceSight();
    for (const record of this.opts.registry.list()) {
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

  /** What one sandbox should have: the documents' desired state with names and addresses decided. */
  private desiredOf({ record, records }: LiveSandbox, docs: DesiredDocuments, addresses: 'allocate' | 'preview'): SandboxWork {
    const known = this.opts.identity ? this.opts.identity(record) : identityOf(record);
    const identity = known ?? identityOf(record);
    // Names the annotation's unnamed selections got before, podnet's links and delegated alike.
    const earlier = [...(this.applied.get(record.containerId)?.attachments ?? []), ...this.delegated.of(record.containerId)];
    const wanted = known ? desiredFor(known, docs.networks, docs.configs, earlier) : nothingWanted();
    const { desired, problems } = this.resolve(record.containerId, wanted, addresses, docs.networks);
    return { record, identity, desired, desiredJson: JSON.stringify(desired), problems, records, wanted, known: known !== undefined };
  }

  /**
   * What a pass would do with `extra` documents on top of the followed ones, without doing it:
   * the same desired state, observation and plan, addresses previewed rather than taken; the
   * sandboxes are planned as if the host steps (bridges) had run.
   */
  async diff(extra: readonly (Network | PodNetworkConfig)[]): Promise<DiffResponse> {
    const docs = withDocuments(this.opts.documents(), extra);
    const work = [...this.liveSandboxes().live.values()].map((sandbox) => this.desiredOf(sandbox, docs, 'preview'));
    const hostView = await this.observeHost(work);
    const attachments = work.flatMap((w) => w.desired.attachments);
    const { steps: hostSteps } = planBridges(attachments, hostView.links);
    const links = new Map(hostView.links);
    for (const a of attachments) {
      if (a.link.kind === 'bridge' && !links.has(a.link.bridge)) links.set(a.link.bridge, { name: a.link.bridge, mtu: a.mtu ?? 1500, up: true, kind: 'bridge', addresses: a.link.bridgeAddresses });
    }
    const asIfMade = hostViewOf(links, hostView.qdiscs, hostView.shaped);
    const view = (s: Step) => ({ where: s.where === 'host' ? 'host' : s.where.netns, tool: s.tool, line: s.line });
    const items = await mapLimited(work, sandboxConcurrency, async (w): Promise<DiffResponse['items'][number]> => {
      const applied = this.applied.get(w.record.containerId);
      const sight = await this.readPod(w, podNeeds(w.desired, applied));
      const observed = observedWith(sight.view, asIfMade);
      const planned = plan({ containerId: w.record.containerId, netns: w.record.netns, desired: w.desired, observed, applied });
      return { containerId: w.record.containerId, namespace: w.identity.namespace, name: w.identity.name, steps: planned.steps.map(view), problems: [...w.problems, ...planned.problems] };
    });
    return { documentProblems: docs.problems, hostSteps: hostSteps.map(view), items };
  }

  /**
   * A pass: every sandbox's desired state (addresses taken), then the bridges they need, made once,
   * then the sandboxes side by side, a few at a time (each touches only its own netns and its
   * own host links); then what gone sandboxes and unused bridges leave. A pass that is not a
   * resync starts from the host as the last pass left it (hostCache) and reads only the netns of
   * the sandboxes it takes; when it must read the host, the first sandboxes read their netns meanwhile.
   */
  private async pass(): Promise<void> {
    if (this.opts.ready && !this.opts.ready()) return;
    const resync = this.resyncNext;
    this.resyncNext = false;
    const docs = this.opts.documents();
    this.documentProblems = docs.problems;
    const { live, unsure } = this.liveSandboxes();
    const work = [...live.values()].map((sandbox) => this.desiredOf(sandbox, docs, 'allocate'));
    const now = Date.now();
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
    // in a large one those reads would hold up the other sandboxes, and the next resync reads.
    const readBack = due.length <= sandboxConcurrency;
    await mapLimited(due, sandboxConcurrency, (w) => this.reconcileSandbox(w, host, { resync, readBack }));
    const hostView = await host;
    const gone = (cid: string) => !live.has(cid) && !unsure.has(cid);
    for (const state of this.applied.all()) if (gone(state.containerId)) await this.forget(state, hostView);
    await this.forgetDelegated(gone);
    if (resync) await this.collectDelegated(work);
    for (const cid of [...this.reports.keys()]) if (gone(cid)) this.reports.delete(cid);
    for (const cid of [...this.tracks.keys()]) if (gone(cid)) this.tracks.delete(cid);
    for (const key of [...this.checkOverruled.keys()]) if (gone(key.slice(0, key.lastIndexOf('@')))) this.checkOverruled.delete(key);
    this.sweepAddresses();
    // Sandboxes make and remove only their own veth ends and ifbs: the view still holds the bridges.
    await this.collectBridges(hostView);
    this.hostCache = this.hostChanged ? await this.observeHost(work).catch(() => undefined) : hostView;
    this.hostChanged = false;
    this.scheduleRetry();
    this.opts.afterPass?.();
  }

  /** Whether a pass takes this sandbox: see schedule. */
  private isDue(work: SandboxWork, resync: boolean, now: number): boolean {
    const track = this.tracks.get(work.record.containerId);
    if (!track || track.deferred || track.desired !== work.desiredJson) return true;
    if (track.failures > 0) return now >= track.retryAt;
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
    clearTimeout(this.retryTimer);
    const next = Math.min(...[...this.tracks.values()].filter((t) => t.failures > 0).map((t) => t.retryAt));
    if (next === Infinity) return;
    // A few ms late rather than early: the pass checks the time against retryAt.
    this.retryTimer = setTimeout(() => void this.passes(), Math.max(0, next - Date.now()) + 5);
    this.retryTimer.unref();
  }

  /**
   * The host as the sandboxes of a pass see it: the last pass's view when there is one that holds
   * what they need, else read; read again after making the bridges they need.
   */
  private async hostWithBridges(work: readonly SandboxWork[], cached: HostView | undefined): Promise<HostView> {
    const hostView = cached && (cached.shaped || !this.shapes(work)) ? cached : await this.observeHost(work);
    const { steps, created } = planBridges(work.flatMap((w) => w.desired.attachments), hostView.links);
    if (steps.length === 0) return hostView;
    this.hostChanged = true;
    const result = await execute(this.opts.run, this.opts.stateDir, hostJournalKey, steps, (pass) => this.applied.setBridges([...this.applied.bridges(), ...created], pass));
    if (result.error) this.opts.log.warn('could not make the bridges this pass needs; what it took was undone', { error: result.error.message });
    return this.observeHost(work);
  }

  /**
   * Releases addresses neither desired nor applied: those a pass took for an attachment and then
   * could not record (a crash between the two, or a desired state that changed before it applied).
   */
  private sweepAddresses(): void {
    const keep = new Set<string>();
    for (const report of this.reports.values()) for (const a of report.desired.attachments) keep.add(`${a.network} ${report.containerId}/${a.interface}`);
    for (const state of this.applied.all()) for (const a of state.attachments) keep.add(`${a.network} ${state.containerId}/${a.interface}`);
    for (const { network, owner } of this.opts.ipam.holders()) {
      if (keep.has(`${network} ${owner}`)) continue;
      this.opts.ipam.release(network, owner);
      this.opts.log.info('released an address nothing asks for', { network, owner });
    }
  }

  /** Whether any sandbox has or wants a rate limit. */
  private shapes(work: readonly SandboxWork[]): boolean {
    return work.some((w) => w.desired.attachments.some((a) => a.bandwidth)) || this.applied.all().some((s) => s.attachments.some((a) => a.bandwidth));
  }

  /** The host's links and, when any sandbox has or wants rate limits, the qdiscs on podnet's links; both read at once. */
  private async observeHost(work: readonly SandboxWork[]): Promise<HostView> {
    const shaped = this.shapes(work);
    const [links, qdiscs] = await Promise.all([observeLinks(this.opts.run, 'host'), shaped ? observeQdiscs(this.opts.run) : new Map()]);
    return hostViewOf(links, qdiscs, shaped);
  }

  /** A sandbox's netns as it is now: its links, and the routes, rules and sysctls `needs` names, read at once. */
  private async readPod({ record, records }: SandboxWork, needs: PodNeeds): Promise<PodSight> {
    const { run } = this.opts;
    const where = { netns: record.netns };
    const [pod, routing, sysctls] = await Promise.all([
      observeLinks(run, where),
      Promise.all([...needs.families].map((family) => observeRouting(run, where, family))),
      run.readSysctls(where, [...needs.paths]),
    ]);
    return { ...needs, records, view: { pod, routes: routing.flatMap((r) => r.routes), rules: routing.flatMap((r) => r.rules), sysctls } };
  }

  /**
   * One sandbox's part of a pass: observe (or take the view its last pass left), plan, apply; a
   * failure is reported, the pass goes on.
   */
  private async reconcileSandbox(work: SandboxWork, host: Promise<HostView>, pass: { resync: boolean; readBack: boolean }): Promise<void> {
    const { log } = this.opts;
    const { record, identity, desired, problems } = work;
    const report: SandboxReport = {
      containerId: record.containerId,
      namespace: identity.namespace,
      name: identity.name,
      netns: record.netns,
      desired,
      applied: this.applied.get(record.containerId),
      problems: [...problems],
      lastSteps: [],
      delegated: this.delegated.of(record.containerId).filter((r) => r.result !== undefined),
      wanted: work.wanted,
      known: work.known,
    };
    this.reports.set(record.containerId, report);
    const pod = `${identity.namespace}/${identity.name}`;
    const previous = this.tracks.get(record.containerId);
    const track: SandboxTrack = { desired: work.desiredJson, planProblems: [], delegateProblems: [], failures: 0, retryAt: 0, deferred: false };
    this.tracks.set(record.containerId, track);
    try {
      // The plugins first: what the plan tunes or routes through may be an interface they make.
      const delegation = await this.delegate(work, report, track, pass.resync);
      if (!asksThePlanner(desired, report.applied)) {
        // Most pods on a node: nothing of podnet's own wanted or there, so nothing to read or plan.
        report.problems = [...work.problems, ...track.delegateProblems];
        report.lastSteps = [];
        if (delegation.failed) throw delegation.failed;
        return;
      }
      const needs = podNeeds(desired, report.applied);
      const last = previous?.sight;
      const kept = !pass.resync && !delegation.changed && last && last.records === work.records && covers(last, needs) ? last : undefined;
      try {
        track.sight = await this.planAndApply(work, report, track, kept ?? this.readPod(work, needs), host, pass.readBack);
      } catch (err) {
        const e = toPodnetError(err);
        // Made again only when a step failed and was taken back whole: anything else would fail alike.
        if (!kept || e.code !== 'IO_FAILURE' || undoFailed.has(e)) throw err;
        log.warn('a plan from the view the last pass left failed; planning again from the netns and host as they are', { pod, error: e.message });
        report.lastSteps = [];
        track.planProblems = [];
        this.hostChanged = true;
        track.sight = await this.planAndApply(work, report, track, this.readPod(work, needs), this.observeHost([work]), pass.readBack);
      }
      // The rest applied; a plugin that failed is tried again with the sandbox's backoff.
      if (delegation.failed) throw delegation.failed;
    } catch (err) {
      const e: PodnetError = toPodnetError(err);
      report.lastError = e.message;
      track.failures = (previous?.failures ?? 0) + 1;
      track.retryAt = Date.now() + retryWaitMs(track.failures);
      log.warn('reconcile failed; what this pass took was undone', { pod, error: e.message, retryInMs: track.retryAt - Date.now() });
    }
  }

  /**
   * A sandbox's delegated attachments: DEL for those no longer wanted (or wanted with another
   * config, or whose ADD a crash cut short, or, on a resync, that CHECK found wrong), then ADD for
   * those missing. A failed ADD is taken back
   * with DEL at once and becomes a problem of the attachment; the first failure is returned for
   * the sandbox's retry. A DEL that fails keeps its record, for the next pass.
   */
  private async delegate(work: SandboxWork, report: SandboxReport, track: SandboxTrack, resync: boolean): Promise<{ changed: boolean; failed?: PodnetError }> {
    const { record, desired } = work;
    const cid = record.containerId;
    const pod = `${work.identity.namespace}/${work.identity.name}`;
    const wanted = (r: DelegatedRecord) => desired.delegated.find((d) => d.interface === r.interface && d.network === r.network && JSON.stringify(d.config) === JSON.stringify(r.config));
    let changed = false;
    let failed: PodnetError | undefined;
    const tell = (want: { interface: string; network: string }, reason: string) => {
      const wantedBy = work.wanted.attachments.find((a) => a.interface === want.interface);
      const problem = { document: wantedBy?.from ?? `Network ${want.network}`, field: wantedBy?.field ?? 'spec.cni', reason };
      track.delegateProblems.push(problem);
      report.problems.push(problem);
    };
    const held = (r: DelegatedRecord) => tell(r, `${r.addError ?? 'its ADD did not answer'}; its DEL failed ${maxFailedDels} times, so it is not tried again until the Network's config changes`);
    for (const had of this.delegated.of(cid)) {
      if (isGivenUp(had)) {
        // Held while asked for as it was; once not, it goes without a DEL (three failed already).
        if (wanted(had)) held(had);
        else {
          this.delegated.remove(had);
          changed = true;
        }
        continue;
      }
      if (had.result && wanted(had)) {
        // A resync asks the plugins whether it is still as they made it; what is not is made again.
        // Not an interface podnet tunes (its MAC would differ from the result's), nor on a failure
        // that says to try again later (11, or no answer in time).
        if (!resync || !runsCheck(had.config) || desired.tuning.some((t) => t.interface === had.interface)) continue;
        try {
          await this.opts.plugins.check(had.config, targetOf(had, true), had.result);
          continue;
        } catch (err) {
          const e = toPodnetError(err);
          if (e.code === 'TRY_AGAIN_LATER' || e.details === '11') continue;
          // A CHECK can fail on what is not the pod's: the reference bridge compares the bridge's
          // MAC, which follows its ports when the plugin did not set one. The pod's interface as the
          // result made it is what a tenant has; remaking it would change its address for nothing.
          if (await this.podInterfaceAsMade(had)) {
            const key = `${cid}@${had.interface}`;
            if (this.checkOverruled.get(key) !== e.message) this.opts.log.warn("CHECK failed, but the pod's interface is as the plugins made it; kept", { pod, network: had.network, interface: had.interface, error: e.message });
            this.checkOverruled.set(key, e.message);
            continue;
          }
          this.opts.log.warn('CHECK failed; attaching again', { pod, network: had.network, interface: had.interface, error: e.message });
        }
      }
      // Still asked, but its config cannot be had now (a NetworkAttachmentDefinition gone or broken):
      // what is there stays; only a config that changed takes it down.
      const asked = work.wanted.attachments.some((a) => a.interface === had.interface && a.network.metadata.name === had.network);
      if (had.result && asked && !desired.delegated.some((d) => d.interface === had.interface)) continue;
      try {
        await this.opts.plugins.del(had.config, targetOf(had, true), had.result);
      } catch (err) {
        const e = toPodnetError(err);
        const givenUp = this.delDidNotTakeBack(had, e);
        if (!givenUp) failed ??= e;
        // A failed ADD still asked for stays told while its DEL is tried again, and once held.
        if (had.result === undefined && wanted(had)) {
          if (givenUp) held(had);
          else tell(had, `${had.addError ?? 'its ADD did not answer'}; its DEL failed too (${e.message}) and is tried again`);
        }
        continue;
      }
      this.delegated.remove(had);
      changed = true;
      this.opts.log.info('detached through the Network\'s plugins', { pod, network: had.network, interface: had.interface });
    }
    const args = cniArgsOf(record);
    for (const want of desired.delegated) {
      if (this.delegated.of(cid).some((r) => r.interface === want.interface)) continue;
      // The runtime's DEL may have come in during this pass: nothing new for a sandbox that is going
      // (its DEL waits for the delegated records to be gone, and the next pass takes back the rest).
      if (!this.opts.registry.list().some((r) => r.containerId === cid)) break;
      const attempt: DelegatedRecord = { containerId: cid, interface: want.interface, network: want.network, config: want.config, netns: record.netns, args };
      const fail = (e: PodnetError) => {
        tell(want, e.message);
        failed ??= e;
      };
      try {
        // Before the record and the ADD: a list with a missing plugin, or one whose plugins say
        // they are not ready (STATUS, 1.1), is not started at all.
        this.opts.plugins.requirePlugins(want.config);
        if (runsStatus(want.config)) await this.opts.plugins.status(want.config);
      } catch (err) {
        fail(toPodnetError(err));
        continue;
      }
      this.delegated.put(attempt);
      changed = true;
      try {
        this.delegated.put({ ...attempt, result: await this.opts.plugins.add(want.config, targetOf(attempt, true)) });
        this.opts.log.info('attached through the Network\'s plugins', { pod, network: want.network, interface: want.interface });
      } catch (err) {
        const e = toPodnetError(err);
        fail(e);
        // What the failed ADD left: the spec has DEL clean up after it.
        const failedAdd = { ...attempt, addError: e.message };
        await this.opts.plugins.del(want.config, targetOf(failedAdd, true), undefined).then(
          () => this.delegated.remove(failedAdd),
          (undo: unknown) => this.delDidNotTakeBack(failedAdd, undo),
        );
      }
    }
    report.delegated = this.delegated.of(cid).filter((r) => r.result !== undefined);
    return failed ? { changed, failed } : { changed };
  }

  /**
   * Whether the pod's interface of a delegated attachment is as its result says: there, with the
   * result's MAC and addresses. A netns that cannot be read counts as yes: a look that failed is
   * no reason to take an attachment down.
   */
  private async podInterfaceAsMade(record: DelegatedRecord): Promise<boolean> {
    const links = await observeLinks(this.opts.run, { netns: record.netns }).catch(() => undefined);
    if (!links) return true;
    const link = links.get(record.interface);
    if (!link) return false;
    const made = resultFor(record.result, record.interface);
    if (made.mac && made.mac.toLowerCase() !== link.mac?.toLowerCase()) return false;
    return made.ips.every((address) => link.addresses.includes(address));
  }

  /**
   * A DEL failed. For an ADD that answered, its record stays and DEL is tried again next pass (the
   * attachment is there). For one that did not, a few tries, then podnet gives up and holds the
   * record (isGivenUp): such a DEL often fails for the same reason the ADD did, and an ADD tried
   * again would leave as much behind each time. Whether it gave up.
   */
  private delDidNotTakeBack(record: DelegatedRecord, err: unknown): boolean {
    const error = toPodnetError(err).message;
    const failedDels = record.result === undefined ? (record.failedDels ?? 0) + 1 : undefined;
    if (failedDels !== undefined) this.delegated.put({ ...record, failedDels });
    if (failedDels === undefined || failedDels < maxFailedDels) {
      this.opts.log.warn('DEL failed; trying again next pass', { containerId: record.containerId, network: record.network, interface: record.interface, error });
      return false;
    }
    this.opts.log.warn('gave up taking back a failed ADD: DEL failed each time; what the plugins made of it, if anything, is left', {
      containerId: record.containerId,
      network: record.network,
      interface: record.interface,
      error,
    });
    return true;
  }

  /** Delegated attachments of sandboxes that are gone: DEL, without the netns when it went with them. */
  private async forgetDelegated(gone: (containerId: string) => boolean): Promise<void> {
    const sight = networkNamespaceSight();
    const now = Date.now();
    for (const record of this.delegated.all()) {
      if (!gone(record.containerId)) continue;
      if (isGivenUp(record)) {
        this.delegated.remove(record);
        continue;
      }
      // Its DEL gets the netns while it is there (host-device gives its device back from it).
      const netns = sight(record.netns);
      if (netns === 'unsure') continue;
      // A DEL that keeps failing (its plugin hangs or is gone) must not hold up every pass.
      const key = `${record.containerId}@${record.interface}`;
      const retry = this.delRetries.get(key);
      if (retry && now < retry.retryAt) continue;
      try {
        await this.opts.plugins.del(record.config, targetOf(record, netns === 'net'), record.result);
      } catch (err) {
        const failures = (retry?.failures ?? 0) + 1;
        if (this.delDidNotTakeBack(record, err)) {
          this.delRetries.delete(key);
          this.delegated.remove(record);
        } else this.delRetries.set(key, { failures, retryAt: Date.now() + retryWaitMs(failures) });
        continue;
      }
      this.delRetries.delete(key);
      this.delegated.remove(record);
      this.opts.log.info('took back a gone sandbox\'s delegated attachment', { containerId: record.containerId, network: record.network, interface: record.interface });
    }
  }

  /**
   * On a resync, GC for each delegated list at CNI 1.1 (the current Networks' and the recorded
   * ones): its plugins drop what they hold for attachments podnet has no record of, the leftovers
   * of a DEL given up on or of state podnet lost. Every record of the network counts as valid,
   * also one whose ADD has not answered (GC must never take what an ADD may be making), but not
   * one given up on: what its failed ADD left is GC's to take.
   */
  private async collectDelegated(work: readonly SandboxWork[]): Promise<void> {
    const lists = new Map<string, DelegatedConfig>();
    for (const config of [...work.flatMap((w) => w.desired.delegated.map((d) => d.config)), ...this.delegated.all().map((r) => r.config)]) {
      if (runsGc(config)) lists.set(JSON.stringify(config), config);
    }
    for (const config of lists.values()) {
      const valid = this.delegated
        .all()
        .filter((r) => r.config.name === config.name && !isGivenUp(r))
        .map((r) => ({ containerID: r.containerId, ifname: r.interface }));
      await this.opts.plugins.gc(config, valid).catch((err: unknown) => this.opts.log.warn('GC of a delegated network failed; trying again at the next resync', { network: config.name, error: toPodnetError(err).message }));
    }
  }

  /**
   * Plans from `sight` and the host and applies the plan; throws when a step fails (the steps
   * taken were undone). Resolves with the netns as the plan left it: `sight` when the plan had
   * no steps, else read back when `readBack` says so; none otherwise, or when that read fails
   * (the next pass reads).
   */
  private async planAndApply(
    work: SandboxWork,
    report: SandboxReport,
    track: SandboxTrack,
    sight: PodSight | Promise<PodSight>,
    host: Promise<HostView>,
    readBack: boolean,
  ): Promise<PodSight | undefined> {
    const { record, identity, desired } = work;
    const [seen, hostView] = await Promise.all([sight, host]);
    const planned = plan({ containerId: record.containerId, netns: record.netns, desired, observed: observedWith(seen.view, hostView), applied: report.applied });
    report.problems = [...work.problems, ...track.delegateProblems, ...planned.problems];
    report.lastSteps = planned.steps;
    track.planProblems = planned.problems;
    if (planned.steps.length === 0 && sameApplied(report.applied, planned.next)) return seen;
    const before = report.applied;
    if (planned.steps.some((step) => step.where === 'host')) this.hostChanged = true;
    const result = await execute(this.opts.run, this.opts.stateDir, record.containerId, planned.steps, (pass) => this.commit(before, { ...planned.next, pass }));
    if (result.error) {
      if (result.undoErrors.length === 0) throw result.error;
      const e = new PodnetError('IO_FAILURE', `${result.error.message}; taking back this pass's steps also failed: ${result.undoErrors.map((u) => u.message).join('; ')}`);
      undoFailed.add(e);
      throw e;
    }
    report.applied = this.applied.get(record.containerId);
    // Level-triggered: what had to wait for this pass's changes gets the next pass at once.
    if (planned.deferred) {
      track.deferred = true;
      void this.passes();
    }
    if (planned.steps.length > 0) this.opts.log.info('applied', { pod: `${identity.namespace}/${identity.name}`, steps: planned.steps.length });
    if (planned.steps.length === 0) return seen;
    if (!readBack) return undefined;
    // Host steps change the netns too: a veth made from the host puts its end there, deleting the host end takes it away.
    return this.readPod(work, podNeeds(desired, report.applied)).catch(() => undefined);
  }

  /** Names, link specs and addresses of the desired attachments; addresses from the node's IPAM. */
  private resolve(
    containerId: string,
    wanted: DesiredSandbox,
    addresses: 'allocate' | 'preview',
    networks: ReadonlyMap<string, Network>,
  ): { desired: Resolved; problems: Problem[] } {
    const problems = [...wanted.problems];
    const attachments: ResolvedAttachment[] = [];
    const delegated: ResolvedDelegated[] = [];
    for (const want of wanted.attachments) {
      if (want.network.spec.type === 'cni') {
        const config = delegatedConfigOf(want.network);
        if (isConfigProblem(config)) problems.push({ document: want.from, field: want.field, reason: `Network ${want.network.metadata.name}: ${config.field}: ${config.reason}` });
        else if (want.bandwidth) problems.push({ document: want.from, field: `${want.field}.bandwidth`, reason: `rate limits need a bridge Network: Network ${want.network.metadata.name}'s plugins make its link (a bandwidth plugin in its list can shape it)` });
        else if (want.ips) problems.push({ document: want.from, field: `${want.field}.ips`, reason: `Network ${want.network.metadata.name}'s plugins choose its addresses (their ipam config); podnet does not pass static ones to them` });
        else delegated.push({ interface: want.interface, network: want.network.metadata.name, config });
        continue;
      }
      try {
        attachments.push(this.resolveAttachment(containerId, want, addresses, networks));
      } catch (err) {
        problems.push({ document: want.from, field: want.field, reason: toPodnetError(err).message });
      }
    }
    const tuning = wanted.tuning.map((t) => ({ interface: t.interface, settings: t.settings }));
    return { desired: { attachments, delegated, tuning, routes: wanted.routes, rules: wanted.rules, sysctls: wanted.sysctls }, problems };
  }

  private resolveAttachment(containerId: string, want: DesiredAttachment, addresses: 'allocate' | 'preview', networks: ReadonlyMap<string, Network>): ResolvedAttachment {
    const network = want.network;
    const spec = network.spec;
    const shared = sharedBridgeReason(network, networks);
    if (shared) throw new PodnetError('INVALID_REQUEST', shared);
    const owner = `${containerId}/${want.interface}`;
    const allocations = spec.ipam
      ? this.opts.ipam[addresses](network.metadata.name, spec.ipam.ranges, owner, want.ips)
      : (want.ips ?? []).map((address) => ({ address }));
    const prefixOf = (cidr: string) => cidr.slice(cidr.indexOf('/'));
    let link: LinkSpec;
    switch (spec.type) {
      case 'bridge':
        link = {
          kind: 'bridge',
          bridge: bridgeNameOf(network),
          bridgeAddresses: spec.bridge?.gateway ? allocations.flatMap((a) => ('gateway' in a && a.gateway ? [`${a.gateway}${prefixOf(a.address)}`] : [])) : [],
        };
        break;
      case 'macvlan':
        link = { kind: 'macvlan', parent: spec.macvlan!.parent, mode: spec.macvlan!.mode ?? 'bridge' };
        break;
      case 'vlan':
        link = { kind: 'vlan', parent: spec.vlan!.parent, id: spec.vlan!.id };
        break;
      case 'vxlan': {
        const v = spec.vxlan!;
        link = { kind: 'vxlan', vni: v.vni, port: v.port ?? 4789, ...(v.remote ? { remote: v.remote } : {}), ...(v.group ? { group: v.group } : {}), ...(v.device ? { device: v.device } : {}) };
        break;
      }
      case 'cni':
        throw new PodnetError('INTERNAL', `Network ${network.metadata.name} is delegated: its plugins attach it, not a link podnet makes`);
    }
    return {
      interface: want.interface,
      network: network.metadata.name,
      link,
      hostIf: hostInterfaceName(containerId, want.interface),
      ifb: hostInterfaceName(containerId, want.interface, 'pnb'),
      ...(spec.mtu ? { mtu: spec.mtu } : {}),
      addresses: allocations.map((a) => a.address),
      ...(want.bandwidth ? { bandwidth: want.bandwidth } : {}),
    };
  }

  /** Records the new applied state and releases addresses no longer held. */
  private commit(before: AppliedState | undefined, after: AppliedState): void {
    this.applied.put(after);
    for (const was of before?.attachments ?? []) {
      if (!after.attachments.some((a) => a.interface === was.interface && a.network === was.network)) {
        this.opts.ipam.release(was.network, `${after.containerId}/${was.interface}`);
      }
    }
  }

  /** A sandbox that is gone: its pod ends went with its netns; host ends, ifbs and addresses go now. */
  private async forget(state: AppliedState, hostView: HostView): Promise<void> {
    const names = state.attachments.flatMap((a) => [a.hostIf, a.ifb]).filter((n): n is string => n !== undefined && hostView.links.has(n));
    if (names.length > 0) this.hostChanged = true;
    const result = await this.opts.run.batch('host', 'ip', names.map((n) => `link del ${n}`));
    if (result.error) {
      this.opts.log.warn('could not remove the host ends of a gone sandbox; retrying next pass', { containerId: state.containerId, error: result.error.message });
      return;
    }
    for (const a of state.attachments) this.opts.ipam.release(a.network, `${state.containerId}/${a.interface}`);
    this.applied.remove(state.containerId);
    this.opts.log.info('took back a gone sandbox', { containerId: state.containerId, attachments: state.attachments.length });
  }

  /** Removes bridges podnet made that no attachment uses any more. */
  private async collectBridges(hostView: HostView): Promise<void> {
    const inUse = new Set(this.applied.all().flatMap((s) => s.attachments.flatMap((a) => (a.bridge ? [a.bridge] : []))));
    const known = this.applied.bridges();
    const unused = known.filter((b) => !inUse.has(b));
    if (unused.length === 0) return;
    const lines = unused.filter((b) => hostView.links.has(b)).map((b) => `link del ${b}`);
    if (lines.length > 0) this.hostChanged = true;
    const result = await this.opts.run.batch('host', 'ip', lines);
    if (result.error) {
      this.opts.log.warn('could not remove an unused bridge; retrying next pass', { error: result.error.message });
      return;
    }
    this.applied.setBridges(known.filter((b) => inUse.has(b)));
  }
}

/** The CNI_ARGS a delegated plugin gets: the pod's identity as a kubelet passes it. */
function cniArgsOf(record: AttachmentRecord): string {
  const { namespace, name, uid } = record.pod;
  const pairs = [
    'IgnoreUnknown=1',
    ...(namespace ? [`K8S_POD_NAMESPACE=${namespace}`] : []),
    ...(name ? [`K8S_POD_NAME=${name}`] : []),
    `K8S_POD_INFRA_CONTAINER_ID=${record.containerId}`,
    ...(uid ? [`K8S_POD_UID=${uid}`] : []),
  ];
  return pairs.join(';');
}

/** What a sandbox whose pod the source does not know should have: nothing of podnet's. */
function nothingWanted(): DesiredSandbox {
  return { configs: [], attachments: [], tuning: [], routes: [], rules: [], sysctls: [], problems: [] };
}

/**
 * Two bridge Networks on one host bridge would join their pods' traffic, and taking one back
 * would take the other's bridge: the attachments of each are refused, naming the other.
 */
/** Whether `b` records what `a` does; which pass wrote a record does not count. */
function sameApplied(a: AppliedState | undefined, b: AppliedState): boolean {
  if (a === undefined) return isEmptyApplied(b);
  const { pass: _a, ...left } = a;
  const { pass: _b, ...right } = b;
  return JSON.stringify(left) === JSON.stringify(right);
}
