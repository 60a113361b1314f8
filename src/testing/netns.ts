// A network namespace that is not the node's, for unit tests that need a live one (the node's own
// is never a sandbox's, so /proc/self/ns/net will not do): a sleeping process unshared into a
// netns of its own, user namespace included so that no root is needed. Ended when the test
// process exits.
import { spawn } from 'node:child_process';
import { readlinkSync } from 'node:fs';

let path: string | undefined;

/** The path of a live network namespace of this test process's own (/proc/<pid>/ns/net). */
export function podNetns(): string {
  if (path) return path;
  const child = spawn('unshare', ['--map-root-user', '--net', 'sleep', '3600'], { stdio: 'ignore' });
  child.unref();
  process.on('exit', () => child.kill('SIGKILL'));
  const ours = readlinkSync('/proc/self/ns/net');
  const deadline = Date.now() + 5000;
  // Synchronous on purpose: test fixtures are built at module load. The child unshares in a few ms.
  while (Date.now() < deadline) {
    try {
      if (readlinkSync(`/proc/${child.pid}/ns/net`) !== ours) return (path = `/proc/${child.pid}/ns/net`);
    } catch {
      // Not started yet.
    }
    Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 5);
  }
  throw new Error('unshare --map-root-user --net did not make a netns in 5 s');
}
