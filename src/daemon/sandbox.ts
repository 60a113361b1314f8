// One sandbox's part of a pass, callable on its own as a plugin's cmdAdd is: its delegated
// plugins first, then observe (or take the view its last pass left), plan, apply, and read back;
// what came of it goes to the ledger. A failure is the sandbox's alone: told, and tried again
// with its backoff.
import { PodnetError, toPodnetError, type ErrorCode } from '../errors.ts';
import type { DelegatedLifecycle } from '../delegate/lifecycle.ts';
import type { Together, ReadBack } from '../executor/execute.ts';
import type { Logger } from '../log.ts';
import type { PassMetrics } from '../metrics.ts';
import type { DesiredSandbox, Problem } from '../model/desired.ts';
import type { RefusedGeneration } from '../model/refusal.ts';
import { causeProblems } from '../model/step.ts';
import { newGenerationsRefused } from '../model/whole-configs.ts';
import type { SandboxIdentity } from '../model/identity.ts';
import type { Resolved } from '../model/state.ts';
import { linksOf, linksRead, type NetnsObserver } from '../netns/observe.ts';
import { plan } from '../planner/plan.ts';
import type { AttachmentRecord } from '../protocol/validate.ts';
import { originsOf, sameApplied, withConfigs, type AppliedRecords } from './applied-records.ts';
import type { HostRoom } from './host.ts';
import type { SandboxLedger, SandboxOutcome, SandboxTrack } from './ledger.ts';
import { mapLimited } from './map-limited.ts';
import type { PassSteps } from './pass-steps.ts';
import { asksThePlanner, covers, linksAlone, observedWith, podNeeds, readPod, sightOfLinks, type HostView, type PodNeeds, type PodSight } from './views.ts';

/** Sandboxes reconciled at once: each runs a few short ip processes, mostly waiting on the kernel. */
export const sandboxConcurrency = 8;

/** A live sandbox and what it should have, decided at the start of a pass. */
export interface SandboxWork {
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
  /** What it gets with these generations of its configs refused too (ADR 17): for a part the pass finds it cannot plan or make. */
  rewant?: (refused: readonly RefusedGeneration[]) => Pick<SandboxWork, 'wanted' | 'desired' | 'problems' | 'desiredJson' | 'rewant'>;
}

/** How a pass takes a sandbox: at a resync (read everything anew), reading back what it changed, and in a large pass with the others' host steps (stages.ts). */
export interface SandboxPass {
  resync: boolean;
  readBack: boolean;
  together?: Together;
}

export interface SandboxRoomOptions {
  observe: NetnsObserver;
  delegated: DelegatedLifecycle;
  applied: AppliedRecords;
  ledger: SandboxLedger;
  host: HostRoom;
  steps: PassSteps;
  metrics: PassMetrics;
  log: Logger;
  /** Asks for one more pass: what had to wait for this pass's changes gets it at once. */
  again: () => void;
}

/** The sandbox's failure for the generations a pass refused whole: the pod has what it had of them, and they are tried again with its backoff. */
function refusedError(refused: readonly PassRefusal[]): PodnetError {
  return new PodnetError(refused[0]!.code, refused.map(({ problem: p }) => `${p.document} ${p.field}: ${p.reason}`).join('; '));
}

/** A generation a pass refused whole, with the code of what failed: a step's or plugin's error, INVALID_REQUEST for what could not be planned. */
interface PassRefusal extends RefusedGeneration {
  code: ErrorCode;
}

/** Failures whose steps could not all be taken back: a fresh plan would meet podnet's own leftovers as someone else's. */
const undoFailed = new WeakSet<Error>();

export class SandboxRoom {
  private readonly opts: SandboxRoomOptions;

  constructor(opts: SandboxRoomOptions) {
    this.opts = opts;
  }

