// The vocabulary of batches, pure: what a batch tells its caller, a batch whose process is under
// way, and which batches share a process. The runner (runner.ts) makes them, join.ts joins them,
// and the executor, given a runner, plans its large passes by them; none of the three need the
// others' code for it. It would sit in model/step.ts beside Tool and Where, were that not the
// model's: here it is the netns room's lowest file, importing nothing of the room.
import type { PodnetError } from '../errors.ts';
import type { Tool, Where } from '../model/step.ts';

export interface BatchResult {
  /** How many lines succeeded, in order. */
  done: number;
  error?: PodnetError;
  /** Each answer of the read that followed the lines (ReadAfter), when every line succeeded and so did the read. */
  read?: unknown[];
  /** The failure names no line (the tool was killed, or its message was cut): `done` counts none, though some may have run. */
  unplaced?: true;
}

/** A batch whose process is already running, waiting on stdin for its lines. */
export interface StartedBatch {
  /** Runs `lines` in order, stopping at the first that fails; hands them to the process before it first waits. Call once. */
  run(lines: readonly string[]): Promise<BatchResult>;
  /** Lets the process go without running anything. */
  cancel(): void;
}

/** Whether batches of `tool` at `where` share a process with those asked for meanwhile (join.ts): the host's ip and nft. */
export function joinsOthers(where: Where, tool: Tool): boolean {
  return where === 'host' && (tool === 'ip' || tool === 'nft');
}
