// The geneve kind: a layer-2 Geneve tunnel in the pod to a remote endpoint; made from the host
// straight into the pod, so its packets leave by the host's routes, as vxlan's do.
import { canonicalRemote, mtuArgument, noHostEndToShape, tunnelRemoteOf, tunnelRemoteProblems, type LinkKind } from './kind.ts';

export interface GeneveLink {
  kind: 'geneve';
  vni: number;
  remote: string;
  port: number;
  ttl?: number;
}

export const geneveKind: LinkKind<'geneve', GeneveLink> = {
  type: 'geneve',
  attachedBy: 'podnet',
  refusedAsks: () => ({ bandwidth: noHostEndToShape('geneve') }),
  specProblems: (network) => tunnelRemoteProblems('geneve', network.spec.geneve?.remote, network.spec.geneve?.remoteRanges),
  onePerNode: 'its tunnel endpoint (VNI, remote and port) is the node\'s',
  tunnelRemote: (network) => tunnelRemoteOf('geneve', network.spec.geneve),
  linkSpec(network, _allocations, asked) {
    // The schema requires spec.geneve on a geneve Network, and its remote or remoteRanges (then the attachment's remote, kinds/index.ts).
    const g = network.spec.geneve!;
    return { kind: 'geneve', vni: g.vni, remote: canonicalRemote((asked?.remote ?? g.remote)!), port: g.port ?? 6081, ...(g.ttl ? { ttl: g.ttl } : {}) };
  },
  making: (spec) => ({
    // Its VNI, remote and port may be the old link's (a new ttl): the host's socket holds them.
    besideOld: () => false,
    createInPod: (pod) => `link add name ${pod.interface} netns ${pod.netns}${mtuArgument(pod)} type geneve id ${spec.vni} remote ${spec.remote} dstport ${spec.port}${spec.ttl ? ` ttl ${spec.ttl}` : ''}`,
  }),
  describe: (spec) => `geneve ${spec.vni} to ${spec.remote} port ${spec.port}`,
};
