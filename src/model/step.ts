// The step vocabulary shared by the planner, the executor and the netns runner: where a command
// runs, which tool runs it, and the action that takes it back. Pure data; the runner (netns/)
// is the only code that turns a command into a process.
import type { Problem, UndoAction } from '../protocol/validate.ts';

/** Where a command runs: the host (the daemon's own netns) or a pod's netns file. */
export type Where = 'host' | { netns: string };

export const host = 'host' satisfies Where;

/**
 * ip and tc take batches; ip6 is `ip -6`, for the commands whose words do not say the family (an
 * IPv6 rule that names no address); a sysctl line is `path=value`, path under /proc/sys
 * (net/ipv4/ip_forward); nft reads a batch as one transaction (podnet's port security table).
 */
export type Tool = 'ip' | 'ip6' | 'tc' | 'sysctl' | 'nft' | 'wg';

export interface Command {
  where: Where;
  tool: Tool;
  line: string;
}

/**
 * One command and, where one exists, the action that takes it back: an action, not a command line,
 * because undo actions are journaled and read back at the next start (src/model/undo.ts renders them).
 */
export interface Step extends Command {
  undo?: UndoAction;
  /** The document and field that asked for it ("PodNetworkConfig ns/x spec.routes[0]"): what its failure names. */
  cause?: string;
}

/** Names `cause` on the steps from `from` on that name none: what one desired thing's planning added. */
export function stamp(steps: Step[], from: number, cause: string | undefined): void {
  if (cause === undefined) return;
  for (const step of steps.slice(from)) step.cause ??= cause;
}

/**
 * Who a cause names, each as a problem's document and field with `reason`: "PodNetworkConfig ns/x
 * spec.routes[0]" is document "PodNetworkConfig ns/x" and field "spec.routes[0]"; several who
 * asked one thing are joined by ", ". Neither a document name nor a field holds ", ".
 */
export function causeProblems(cause: string, reason: string): Problem[] {
  return cause.split(', ').flatMap((one) => {
    const at = one.indexOf(' ', one.indexOf(' ') + 1);
    return at > 0 ? [{ document: one.slice(0, at), field: one.slice(at + 1), reason }] : [];
  });
}

export function describeWhere(where: Where): string {
  return where === 'host' ? 'host' : `netns ${where.netns}`;
}

export function sameWhere(a: Where, b: Where): boolean {
  return a === 'host' ? b === 'host' : b !== 'host' && a.netns === b.netns;
}