  /** One sandbox's part of a pass; never throws: a failure is told on its outcome and in the log. */
  async reconcile(given: SandboxWork, host: Promise<HostView>, pass: SandboxPass): Promise<void> {
    const { log, applied, delegated, ledger } = this.opts;
    const { record, identity, problems } = given;
    let work = given;
    const report: SandboxOutcome = {
      record,
      containerId: record.containerId,
      namespace: identity.namespace,
      name: identity.name,
      netns: record.netns,
      desired: given.desired,
      applied: applied.get(record.containerId),
      problems: [...problems],
      lastSteps: [],
      delegated: delegated.attachedTo(record.containerId),
      wanted: given.wanted,
      known: given.known,
    };
    const { track, previous } = ledger.begin(report, { desiredJson: given.desiredJson, records: given.records });
    const pod = `${identity.namespace}/${identity.name}`;
    /** Generations of configs this pass found it cannot make and refused whole (ADR 17). */
    const refusedWhole: PassRefusal[] = [];
    try {
      // The plugins first: what the plan tunes or routes through may be an interface they make.
      const syncPlugins = () => delegated.sync({ record, pod, desired: work.desired.delegated, wanted: work.wanted, tuned: new Set(work.desired.tuning.map((t) => t.interface)) }, pass.resync);
      let delegation = await syncPlugins();
      // A config's new generation whose plugin failed is refused whole: its other attachments' plugins are taken back too.
      for (let refused = this.refusedNew(work, report, delegation.takenBack); refused.length > 0; refused = this.refusedNew(work, report, delegation.takenBack)) {
        work = this.without(work, report, refused, refusedWhole, delegation.failed?.code ?? 'INVALID_REQUEST');
        const again = await syncPlugins();
        delegation = { ...again, changed: delegation.changed || again.changed };
      }
      const { desired } = work;
      track.delegateProblems = delegation.problems;
      report.problems = [...work.problems, ...delegation.problems];
      report.delegated = delegated.attachedTo(record.containerId);
      if (!asksThePlanner(desired, report.applied)) {
        // Most pods on a node: nothing of podnet's own wanted or there, so nothing to read or plan.
        report.problems = [...work.problems, ...track.delegateProblems];
        report.lastSteps = [];
        // Its configs may still give it delegated attachments: which generation it has is kept.
        if (!delegation.failed) report.applied = applied.keepConfigs(record, report.applied, work.wanted.whole ?? []);
        // What its other plugins made stands.
        track.committed = true;
        if (refusedWhole.length > 0) {
          track.refusedWhole = refusedWhole.map(({ code: _code, ...r }) => r);
          throw refusedError(refusedWhole);
        }
        if (delegation.failed) throw delegation.failed;
        return;
      }
      const needs = podNeeds(desired, report.applied);
      const last = previous?.sight;
      const kept = !pass.resync && !delegation.changed && last && last.records === work.records && covers(last, needs) ? last : undefined;
      try {
        track.sight = await this.planAndApply(work, report, track, kept ?? this.readPod(work, needs), host, pass, refusedWhole, !kept);
      } catch (err) {
        const e = toPodnetError(err);
        // Made again only when a step failed and was taken back whole: anything else would fail alike.
        if (!kept || e.code !== 'IO_FAILURE' || undoFailed.has(e)) throw err;
        log.warn('a plan from the view the last pass left failed; planning again from the netns and host as they are', { pod, error: e.message });
        report.lastSteps = [];
        track.planProblems = [];
        this.opts.host.stale();
        track.sight = await this.planAndApply(work, report, track, this.readPod(work, needs), this.opts.host.read(work.desired.attachments), pass, refusedWhole, true);
      }
      track.committed = true;
      // The pod has what it had of them, and the rest; they are tried again with its backoff, from
      // the netns as it is then (from a kept view a failed step would be tried twice).
      if (refusedWhole.length > 0) {
        track.sight = undefined;
        track.refusedWhole = refusedWhole.map(({ code: _code, ...r }) => r);
        throw refusedError(refusedWhole);
      }
      // The rest applied; a plugin that failed, or a port that waits for the port security table,
      // is tried again with the sandbox's backoff.
      if (delegation.failed) throw delegation.failed;
      if (track.unavailable !== undefined) {
        track.waitsForTable = true;
        throw new PodnetError('NOT_AVAILABLE', track.unavailable);
      }
    } catch (err) {
      const e: PodnetError = toPodnetError(err);
      this.opts.metrics.sandboxFailed(e.code);
      const retryInMs = ledger.failed(report, track, previous, e);
      const outcome =
        refusedWhole.length > 0 ? 'what it could not make was refused whole; the rest of its config was applied' : track.committed ? 'the rest of its config was applied' : undoFailed.has(e) ? 'taking back what this pass took failed too' : 'what this pass took was undone';
      log.warn(`reconcile failed; ${outcome}`, { pod, error: e.message, retryInMs });
    }
  }

  /**
   * Reads the netns of a large pass's sandboxes that it changed, once every sandbox's steps ran:
   * what the status then tells of them (each link's MTU and MAC) is what they have. Without it a
   * pod's network-status lost its MTU after every large pass and got it back at the next resync,
   * two writes for nothing (bench/kube-scale); and the next request plans from this view.
   */
  async readBackChanged(due: readonly SandboxWork[]): Promise<void> {
    const { ledger } = this.opts;
    const changed = due.filter((w) => {
      const report = ledger.outcome(w.record.containerId);
      const track = ledger.track(w.record.containerId);
      return report !== undefined && report.lastSteps.length > 0 && track?.committed === true && track.sight === undefined;
    });
    await mapLimited(changed, sandboxConcurrency, async (w) => {
      const track = ledger.track(w.record.containerId);
      const applied = ledger.outcome(w.record.containerId)?.applied;
      // A read that fails leaves no view: the next pass reads, as before.
      if (track) track.sight = await this.readPod(w, podNeeds(w.desired, applied)).catch(() => undefined);
    });
  }

