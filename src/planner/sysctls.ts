// Sysctls of the pod's netns: set to the asked value, the value before podnet's first change
// remembered and put back once no request asks for the key.
import type { AppliedSysctl } from '../model/state.ts';
import { sysctlLine } from '../model/undo.ts';
import { sysctlKnobPath } from '../model/sysctl.ts';
import { originKey } from '../model/desired.ts';
import { cannotMake, emptyPart, podProblem, type Part, type PlanContext } from './part.ts';

export function planSysctls(ctx: PlanContext): Part<AppliedSysctl> {
  const part = emptyPart<AppliedSysctl>();
  const { observed, desired, pod } = ctx;
  const wanted = new Set(desired.sysctls.map((s) => s.path));
  // Recorded by an older podnet under another spelling of the same knob: the same setting.
  const applied = { sysctls: ctx.applied.sysctls.map((s) => ({ ...s, path: sysctlKnobPath(s.path) })) };
  for (const was of applied.sysctls) {
    const current = observed.sysctls.get(was.path);
    if (wanted.has(was.path) || current === undefined || current === was.original) continue;
    part.takeBack.push({ where: pod, tool: 'sysctl', line: sysctlLine(was.path, was.original), undo: { where: pod, action: 'sysctl', path: was.path, value: current } });
  }
  for (const want of desired.sysctls) {
    // A per-interface key of an interface this pass makes (anew, or again: what is seen is the old
    // link's) is set in the next pass, when it is there.
    const dev = /^net\/ipv[46]\/conf\/(.+)\/[a-z0-9_]+$/.exec(want.path)?.[1];
    if (dev !== undefined && ctx.creating.has(dev)) {
      part.deferred = true;
      continue;
    }
    const current = observed.sysctls.get(want.path);
    if (current === undefined) {
      cannotMake(part, ctx, originKey.sysctl(want.path), podProblem(`sysctl ${want.name}`, 'sysctls', `the pod's network namespace has no sysctl ${want.name}`));
      continue;
    }
    const before = applied.sysctls.find((s) => s.path === want.path);
    if (current !== want.value) {
      const cause = ctx.causeOf(originKey.sysctl(want.path));
      part.apply.push({ where: pod, tool: 'sysctl', line: sysctlLine(want.path, want.value), undo: { where: pod, action: 'sysctl', path: want.path, value: current }, ...(cause ? { cause } : {}) });
    }
    part.next.push({ path: want.path, value: want.value, original: before?.original ?? current });
  }
  return part;
}
