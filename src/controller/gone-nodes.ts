// The status of a Network or PodNetworkConfig without the entries of nodes that are gone (ADR 32):
// READY and the conditions summed again from the entries that remain, with the functions every
// node's daemon sums them with (status.ts); and the gone nodes' lines in its managedFields. Pure.
import type { NetworkStatus, PodNetworkConfigStatus } from '../protocol/validate.ts';
import { nodeOfFieldManager } from '../kube/resources.ts';
import { configStatus, networkStatus } from '../status/status.ts';

export type StatusKind = 'Network' | 'PodNetworkConfig';
export type AnyStatus = PodNetworkConfigStatus | NetworkStatus;

/** What of an object names nodes: its status's entries, and the field managers of its metadata. */
export interface NodeTraces {
  status?: AnyStatus | undefined;
  managedFields?: readonly { manager?: string }[] | undefined;
}

/**
 * The nodes `object` names, by a status entry or by a node's field manager (a node writes its
 * entry as podnet/<node>, and its line in managedFields outlives the entry), that `live` does not
 * know.
 */
export function unknownNodes(object: NodeTraces, live: (node: string) => boolean): string[] {
  const named = new Set([...(object.status?.nodes ?? []).map((n) => n.name), ...(object.managedFields ?? []).flatMap((m) => nodeOfFieldManager(m.manager) ?? [])]);
  return [...named].filter((name) => !live(name));
}

/** The indexes of `managedFields` lines that are gone nodes' field managers, last first (for JSON patch removals). */
export function goneManagerLines(managedFields: readonly { manager?: string }[] | undefined, gone: ReadonlySet<string>): number[] {
  const lines = (managedFields ?? []).flatMap((m, i) => {
    const node = nodeOfFieldManager(m.manager);
    return node !== undefined && gone.has(node) ? [i] : [];
  });
  return lines.reverse();
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
