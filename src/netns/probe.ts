// Reading, never entering: whether a path is a network namespace. The file is checked, not the
// path. Two facts from the kernel, both without a process or setns:
//  - the filesystem: a namespace file, bind-mounted (/run/netns/x) or not (/proc/<pid>/ns/net),
//    lives on nsfs;
//  - the type: an opened /proc/<pid>/ns/* file's fd link reads "<type>:[<inode>]", so "mnt:[...]"
//    or "pid:[...]" is refused. A bind mount's link reads its mount path instead, and there only
//    the filesystem is known here; the daemon's setns into it (which checks the type) settles it.
import { open, readlink, statfs } from 'node:fs/promises';

/** The filesystem magic of nsfs (linux/magic.h). */
const NSFS_MAGIC = 0x6e736673;

export async function isNetworkNamespace(path: string): Promise<boolean> {
  let handle;
  try {
    handle = await open(path, 'r');
    const [fs, link] = await Promise.all([statfs(path), readlink(`/proc/self/fd/${handle.fd}`)]);
    if (fs.type !== NSFS_MAGIC) return false;
    const typed = /^([a-z_]+):\[\d+\]$/.exec(link);
    return typed === null || typed[1] === 'net';
  } catch {
    return false;
  } finally {
    await handle?.close();
  }
}

