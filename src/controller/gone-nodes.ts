// The status of a Network or PodNetworkConfig without the entries of nodes that are gone (ADR 32):
// READY and the conditions summed again from the entries that remain, with the functions every
// node's daemon sums them with (status.ts). Pure.
import type { NetworkStatus, PodNetworkConfigStatus } from '../protocol/validate.ts';
import { configStatus, networkStatus } from '../status/status.ts';

export type StatusKind = 'Network' | 'PodNetworkConfig';
export type AnyStatus = PodNetworkConfigStatus | NetworkStatus;

/** The nodes `status` has an entry of that `live` does not know. */
export function unknownNodes(status: AnyStatus | undefined, live: (node: string) => boolean): string[] {
  return (status?.nodes ?? []).map((n) => n.name).filter((name) => !live(name));
}

/**
 * `current` without the entries of `gone`, READY and the conditions summed from the rest. A
 * status whose spec has problems (Degraded for InvalidSpec) keeps its conditions: the spec's
 * problems are judged by the daemons, each of which tells them, and words them again at its next
 * round from the entries that remain.
 */
export function withoutNodes(kind: StatusKind, current: AnyStatus, gone: ReadonlySet<string>, now: string): AnyStatus {
  const remaining = { ...current, nodes: (current.nodes ?? []).filter((n) => !gone.has(n.name)) };
  // No node of theirs named '': summed over every entry that remains, none added; the generation
  // the nodes reported on stays, in the conditions too.
  const summed =
    kind === 'PodNetworkConfig'
      ? configStatus((current as PodNetworkConfigStatus).observedGeneration, undefined, remaining as PodNetworkConfigStatus, [], '', now)
      : networkStatus(undefined, remaining as NetworkStatus, [], '', now);
  const specProblems = current.conditions?.some((c) => c.type === 'Degraded' && c.status === 'True' && c.reason === 'InvalidSpec') ?? false;
  return { ...remaining, ready: summed.ready, conditions: specProblems ? current.conditions : summed.conditions } as AnyStatus;
}
