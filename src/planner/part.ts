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
  /** Who asked a desired thing, by its origin key (model/desired.ts originKey, routeKey, ruleKey). */
  causeOf: (key: string) => string | undefined;
}

export interface Part<T> {
  takeBack: Step[];
  apply: Step[];
  /** What podnet will have applied of this part once every step succeeded. */
  next: T[];
  problems: Problem[];
  /** Part of the desired state waits for a next pass (it needs an interface this pass makes). */
  deferred: boolean;
}

export function emptyPart<T>(): Part<T> {
  return { takeBack: [], apply: [], next: [], problems: [], deferred: false };
}


/** The problem's document for what the planner finds in the pod, not in a document. */
export function podProblem(what: string, field: string, reason: string): Problem {
  return { document: what, field, reason };
}
