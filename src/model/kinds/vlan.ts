// The vlan kind: an 802.1Q sub-interface of a host interface (its parent), made from the host
// straight into the pod.
import { mtuArgument, noHostEndToShape, type LinkKind } from './kind.ts';

export interface VlanLink {
  kind: 'vlan';
  parent: string;
  id: number;
}

export const vlanKind: LinkKind<'vlan', VlanLink> = {
  type: 'vlan',
  attachedBy: 'podnet',
  refusedAsks: () => ({ bandwidth: noHostEndToShape('vlan') }),
  specProblems: () => [],
  // The schema requires spec.vlan on a vlan Network.
  linkSpec: (network) => ({ kind: 'vlan', parent: network.spec.vlan!.parent, id: network.spec.vlan!.id }),
  making: (spec) => ({
    hostInterface: spec.parent,
    // Made again only for a new parent or id, which the old link does not hold.
    besideOld: () => true,
    createInPod: (pod) => `link add link ${spec.parent} name ${pod.interface} netns ${pod.netns}${mtuArgument(pod)} type vlan id ${spec.id}`,
  }),
  describe: (spec) => `vlan ${spec.id} on ${spec.parent}`,
};
