// The step vocabulary shared by the planner, the executor and the netns runner: where a command
// runs, which tool runs it, and the command that takes it back. Pure data; the runner (netns/)
// is the only code that turns a command into a process.

/** Where a command runs: the host (the daemon's own netns) or a pod's netns file. */
export type Where = 'host' | { netns: string };

export const host: Where = 'host';

/**
 * ip and tc take batches; ip6 is `ip -6`, for the commands whose words do not say the family (an
 * IPv6 rule that names no address); a sysctl line is `path=value`, path under /proc/sys
 * (net/ipv4/ip_forward).
 */
export type Tool = 'ip' | 'ip6' | 'tc' | 'sysctl';

export interface Command {
  where: Where;
  tool: Tool;
  line: string;
}

/** One command and, where one exists, the command that takes it back. */
export interface Step extends Command {
  undo?: Command;
}

export function describeWhere(where: Where): string {
  return where === 'host' ? 'host' : `netns ${where.netns}`;
}

export function sameWhere(a: Where, b: Where): boolean {
  return a === 'host' ? b === 'host' : b !== 'host' && a.netns === b.netns;
}
