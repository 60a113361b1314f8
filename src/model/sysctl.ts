// Which sysctls a tenant may set in its pod's netns: net.* keys on an allowlist, nothing else.
// Namespace-wide keys are the ones a CNF needs and that cannot reach beyond the pod (forwarding,
// the port range, ICMP); per-interface keys only for eth0, all, default and the interfaces the
// same request attaches, never for an interface podnet neither manages nor was asked about.

const namespaceWide = new Set([
  'net.ipv4.ip_forward',
  'net.ipv4.ip_local_port_range',
  'net.ipv4.ip_unprivileged_port_start',
  'net.ipv4.ping_group_range',
  'net.ipv4.ip_default_ttl',
  'net.ipv4.fib_multipath_hash_policy',
  'net.ipv4.tcp_syncookies',
  'net.ipv4.tcp_keepalive_time',
  'net.ipv4.tcp_keepalive_intvl',
  'net.ipv4.tcp_keepalive_probes',
  'net.ipv4.tcp_fin_timeout',
  'net.ipv6.fib_multipath_hash_policy',
  'net.ipv6.seg6_flowlabel',
]);

const perInterface: Record<'ipv4' | 'ipv6', ReadonlySet<string>> = {
  ipv4: new Set(['forwarding', 'rp_filter', 'accept_redirects', 'send_redirects', 'accept_source_route', 'arp_ignore', 'arp_announce', 'arp_filter', 'proxy_arp', 'accept_local', 'route_localnet']),
  ipv6: new Set(['forwarding', 'accept_ra', 'accept_redirects', 'autoconf', 'disable_ipv6', 'accept_dad', 'dad_transmits', 'seg6_enabled', 'hop_limit', 'mtu']),
};

/**
 * Keys that are another spelling of one kernel knob: writing net.ipv4.ip_forward writes
 * net.ipv4.conf.all.forwarding (and every interface's), and reading either shows the one value.
 */
const aliases: Record<string, string> = { 'net.ipv4.ip_forward': 'net.ipv4.conf.all.forwarding' };

/**
 * The knob a key names, in one spelling: what requests are merged by and what an original value is
 * kept under, so that two spellings are one setting (one conflict, one original, one restore).
 */
export function sysctlKnob(name: string): string {
  return aliases[name] ?? name;
}

/** A /proc/sys path in its knob's one spelling: what an older podnet recorded under another is the same setting. */
export function sysctlKnobPath(path: string): string {
  return sysctlKnob(path.replaceAll('/', '.')).replaceAll('.', '/');
}

/** The /proc/sys path of an allowed key, of its knob's one spelling, or why it is not allowed. */
export function sysctlPath(name: string, managedInterfaces: ReadonlySet<string>): { path: string } | { reason: string } {
  if (namespaceWide.has(name)) return { path: sysctlKnob(name).replaceAll('.', '/') };
  // net.ipv4.conf.<interface>.<leaf>: the interface is everything between conf. and the last dot.
  const match = /^net\.(ipv4|ipv6)\.conf\.(.+)\.([a-z0-9_]+)$/.exec(name);
  if (!match) return { reason: `${name} is not on podnet's sysctl allowlist` };
  const [, family, dev, leaf] = match as unknown as [string, 'ipv4' | 'ipv6', string, string];
  if (!perInterface[family].has(leaf)) return { reason: `${name}: ${leaf} is not on podnet's allowlist of per-interface ${family} sysctls` };
  if (dev.includes('/')) return { reason: `${name}: interface names have no /` };
  if (!['all', 'default', 'eth0'].includes(dev) && !managedInterfaces.has(dev)) {
    return { reason: `${name}: ${dev} is not eth0 nor an interface this request attaches` };
  }
  return { path: `net/${family}/conf/${dev}/${leaf}` };
}
