// Level-triggered reconcile: every pass makes each recorded sandbox match what the documents ask,
// takes back what podnet did to sandboxes that are gone, and removes bridges podnet made that
// nothing uses. Passes are serialized and coalesced (a request during a pass runs one more pass
// after it); a periodic pass repairs drift. The reconciler orders passes and hands the work to the
// rooms (ADR 12): node admission (model/admission.ts) decides what each sandbox gets, the host
// room (host.ts) the host's view and shared links, the sandbox room (sandbox.ts) one sandbox's
// plan and apply, the ledger (ledger.ts) what each sandbox's last pass left. One sandbox's failure
// does not stop the others.
import { coalesce } from '../coalesce.ts';
import type { DelegatedLifecycle } from '../delegate/lifecycle.ts';
import { runJournalUndo } from '../executor/execute.ts';
import type { NodeIpam } from '../ipam/ipam.ts';
import type { Logger } from '../log.ts';
import { noMetrics, type AttachmentState, type PassMetrics } from '../metrics.ts';
import { admit, withoutRefusedMacs, type AdmissionSandbox } from '../model/admission.ts';
import { defaultLimits, type NodeLimits, type Problem } from '../model/desired.ts';
import { identityOf, requiredAttachments } from '../model/identity.ts';
import { documentProblems } from '../model/document-problems.ts';
import type { RefusedGeneration } from '../model/refusal.ts';
import { givesAnew, newGenerationsRefused } from '../model/whole-configs.ts';
import { hostBridgeOf } from '../model/kinds/index.ts';
import { resolveSandbox } from '../model/resolve.ts';
import { wireguardKeys, type WireguardKeys } from './wireguard-keys.ts';
import { stateLayout } from '../protocol/paths.ts';
import { join } from 'node:path';
import type { AppliedState } from '../model/state.ts';
import type { Step } from '../model/step.ts';
import type { NetnsObserver } from '../netns/observe.ts';
import type { NamespaceSight } from '../netns/probe.ts';
import type { NetnsRunner } from '../netns/runner.ts';
import { plan } from '../planner/plan.ts';
import { planBridges } from '../planner/bridges.ts';
import { planGoneSandbox } from '../planner/leftovers.ts';
import type { AttachmentRecord, DiffResponse, FirstPassResponse, SandboxList } from '../protocol/validate.ts';
import type { ApiDocument } from '../sources/documents.ts';
import type { AppliedStore } from '../registry/applied.ts';
import type { OnQuarantined } from '../registry/quarantine.ts';
import type { Clock, Timer } from '../retry.ts';
import { emptyDocuments, withDocuments, type DesiredDocuments, type DesiredSource } from '../sources/source.ts';
import type { SandboxFacts } from '../status/status.ts';
import { AppliedRecords, originsOf } from './applied-records.ts';
import { answerWithinMs, asksAnything, firstPassOutcome } from './first-pass.ts';
import { HostRoom, hostJournalKey } from './host.ts';
import { SandboxLedger } from './ledger.ts';
import { mapLimited } from './map-limited.ts';
import { PassSteps } from './pass-steps.ts';
import { SandboxRoom, sandboxConcurrency, type SandboxWork } from './sandbox.ts';
import { fairShare } from '../fair-share.ts';
import { PassRefusals } from './pass-refusals.ts';
import { inStages } from './stages.ts';
import { hostViewOf, observedWith, podNeeds, recordsKey, type HostView, type TableSeen } from './views.ts';

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
  sight: () => (path: string, identity?: string) => NamespaceSight;
  /** What podnet applied to each sandbox, and the host bridges it made. */
  applied: Pick<AppliedStore, 'get' | 'all' | 'put' | 'remove' | 'bridges' | 'hostPass' | 'setBridges'>;
  /** Addresses of Networks with ipam. */
  ipam: Pick<NodeIpam, 'allocate' | 'preview' | 'release' | 'holders'>;
  /** Attachments of cni Networks, run through their plugins. */
  delegated: DelegatedLifecycle;
  /** The WireGuard keys of attachments (default: the state dir's wireguard folder). */
  keys?: WireguardKeys;
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

