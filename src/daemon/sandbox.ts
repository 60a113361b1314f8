// One sandbox's part of a pass, callable on its own as a plugin's cmdAdd is: its delegated
// plugins first, then observe (or take the view its last pass left), plan, apply, and read back;
// what came of it goes to the ledger. A failure is the sandbox's alone: told, and tried again
// with its backoff.
import { PodnetError, toPodnetError } from '../errors.ts';
import { pluginTimePerPassMs, type DelegatedLifecycle, type DelegatedSync } from '../delegate/lifecycle.ts';
import type { Together, ReadBack } from '../executor/execute.ts';
import type { Logger } from '../log.ts';
import type { PassMetrics } from '../metrics.ts';
import type { Problem } from '../model/desired.ts';
import { causeProblems } from '../model/step.ts';
import { linksOf, linksRead, type NetnsObserver } from '../netns/observe.ts';
import { plan } from '../planner/plan.ts';
import { originsOf, sameApplied, withConfigs, type AppliedRecords } from './applied-records.ts';
import type { HostRoom } from './host.ts';
import type { SandboxLedger, SandboxOutcome, SandboxTrack } from './ledger.ts';
import { mapLimited } from './map-limited.ts';
import { PassRefusals } from './pass-refusals.ts';
import type { SandboxWork } from './work.ts';
import type { PassSteps } from './pass-steps.ts';
import { asksThePlanner, covers, linksAlone, observedWith, podNeeds, readPod, sightOfLinks, type HostView, type PodNeeds, type PodSight } from './views.ts';

/** Sandboxes reconciled at once: each runs a few short ip processes, mostly waiting on the kernel. */
export const sandboxConcurrency = 8;

