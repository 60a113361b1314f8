// Interface tuning: MTU, txqueuelen, MAC, up/down, promisc of an interface in the pod (eth0 or
// one podnet attached), and the VRF it is in. Each original value is the one before podnet's
// first change, kept across passes, and restored once no request asks for that setting.
// Moving an interface into or out of a VRF makes the kernel drop its routes (but the connected
// ones, which follow it) and its IPv6 addresses: the addresses are put back in the same step
// group; the main table's routes that were not podnet's are recorded and put back when it leaves;
// podnet's own routes are the routes part's to add again (ctx.moving).
import { originKey } from '../model/desired.ts';
import { hostBridgeOf } from '../model/kinds/index.ts';
import { mainTable, routeKey } from '../model/routing.ts';
import { linkSettingNames, type AppliedTuning, type LinkSettingName, type LinkSettings, type ObservedLink, type ObservedRoute, type ResolvedRoute } from '../model/state.ts';
import { stamp, type Step } from '../model/step.ts';
import { addrLine, routeLine, settingLine } from '../model/undo.ts';
import { podMacOf } from '../model/port-security.ts';
import { cannotMake, emptyPart, podProblem, type Part, type PlanContext } from './part.ts';

/** Routes of the main table kept for one interface while it is in a VRF (the applied state's bound). */
const maxDroppedRoutes = 64;

