// Interface tuning: MTU, txqueuelen, MAC, up/down, promisc of an interface in the pod (eth0 or
// one podnet attached), and the VRF it is in. Each original value is the one before podnet's
// first change, kept across passes, and restored once no request asks for that setting.
// Moving an interface into or out of a VRF makes the kernel drop its routes (but the connected
// ones, which follow it) and its IPv6 addresses: the addresses are put back in the same step
// group; the main table's routes that were not podnet's are recorded and put back when it leaves;
// podnet's own routes are the routes part's to add again (ctx.moving).
import { originKey } from '../model/desired.ts';
import { hostBridgeOf } from '../model/kinds/index.ts';
import { routeKey } from '../model/routing.ts';
import { linkSettingNames, type AppliedTuning, type LinkSettingName, type LinkSettings, type ObservedLink, type ObservedRoute, type ResolvedRoute } from '../model/state.ts';
import { stamp, type Step } from '../model/step.ts';
import { addrLine, routeLine, settingLine } from '../model/undo.ts';
import { podMacOf } from '../model/port-security.ts';
import { cannotMake, emptyPart, podProblem, type Part, type PlanContext } from './part.ts';

const mainTable = 254;

export function planTuning(ctx: PlanContext): Part<AppliedTuning> & { moving: Set<string> } {
  const part = { ...emptyPart<AppliedTuning>(), moving: new Set<string>() };
  const { observed, applied, desired, pod } = ctx;
  const tuned = new Set(desired.tuning.map((t) => t.interface));
  for (const was of applied.tuning) {
    const link = observed.pod.get(was.interface);
    if (!tuned.has(was.interface) && link) part.takeBack.push(...restore(ctx, part, link, was, linkSettingNames).steps);
  }
  for (const want of desired.tuning) {
    const mark = part.apply.length;
    try {
      const link = observed.pod.get(want.interface);
      const refused = vrfRefusal(ctx, want.interface, want.settings.vrf, link);
      if (refused !== undefined) cannotMake(part, ctx, originKey.tuning(want.interface), podProblem(`pod interface ${want.interface}`, 'interfaces.vrf', refused));
      const settings = refused !== undefined ? withoutVrf(want.settings) : want.settings;
      if (!link && ctx.creating.has(want.interface)) {
        // Made in this pass: tuned right after, in the same pass. What it had is what its Network
        // gave it: the MTU, and on a veth to a bridge the MAC podnet gives (model/port-security.ts); its
        // creation's undo takes the settings with it.
        const made = desired.attachments.find((a) => a.interface === want.interface);
        for (const setting of linkSettingNames) {
          const value = settings[setting];
          if (value === undefined) continue;
          if (setting === 'vrf') part.apply.push(...vrfMove(ctx, part, want.interface, value as string, '', undefined, []).steps);
          else part.apply.push({ where: pod, tool: 'ip', line: settingLine(want.interface, setting, value) });
        }
        const original: LinkSettings = {
          ...(settings.mtu !== undefined && made?.mtu !== undefined ? { mtu: made.mtu } : {}),
          ...(settings.mac !== undefined && made && hostBridgeOf(made.link) ? { mac: podMacOf(ctx.applied.containerId, want.interface) } : {}),
          ...(settings.vrf !== undefined ? { vrf: '' } : {}),
        };
        part.next.push({ interface: want.interface, original });
        continue;
      }
      if (!link) {
        cannotMake(part, ctx, originKey.tuning(want.interface), podProblem(`pod interface ${want.interface}`, 'interfaces', `the pod has no interface ${want.interface}`));
        continue;
      }
      const was = applied.tuning.find((t) => t.interface === want.interface);
      const before = was?.original ?? {};
      const original: LinkSettings = {};
      let dropped = was?.dropped ?? [];
      for (const setting of linkSettingNames) {
        const value = settings[setting];
        if (value === undefined) continue;
        const current = currentOf(ctx, link, setting);
        (original as Record<string, unknown>)[setting] = before[setting] ?? current;
        if (current === value) continue;
        if (setting === 'vrf') {
          const moved = vrfMove(ctx, part, want.interface, value as string, current as string, link, dropped);
          part.apply.push(...moved.steps);
          dropped = moved.dropped;
        } else part.apply.push(settingStep(pod, want.interface, setting, value, current));
      }
      // Settings asked for before but not now go back to their original.
      const restored = restore(ctx, part, link, { interface: want.interface, original: before, dropped }, linkSettingNames.filter((s) => settings[s] === undefined));
      part.apply.push(...restored.steps);
      part.next.push({ interface: want.interface, original, ...(restored.dropped.length > 0 ? { dropped: restored.dropped } : {}) });
    } finally {
      // What this one thing's planning added names who asked for it: a failure says so.
      stamp(part.apply, mark, ctx.causeOf(originKey.tuning(want.interface)));
    }
  }
  return part;
}

