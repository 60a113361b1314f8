// The ipvlan kind: an ipvlan sub-interface of a host interface (its parent), made from the host
// straight into the pod. Its pods share the parent's MAC, which is why CNFs ask for it: a switch
// port that admits one MAC, or a parent whose MAC table is too small for a macvlan per pod.
import { mtuArgument, noHostEndToShape, type LinkKind } from './kind.ts';

export interface IpvlanLink {
  kind: 'ipvlan';
  parent: string;
  mode: string;
}

export const ipvlanKind: LinkKind<'ipvlan', IpvlanLink> = {
  type: 'ipvlan',
  attachedBy: 'podnet',
  refusedAsks: () => ({
    bandwidth: noHostEndToShape('ipvlan'),
    mac: "an ipvlan link has its parent's MAC; it takes no MAC of its own",
  }),
  specProblems: () => [],
  // The schema requires spec.ipvlan on an ipvlan Network.
  linkSpec: (network) => ({ kind: 'ipvlan', parent: network.spec.ipvlan!.parent, mode: network.spec.ipvlan!.mode ?? 'l2' }),
  making: (spec) => ({
    hostInterface: spec.parent,
    besideOld: () => true,
    createInPod: (pod) => `link add link ${spec.parent} name ${pod.interface} netns ${pod.netns}${mtuArgument(pod)} type ipvlan mode ${spec.mode}`,
  }),
  describe: (spec) => `ipvlan on ${spec.parent}, mode ${spec.mode}`,
};
