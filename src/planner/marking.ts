// DSCP marking (model/marking.ts): podnet's table in the pod, written whole, in one transaction,
// when the fingerprint it carries is not the one of what it should hold (a change, or a table
// someone deleted); deleted when nothing is marked any more. Taken back, it holds what it held.
import { markingFingerprint, markingLine, sortedMarking, type MarkingEntry } from '../model/marking.ts';
import type { Step } from '../model/step.ts';
import { emptyPart, type Part, type PlanContext } from './part.ts';

export function planMarking(ctx: PlanContext): Part<MarkingEntry> {
  const part = emptyPart<MarkingEntry>();
  const wanted = sortedMarking(ctx.desired.attachments.flatMap((a) => (a.dscp !== undefined ? [{ interface: a.interface, dscp: a.dscp }] : [])));
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
