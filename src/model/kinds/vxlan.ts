// The vxlan kind: a VXLAN tunnel endpoint in the pod, to a remote or a multicast group, over an
// underlay device when one is named; made from the host straight into the pod.
import { mtuArgument, noHostEndToShape, type LinkKind } from './kind.ts';

export interface VxlanLink {
  kind: 'vxlan';
  vni: number;
  remote?: string;
  group?: string;
  port: number;
  device?: string;
}

export const vxlanKind: LinkKind<'vxlan', VxlanLink> = {
  type: 'vxlan',
  attachedBy: 'podnet',
  refusedAsks: () => ({ bandwidth: noHostEndToShape('vxlan') }),
  specProblems: () => [],
  onePerNode: 'its tunnel endpoint (VNI and port) is the node\'s',
  linkSpec(network) {
    // The schema requires spec.vxlan on a vxlan Network.
    const v = network.spec.vxlan!;
    return { kind: 'vxlan', vni: v.vni, port: v.port ?? 4789, ...(v.remote ? { remote: v.remote } : {}), ...(v.group ? { group: v.group } : {}), ...(v.device ? { device: v.device } : {}) };
  },
  making: (spec) => ({
    ...(spec.device ? { hostInterface: spec.device } : {}),
    // Its VNI and port may be the old link's (a new remote): the host's socket holds them.
    besideOld: () => false,
    createInPod: (pod) => {
      const peer = spec.remote ? ` remote ${spec.remote}` : spec.group ? ` group ${spec.group}` : '';
      const device = spec.device ? ` dev ${spec.device}` : '';
      return `link add name ${pod.interface} netns ${pod.netns}${mtuArgument(pod)} type vxlan id ${spec.vni}${peer} dstport ${spec.port}${device}`;
    },
  }),
  describe: (spec) => `vxlan ${spec.vni}${spec.remote ? ` to ${spec.remote}` : ''}${spec.group ? ` group ${spec.group}` : ''} port ${spec.port}${spec.device ? ` over ${spec.device}` : ''}`,
};