  readPod({ record, records }: SandboxWork, needs: PodNeeds): Promise<PodSight> {
    return readPod(this.opts.observe, record.netns, records, needs);
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
    given: SandboxWork,
    report: SandboxOutcome,
    track: SandboxTrack,
    sight: PodSight | Promise<PodSight>,
    host: Promise<HostView>,
    { readBack, together }: SandboxPass,
    refusedWhole: PassRefusal[],
    /** Whether a failed step refuses its generation whole; not from a kept view of the netns, which may be what failed (made again from the netns as it is). */
    refuseFailedSteps: boolean,
  ): Promise<PodSight | undefined> {
    const { applied } = this.opts;
    const { record, identity } = given;
    const [seen, hostView] = await Promise.all([sight, host]);
    let work = given;
    const planOf = () => plan({ containerId: record.containerId, netns: record.netns, desired: work.desired, observed: observedWith(seen.view, hostView), applied: report.applied, ...originsOf(work.wanted) });
    let planned = planOf();
    // A config's new generation of which a part cannot be planned is refused whole, and planned again without.
    for (let refused = this.refusedNew(work, report, planned.refused.flatMap((r) => causeProblems(r.cause, r.problem.reason))); refused.length > 0; refused = this.refusedNew(work, report, planned.refused.flatMap((r) => causeProblems(r.cause, r.problem.reason)))) {
      work = this.without(work, report, refused, refusedWhole, 'INVALID_REQUEST');
      planned = planOf();
    }
    const { desired } = work;
    report.problems = [...work.problems, ...track.delegateProblems, ...planned.problems];
    report.lastSteps = planned.steps;
    track.unavailable = planned.unavailable;
    track.planProblems = planned.problems;
    const next = withConfigs(planned.next, work.wanted.whole ?? []);
    if (planned.steps.length === 0 && sameApplied(report.applied, next)) return seen;
    const before = report.applied;
    this.opts.host.changedByPass(planned.steps);
    const needsAfter = podNeeds(desired, next);
    const linksBack: ReadBack | undefined = linksAlone(needsAfter) ? { where: { netns: record.netns }, read: linksRead } : undefined;
    const result = await this.opts.steps.journaled(record.containerId, planned.steps, (pass) => applied.commit(before, { ...next, pass }), linksBack, together);
    if (result.error) {
      // A step of a config's new generation failed and this pass's steps were taken back: planned again without it, from the netns as it is.
      const refused = refuseFailedSteps && result.undoErrors.length === 0 && result.failed?.cause ? this.refusedNew(work, report, causeProblems(result.failed.cause, `the node could not make it: ${result.error.message.slice(result.failed.cause.length + 2)}`)) : [];
      if (refused.length > 0) {
        this.opts.host.stale();
        const again = this.without(work, report, refused, refusedWhole, result.error.code);
        return this.planAndApply(again, report, track, this.readPod(again, podNeeds(again.desired, report.applied)), this.opts.host.read(again.desired.attachments), { resync: true, readBack }, refusedWhole, true);
      }
      if (result.undoErrors.length === 0) throw result.error;
      const e = new PodnetError('IO_FAILURE', `${result.error.message}; taking back this pass's steps also failed: ${result.undoErrors.map((u) => u.message).join('; ')}`);
      undoFailed.add(e);
      throw e;
    }
    report.applied = applied.get(record.containerId);
    applied.countChanges(before, report.applied);
    // Level-triggered: what had to wait for this pass's changes gets the next pass at once.
    if (planned.deferred) {
      track.deferred = true;
      this.opts.again();
    }
    if (planned.steps.length > 0) this.opts.log.info('applied', { pod: `${identity.namespace}/${identity.name}`, steps: planned.steps.length });
    if (planned.steps.length === 0) return seen;
    const readTogether = result.read && this.linksReadBack(result.read);
    if (readTogether) return sightOfLinks(needsAfter, work.records, readTogether);
    if (!readBack) return undefined;
    // Host steps change the netns too: a veth made from the host puts its end there, deleting the host end takes it away.
    return this.readPod(work, needsAfter).catch(() => undefined);
  }

  /** The generations of the configs `work` was to give anew that these problems name: refused whole (model/whole-configs.ts). */
  private refusedNew(work: SandboxWork, report: SandboxOutcome, problems: readonly Problem[]): RefusedGeneration[] {
    return work.rewant ? newGenerationsRefused(work.wanted.whole ?? [], report.applied?.configs, problems) : [];
  }

  /** `work` without the `refused` generations, told on the outcome and noted in `refusedWhole` (once: a plan made again meets them again). */
  private without(work: SandboxWork, report: SandboxOutcome, refused: readonly RefusedGeneration[], refusedWhole: PassRefusal[], code: ErrorCode): SandboxWork {
    for (const r of refused) if (!refusedWhole.some((w) => w.config === r.config && w.generation === r.generation && w.problem.field === r.problem.field)) refusedWhole.push({ ...r, code });
    const again: SandboxWork = { ...work, ...work.rewant!(refused) };
    report.asked ??= work.desired;
    report.desired = again.desired;
    report.wanted = again.wanted;
    report.refusedByPass = refusedWhole.map((r) => r.problem);
    return again;
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
}