export type { SandboxWork } from './work.ts';

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
    const refusals = new PassRefusals(given);
    try {
      // The plugins first: what the plan tunes or routes through may be an interface they make.
      let delegation = await this.syncPlugins(refusals, report, pass.resync);
      // A config's new generation whose plugin failed is refused whole: the plugins of its other
      // attachments are taken back too, and what failed is not tried again in this pass.
      while (refusals.refuse(delegation.takenBack, report.applied, delegation.failed?.code ?? 'INVALID_REQUEST')) {
        delegation = { ...(await this.syncPlugins(refusals, report, false, delegation)), changed: true };
      }
      track.delegateProblems = delegation.problems;
      report.delegated = delegated.attachedTo(record.containerId);
      if (delegation.cut) {
        this.pluginsGoOn(refusals, report, track, delegation);
        return;
      }
      const afterPlugins = refusals.mark();
      if (!asksThePlanner(refusals.work.desired, report.applied)) {
        // Most pods on a node: nothing of podnet's own wanted or there, so nothing to read or plan.
        refusals.tell(report);
        report.problems = [...refusals.work.problems, ...track.delegateProblems];
        report.lastSteps = [];
        // Its configs may still give it delegated attachments: which generation it has is kept.
        if (!delegation.failed) report.applied = applied.keepConfigs(record, report.applied, refusals.work.wanted.whole ?? []);
        // What its other plugins made stands.
        track.committed = true;
      } else {
        const needs = podNeeds(refusals.work.desired, report.applied);
        const last = previous?.sight;
        const kept = !pass.resync && !delegation.changed && last && last.records === given.records && covers(last, needs) ? last : undefined;
        try {
          track.sight = await this.planAndApply(refusals, report, track, kept ?? this.readPod(refusals.work, needs), host, pass, !kept);
        } catch (err) {
          const e = toPodnetError(err);
          // Made again only when a step failed and was taken back whole: anything else would fail alike.
          if (!kept || e.code !== 'IO_FAILURE' || undoFailed.has(e)) throw err;
          log.warn('a plan from the view the last pass left failed; planning again from the netns and host as they are', { pod, error: e.message });
          report.lastSteps = [];
          track.planProblems = [];
          // What the plan from that view refused may not hold for the netns as it is.
          refusals.reset(afterPlugins);
          this.opts.host.stale();
          track.sight = await this.planAndApply(refusals, report, track, this.readPod(refusals.work, needs), this.opts.host.read(refusals.work.desired.attachments), pass, true);
        }
        track.committed = true;
        // The plugins of a generation the plan refused are taken back too.
        if (refusals.refusedSince(afterPlugins)) {
          delegation = { ...(await this.syncPlugins(refusals, report, false, delegation)), changed: true };
          track.delegateProblems = delegation.problems;
          report.delegated = delegated.attachedTo(record.containerId);
          report.problems = [...refusals.work.problems, ...track.delegateProblems, ...track.planProblems];
        }
        refusals.tell(report);
      }
      const refused = refusals.error();
      // An ADD that waits for the plan to take back podnet's own link of its name: the next pass
      // makes it, at once; but not past the backoff of a sandbox that fails.
      if (delegation.waiting && !delegation.failed && !refused && track.unavailable === undefined) {
        track.deferred = true;
        this.opts.again();
      }
      if (refused) {
        // Tried again with its backoff, from the netns as it is then (from a kept view a failed step would be tried twice).
        track.sight = undefined;
        track.refusedWhole = refusals.generations();
      }
      // The rest applied; a plugin that failed, or a port that waits for the port security table,
      // is tried again with the sandbox's backoff. Their failure is told before a refusal's, which
      // the refused configs' own problems tell.
      if (delegation.failed && !refused) throw delegation.failed;
      if (track.unavailable !== undefined) {
        track.waitsForTable = true;
        throw new PodnetError('NOT_AVAILABLE', track.unavailable);
      }
      if (refused) throw refused;
    } catch (err) {
      const e: PodnetError = toPodnetError(err);
      this.opts.metrics.sandboxFailed(e.code);
      const retryInMs = ledger.failed(report, track, previous, e);
      const outcome = !track.committed
        ? undoFailed.has(e)
          ? 'taking back what this pass took failed too'
          : 'what this pass took was undone'
        : refusals.generations()
          ? 'what it could not make was refused whole; the rest of its config was applied'
          : 'the rest of its config was applied';
      log.warn(`reconcile failed; ${outcome}`, { pod, error: e.message, retryInMs });
    }
  }

  /**
   * A sync that spent the pass's plugin time with ADDs or DELs left: the sandbox's next pass goes
   * on at once (after its backoff, if a plugin failed). Its plan waits for that: it may tune or
   * route through what they make, and would refuse a config whose interfaces are still being
   * made; the configs are not recorded as applied before they are whole. What the plugins made
   * stays.
   */
  private pluginsGoOn(refusals: PassRefusals, report: SandboxOutcome, track: SandboxTrack, delegation: DelegatedSync): void {
    refusals.tell(report);
    report.problems = [...refusals.work.problems, ...track.delegateProblems];
    report.lastSteps = [];
    track.committed = true;
    const refused = refusals.error();
    if (refused) track.refusedWhole = refusals.generations();
    if (delegation.failed) throw delegation.failed;
    if (refused) throw refused;
    track.deferred = true;
    this.opts.again();
  }

  /**
   * The sandbox's delegated attachments synced to what the pass works from now; `earlier`: this
   * pass's sync before, whose failed ADDs are not tried again, and whose problems of what is still
   * asked stand.
   */
  private async syncPlugins(refusals: PassRefusals, report: SandboxOutcome, resync: boolean, earlier?: DelegatedSync): Promise<DelegatedSync> {
    const { record, identity } = refusals.work;
    const { desired, wanted } = refusals.work;
    const native = new Set((report.applied?.attachments ?? []).map((a) => a.interface));
    const tried = new Set(earlier?.tried ?? []);
    // The pass's plugin time is the sandbox's, whatever syncs it takes; but taking back a refused
    // generation is not cut by it: what that made goes whole.
    const budget = earlier ? { ms: pluginTimePerPassMs - earlier.spentMs, takingBack: true } : { ms: pluginTimePerPassMs };
    const sync = await this.opts.delegated.sync({ record, pod: `${identity.namespace}/${identity.name}`, desired: desired.delegated, wanted, tuned: new Set(desired.tuning.map((t) => t.interface)), native, tried }, resync, budget);
    if (!earlier) return sync;
    const stillAsked = (p: Problem) => wanted.attachments.some((a) => a.from === p.document && a.field === p.field);
    const failed = sync.failed ?? earlier.failed;
    return { ...sync, problems: [...earlier.problems.filter(stillAsked), ...sync.problems], tried: [...tried, ...sync.tried], spentMs: earlier.spentMs + sync.spentMs, ...(failed ? { failed } : {}) };
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
    refusals: PassRefusals,
    report: SandboxOutcome,
    track: SandboxTrack,
    sight: PodSight | Promise<PodSight>,
    host: Promise<HostView>,
    { readBack, together }: SandboxPass,
    /** Whether a failed step refuses its generation whole; not from a kept view of the netns, which may be what failed (made again from the netns as it is). */
    refuseFailedSteps: boolean,
  ): Promise<PodSight | undefined> {
    const { applied } = this.opts;
    const { record, identity } = refusals.work;
    const [seen, hostView] = await Promise.all([sight, host]);
    // A config's new generation of which a part cannot be planned is refused whole, and planned again without.
    const planned = refusals.plan((work) => plan({ containerId: record.containerId, netns: record.netns, desired: work.desired, observed: observedWith(seen.view, hostView), applied: report.applied, pluginsMade: this.opts.delegated.made(record.containerId), ...originsOf(work.wanted) }), report.applied);
    const { desired, wanted } = refusals.work;
    report.problems = [...refusals.work.problems, ...track.delegateProblems, ...planned.problems];
    report.lastSteps = planned.steps;
    track.unavailable = planned.unavailable;
    track.planProblems = planned.problems;
    const next = withConfigs(planned.next, wanted.whole ?? []);
    if (planned.steps.length === 0 && sameApplied(report.applied, next)) return seen;
    const before = report.applied;
    this.opts.host.changedByPass(planned.steps);
    const needsAfter = podNeeds(desired, next);
    const linksBack: ReadBack | undefined = linksAlone(needsAfter) ? { where: { netns: record.netns }, read: linksRead } : undefined;
    const result = await this.opts.steps.journaled(record.containerId, planned.steps, (pass) => applied.commit(before, { ...next, pass }), linksBack, together);
    if (result.error) {
      // A step of a config's new generation failed and this pass's steps were taken back: planned
      // again without it, from the netns as it is. Not for nft, whose transaction fails whole: the
      // step it names is its first, not the one that failed.
      const failed = refuseFailedSteps && result.undoErrors.length === 0 && result.failed?.step.tool !== 'nft' ? result.failed : undefined;
      if (failed?.step.cause && refusals.refuse(causeProblems(failed.step.cause, `the node could not make it: ${failed.reason}`), report.applied, result.error.code)) {
        this.opts.host.stale();
        const again = refusals.work;
        return this.planAndApply(refusals, report, track, this.readPod(again, podNeeds(again.desired, report.applied)), this.opts.host.read(again.desired.attachments), { resync: true, readBack }, true);
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
    if (readTogether) return sightOfLinks(needsAfter, refusals.work.records, readTogether);
    if (!readBack) return undefined;
    // Host steps change the netns too: a veth made from the host puts its end there, deleting the host end takes it away.
    return this.readPod(refusals.work, needsAfter).catch(() => undefined);
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
