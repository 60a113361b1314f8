// The plugin process: real stdin, environment and stdout around runPlugin. This module and what it
// imports are the executable's plugin bundle (docs/adr/0025), so nothing else loads on a pod's
// creation.
import { readSync, writeSync } from 'node:fs';
import { maxStdinBytes, runPlugin } from './plugin.ts';
import { spoolRecorder } from './recorder.ts';
import { isNamespaceFile, isNodeNetworkNamespace, namespaceIdentity } from '../netns/probe.ts';

export async function pluginMain(): Promise<void> {
  const stdin = readStdin(maxStdinBytes + 1);
  const out = await runPlugin({
    env: process.env,
    stdin,
    openRecorder: spoolRecorder,
    isNetworkNamespace: isNamespaceFile,
    isNodeNetworkNamespace,
    netnsIdentity: namespaceIdentity,
    now: () => new Date(),
  });
  if (out.stdout) writeSync(1, out.stdout);
  process.exitCode = out.exitCode;
}

/**
 * Stdin up to `limit` bytes: a runtime that sends more gets the config parse's refusal of its
 * size, not a plugin that holds all of it in memory. None (a closed descriptor) is ''.
 */
function readStdin(limit: number): string {
  const buffer = Buffer.allocUnsafe(limit);
  let length = 0;
  try {
    for (let n = 1; n > 0 && length < limit; length += n) n = readSync(0, buffer, length, limit - length, null);
  } catch {
    // A closed or unreadable descriptor ends stdin: the config parse says what is missing.
  }
  return buffer.subarray(0, length).toString('utf8');
}

// The build plays it through this bundle before taking its code cache (scripts/code-cache.ts).
export { rehearsePlugin } from './rehearsal.ts';
