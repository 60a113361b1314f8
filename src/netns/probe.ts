// Reading, never entering: whether a path is a network namespace. The file is checked, not the
// path, with three facts from the kernel and no process or setns:
//  - statfs first, which opens nothing: a namespace file lives on nsfs (so a FIFO or a device at
//    the path is never opened);
//  - the type of /proc/<pid>/ns/* files: the opened file's fd link reads "<type>:[<inode>]";
//  - the type of a bind mount (/run/netns/x, what runtimes pass): the link reads the mount path,
//    and /proc/self/mountinfo gives the mount's root as "<type>:[<inode>]".
// The plugin, on every pod creation, stops before the last step (isNamespaceFile): mountinfo grows
// with the node's mounts (hundreds on a kubelet node) and its read showed in bench/plugin-add; a
// runtime handing over a bind-mounted namespace of another type is broken beyond what the plugin
// could fix. The daemon, which reports and later enters namespaces, checks fully.
// Synchronous: a thread-pool round trip costs more than these system calls. Callers validate the
// path against the schema first.
import { closeSync, openSync, readFileSync, readlinkSync, realpathSync, statfsSync, statSync } from 'node:fs';

/** The filesystem magic of nsfs (linux/magic.h). */
const NSFS_MAGIC = 0x6e736673;

const namespaceType = /^([a-z_]+):\[\d+\]$/;

/** The node's own network namespaces: this process's (the daemon and the plugin run in the host's) and init's. */
const nodeNetworkNamespaces = ['/proc/self/ns/net', '/proc/1/ns/net'];

/**
 * Whether `path` is the node's own network namespace, by the namespace's device and inode (what a
 * bind mount of it shows too). Never a sandbox's: a record naming it would have podnet change the
 * node's interfaces, routes and sysctls on a tenant's request. stat opens nothing.
 */
export function isNodeNetworkNamespace(path: string): boolean {
  let target;
  try {
    target = statSync(path);
  } catch {
    return false;
  }
  return nodeNetworkNamespaces.some((own) => {
    try {
      const ns = statSync(own);
      return ns.dev === target.dev && ns.ino === target.ino;
    } catch {
      return false;
    }
  });
}

/**
 * The identity of the namespace at `path`: its device and inode ("<dev>:<ino>"), the same through
 * a bind mount and through /proc/<pid>/ns/net; undefined when there is nothing there. stat opens
 * nothing.
 */
export function namespaceIdentity(path: string): string | undefined {
  try {
    const { dev, ino } = statSync(path, { bigint: true });
    return `${dev}:${ino}`;
  } catch {
    return undefined;
  }
}

/** Whether `path` is a network namespace: on nsfs and of type net. */
export function isNetworkNamespace(path: string): boolean {
  return networkNamespaceCheck()(path);
}

/**
 * What a look at a path told: a network namespace; something else or nothing (the namespace is
 * gone); or nothing certain, when the kernel refused a read (out of file descriptors, mountinfo
 * unreadable). The daemon takes back a sandbox only on the second: what a pod has must not go
 * because a look failed.
 */
export type NamespaceSight = 'net' | 'not-net' | 'unsure';

/**
 * isNetworkNamespace for many paths at once (every sandbox of a pass): mountinfo, which grows
 * with the node's mounts, is read once, by the first path that needs it.
 */
export function networkNamespaceCheck(): (path: string) => boolean {
  const sight = networkNamespaceSight();
  return (path) => sight(path) === 'net';
}

/**
 * networkNamespaceCheck, telling a namespace that is not there from one that could not be looked
 * at. With `identity` (namespaceIdentity when its sandbox was made), a path that names another
 * namespace now is not there: a /proc/<pid>/ns/net path whose pid another process has since.
 */
export function networkNamespaceSight(): (path: string, identity?: string) => NamespaceSight {
  let mounts: ReadonlyMap<string, string | undefined> | undefined;
  return (path, identity) => {
    try {
      const type = linkedType(path) ?? (mounts ??= mountedNamespaceTypes(readFileSync('/proc/self/mountinfo', 'utf8'))).get(realpathSync(path));
      if (identity !== undefined && namespaceIdentity(path) !== identity) return 'not-net';
      // The node's own is no sandbox's netns, whatever a record says (see isNodeNetworkNamespace).
      return type === 'net' && !isNodeNetworkNamespace(path) ? 'net' : 'not-net';
    } catch (err) {
      return err instanceof NotOnNsfs || isAbsence(err) ? 'not-net' : 'unsure';
    }
  };
}

/**
 * Whether `path` is a namespace file that is not known to be of another type than net: on nsfs,
 * and of type net where its fd link names the type. The plugin's check (see above).
 */
export function isNamespaceFile(path: string): boolean {
  try {
    const type = linkedType(path);
    return type === undefined || type === 'net';
  } catch {
    return false;
  }
}

/** A path that is there but is no namespace file. */
class NotOnNsfs extends Error {}

/** Errors that say the path is not there: the namespace's mount and file are gone. */
function isAbsence(err: unknown): boolean {
  const code = (err as NodeJS.ErrnoException).code;
  return code === 'ENOENT' || code === 'ENOTDIR';
}

/** The type the fd link names, undefined for a bind mount; throws when `path` is not on nsfs. */
function linkedType(path: string): string | undefined {
  if (statfsSync(path).type !== NSFS_MAGIC) throw new NotOnNsfs(`${path} is not on nsfs`);
  const fd = openSync(path, 'r');
  try {
    return namespaceType.exec(readlinkSync(`/proc/self/fd/${fd}`))?.[1];
  } finally {
    closeSync(fd);
  }
}

/** The namespace type of the mount visible at each mount point ("net", "uts", ...), from mountinfo's text. */
function mountedNamespaceTypes(mountinfo: string): Map<string, string | undefined> {
  const types = new Map<string, string | undefined>();
  // Fields: id, parent, major:minor, root, mount point, ... The last mount at a point is the one
  // visible there. Paths reaching here hold no space (the schema), so no octal unescaping. Read
  // into a map once: every netns is a mount, so a look per path would be the pods squared.
  for (const line of mountinfo.split('\n')) {
    const fields = line.split(' ');
    if (fields[4] !== undefined) types.set(fields[4], namespaceType.exec(fields[3] ?? '')?.[1]);
  }
  return types;
}
