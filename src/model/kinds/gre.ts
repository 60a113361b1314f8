// The gre kind: a layer-3 GRE tunnel in the pod to a remote endpoint, over IPv6 (ip6gre) when the
// remote is an IPv6 address. The kernel's ip tunnels route in the netns they are made in, and keep
// it when moved: so the link is made on the host and moved into the pod, and its packets leave by
// the host's routes (or the underlay named), as vxlan's do.
import { isIP } from 'node:net';
import { canonicalRemote, noHostEndToShape, tunnelRemoteOf, tunnelRemoteProblems, type LinkKind } from './kind.ts';

export interface GreLink {
  kind: 'gre';
  remote: string;
  device?: string;
  key?: number;
  ttl?: number;
}

export const greKind: LinkKind<'gre', GreLink> = {
  type: 'gre',
  attachedBy: 'podnet',
  refusedAsks: () => ({ bandwidth: noHostEndToShape('gre'), mac: 'a gre link carries IP packets and has no MAC' }),
  onePerNode: 'its tunnel endpoint (remote and key) is the node\'s',
  specProblems: (network) => {
    const gre = network.spec.gre;
    const remote = tunnelRemoteProblems('gre', gre?.remote, gre?.remoteRanges);
    const overIpv6 = gre !== undefined && (isIP(gre.remote ?? '') === 6 || (gre.remoteRanges ?? []).some((r) => r.includes(':')));
    if (remote.length > 0 || !overIpv6 || gre.device) return remote;
    return [{ field: 'spec.gre.device', reason: 'a gre tunnel over IPv6 needs its underlay named: its local end is that interface\'s IPv6 address (a tunnel moved into a pod has none of its own to choose)' }];
  },
  tunnelRemote: (network) => tunnelRemoteOf('gre', network.spec.gre),
  linkSpec(network, _allocations, asked) {
    // The schema requires spec.gre on a gre Network, and its remote or remoteRanges (then the attachment's remote, kinds/index.ts).
    const g = network.spec.gre!;
    return { kind: 'gre', remote: canonicalRemote((asked?.remote ?? g.remote)!), ...(g.device ? { device: g.device } : {}), ...(g.key !== undefined ? { key: g.key } : {}), ...(g.ttl ? { ttl: g.ttl } : {}) };
  },
  making: (spec) => ({
    ...(spec.device ? { hostInterface: spec.device } : {}),
    createOnHost: (link) => {
      const family = isIP(spec.remote);
      const type = family === 6 ? 'ip6gre' : 'gre';
      // A tunnel moved into a pod picks its IPv6 source there, where it has none: an ip6gre link
      // sends only with its local address set, taken from the underlay's IPv6 addresses.
      const local = family === 6 ? link.underlayAddresses.map((a) => a.split('/')[0]!).find((a) => isIP(a) === 6) : undefined;
      if (family === 6 && local === undefined) return { problem: `the host's interface ${spec.device} has no IPv6 address for the local end of a gre tunnel to ${spec.remote}` };
      const key = spec.key !== undefined ? ` key ${spec.key}` : '';
      const ttl = spec.ttl ? ` ttl ${spec.ttl}` : '';
      const device = spec.device ? ` dev ${spec.device}` : '';
      return `link add name ${link.name}${link.mtu ? ` mtu ${link.mtu}` : ''} type ${type} remote ${spec.remote}${local ? ` local ${local}` : ''}${key}${ttl}${device}`;
    },
  }),
  describe: (spec) => `gre to ${spec.remote}${spec.key !== undefined ? ` key ${spec.key}` : ''}${spec.device ? ` over ${spec.device}` : ''}`,
};
