// The plugin process: real stdin, environment and stdout around runPlugin. This module and what it
// imports are the whole main script of the executable, so nothing else loads on a pod's creation.
import { readFileSync, writeSync } from 'node:fs';
import { runPlugin } from './plugin.ts';
import { spoolRecorder } from './recorder.ts';
import { isNamespaceFile, isNodeNetworkNamespace } from '../netns/probe.ts';

export async function pluginMain(): Promise<void> {
  let stdin = '';
  try {
    stdin = readFileSync(0, 'utf8');
  } catch {
    // No stdin (a closed descriptor): the config parse reports it.
  }
  const out = await runPlugin({
    env: process.env,
    stdin,
    openRecorder: spoolRecorder,
    isNetworkNamespace: isNamespaceFile,
    isNodeNetworkNamespace,
    now: () => new Date(),
  });
  if (out.stdout) writeSync(1, out.stdout);
  process.exitCode = out.exitCode;
}