/** How often a first pass looks again for a pod its source does not know yet. */
const firstPassPollMs = 50;

/** A recorded sandbox whose netns is there: the record a pass works from, and all of its records' key. */
interface LiveSandbox {
  record: AttachmentRecord;
  records: string;
}

export class Reconciler {
  private readonly opts: ReconcilerOptions;
  private readonly metrics: PassMetrics;
  private readonly steps: PassSteps;
  private readonly applied: AppliedRecords;
  private readonly keys: WireguardKeys;
  private readonly ledger: SandboxLedger;
  private readonly host: HostRoom;
  private readonly sandboxes: SandboxRoom;
  /** Passes, one at a time; requests during a pass merge into one more pass. */
  private readonly passes = coalesce(() => this.pass().catch((err: Error) => this.opts.log.error('reconcile pass failed', { error: err.message })));
  /** Set by close(): no pass runs after it, and a first pass under way answers at once. */
  private closed = false;
  /** Whether the next pass takes every sandbox (a resync), not only those whose desired state changed. */
  private resyncNext = false;
  /** The documents the last pass read: what the socket's list judges. */
  private documents: DesiredDocuments = emptyDocuments();
  /** Sandboxes a resync was due for that their namespace's share of it left to the next pass (fair-share.ts). */
  private carried = new Set<string>();
  /** Sandboxes the last pass left for their namespace's share: the next pass takes them first. */
  private left = new Set<string>();
  /** Passes begun, and who waits for the end of one begun after they asked (passBy). */
  private begun = 0;
  private passWaiters: { after: number; wake: () => void }[] = [];
  private readonly judged = new WeakMap<DesiredDocuments, Problem[]>();
  /** The document problems the log has told, as lines: each is told once, when it appears. */
  private loggedProblems = new Set<string>();

  constructor(opts: ReconcilerOptions) {
    this.opts = opts;
    this.metrics = opts.metrics ?? noMetrics;
    const { log } = opts;
    this.steps = new PassSteps(opts.run, opts.stateDir);
    this.keys = opts.keys ?? wireguardKeys(join(opts.stateDir, stateLayout.wireguard));
    this.applied = new AppliedRecords({ applied: opts.applied, ipam: opts.ipam, keys: this.keys, metrics: this.metrics, log });
    this.ledger = new SandboxLedger(opts.clock, opts.timer);
    this.host = new HostRoom({ observe: opts.observe, applied: opts.applied, steps: this.steps, log });
    this.sandboxes = new SandboxRoom({ observe: opts.observe, delegated: opts.delegated, applied: this.applied, ledger: this.ledger, host: this.host, steps: this.steps, metrics: this.metrics, log, again: () => void this.passes() });
  }

  /** The port security table as a pass last read the host, for `podnet status`; undefined until one has. */
  portSecuritySeen(): TableSeen | undefined {
    return this.host.portSecuritySeen();
  }

  /** Every sandbox's report, for `podnet explain`. */
  list(): SandboxList {
    return this.ledger.list(this.judge(this.documents));
  }

  /** The sandboxes whose pod the source knows, as the last pass left them: what their status is made from. */
  facts(): SandboxFacts[] {
    return this.ledger.facts();
  }

  /** Each attachment the sandboxes want or have, with its Network and state, as the last pass left them: what the metrics count. */
  attachmentStates(): { network: string; state: AttachmentState }[] {
    return this.ledger.attachmentStates();
  }

  /**
   * By Network, the owners holding addresses of it on this node whose attachment came from no
   * claim: what a DRA device offers less (docs/adr/0033). From IPAM's own file, so an address kept
   * for a retry, or held by a sandbox a restarted daemon has not passed yet, counts too.
   */
  addressesHeldOutsideClaims(): Map<string, number> {
    const claimed = this.ledger.claimAddressOwners();
    const held = new Map<string, number>();
    for (const { network, owner } of this.opts.ipam.holders()) if (!claimed.has(owner)) held.set(network, (held.get(network) ?? 0) + 1);
    return held;
  }