export function planTuning(ctx: PlanContext): Part<AppliedTuning> & { moving: Set<string> } {
  const part = { ...emptyPart<AppliedTuning>(), moving: new Set<string>() };
  const { observed, applied, desired, pod } = ctx;
  const tuned = new Set(desired.tuning.map((t) => t.interface));
  for (const was of applied.tuning) {
    const link = observed.pod.get(was.interface);
    // Before the vrfs part's steps: the interface is still in the VRF the kernel shows.
    if (!tuned.has(was.interface) && link) part.takeBack.push(...restore(ctx, part, link, was, linkSettingNames, false).steps);
  }
  for (const want of desired.tuning) {
    const mark = part.apply.length;
    try {
      const link = observed.pod.get(want.interface);
      const refused = vrfRefusal(ctx, want.interface, want.settings.vrf, link);
      if (refused !== undefined) cannotMake(part, ctx, originKey.placement(want.interface), podProblem(`pod interface ${want.interface}`, 'interfaces.vrf', refused));
      const settings = refused !== undefined ? withoutVrf(want.settings) : want.settings;
      const made = ctx.creating.has(want.interface);
      if (made) {
        // Made in this pass (anew, or again in place of the one seen): tuned right after, in the
        // same pass. What it had is what its Network gave it: the MTU, and on a veth to a bridge the
        // MAC podnet gives (model/port-security.ts); its creation's undo takes the settings with it.
        const attached = desired.attachments.find((a) => a.interface === want.interface);
        for (const setting of linkSettingNames) {
          const value = settings[setting];
          if (value === undefined) continue;
          if (setting === 'vrf') part.apply.push(...vrfMove(ctx, part, want.interface, value as string, '', undefined, []).steps);
          else part.apply.push({ where: pod, tool: 'ip', line: settingLine(want.interface, setting, value) });
        }
        // Made again in place of one seen: what the request did not set on it is as the pod had it.
        const was = link ? applied.tuning.find((t) => t.interface === want.interface) : undefined;
        const original: LinkSettings = {
          ...(was?.original ?? {}),
          ...(settings.mtu !== undefined && attached?.mtu !== undefined ? { mtu: attached.mtu } : {}),
          ...(settings.mac !== undefined && attached && hostBridgeOf(attached.link) ? { mac: podMacOf(ctx.applied.containerId, want.interface) } : {}),
          ...(settings.vrf !== undefined ? { vrf: '' } : {}),
        };
        part.next.push({ interface: want.interface, original, ...(was?.dropped?.length ? { dropped: was.dropped } : {}) });
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
        const current = currentOf(ctx, link, setting, true);
        (original as Record<string, unknown>)[setting] = before[setting] ?? current;
        if (current === value) continue;
        if (setting === 'vrf') {
          const moved = vrfMove(ctx, part, want.interface, value as string, current as string, link, dropped);
          part.apply.push(...moved.steps);
          dropped = moved.dropped;
        } else part.apply.push(settingStep(pod, want.interface, setting, value, current));
      }
      // Settings asked for before but not now go back to their original.
      const restored = restore(ctx, part, link, { interface: want.interface, original: before, dropped }, linkSettingNames.filter((s) => settings[s] === undefined), true);
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
  // Bounded: what the kernel drops is kept in the applied state until the interface leaves.
  const was = ctx.applied.tuning.find((t) => t.interface === name)?.dropped ?? [];
  if (link && was.length + routesLeaving(ctx, name, was).length > maxDroppedRoutes) return `${name} has more than ${maxDroppedRoutes} routes in the main table that podnet would keep to put back when it leaves the VRF`;
  return undefined;
}

function withoutVrf(settings: LinkSettings): LinkSettings {
  const { vrf: _refused, ...rest } = settings;
  return rest;
}

/**
 * A setting as a step finds it; the VRF is the link's master. After the vrfs part's steps
 * (`afterVrfs`), a VRF it made again or deleted has let the interface go.
 */
function currentOf(ctx: PlanContext, link: ObservedLink, setting: LinkSettingName, afterVrfs: boolean): LinkSettings[LinkSettingName] {
  if (setting !== 'vrf') return link[setting];
  const master = link.master ?? '';
  const gone = ctx.vrfs.made.has(master) || (ctx.observed.pod.get(master)?.kind === 'vrf' && (ctx.applied.vrfs ?? []).some((v) => v.name === master) && !ctx.vrfs.held.has(master));
  return afterVrfs && gone ? '' : master;
}

/** Steps that put the `settings` of `link` back to what `was` recorded, and the routes it still keeps to put back. */
function restore(ctx: PlanContext, part: { moving: Set<string> }, link: ObservedLink, was: AppliedTuning, settings: readonly LinkSettingName[], afterVrfs: boolean): { steps: Step[]; dropped: ResolvedRoute[] } {
  const steps: Step[] = [];
  let dropped = was.dropped ?? [];
  for (const setting of settings) {
    const value = was.original[setting];
    const current = currentOf(ctx, link, setting, afterVrfs);
    if (value === undefined) continue;
    if (setting !== 'vrf') {
      if (value !== current) steps.push(settingStep(ctx.pod, link.name, setting, value, current));
    } else if (value !== current) {
      const moved = vrfMove(ctx, part, link.name, value as string, current as string, link, dropped);
      steps.push(...moved.steps);
      dropped = moved.dropped;
    } else if (value === '' && dropped.length > 0) {
      // Let go some other way (its VRF deleted, by hand or made again): what the kernel dropped goes back all the same.
      steps.push(...putBack(ctx, part, link.name, link, dropped));
      dropped = [];
    }
  }
  return { steps, dropped };
}

/**
 * Moves `dev` from VRF `from` to VRF `to` ("" is none), with what the kernel drops put back: its
 * IPv6 addresses at once; the main table's routes by it that were not podnet's, recorded as it
 * enters a VRF and put back as it leaves. If the pass is undone, the journal takes the move back
 * first, then puts back what it dropped (the steps before the move change nothing, their undo
 * does). Hands back what stays recorded.
 */
function vrfMove(ctx: PlanContext, part: { moving: Set<string> }, dev: string, to: string, from: string, link: ObservedLink | undefined, dropped: readonly ResolvedRoute[]): { steps: Step[]; dropped: ResolvedRoute[] } {
  const { pod } = ctx;
  part.moving.add(dev);
  const kept = [...dropped];
  const steps: Step[] = [];
  if (from === '' && to !== '' && link) {
    const leaving = routesLeaving(ctx, dev, kept);
    kept.push(...leaving);
    for (const route of leaving) steps.push({ where: pod, tool: 'ip', line: routeLine('replace', route), undo: { where: pod, action: 'route', verb: 'replace', route } });
  }
  const addresses = ipv6Of(ctx, dev, link);
  if (link) for (const address of addresses) steps.push({ where: pod, tool: 'ip', line: addrLine('replace', address, dev), undo: { where: pod, action: 'addr-add', dev, address } });
  steps.push(settingStep(pod, dev, 'vrf', to, link ? from : undefined));
  for (const address of addresses) steps.push({ where: pod, tool: 'ip', line: addrLine('replace', address, dev) });
  if (to !== '') return { steps, dropped: kept };
  steps.push(...putBack(ctx, part, dev, undefined, kept));
  return { steps, dropped: [] };
}

/** The routes recorded for `dev` put back in the main table (routes by the interface alone first: a gateway is reached by one), but those podnet adds itself; with its IPv6 addresses when `link` was let go already. */
function putBack(ctx: PlanContext, part: { moving: Set<string> }, dev: string, link: ObservedLink | undefined, routes: readonly ResolvedRoute[]): Step[] {
  part.moving.add(dev);
  const podnets = new Set(ctx.desired.routes.map(routeKey));
  const steps: Step[] = link ? ipv6Of(ctx, dev, link).map((address) => ({ where: ctx.pod, tool: 'ip', line: addrLine('replace', address, dev) })) : [];
  const byDevFirst = routes.filter((r) => !podnets.has(routeKey(r))).sort((a, b) => Number(a.via !== undefined) - Number(b.via !== undefined));
  for (const route of byDevFirst) steps.push({ where: ctx.pod, tool: 'ip', line: routeLine('replace', route) });
  return steps;
}

/** The main table's routes by `dev` the kernel drops as it enters a VRF: not the kernel's own, not podnet's, not recorded already. */
function routesLeaving(ctx: PlanContext, dev: string, recorded: readonly ResolvedRoute[]): ResolvedRoute[] {
  const known = new Set([...ctx.applied.routes, ...ctx.desired.routes, ...recorded].map(routeKey));
  return ctx.observed.routes.filter((r) => r.table === mainTable && r.dev === dev && !r.kernel && !known.has(routeKey(r))).map(resolvedOf);
}

/** The IPv6 addresses a move flushes: an attachment's are those podnet gives it (one it takes away this pass is not put back); another interface's, those it has. */
function ipv6Of(ctx: PlanContext, dev: string, link: ObservedLink | undefined): string[] {
  const attached = ctx.desired.attachments.find((a) => a.interface === dev);
  return (attached ? attached.addresses : (link?.addresses ?? [])).filter((a) => a.includes(':'));
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
