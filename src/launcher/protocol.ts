// What the daemon and its launcher (ADR 22) say to each other over the IPC channel between them:
// nothing else reaches that channel, so these are types, not a schema.
import type { ProcessExit } from '../process.ts';

export type LauncherRequest =
  | { op: 'start'; id: number; file: string; args: readonly string[]; env: Readonly<Record<string, string>>; maxStdoutBytes: number; maxStderrBytes: number }
  | { op: 'feed'; id: number; input: string }
  | { op: 'kill'; id: number };

/** How a started process ended, or why it could not start (spawn refused it, or its exec failed). */
export type LauncherAnswer = { id: number; exit: ProcessExit } | { id: number; failed: string };