  /** The Networks an attachment on this node that came from no claim holds or asks: a tunnel's device is not offered then. */
  networksAttachedOutsideClaims(): Set<string> {
    return this.ledger.networksAttachedOutsideClaims();
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

  /**
   * A new sandbox's first pass, for its ADD (docs/adr/0028): waits for the pod to be known to the
   * source (a pod's watch event may come a moment after its sandbox's ADD) and for a pass that
   * takes it, and answers within `waitMs` whatever it came to. A pod that asks podnet for nothing
   * is answered at once; the passes go on after the answer as they would without it.
   */
  async firstPass(record: AttachmentRecord, waitMs: number): Promise<FirstPassResponse> {
    const { source, clock } = this.opts;
    const deadline = clock() + answerWithinMs(waitMs);
    let pod = source.synced ? source.identity(record) : undefined;
    while (!pod && !this.closed && clock() < deadline) {
      await this.sleep(Math.min(firstPassPollMs, deadline - clock()));
      pod = source.synced ? source.identity(record) : undefined;
    }
    if (!pod) return { outcome: 'unknown-pod' };
    const { configs } = source.documents();
    if (!asksAnything(pod, configs)) return { outcome: 'nothing-asked' };
    const required = requiredAttachments(pod, configs);
    // A pass that takes it (a new sandbox is always due, though a namespace's share may leave it to
    // the next), and the passes its plan left work to; one that did not take it (its netns not seen,
    // the pass cut short) is not run again for it here.
    for (;;) {
      if (this.closed) return this.answer(record, { outcome: 'pending' });
      const passed = await this.passBy(deadline);
      const answer = firstPassOutcome(this.ledger, record, required);
      // Again for a plan that left work to the next pass, or a pass that left the sandbox to the next for its namespace's share.
      const waits = this.ledger.track(record.containerId)?.deferred === true || this.left.has(record.containerId);
      if (!passed || answer.outcome !== 'pending' || clock() >= deadline || !waits) return this.answer(record, answer);
    }
  }

  /** What the ADD is answered: what its sandbox has by now was there before its containers started. */
  private answer(record: AttachmentRecord, answer: FirstPassResponse): FirstPassResponse {
    this.ledger.answered(record);
    return answer;
  }

  /** Runs a pass (one more after the pass under way), waiting for it until `deadline`: whether it ended by then. */
  passBy(deadline: number): Promise<boolean> {
    let cancel: () => void = () => undefined;
    const timedOut = new Promise<false>((resolve) => (cancel = this.opts.timer(Math.max(0, deadline - this.opts.clock()), () => resolve(false))));
    // The end of the next pass, not of the passes that follow it (a namespace's share left to them,
    // fair-share.ts): what that pass did for a pod is what its ADD is answered.
    const waiter = { after: this.begun, wake: () => undefined as void };
    const ended = new Promise<true>((resolve) => (waiter.wake = () => resolve(true)));
    this.passWaiters.push(waiter);
    void this.schedule();
    return Promise.race([ended, timedOut]).finally(() => {
      cancel();
      this.passWaiters = this.passWaiters.filter((w) => w !== waiter);
    });
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.opts.timer(Math.max(0, ms), resolve));
  }