/** Why the interface cannot be placed in VRF `vrf` (when one is asked): the vrfs part could not make it, or the interface is a port of something else. */
function vrfRefusal(ctx: PlanContext, name: string, vrf: string | undefined, link: ObservedLink | undefined): string | undefined {
  if (vrf === undefined) return undefined;
  if (!ctx.vrfs.held.has(vrf)) return `the pod has no VRF ${vrf}: podnet could not make it`;
  const master = link?.master !== undefined && !ctx.vrfs.made.has(link.master) ? ctx.observed.pod.get(link.master) : undefined;
  if (master !== undefined && master.kind !== 'vrf') return `${name} is a port of ${master.name}, which is not a VRF: podnet does not take it out`;
  return undefined;
}

function withoutVrf(settings: LinkSettings): LinkSettings {
  const { vrf: _refused, ...rest } = settings;
  return rest;
}

/** A setting as the pass finds it; the VRF is the link's master, none when the vrfs part makes that VRF again (which lets it go). */
function currentOf(ctx: PlanContext, link: ObservedLink, setting: LinkSettingName): LinkSettings[LinkSettingName] {
  if (setting !== 'vrf') return link[setting];
  const master = link.master ?? '';
  return ctx.vrfs.made.has(master) ? '' : master;
}

/** Steps that put the `settings` of `link` back to what `was` recorded, and the routes it still keeps to put back. */
function restore(ctx: PlanContext, part: { moving: Set<string> }, link: ObservedLink, was: AppliedTuning, settings: readonly LinkSettingName[]): { steps: Step[]; dropped: ResolvedRoute[] } {
  const steps: Step[] = [];
  let dropped = was.dropped ?? [];
  for (const setting of settings) {
    const value = was.original[setting];
    const current = currentOf(ctx, link, setting);
    if (value === undefined || value === current) continue;
    if (setting !== 'vrf') steps.push(settingStep(ctx.pod, link.name, setting, value, current));
    else {
      const moved = vrfMove(ctx, part, link.name, value as string, current as string, link, dropped);
      steps.push(...moved.steps);
      dropped = moved.dropped;
    }
  }
  return { steps, dropped };
}

/**
 * Moves `dev` from VRF `from` to VRF `to` ("" is none), with what the kernel drops put back: its
 * IPv6 addresses (as seen, and those its attachment is given) at once; the main table's routes by
 * it that were not podnet's, recorded as it enters a VRF and put back as it leaves (routes by the
 * interface alone first: a gateway is reached by one). Hands back what stays recorded.
 */
function vrfMove(ctx: PlanContext, part: { moving: Set<string> }, dev: string, to: string, from: string, link: ObservedLink | undefined, dropped: readonly ResolvedRoute[]): { steps: Step[]; dropped: ResolvedRoute[] } {
  const { pod } = ctx;
  part.moving.add(dev);
  const steps: Step[] = [settingStep(pod, dev, 'vrf', to, link ? from : undefined)];
  const attached = ctx.desired.attachments.find((a) => a.interface === dev)?.addresses ?? [];
  for (const address of new Set([...(link?.addresses ?? []), ...attached].filter((a) => a.includes(':')))) steps.push({ where: pod, tool: 'ip', line: addrLine('replace', address, dev) });
  let kept = [...dropped];
  if (from === '' && to !== '') {
    const podnets = new Set([...ctx.applied.routes, ...ctx.desired.routes].map(routeKey));
    const recorded = new Set(kept.map(routeKey));
    kept.push(...ctx.observed.routes.filter((r) => r.table === mainTable && r.dev === dev && !r.kernel && !podnets.has(routeKey(r)) && !recorded.has(routeKey(r))).map(resolvedOf));
  }
  if (to === '') {
    const byDevFirst = [...kept].sort((a, b) => Number(a.via !== undefined) - Number(b.via !== undefined));
    for (const route of byDevFirst) steps.push({ where: pod, tool: 'ip', line: routeLine('replace', route) });
    kept = [];
  }
  return { steps, dropped: kept };
}

/** A route as the kernel showed it, in the shape podnet adds one. */
function resolvedOf(o: ObservedRoute): ResolvedRoute {
  return {
    family: o.family,
    to: o.to,
    table: o.table,
    metric: o.metric,
    ...(o.via !== undefined ? { via: o.via } : {}),
    ...(o.dev !== undefined ? { dev: o.dev } : {}),
    ...(o.src !== undefined ? { src: o.src } : {}),
    ...(o.seg6Mode !== undefined && o.segments !== undefined ? { seg6: { mode: o.seg6Mode, segments: o.segments } } : {}),
  };
}

/**
 * Sets one setting; its undo puts back `current`, when the kernel showed one (an interface may
 * show no txqueuelen or MAC: there is nothing to put back then).
 */
function settingStep(pod: PlanContext['pod'], dev: string, setting: LinkSettingName, value: NonNullable<LinkSettings[LinkSettingName]>, current: LinkSettings[LinkSettingName]): Step {
  const line = settingLine(dev, setting, value);
  return current === undefined ? { where: pod, tool: 'ip', line } : { where: pod, tool: 'ip', line, undo: { where: pod, action: 'link-set', dev, setting, value: current } };
}
