// What each part of the planner (links, tuning, routes, sysctls) works from and hands back; the
// plan puts every part's take-back steps before any part's apply steps, so that names and
// addresses are free before they are used again.
import type { Problem } from '../model/desired.ts';
import type { AppliedState, Observed, Resolved } from '../model/state.ts';
import type { Step } from '../model/step.ts';

export interface PlanContext {
  /** Where the pod's own commands run. */
  pod: { netns: string };
  /** The pod's netns path, for commands run on the host that create a link inside the pod. */
  netns: string;
  desired: Resolved;
  observed: Observed;
  applied: AppliedState;
  /** Pod interfaces the links part makes in this pass: what tuning and sysctls may wait for. */
  creating: ReadonlySet<string>;
  /** The VRFs the pod has once the vrfs part's steps ran (held), and those it makes in this pass (made): a VRF made again has let its interfaces go. */
  vrfs: { held: ReadonlySet<string>; made: ReadonlySet<string> };
  /** Interfaces whose routes (but the connected ones) are gone by the time routes are added: made again, or moved into or out of a VRF. The routes part adds them again. */
  moving: ReadonlySet<string>;
  /** Who asked a desired thing, by its origin key (model/desired.ts originKey, routeKey, ruleKey). */
  causeOf: (key: string) => string | undefined;
}

export interface Part<T> {
  takeBack: Step[];
  apply: Step[];
  /** What podnet will have applied of this part once every step succeeded. */
  next: T[];
  problems: Problem[];
  /** Of `problems`, those of a desired thing a document asked, with who asked it: what a pass refuses a config's new generation for (ADR 17). */
  refused: PlanRefusal[];
  /** Part of the desired state waits for a next pass (it needs an interface this pass makes). */
  deferred: boolean;
  /** What the node lacks for this part (nft for port security or marking): the rest is applied, and the sandbox fails with this and is retried. */
  unavailable?: string;
}

/** A desired thing the plan cannot make, and who asked it ("PodNetworkConfig ns/x spec.routes[0]", several joined by ", "). */
export interface PlanRefusal {
  cause: string;
  problem: Problem;
}

export function emptyPart<T>(): Part<T> {
  return { takeBack: [], apply: [], next: [], problems: [], refused: [], deferred: false };
}

/** Tells `problem` of the desired thing of origin `key` (model/desired.ts originKey, routeKey, ruleKey), naming who asked it where a document did. */
export function cannotMake(part: Part<unknown>, ctx: PlanContext, key: string, problem: Problem): void {
  part.problems.push(problem);
  const cause = ctx.causeOf(key);
  if (cause !== undefined) part.refused.push({ cause, problem });
}


/** The problem's document for what the planner finds in the pod, not in a document. */
export function podProblem(what: string, field: string, reason: string): Problem {
  return { document: what, field, reason };
}
