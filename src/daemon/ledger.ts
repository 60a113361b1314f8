// What the daemon knows of each sandbox between passes, in one place: the outcome of its last
// pass (what `podnet explain`, `podnet status`, the metrics and the Kubernetes status all read),
// and its track (what tells the next pass whether it needs the sandbox: the desired state it was
// reconciled to, failures and when the next try is due, the view of its netns the pass left).
import type { ErrorCode, PodnetError } from '../errors.ts';
import { retryWaitMs, type Clock, type Timer } from '../retry.ts';
import type { DesiredSandbox, Problem } from '../model/desired.ts';
import type { RefusedGeneration } from '../model/refusal.ts';
import type { AppliedState, Resolved } from '../model/state.ts';
import type { Step } from '../model/step.ts';
import type { DelegatedRecord } from '../delegate/store.ts';
import type { AttachmentRecord, SandboxList } from '../protocol/validate.ts';
import { isClaimDocument } from '../model/identity.ts';
import { addressOwner } from '../model/resolve.ts';
import { sameSandbox } from '../registry/fold.ts';
import { attachedKeys, attachmentKey, type SandboxFacts } from '../status/status.ts';
import type { AttachmentState } from '../metrics.ts';
import type { PodSight } from './views.ts';

/** What the last pass made of one sandbox: what status is published from, and `podnet explain` shows (SandboxReport on the wire). */
export interface SandboxOutcome extends SandboxFacts {
  /** The record the pass worked from. */
  record: AttachmentRecord;
  containerId: string;
  netns: string;
  /** What it gets: what its documents ask, less what its last pass refused whole (ADR 17). */
  desired: Resolved;
  /** What its documents ask, when its last pass refused part of it whole: its attachments count as failing, and keep the addresses they were given for the retry. */
  asked?: Resolved;
  applied: AppliedState | undefined;
  problems: Problem[];
  lastSteps: Step[];
  /** Its delegated attachments that are there (their plugins' ADD answered), with their results. */
  delegated: DelegatedRecord[];
  /** What the documents ask of it, before names and addresses: which document asked for what. */
  wanted: DesiredSandbox;
  /** Whether its pod is known to the desired state's source (Kubernetes: the pod is on this node). */
  known: boolean;
}

/** What the ledger keeps of a sandbox between passes, to tell whether the next pass needs it. */
export interface SandboxTrack {
  /** The desired state it was last reconciled to, as JSON. */
  desired: string;
  /** Its records then (recordsKey): a new ADD of the same container (a new netns) is a sandbox to reconcile again. */
  records: string;
  /** What its last plan found it cannot do now; reported until it is reconciled again. */
  planProblems: Problem[];
  /** What its delegated plugins answered when their ADD failed; reported as long. */
  delegateProblems: Problem[];
  /** The generations of configs its last pass refused whole for what it could not make (ADR 17): they stay refused until it is reconciled again. */
  refusedWhole?: RefusedGeneration[];
  /** Failed passes in a row, and when the next try is due. */
  failures: number;
  /** What kind of failure the last one was. */
  failedWith?: ErrorCode;
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

/** A sandbox's desired state as a pass found it: what tells whether the pass takes it. */
export interface SandboxDue {
  containerId: string;
  /** Its desired state as JSON. */
  desiredJson: string;
  /** Its records (recordsKey). */
  records: string;
}

export class SandboxLedger {
  private readonly outcomes = new Map<string, SandboxOutcome>();
  private readonly tracks = new Map<string, SandboxTrack>();
  private readonly clock: Clock;
  private readonly timer: Timer;
  private cancelRetry: () => void = () => undefined;

  constructor(clock: Clock, timer: Timer) {
    this.clock = clock;
    this.timer = timer;
  }

