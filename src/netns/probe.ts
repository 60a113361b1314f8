// Reading, never entering: whether a path is a network namespace. The file is checked, not the
// path. Two facts from the kernel, both without a process or setns:
//  - the filesystem: a namespace file, bind-mounted (/run/netns/x) or not (/proc/<pid>/ns/net),
//    lives on nsfs;
//  - the type: an opened /proc/<pid>/ns/* file's fd link reads "<type>:[<inode>]", so "mnt:[...]"
//    or "pid:[...]" is refused. A bind mount's link reads its mount path instead, and there only
//    the filesystem is known here; the daemon's setns into it (which checks the type) settles it.
// Synchronous: it runs on the plugin's path, where a thread-pool round trip costs more than the
// three system calls.
import { closeSync, openSync, readlinkSync, statfsSync } from 'node:fs';

/** The filesystem magic of nsfs (linux/magic.h). */
const NSFS_MAGIC = 0x6e736673;

export function isNetworkNamespace(path: string): boolean {
  let fd: number | undefined;
  try {
    fd = openSync(path, 'r');
    if (statfsSync(path).type !== NSFS_MAGIC) return false;
    const typed = /^([a-z_]+):\[\d+\]$/.exec(readlinkSync(`/proc/self/fd/${fd}`));
    return typed === null || typed[1] === 'net';
  } catch {
    return false;
  } finally {
    if (fd !== undefined) closeSync(fd);
  }
}
