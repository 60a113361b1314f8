// Where things are: defaults shared by the plugin config, the daemon and the CLI, the socket's
// HTTP routes, and the layout of the state directory.

export const defaultSocketPath = '/run/podnet/podnet.sock';
export const defaultStateDir = '/var/lib/podnet';
export const defaultTimeoutMs = 1000;
/**
 * How long ADD waits for the daemon's first pass of its sandbox (docs/adr/0028): past what a busy
 * node's daemon takes (a resync of 500 sandboxes converges in about 4 s), far below the kubelet's
 * bound on a sandbox's creation (its runtime request timeout, 2 minutes).
 */
export const defaultFirstPassTimeoutMs = 5000;
/** Standalone mode's documents: what `podnet apply` writes and `podnet daemon --config-dir` follows. */
export const defaultConfigDir = '/etc/podnet/config.d';
/** The runtime's CNI dirs, where `podnet install` puts podnet and cni Networks' plugins are found. */
export const defaultCniBinDir = '/opt/cni/bin';
export const defaultCniConfDir = '/etc/cni/net.d';
/**
 * How long a cni Network's plugin may take: longer than any reference plugin (DHCP's first lease
 * takes seconds), short enough that a hung one does not hold its sandbox for long.
 */
export const defaultPluginTimeoutMs = 30_000;

/** The socket's routes. Versioned so a newer daemon can keep answering an older plugin. */
export const routes = {
  healthz: '/healthz',
  readyz: '/readyz',
  status: '/v1/status',
  attachments: '/v1/attachments',
  gc: '/v1/gc',
  sandboxes: '/v1/sandboxes',
  diff: '/v1/diff',
} as const;

export function attachmentRoute(key: { containerId: string; ifname: string }): string {
  return `${routes.attachments}/${encodeURIComponent(key.containerId)}/${encodeURIComponent(key.ifname)}`;
}

/** Where ADD asks for its sandbox's first pass (docs/adr/0028). */
export function firstPassRoute(key: { containerId: string; ifname: string }): string {
  return `${attachmentRoute(key)}/first-pass`;
}

/** Folders of the state directory. */
export const stateLayout = {
  /** One file per attachment record. */
  records: 'records',
  /** The plugins' changes, in order, until the daemon has applied them (docs/adr/0003). */
  spool: 'spool',
  /** Files found corrupt, set aside for a human. */
  quarantine: 'quarantine',
  /** What podnet has applied to each sandbox, and host-objects.json: the bridges it made. */
  applied: 'applied',
  /** Runtime networks' address allocations, one file per Network. */
  ipam: 'ipam',
  /** The steps of a pass under way, undone at start when a crash cut it short. */
  journal: 'journal',
  /**
   * Delegated plugins' attachments: the config ADD ran and its result, per (container, interface);
   * durable and kept across boots (docs/adr/0011), since the plugins' own state (host-local's
   * addresses) outlives the kernel's.
   */
  delegated: 'delegated',
  /**
   * Hints for the plugin (docs/adr/0028): an empty file per pod of this node, by UID, that asks
   * podnet for nothing, and `_all` while no document can ask anything of any pod: their ADD does
   * not wait for a first pass. The daemon's alone to write; absent, the plugin asks the daemon.
   */
  quietPods: 'quiet-pods',
  /**
   * The ResourceClaims the kubelet had podnet prepare (docs/adr/0033), one file per claim UID, kept
   * across restarts and boots until the kubelet unprepares it: a prepared claim is never forgotten.
   */
  claims: 'claims',
  /**
   * The private keys of the pods' WireGuard interfaces (docs/adr/0037), one file per attachment:
   * kernel-mirroring, dropped with an earlier boot's sandboxes.
   */
  wireguard: 'wireguard',
} as const;

/**
 * A Kubernetes object UID as podnet's records and state files take one (schemas: PodIdentity.uid,
 * ClaimUid): what may name a file in quiet-pods/ or claims/.
 */
export const objectUid = /^[a-zA-Z0-9-]{1,64}$/;

/** In stateLayout.quietPods: every pod is quiet ('_' is in no pod UID). */
export const allPodsQuiet = '_all';

/** The boot that wrote the state dir's kernel-mirroring state (src/registry/boot.ts). */
export const bootIdFile = 'boot-id';

/** The state dir's own file of the host objects podnet made (bridges). */
export const hostObjectsFile = 'host-objects.json';

/**
 * The file name of an attachment's record. A container id cannot hold '@' (the spec restricts it
 * to alphanumerics, '_', '.', '-'), so the name is unambiguous; the ifname holds no '/'.
 */
export function recordFileName(key: { containerId: string; ifname: string }): string {
  return `${key.containerId}@${key.ifname}.json`;
}
