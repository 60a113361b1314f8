// The planner: a pure function of (desired, observed, applied) to ordered steps. Nothing here
// runs a command or reads a file; the executor runs the steps, `podnet diff` prints them.
// Order: take back what is no longer wanted, most dependent first (rules, routes, sysctls,
// tuning, VRFs, then links, which frees names and addresses); then apply in the reverse order:
// links, VRFs, tuning (which places interfaces in VRFs), sysctls, routes (which may leave by a
// link made just before), rules. DSCP marking, by
// interface name, goes first when taken back and last when applied.
import type { Problem } from '../model/desired.ts';
import { emptyApplied, type AppliedState, type Observed, type Resolved } from '../model/state.ts';
import type { Step } from '../model/step.ts';
import { planLinks } from './links.ts';
import { planMarking } from './marking.ts';
import type { Part, PlanContext, PlanRefusal } from './part.ts';
import { planRoutes, planRules } from './routes.ts';
import { planSysctls } from './sysctls.ts';
import { planTuning } from './tuning.ts';
import { planVrfs } from './vrfs.ts';

export interface PlanInput {
  containerId: string;
  netns: string;
  desired: Resolved;
  observed: Observed;
  applied: AppliedState | undefined;
  /** Who asked each desired thing (DesiredSandbox.origins): stamped on its steps. */
  origins?: ReadonlyMap<string, string>;
  /** The pod interfaces its cni Networks' plugins made (their ADD answered): marked as podnet's own links are. */
  pluginsMade?: ReadonlySet<string>;
}

export interface Plan {
  steps: Step[];
  /** Part of the desired state waits for a next pass (it needs an interface this pass makes). */
  deferred: boolean;
  /** What the node lacks for part of the desired state (nft for port security or marking): the first part that says so; the rest is applied, and the sandbox fails with this and is retried. */
  unavailable?: string;
  /** What podnet will have applied once every step succeeded. */
  next: AppliedState;
  problems: Problem[];
  /** Of `problems`, those of what a document asked, with who asked it. */
  refused: PlanRefusal[];
}

export function plan(input: PlanInput): Plan {
  const base: PlanContext = {
    pod: { netns: input.netns },
    netns: input.netns,
    desired: input.desired,
    observed: input.observed,
    applied: input.applied ?? emptyApplied(input.containerId, input.netns),
    creating: new Set(),
    vrfs: { held: new Set(), made: new Set() },
    moving: new Set(),
    causeOf: (key) => input.origins?.get(key),
  };
  const links = planLinks(base);
  const vrfs = planVrfs(base);
  const ctx: PlanContext = { ...base, creating: new Set([...links.creates, ...vrfs.made]), vrfs: { held: new Set(vrfs.next.map((v) => v.name)), made: vrfs.made } };
  const tuning = planTuning(ctx);
  const sysctls = planSysctls(ctx);
  // A link made again, or moved into or out of a VRF, has lost its routes by the time routes are added.
  const routes = planRoutes({ ...ctx, moving: new Set([...tuning.moving, ...links.remade]) });
  const rules = planRules(ctx);
  const marking = planMarking(ctx, new Set([...links.next.map((a) => a.interface), ...(input.pluginsMade ?? [])]));
  const parts: Part<unknown>[] = [links, vrfs, tuning, sysctls, routes, rules, marking];
  const unavailable = parts.find((p) => p.unavailable !== undefined)?.unavailable;
  return {
    steps: [...[...parts].reverse().flatMap((p) => p.takeBack), ...parts.flatMap((p) => p.apply)],
    deferred: parts.some((p) => p.deferred),
    ...(unavailable !== undefined ? { unavailable } : {}),
    problems: parts.flatMap((p) => p.problems),
    refused: parts.flatMap((p) => p.refused),
    next: {
      containerId: input.containerId,
      netns: input.netns,
      attachments: links.next,
      ...(vrfs.next.length > 0 ? { vrfs: vrfs.next } : {}),
      tuning: tuning.next,
      routes: routes.next,
      rules: rules.next,
      sysctls: sysctls.next,
      ...(marking.next.length > 0 ? { marking: marking.next } : {}),
    },
  };
}