  /** Waits for the pass under way; no pass or retry runs after. */
  async close(): Promise<void> {
    this.closed = true;
    this.ledger.close();
    await this.passes.idle();
    this.ledger.close();
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
      const seen = sight(record.netns, record.netnsId);
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
   * What each sandbox should have, and its JSON: what tells a pass whether it changed. Node
   * admission judges the sandboxes together (model/admission.ts), against the host's links as
   * last read; then each gets its names and addresses (taken, or previewed for a diff), and the
   * static MACs the node refuses are taken out of its tuning.
   */
  private async workOf(sandboxes: Iterable<LiveSandbox>, docs: DesiredDocuments, addresses: 'allocate' | 'preview'): Promise<SandboxWork[]> {
    const live = [...sandboxes];
    const { source, ipam, delegated, log } = this.opts;
    const pods = live.map(({ record }) => source.identity(record));
    const admission = admit(
      live.map(({ record }, i): AdmissionSandbox => ({
        containerId: record.containerId,
        pod: pods[i],
        applied: this.applied.get(record.containerId),
        delegated: delegated.recordsOf(record.containerId),
        seenMacs: [...(this.ledger.track(record.containerId)?.sight?.view.pod.values() ?? [])].flatMap((l) => (l.mac ? [l.mac] : [])),
      })),
      { networks: docs.networks, configs: docs.configs, permissions: docs.permissions, limits: this.opts.limits ?? defaultLimits, hostLinks: await this.host.links() },
    );
    if (admission.unsettled?.refusing) log.warn('the node refused parts of configs past the rounds that judge them whole; those parts alone are left out this pass', { containerIds: admission.unsettled.containerIds });
    else if (admission.unsettled) log.warn('the node\'s refusals of configs did not settle within the rounds that judge them; some stay refused this pass though they may no longer hold', { containerIds: admission.unsettled.containerIds });
    const allocate = addresses === 'allocate' ? ipam.allocate.bind(ipam) : ipam.preview.bind(ipam);
    // A key is made as an address is taken: for what the pass applies, not for a preview.
    const previewKey = (network: string, owner: string) => this.keys.keyOf(network, owner, false);
    const keyOf = addresses === 'allocate' ? (network: string, owner: string) => this.keys.keyOf(network, owner, true) : previewKey;
    return live.map(({ record, records }, i) => {
      const had = this.applied.get(record.containerId)?.configs;
      /**
       * What the sandbox gets with these generations refused too: one whose part cannot be
       * resolved (an address its Network's ranges cannot give) is refused whole at once (ADR 17);
       * the sandbox room refuses one whose part cannot be planned or made, through `rewant`.
       */
      const build = (refused: readonly RefusedGeneration[]): Pick<SandboxWork, 'wanted' | 'desired' | 'problems' | 'desiredJson' | 'rewant' | 'refused'> => {
        const wanted = refused.length === 0 ? admission.wanted[i]! : admission.again(i, refused);
        // Addresses are taken only for what is kept: one taken for a generation refused here would
        // be released at the pass's end and taken again by the next, each pass (ADR 17).
        const tried = givesAnew(wanted.whole, had) ? resolveSandbox(record.containerId, wanted, docs.networks, ipam.preview.bind(ipam), previewKey) : undefined;
        const unresolved = tried ? newGenerationsRefused(wanted.whole ?? [], had, tried.problems.slice(wanted.problems.length)) : [];
        if (unresolved.length > 0) return build([...refused, ...unresolved]);
        const resolved = resolveSandbox(record.containerId, wanted, docs.networks, allocate, keyOf);
        const { desired, problems } = withoutRefusedMacs(resolved.desired, resolved.problems, admission.macs.get(record.containerId));
        return { wanted, desired, problems, desiredJson: JSON.stringify(desired), refused, rewant: (more) => build([...refused, ...more]) };
      };
      return { record, records, identity: pods[i] ?? identityOf(record), known: pods[i] !== undefined, ...build([]) };
    });
  }

  /**
   * What a pass would do with `extra` documents on top of the followed ones, without doing it:
   * the same desired state, observation and plan, addresses previewed rather than taken; the
   * sandboxes are planned as if the host steps (bridges) had run.
   */
  async diff(extra: readonly ApiDocument[]): Promise<DiffResponse> {
    const docs = withDocuments(this.opts.source.documents(), extra);
    const work = await this.workOf(this.liveSandboxes().live.values(), docs, 'preview');
    const attachments = work.flatMap((w) => w.desired.attachments);
    const hostView = await this.host.read(attachments);
    const bridges = planBridges(attachments, hostView.links, hostView.securedPorts);
    const hostSteps = [...bridges.table, ...bridges.steps];
    const links = new Map(hostView.links);
    for (const a of attachments) {
      const bridge = hostBridgeOf(a.link);
      if (bridge && !links.has(bridge.name)) links.set(bridge.name, { name: bridge.name, mtu: a.mtu ?? 1500, up: true, kind: 'bridge', addresses: [...bridge.addresses] });
    }
    // The port security table too, when the pass would put it: empty, its ports' entries to come.
    const asIfMade = hostViewOf(links, hostView.qdiscs, hostView, bridges.table.length > 0 ? new Set<string>() : hostView.securedPorts);
    const view = (s: Step) => ({ where: s.where === 'host' ? 'host' : s.where.netns, tool: s.tool, line: s.line });
    const items = await mapLimited(work, sandboxConcurrency, async (w): Promise<DiffResponse['items'][number]> => {
      const applied = this.applied.get(w.record.containerId);
      const sight = await this.sandboxes.readPod(w, podNeeds(w.desired, applied));
      const observed = observedWith(sight.view, asIfMade);
      // What the pass would refuse whole of a new generation it cannot plan, refused here too (ADR 17).
      const refusals = new PassRefusals(w);
      const planned = refusals.plan((work) => plan({ containerId: w.record.containerId, netns: w.record.netns, desired: work.desired, observed, applied, pluginsMade: this.opts.delegated.made(w.record.containerId), ...originsOf(work.wanted) }), applied);
      return { containerId: w.record.containerId, namespace: w.identity.namespace, name: w.identity.name, steps: planned.steps.map(view), problems: [...refusals.work.problems, ...planned.problems] };
    });
    return { documentProblems: this.judge(docs), hostSteps: hostSteps.map(view), items };
  }

  /**
   * A pass: every sandbox's desired state (addresses taken), then the bridges they need, made once,
   * then the sandboxes side by side, a few at a time (each touches only its own netns and its
   * own host links; in a large pass the host steps their plans start with run together, once every
   * sandbox of a wave of them has planned: stages.ts); then what gone sandboxes and unused bridges
   * leave. A pass that is not a resync starts from the host as the last pass left it and reads
   * only the netns of the sandboxes it takes; when it must read the host, the first sandboxes
   * read their netns meanwhile.
   */
  private async pass(): Promise<void> {
    const seq = ++this.begun;
    try {
      await this.passNow();
    } finally {
      this.passEnded(seq);
    }
  }

  /** Wakes who waits for the end of a pass begun after they asked: this one. */
  private passEnded(seq: number): void {
    const woken = this.passWaiters.filter((w) => w.after < seq);
    this.passWaiters = this.passWaiters.filter((w) => w.after >= seq);
    for (const w of woken) w.wake();
  }

  private async passNow(): Promise<void> {
    if (!this.opts.source.synced || this.closed) return;
    const started = performance.now();
    this.steps.count();
    const resync = this.resyncNext;
    this.resyncNext = false;
    try {
      await this.passOver(resync);
    } finally {
      // Also a pass an error cut short: its time and the steps it ran count.
      this.metrics.passEnded({ seconds: (performance.now() - started) / 1000, steps: this.steps.count(), resync });
    }
    this.opts.afterPass?.();
  }

  private async passOver(resync: boolean): Promise<void> {
    const docs = this.opts.source.documents();
    this.documents = docs;
    this.logDocumentProblems(docs);
    const { live, unsure } = this.liveSandboxes();
    const work = await this.workOf(live.values(), docs, 'allocate');
    const now = this.opts.clock();
    // Sandboxes the last pass left to this one for their namespace's share: taken as that pass would have.
    const carried = this.carried;
    this.carried = new Set();
    const resyncOf = (w: SandboxWork) => resync || carried.has(w.record.containerId);
    const ready: SandboxWork[] = [];
    const waiting: SandboxWork[] = [];
    for (const w of work) (this.ledger.isDue({ containerId: w.record.containerId, desiredJson: w.desiredJson, records: w.records }, resyncOf(w), now) ? ready : waiting).push(w);
    // Each namespace its share of the pass (fair-share.ts): what runs plugins past it waits for the
    // next pass, at once, and goes first there, so none waits behind the same others every pass.
    const leftBefore = this.left;
    const { now: due, later } = fairShare(
      [...ready.filter((w) => leftBefore.has(w.record.containerId)), ...ready.filter((w) => !leftBefore.has(w.record.containerId))],
      (w) => w.identity.namespace,
      (w) => this.opts.delegated.runsPlugins(w.record.containerId, w.desired.delegated, resyncOf(w)),
      sandboxConcurrency,
    );
    this.left = new Set(later.map((w) => w.record.containerId));
    for (const w of later) if (resyncOf(w)) this.carried.add(w.record.containerId);
    if (later.length > 0) void this.passes();
    for (const w of [...waiting, ...later]) {
      // What its last pass refused whole stays refused until it is taken again.
      const refused = this.ledger.track(w.record.containerId)?.refusedWhole;
      const told = refused && w.rewant ? w.rewant(refused) : w;
      this.ledger.refresh(w.record, told.wanted, told.problems, w.known);
    }
    const attachments = work.flatMap((w) => w.desired.attachments);
    const host = this.host.forPass(attachments, resync);
    // Awaited below in every case; this keeps a failure before then from counting as unhandled.
    host.catch(() => undefined);
    // A small pass (a request) reads back the netns it changed, for the next request to plan from;
    // in a large one those reads would hold up the other sandboxes: they come after all (readBackChanged).
    const readBack = due.length <= sandboxConcurrency;
    if (readBack) await mapLimited(due, sandboxConcurrency, (w) => this.sandboxes.reconcile(w, host, { resync: resyncOf(w), readBack }));
    else {
      // A large pass: the host steps its plans start with run together, wave by wave (stages.ts).
      await inStages(due, sandboxConcurrency, this.opts.timer, (w, together) => this.sandboxes.reconcile(w, host, { resync: resyncOf(w), readBack, together }));
      await this.sandboxes.readBackChanged(due);
    }
    const hostView = await host;
    const gone = (cid: string) => !live.has(cid) && !unsure.has(cid);
    for (const state of this.applied.all()) if (gone(state.containerId)) await this.forget(state, hostView);
    // What the pass's plugin time left of gone sandboxes' DELs: the next pass, at once.
    if (await this.opts.delegated.forgetGone(gone)) void this.passes();
    if (resync) await this.opts.delegated.collect(work.flatMap((w) => w.desired.delegated.map((d) => d.config)));
    this.ledger.forget(gone);
    this.applied.sweepUnheld([...this.ledger.all()].map((o) => ({ containerId: o.containerId, attachments: (o.asked ?? o.desired).attachments })));
    // Sandboxes make and remove only their own veth ends and ifbs: the view still holds the bridges.
    await this.host.collectBridges(hostView);
    await this.host.endPass(hostView, attachments);
    this.ledger.scheduleRetry(() => void this.passes());
  }

  /**
   * A sandbox that is gone: its pod ends went with its netns; host ends, ifbs and addresses go
   * now, through a journaled pass like any other change (a crash in it is taken back at start).
   */
  private async forget(state: AppliedState, hostView: HostView): Promise<void> {
    const steps = planGoneSandbox(state, hostView.podnetLinks);
    this.host.changedByPass(steps);
    const result = await this.steps.journaled(state.containerId, steps, () => this.applied.forget(state));
    if (result.error) {
      this.opts.log.warn('could not remove the host ends of a gone sandbox; retrying next pass', { containerId: state.containerId, error: result.error.message });
      return;
    }
    this.applied.countChanges(state, undefined);
    this.opts.log.info('took back a gone sandbox', { containerId: state.containerId, attachments: state.attachments.length });
  }

  /** Tells the log of each document problem once, when it appears (a file dropped in the dir, an edit that broke one). */
  private logDocumentProblems(docs: DesiredDocuments): void {
    const now = new Set(this.judge(docs).map((p) => `${p.document} ${p.field}: ${p.reason}`));
    for (const problem of now) if (!this.loggedProblems.has(problem)) this.opts.log.warn('a document podnet cannot use', { problem });
    this.loggedProblems = now;
  }
}