  /**
   * Whether a pass takes this sandbox: a new one, one whose desired state or records changed or
   * whose last plan left part of it for the next pass, a failed one whose retry is due, and at a
   * resync every one.
   */
  isDue({ containerId, desiredJson, records }: SandboxDue, resync: boolean, now: number): boolean {
    const track = this.tracks.get(containerId);
    if (!track || track.deferred || track.desired !== desiredJson || track.records !== records) return true;
    // One that waits for the port security table, at each resync too, to be tried soon after the
    // table can be put whole again (nft installed, a chain in its way gone): any pass that finds it
    // not whole puts it again.
    if (track.failures > 0) return now >= track.retryAt || (resync && track.waitsForTable);
    return resync;
  }

  /** A sandbox a pass does not take keeps its outcome, with the documents' problems of now. */
  refresh(record: AttachmentRecord, wanted: DesiredSandbox, problems: readonly Problem[], known: boolean): void {
    const outcome = this.outcomes.get(record.containerId);
    if (!outcome) return;
    const containerId = record.containerId;
    // The same sandbox's record as the registry has it now: the plugin marks it once its ADD returned without the pod's network.
    if (sameSandbox(outcome.record, record)) outcome.record = record;
    const track = this.tracks.get(containerId);
    outcome.problems = [...problems, ...(track?.delegateProblems ?? []), ...(track?.planProblems ?? [])];
    outcome.wanted = wanted;
    outcome.known = known;
  }

  /** A pass takes the sandbox: its new outcome and track, and the track its last pass left. */
  begin(outcome: SandboxOutcome, { desiredJson, records }: Omit<SandboxDue, 'containerId'>): { track: SandboxTrack; previous: SandboxTrack | undefined } {
    // What the pod asked when its sandbox was first taken with the pod known, less what it had then
    // (docs/adr/0028). A record marked already was not answered by this daemon (it was down, or
    // restarted since): what it has may have come late too, and is kept as it was told.
    const earlier = this.outcomes.get(outcome.containerId);
    if (earlier?.awaitedAtStart && sameSandbox(earlier.record, outcome.record)) outcome.awaitedAtStart = earlier.awaitedAtStart;
    else if (outcome.known) {
      const had = outcome.record.startedWithoutNetwork === true ? new Set<string>() : attachedKeys(outcome);
      outcome.awaitedAtStart = new Set(outcome.wanted.attachments.map((w) => attachmentKey(w.network.metadata.name, w.interface)).filter((k) => !had.has(k)));
    }
    this.outcomes.set(outcome.containerId, outcome);
    const previous = this.tracks.get(outcome.containerId);
    const track: SandboxTrack = { desired: desiredJson, records, planProblems: [], delegateProblems: [], failures: 0, retryAt: 0, deferred: false, committed: false, waitsForTable: false };
    this.tracks.set(outcome.containerId, track);
    return { track, previous };
  }

  /** The sandbox's ADD is answered now: what it has by then was there before its containers started. */
  answered(record: AttachmentRecord): void {
    const outcome = this.outcomes.get(record.containerId);
    if (!outcome?.awaitedAtStart || !sameSandbox(outcome.record, record)) return;
    const has = attachedKeys(outcome);
    outcome.awaitedAtStart = new Set([...outcome.awaitedAtStart].filter((k) => !has.has(k)));
  }

  /** The sandbox's pass failed with `error`: told on its outcome, and its next try put off by its backoff; how long, in ms. */
  failed(outcome: SandboxOutcome, track: SandboxTrack, previous: SandboxTrack | undefined, error: PodnetError): number {
    outcome.lastError = error.message;
    track.failedWith = error.code;
    track.failures = (previous?.failures ?? 0) + 1;
    track.retryAt = this.clock() + retryWaitMs(track.failures);
    return track.retryAt - this.clock();
  }

  outcome(containerId: string): SandboxOutcome | undefined {
    return this.outcomes.get(containerId);
  }

  track(containerId: string): SandboxTrack | undefined {
    return this.tracks.get(containerId);
  }

  /** Every sandbox's outcome. */
  all(): Iterable<SandboxOutcome> {
    return this.outcomes.values();
  }

