// Interface tuning: MTU, txqueuelen, MAC, up/down, promisc of an interface in the pod (eth0 or
// one podnet attached). Each original value is the one before podnet's first change, kept across
// passes, and restored once no request asks for that setting.
import { linkSettingNames, type AppliedTuning, type LinkSettingName, type LinkSettings, type ObservedLink } from '../model/state.ts';
import type { Step, Where } from '../model/step.ts';
import { emptyPart, podProblem, type Part, type PlanContext } from './part.ts';

export function planTuning(ctx: PlanContext): Part<AppliedTuning> {
  const part = emptyPart<AppliedTuning>();
  const { observed, applied, desired, pod } = ctx;
  const tuned = new Set(desired.tuning.map((t) => t.interface));
  for (const was of applied.tuning) {
    const link = observed.pod.get(was.interface);
    if (!tuned.has(was.interface) && link) part.takeBack.push(...restore(pod, link, was.original, linkSettingNames));
  }
  for (const want of desired.tuning) {
    const link = observed.pod.get(want.interface);
    if (!link && ctx.creating.has(want.interface)) {
      // Made in this pass: tuned right after, in the same pass. What it had is what its Network
      // gave it, known for the MTU only; its creation's undo takes the settings with it.
      const made = desired.attachments.find((a) => a.interface === want.interface);
      for (const setting of linkSettingNames) {
        const value = want.settings[setting];
        if (value !== undefined) part.apply.push({ where: pod, tool: 'ip', line: settingLine(want.interface, setting, value) });
      }
      part.next.push({ interface: want.interface, original: want.settings.mtu !== undefined && made?.mtu !== undefined ? { mtu: made.mtu } : {} });
      continue;
    }
    if (!link) {
      part.problems.push(podProblem(`pod interface ${want.interface}`, 'interfaces', `the pod has no interface ${want.interface}`));
      continue;
    }
    const before = applied.tuning.find((t) => t.interface === want.interface)?.original ?? {};
    const original: LinkSettings = {};
    for (const setting of linkSettingNames) {
      const value = want.settings[setting];
      if (value === undefined) continue;
      const current = link[setting];
      (original as Record<string, unknown>)[setting] = before[setting] ?? current;
      if (current !== value) part.apply.push({ where: pod, tool: 'ip', line: settingLine(want.interface, setting, value), undo: { where: pod, tool: 'ip', line: settingLine(want.interface, setting, current) } });
    }
    // Settings asked for before but not now go back to their original.
    part.apply.push(...restore(pod, link, before, linkSettingNames.filter((s) => want.settings[s] === undefined)));
    part.next.push({ interface: want.interface, original });
  }
  return part;
}

/** The ip line that sets one setting; every value passed the schema (numbers, a MAC, booleans). */
function settingLine(dev: string, setting: LinkSettingName, value: LinkSettings[LinkSettingName]): string {
  switch (setting) {
    case 'mtu':
      return `link set ${dev} mtu ${value}`;
    case 'txqueuelen':
      return `link set ${dev} txqueuelen ${value}`;
    case 'mac':
      return `link set ${dev} address ${value}`;
    case 'up':
      return `link set ${dev} ${value ? 'up' : 'down'}`;
    case 'promisc':
      return `link set ${dev} promisc ${value ? 'on' : 'off'}`;
  }
}

/** Steps that put the `settings` of `link` back to `original`, where it recorded one. */
function restore(pod: Where, link: ObservedLink, original: LinkSettings, settings: readonly LinkSettingName[]): Step[] {
  const steps: Step[] = [];
  for (const setting of settings) {
    const value = original[setting];
    const current = link[setting];
    if (value === undefined || value === current) continue;
    steps.push({ where: pod, tool: 'ip', line: settingLine(link.name, setting, value), undo: { where: pod, tool: 'ip', line: settingLine(link.name, setting, current) } });
  }
  return steps;
}
