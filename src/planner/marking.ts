// DSCP marking (model/marking.ts): podnet's table in the pod, written whole, in one transaction,
// when the fingerprint it carries is not the one of what it should hold (a change, or a table
// someone deleted); deleted when nothing is marked any more. Taken back, it holds what it held.
// Only interfaces podnet holds after the pass (`podnets`: its links, and those its cni Networks'
// plugins made) are marked: never one it refused to make because the pod has it already, or could
// not make.
import { markingFingerprint, markingLine, sortedMarking, type MarkingEntry } from '../model/marking.ts';
import type { Step } from '../model/step.ts';
import { emptyPart, podProblem, type Part, type PlanContext } from './part.ts';

export function planMarking(ctx: PlanContext, podnets: ReadonlySet<string>): Part<MarkingEntry> {
  const part = emptyPart<MarkingEntry>();
  const asked = [...ctx.desired.attachments, ...ctx.desired.delegated];
  const wanted = sortedMarking(asked.flatMap((a) => (a.dscp !== undefined && podnets.has(a.interface) ? [{ interface: a.interface, dscp: a.dscp }] : [])));
  const unreadable = ctx.observed.markingUnavailable;
  if (unreadable !== undefined) {
    // Nothing changes: what was marked stays recorded, to be taken back once the table reads.
    const why = `DSCP marking needs nft in the pod's network namespace: ${unreadable}`;
    for (const entry of wanted) part.problems.push(podProblem(`pod interface ${entry.interface}`, 'dscp', why));
    if (wanted.length > 0) part.unavailable = why;
    part.next.push(...(ctx.applied.marking ?? []));
    return part;
  }
  const there = ctx.observed.marking;
  // What an undo puts back: the entries the table held, as podnet last wrote them; none when it was not there.
  const held = there === undefined ? [] : sortedMarking(ctx.applied.marking ?? []);
  const step = (entries: MarkingEntry[]): Step => ({ where: ctx.pod, tool: 'nft', line: markingLine(entries), undo: { where: ctx.pod, action: 'marking', entries: held } });
  if (wanted.length === 0) {
    if (there !== undefined) part.takeBack.push(step([]));
  } else if (there !== markingFingerprint(wanted)) {
    part.apply.push(step(wanted));
  }
  part.next.push(...wanted);
  return part;
}
