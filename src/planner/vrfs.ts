// VRF devices in the pod (spec.vrfs): podnet makes each, up, with its table; makes it again when
// someone deletes it; and deletes only one it made, while it still is a VRF of the table podnet
// gave it. The kernel fixes a VRF's table when it is made: a new table makes it again, which lets
// its interfaces go (tuning puts them back, `remade`). Interfaces are placed in a VRF by tuning.
import { originKey } from '../model/desired.ts';
import type { ObservedLink, ResolvedVrf } from '../model/state.ts';
import { stamp } from '../model/step.ts';
import { linkDelLine, settingLine, vrfAddLine } from '../model/undo.ts';
import { cannotMake, emptyPart, podProblem, type Part, type PlanContext } from './part.ts';

/** Whether `link` is the VRF podnet made as `was`. */
function isMade(was: ResolvedVrf | undefined, link: ObservedLink | undefined): boolean {
  return was !== undefined && link?.kind === 'vrf' && link.vrfTable === was.table;
}

export function planVrfs(ctx: PlanContext): Part<ResolvedVrf> & { made: Set<string> } {
  const part = { ...emptyPart<ResolvedVrf>(), made: new Set<string>() };
  const { observed, applied, desired, pod } = ctx;
  const appliedBy = new Map((applied.vrfs ?? []).map((v) => [v.name, v]));
  const wanted = new Map(desired.vrfs.map((v) => [v.name, v]));
  for (const was of appliedBy.values()) {
    const want = wanted.get(was.name);
    if (isMade(was, observed.pod.get(was.name)) && want?.table !== was.table) part.takeBack.push({ where: pod, tool: 'ip', line: linkDelLine(was.name) });
  }
  for (const want of desired.vrfs) {
    const mark = part.apply.length;
    const link = observed.pod.get(want.name);
    const was = appliedBy.get(want.name);
    if (link && !isMade(was, link)) {
      // An attachment of the name that this pass takes back frees it: the next pass makes the VRF.
      if (applied.attachments.some((a) => a.interface === want.name) && !desired.attachments.some((a) => a.interface === want.name)) {
        part.deferred = true;
        continue;
      }
      cannotMake(part, ctx, originKey.vrf(want.name), podProblem(`VRF ${want.name}`, 'vrfs', `the pod has an interface ${want.name} that podnet did not make`));
      continue;
    }
    const making = !link || was!.table !== want.table;
    // The kernel lets two VRFs share a table, and their routes would mix: one the pod has already keeps it.
    const sharing = making ? [...observed.pod.values()].find((l) => l.kind === 'vrf' && l.vrfTable === want.table && l.name !== want.name && !appliedBy.has(l.name)) : undefined;
    if (sharing) {
      cannotMake(part, ctx, originKey.vrf(want.name), podProblem(`VRF ${want.name}`, 'vrfs', `the pod's VRF ${sharing.name}, which podnet did not make, has table ${want.table}`));
      continue;
    }
    if (making) {
      part.apply.push({ where: pod, tool: 'ip', line: vrfAddLine(want.name, want.table), undo: { where: pod, action: 'link-del', dev: want.name } });
      part.made.add(want.name);
    } else if (!link.up) {
      part.apply.push({ where: pod, tool: 'ip', line: settingLine(want.name, 'up', true) });
    }
    stamp(part.apply, mark, ctx.causeOf(originKey.vrf(want.name)));
    part.next.push({ name: want.name, table: want.table });
  }
  return part;
}
