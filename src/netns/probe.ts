// Reading, never entering: whether a path is a network namespace. The file is checked, not the
// path, with three facts from the kernel and no process or setns:
//  - statfs first, which opens nothing: a namespace file lives on nsfs (so a FIFO or a device at
//    the path is never opened);
//  - the type of /proc/<pid>/ns/* files: the opened file's fd link reads "<type>:[<inode>]";
//  - the type of a bind mount (/run/netns/x, what runtimes pass): the link reads the mount path,
//    and /proc/self/mountinfo gives the mount's root as "<type>:[<inode>]".
// Synchronous: it runs on the plugin's path, where a thread-pool round trip costs more than these
// system calls. Callers validate the path against the schema first.
import { closeSync, openSync, readFileSync, readlinkSync, realpathSync, statfsSync } from 'node:fs';

/** The filesystem magic of nsfs (linux/magic.h). */
const NSFS_MAGIC = 0x6e736673;

const namespaceType = /^([a-z_]+):\[\d+\]$/;

export function isNetworkNamespace(path: string): boolean {
  try {
    if (statfsSync(path).type !== NSFS_MAGIC) return false;
    const fd = openSync(path, 'r');
    let link: string;
    try {
      link = readlinkSync(`/proc/self/fd/${fd}`);
    } finally {
      closeSync(fd);
    }
    return (namespaceType.exec(link)?.[1] ?? mountedNamespaceType(path)) === 'net';
  } catch {
    return false;
  }
}

/** The namespace type of the mount visible at `path` ("net", "uts", ...), from mountinfo. */
function mountedNamespaceType(path: string): string | undefined {
  const mountPoint = realpathSync(path);
  let type: string | undefined;
  // Fields: id, parent, major:minor, root, mount point, ... The last mount at a point is the one
  // visible there. Paths reaching here hold no space (the schema), so no octal unescaping.
  for (const line of readFileSync('/proc/self/mountinfo', 'utf8').split('\n')) {
    const fields = line.split(' ');
    if (fields[4] === mountPoint) type = namespaceType.exec(fields[3] ?? '')?.[1];
  }
  return type;
}