  /** Drops what it keeps of the sandboxes that are gone. */
  forget(gone: (containerId: string) => boolean): void {
    for (const cid of [...this.outcomes.keys()]) if (gone(cid)) this.outcomes.delete(cid);
    for (const cid of [...this.tracks.keys()]) if (gone(cid)) this.tracks.delete(cid);
  }

  /** Sets one timer, for the failed sandbox whose retry is due first, to run `pass`. */
  scheduleRetry(pass: () => void): void {
    this.cancelRetry();
    const next = Math.min(...[...this.tracks.values()].filter((t) => t.failures > 0).map((t) => t.retryAt));
    if (next === Infinity) return;
    // A few ms late rather than early: the pass checks the time against retryAt.
    this.cancelRetry = this.timer(Math.max(0, next - this.clock()) + 5, pass);
  }

  /** No retry runs after this. */
  close(): void {
    this.cancelRetry();
  }

  /** Every sandbox's report, for `podnet explain`, with the documents' problems. */
  list(documentProblems: Problem[]): SandboxList {
    const items = [...this.outcomes.values()].map(({ record: _r, wanted: _w, known: _k, links: _l, awaitedAtStart: _a, refusedByPass: _p, asked: _d, ...report }) => report);
    return { documentProblems, items: items as SandboxList['items'] };
  }

  /** The sandboxes whose pod the source knows, as the last pass left them, with their links as last read: what their status is made from. */
  facts(): SandboxFacts[] {
    return [...this.outcomes.values()].filter((o) => o.known).map(({ lastError, ...o }) => ({ ...o, ...(lastError ? { lastError } : {}), links: this.tracks.get(o.containerId)?.sight?.view.pod }));
  }

  /** The address owners (addressOwner) of the attachments the sandboxes' claims ask (docs/adr/0033). */
  claimAddressOwners(): Set<string> {
    const owners = new Set<string>();
    for (const outcome of this.outcomes.values()) {
      for (const w of outcome.wanted.attachments) if (isClaimDocument(w.from)) owners.add(addressOwner(outcome.record.containerId, w.interface));
    }
    return owners;
  }

  /**
   * The Networks an attachment on the node holds, or a sandbox asks, that came from no claim (an
   * annotation's, a config's): a tunnel Network's one attachment a node is taken (docs/adr/0033).
   */
  networksAttachedOutsideClaims(): Set<string> {
    const networks = new Set<string>();
    for (const outcome of this.outcomes.values()) {
      const claimed = new Set(outcome.wanted.attachments.filter((w) => isClaimDocument(w.from)).map((w) => w.interface));
      for (const a of outcome.applied?.attachments ?? []) if (!claimed.has(a.interface)) networks.add(a.network);
      for (const w of outcome.wanted.attachments) if (!isClaimDocument(w.from)) networks.add(w.network.metadata.name);
    }
    return networks;
  }

  /**
   * Each attachment the sandboxes want or have, with its Network and state, as the last pass left
   * them: ready (there, and its sandbox's last pass did not fail), failing, or pending (wanted, not
   * there yet). What the metrics count.
   */
  attachmentStates(): { network: string; state: AttachmentState }[] {
    return [...this.outcomes.values()].flatMap((r) => {
      const there = new Set([...(r.applied?.attachments ?? []), ...r.delegated].map((a) => `${a.network}/${a.interface}`));
      const asked = r.asked ?? r.desired;
      const wanted = [...asked.attachments, ...asked.delegated];
      const extra = [...(r.applied?.attachments ?? []), ...r.delegated].filter((a) => !wanted.some((w) => w.network === a.network && w.interface === a.interface));
      const failing = r.lastError !== undefined;
      // A pass that failed only for generations it refused whole (ADR 17) left the rest as it should be.
      const refusedAlone = failing && (r.refusedByPass?.length ?? 0) > 0;
      return [...wanted, ...extra].map(({ network, interface: name }) => ({
        network,
        state: there.has(`${network}/${name}`) && (!failing || refusedAlone) ? 'ready' : failing ? 'failing' : 'pending',
      }));
    });
  }
}
