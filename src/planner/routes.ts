// Routes and policy rules in the pod: podnet adds the ones asked for, changes them in place when
// the request changes, puts back one that drifted, and deletes only the ones it added. A route or
// rule already there that podnet did not add is never taken over: that is a problem to report.
import { routeKey, ruleKey } from '../model/routing.ts';
import type { ObservedRoute, ObservedRule, ResolvedRoute, ResolvedRule } from '../model/state.ts';
import type { Step } from '../model/step.ts';
import { routeLine, ruleLine, ruleTool } from '../model/undo.ts';
import { cannotMake, emptyPart, podProblem, type Part, type PlanContext } from './part.ts';

function sameRoute(a: ResolvedRoute, b: ResolvedRoute): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

/** Whether the kernel's route still is what podnet asked for (what the kernel shows of it). */
function routeHolds(o: ObservedRoute, r: ResolvedRoute): boolean {
  return (
    (o.via ?? '') === (r.via ?? '') &&
    (!r.dev || o.dev === r.dev) &&
    (o.src ?? '') === (r.src ?? '') &&
    o.seg6Mode === r.seg6?.mode &&
    (o.segments ?? []).join(',') === (r.seg6?.segments ?? []).join(',')
  );
}

function ruleHolds(o: ObservedRule, r: ResolvedRule): boolean {
  return o.table === r.table && o.from === r.from && o.to === r.to && o.fwmark === r.fwmark;
}

export function planRoutes(ctx: PlanContext): Part<ResolvedRoute> {
  const part = emptyPart<ResolvedRoute>();
  const { observed, applied, desired, pod } = ctx;
  // An interface moved into or out of a VRF in this pass has lost its routes by then, but the connected ones.
  const observedBy = new Map(observed.routes.filter((o) => o.kernel === true || o.dev === undefined || !ctx.moving.has(o.dev)).map((o) => [routeKey(o), o]));
  const appliedBy = new Map(applied.routes.map((r) => [routeKey(r), r]));
  const wanted = new Set(desired.routes.map(routeKey));
  const interfaces = new Set([...observed.pod.keys(), ...ctx.creating]);
  for (const [key, was] of appliedBy) {
    if (!wanted.has(key) && observedBy.has(key)) {
      part.takeBack.push({ where: pod, tool: 'ip', line: routeLine('del', was), undo: { where: pod, action: 'route', verb: 'add', route: was } });
    }
  }
  for (const want of desired.routes) {
    const key = routeKey(want);
    const now = observedBy.get(key);
    const was = appliedBy.get(key);
    const what = `route to ${want.to} in table ${want.table}`;
    if (now && !was) {
      cannotMake(part, ctx, key, podProblem(what, 'routes', `the pod already has a ${what} that podnet did not add`));
      continue;
    }
    if (want.dev && !interfaces.has(want.dev)) {
      cannotMake(part, ctx, key, podProblem(what, 'routes.dev', `the pod has no interface ${want.dev}`));
      continue;
    }
    const cause = ctx.causeOf(key);
    const step = (verb: 'add' | 'replace', undoVerb: 'del' | 'replace', back: ResolvedRoute): Step => ({
      where: pod,
      tool: 'ip',
      line: routeLine(verb, want),
      undo: { where: pod, action: 'route', verb: undoVerb, route: back },
      ...(cause ? { cause } : {}),
    });
    if (!now) part.apply.push(step('add', 'del', want));
    else if (!routeHolds(now, want) || (was && !sameRoute(was, want))) part.apply.push(step('replace', 'replace', was ?? want));
    part.next.push(want);
  }
  return part;
}

export function planRules(ctx: PlanContext): Part<ResolvedRule> {
  const part = emptyPart<ResolvedRule>();
  const { observed, applied, desired, pod } = ctx;
  const observedBy = new Map<string, ObservedRule[]>();
  for (const o of observed.rules) observedBy.set(ruleKey(o), [...(observedBy.get(ruleKey(o)) ?? []), o]);
  const appliedBy = new Map(applied.rules.map((r) => [ruleKey(r), r]));
  const wanted = new Map(desired.rules.map((r) => [ruleKey(r), r]));
  const step = (r: ResolvedRule, verb: 'add' | 'del'): Step => ({ where: pod, tool: ruleTool(r), line: ruleLine(verb, r), undo: { where: pod, action: 'rule', verb: verb === 'add' ? 'del' : 'add', rule: r } });
  for (const [key, was] of appliedBy) {
    const want = wanted.get(key);
    const there = (observedBy.get(key) ?? []).some((o) => ruleHolds(o, was));
    // Gone, or changed: the old rule goes first (a rule is replaced by delete and add).
    if (there && (!want || JSON.stringify(want) !== JSON.stringify(was))) part.takeBack.push(step(was, 'del'));
  }
  for (const want of desired.rules) {
    const key = ruleKey(want);
    const now = observedBy.get(key) ?? [];
    const was = appliedBy.get(key);
    if (now.length > 0 && !was) {
      cannotMake(part, ctx, key, podProblem(`IPv${want.family} rule at priority ${want.priority}`, 'rules', `the pod already has an IPv${want.family} rule at priority ${want.priority} that podnet did not add`));
      continue;
    }
    const cause = ctx.causeOf(key);
    if (!now.some((o) => ruleHolds(o, want))) part.apply.push({ ...step(want, 'add'), ...(cause ? { cause } : {}) });
    part.next.push(want);
  }
  return part;
}
