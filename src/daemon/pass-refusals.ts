// What one sandbox's pass refuses whole of its configs' new generations (ADR 17), and the work it
// goes on with: a config whose part the pass finds it cannot make (an address when addresses are
// given, a plugin that fails, a part the plan cannot make, a step the kernel refuses) gives the pod
// nothing of that generation; the pod keeps the one it had, or nothing of the config. Only new
// generations are refused: a part of one the pod has that fails later is that part's failure.
import { PodnetError, type ErrorCode } from '../errors.ts';
import type { Problem } from '../model/desired.ts';
import type { RefusedGeneration } from '../model/refusal.ts';
import type { AppliedState } from '../model/state.ts';
import { causeProblems } from '../model/step.ts';
import { newGenerationsRefused } from '../model/whole-configs.ts';
import type { Plan } from '../planner/plan.ts';
import { refusalMessage } from '../status/status.ts';
import type { SandboxOutcome } from './ledger.ts';
import type { SandboxWork } from './work.ts';

/** A generation a pass refused whole, with the code of what failed: a step's or plugin's error, INVALID_REQUEST for what could not be given or planned. */
interface PassRefusal extends RefusedGeneration {
  code: ErrorCode;
}

/** Where a pass stood: what a plan from a kept view that failed goes back to before planning again. */
export interface RefusalMark {
  work: SandboxWork;
  count: number;
}

export class PassRefusals {
  /** What the pass works from now: the sandbox's work less what it refused. */
  work: SandboxWork;
  private readonly given: SandboxWork;
  private readonly refused: PassRefusal[];

  constructor(given: SandboxWork) {
    this.given = given;
    this.work = given;
    this.refused = (given.refused ?? []).map((r) => ({ ...r, code: 'INVALID_REQUEST' }));
  }

  /**
   * Refuses whole the new generations (not in `applied`) that these problems name, once for each
   * field; true when it refused any, the work then made again without them.
   */
  refuse(problems: readonly Problem[], applied: AppliedState | undefined, code: ErrorCode): boolean {
    if (!this.work.rewant) return false;
    const named = newGenerationsRefused(this.work.wanted.whole ?? [], applied?.configs, problems);
    if (named.length === 0) return false;
    for (const r of named) {
      if (!this.refused.some((w) => w.config === r.config && w.generation === r.generation && w.problem.field === r.problem.field)) this.refused.push({ ...r, code });
    }
    this.work = { ...this.work, ...this.work.rewant(named) };
    return true;
  }

  /** The plan of the work, made again without each new generation of which it finds a part it cannot plan. */
  plan(planOf: (work: SandboxWork) => Plan, applied: AppliedState | undefined): Plan {
    let planned = planOf(this.work);
    while (this.refuse(planned.refused.flatMap((r) => causeProblems(r.cause, r.problem.reason)), applied, 'INVALID_REQUEST')) planned = planOf(this.work);
    return planned;
  }

  /** Where the pass stands now. */
  mark(): RefusalMark {
    return { work: this.work, count: this.refused.length };
  }

  /** Back to `mark`: what was refused since is not. */
  reset(mark: RefusalMark): void {
    this.work = mark.work;
    this.refused.length = mark.count;
  }

  /** Whether the pass refused anything since `mark`. */
  refusedSince(mark: RefusalMark): boolean {
    return this.refused.length > mark.count;
  }

  /** What it refused, without codes: what the next passes keep refused until the sandbox is taken again. */
  generations(): RefusedGeneration[] | undefined {
    return this.refused.length > 0 ? this.refused.map(({ code: _code, ...r }) => r) : undefined;
  }

  /** The outcome told what the pod gets: its wanted and desired state less what was refused, what it asked, and why. */
  tell(report: SandboxOutcome): void {
    report.wanted = this.work.wanted;
    report.desired = this.work.desired;
    if (this.refused.length === 0) return;
    // What was asked keeps its attachments counted (metrics) and their addresses for the retry.
    if (this.work.desired !== this.given.desired) report.asked = this.given.desired;
    report.refusedByPass = this.refused.map((r) => r.problem);
  }

  /** The sandbox's failure for what was refused: the pod has what it had of them, and they are tried again with its backoff. */
  error(): PodnetError | undefined {
    if (this.refused.length === 0) return undefined;
    return new PodnetError(this.refused[0]!.code, refusalMessage(this.refused.map((r) => r.problem)));
  }
}
