// The only code that runs commands in a network namespace: iproute2 on the host or, through
// nsenter --net=PATH, inside a pod's netns. Every command is an argv array. Batches go to
// `ip -batch -` on stdin, one process per namespace and pass; batch lines are split by ip on
// whitespace, and every name in them has passed a schema that admits no whitespace.
import { execa } from 'execa';
import { PodnetError } from '../errors.ts';

/** Where a command runs: the host (the daemon's own netns) or a pod's netns file. */
export type Where = 'host' | { netns: string };

export interface IpRunner {
  /** `ip -json ARGS` parsed. */
  json(where: Where, args: readonly string[]): Promise<unknown>;
  /**
   * Runs the lines in order, stopping at the first that fails. Resolves with the number of
   * lines that succeeded and the failure, if any.
   */
  batch(where: Where, lines: readonly string[]): Promise<{ done: number; error?: PodnetError }>;
}

function argv(where: Where, args: readonly string[]): [string, string[]] {
  return where === 'host' ? ['ip', [...args]] : ['nsenter', [`--net=${where.netns}`, '--', 'ip', ...args]];
}

export function describeWhere(where: Where): string {
  return where === 'host' ? 'host' : `netns ${where.netns}`;
}

export const iproute2: IpRunner = {
  async json(where, args) {
    const [file, list] = argv(where, ['-json', ...args]);
    const result = await execa(file, list, { reject: false });
    if (result.exitCode !== 0) {
      throw new PodnetError('IO_FAILURE', `ip ${args.join(' ')} in ${describeWhere(where)} failed: ${result.stderr.trim()}`);
    }
    return result.stdout.trim() === '' ? [] : JSON.parse(result.stdout);
  },

  async batch(where, lines) {
    if (lines.length === 0) return { done: 0 };
    const [file, list] = argv(where, ['-batch', '-']);
    const result = await execa(file, list, { input: `${lines.join('\n')}\n`, reject: false });
    if (result.exitCode === 0) return { done: lines.length };
    // ip names the failing line: "Command failed -:3".
    const failed = Number(/Command failed -:(\d+)/.exec(result.stderr)?.[1] ?? 1);
    const line = lines[failed - 1] ?? '';
    const message = result.stderr.split('\n').filter((l) => !l.startsWith('Command failed')).join(' ').trim();
    return { done: failed - 1, error: new PodnetError('IO_FAILURE', `ip ${line} in ${describeWhere(where)}: ${message}`) };
  },
};
