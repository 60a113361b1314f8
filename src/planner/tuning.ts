// Interface tuning: MTU, txqueuelen, MAC, up/down, promisc of an interface in the pod (eth0 or
// one podnet attached). Each original value is the one before podnet's first change, kept across
// passes, and restored once no request asks for that setting.
import { originKey } from '../model/desired.ts';
import { hostBridgeOf } from '../model/kinds/index.ts';
import { linkSettingNames, type AppliedTuning, type LinkSettingName, type LinkSettings, type ObservedLink } from '../model/state.ts';
import { stamp, type Step } from '../model/step.ts';
import { settingLine } from '../model/undo.ts';
import { podMacOf } from '../model/port-security.ts';
import { cannotMake, emptyPart, podProblem, type Part, type PlanContext } from './part.ts';

export function planTuning(ctx: PlanContext): Part<AppliedTuning> {
  const part = emptyPart<AppliedTuning>();
  const { observed, applied, desired, pod } = ctx;
  const tuned = new Set(desired.tuning.map((t) => t.interface));
  for (const was of applied.tuning) {
    const link = observed.pod.get(was.interface);
    if (!tuned.has(was.interface) && link) part.takeBack.push(...restore(pod, link, was.original, linkSettingNames));
  }
  for (const want of desired.tuning) {
    const mark = part.apply.length;
    try {
      const link = observed.pod.get(want.interface);
      if (!link && ctx.creating.has(want.interface)) {
        // Made in this pass: tuned right after, in the same pass. What it had is what its Network
        // gave it: the MTU, and on a veth to a bridge the MAC podnet gives (model/port-security.ts); its
        // creation's undo takes the settings with it.
        const made = desired.attachments.find((a) => a.interface === want.interface);
        for (const setting of linkSettingNames) {
          const value = want.settings[setting];
          if (value !== undefined) part.apply.push({ where: pod, tool: 'ip', line: settingLine(want.interface, setting, value) });
        }
        const original: LinkSettings = {
          ...(want.settings.mtu !== undefined && made?.mtu !== undefined ? { mtu: made.mtu } : {}),
          ...(want.settings.mac !== undefined && made && hostBridgeOf(made.link) ? { mac: podMacOf(ctx.applied.containerId, want.interface) } : {}),
        };
        part.next.push({ interface: want.interface, original });
        continue;
      }
      if (!link) {
        cannotMake(part, ctx, originKey.tuning(want.interface), podProblem(`pod interface ${want.interface}`, 'interfaces', `the pod has no interface ${want.interface}`));
        continue;
      }
      const before = applied.tuning.find((t) => t.interface === want.interface)?.original ?? {};
      const original: LinkSettings = {};
      for (const setting of linkSettingNames) {
        const value = want.settings[setting];
        if (value === undefined) continue;
        const current = link[setting];
        (original as Record<string, unknown>)[setting] = before[setting] ?? current;
        if (current !== value) part.apply.push(settingStep(pod, want.interface, setting, value, current));
      }
      // Settings asked for before but not now go back to their original.
      part.apply.push(...restore(pod, link, before, linkSettingNames.filter((s) => want.settings[s] === undefined)));
      part.next.push({ interface: want.interface, original });
    } finally {
      // What this one thing's planning added names who asked for it: a failure says so.
      stamp(part.apply, mark, ctx.causeOf(originKey.tuning(want.interface)));
    }
  }
  return part;
}

/** Steps that put the `settings` of `link` back to `original`, where it recorded one. */
function restore(pod: PlanContext['pod'], link: ObservedLink, original: LinkSettings, settings: readonly LinkSettingName[]): Step[] {
  const steps: Step[] = [];
  for (const setting of settings) {
    const value = original[setting];
    const current = link[setting];
    if (value === undefined || value === current) continue;
    steps.push(settingStep(pod, link.name, setting, value, current));
  }
  return steps;
}

/**
 * Sets one setting; its undo puts back `current`, when the kernel showed one (an interface may
 * show no txqueuelen or MAC: there is nothing to put back then).
 */
function settingStep(pod: PlanContext['pod'], dev: string, setting: LinkSettingName, value: NonNullable<LinkSettings[LinkSettingName]>, current: LinkSettings[LinkSettingName]): Step {
  const line = settingLine(dev, setting, value);
  return current === undefined ? { where: pod, tool: 'ip', line } : { where: pod, tool: 'ip', line, undo: { where: pod, action: 'link-set', dev, setting, value: current } };
}
