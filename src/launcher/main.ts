// The launcher's side (ADR 22): a small child of the daemon that starts the daemon's tools (ip,
// tc, nft, nsenter, grep, sysctl) for it, so that the daemon never forks itself. Requests come
// on the IPC channel the daemon opened, and only there; each is a start, its input or a kill.
// It ends when the channel does: its parent is gone.
import { startProcess, type ProcessExit, type StartedProcess } from '../process.ts';
import type { LauncherAnswer, LauncherRequest } from './protocol.ts';

export function launcherMain(): void {
  const send = process.send?.bind(process);
  if (!send) {
    process.stderr.write('podnet: PODNET_LAUNCHER is set, but there is no daemon to launch for (the launcher runs only as the daemon\'s child)\n');
    process.exitCode = 2;
    return;
  }
  // What it starts gets the environment each request gives; this mark is for this process alone.
  delete process.env['PODNET_LAUNCHER'];
  const running = new Map<number, StartedProcess>();
  // An answer that cannot be sent (the daemon went as it was written) is dropped: the launcher ends with the channel.
  const answer = (a: LauncherAnswer) => {
    if (process.connected) send(a, undefined, undefined, () => undefined);
  };
  // A stop sent to the whole process group (Ctrl-C, a service manager) is the daemon's to act on:
  // the launcher serves its last steps and ends when the daemon does, with the channel.
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.on(signal, () => undefined);
  process.on('message', (message: LauncherRequest) => {
    const { id } = message;
    if (message.op === 'start') {
      let started: StartedProcess;
      try {
        started = startProcess(message.file, message.args, { env: message.env, maxStdoutBytes: message.maxStdoutBytes, maxStderrBytes: message.maxStderrBytes });
      } catch (err) {
        answer({ id, failed: (err as Error).message });
        return;
      }
      running.set(id, started);
      started.exited.then(
        (exit: ProcessExit) => answer({ id, exit }),
        (err: unknown) => answer({ id, failed: (err as Error).message }),
      ).finally(() => running.delete(id));
    } else if (message.op === 'feed') running.get(id)?.feed(message.input);
    else if (message.op === 'kill') running.get(id)?.kill();
  });
  // The daemon is gone: what runs finishes on its own (each tool is short and bounded).
  process.on('disconnect', () => process.exit(0));
}
