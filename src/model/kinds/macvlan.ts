// The macvlan kind: a macvlan sub-interface of a host interface (its parent), made from the host
// straight into the pod.
import { mtuArgument, noHostEndToShape, type LinkKind } from './kind.ts';

export interface MacvlanLink {
  kind: 'macvlan';
  parent: string;
  mode: string;
}

export const macvlanKind: LinkKind<'macvlan', MacvlanLink> = {
  type: 'macvlan',
  attachedBy: 'podnet',
  refusedAsks: () => ({ bandwidth: noHostEndToShape('macvlan') }),
  specProblems: () => [],
  // The schema requires spec.macvlan on a macvlan Network.
  linkSpec: (network) => ({ kind: 'macvlan', parent: network.spec.macvlan!.parent, mode: network.spec.macvlan!.mode ?? 'bridge' }),
  making: (spec) => ({
    hostInterface: spec.parent,
    // A parent in passthru takes no second macvlan, and a passthru one none beside it.
    besideOld: (old) => spec.mode !== 'passthru' && old.mode !== 'passthru',
    createInPod: (pod) => `link add link ${spec.parent} name ${pod.interface} netns ${pod.netns}${mtuArgument(pod)} type macvlan mode ${spec.mode}`,
  }),
  describe: (spec) => `macvlan on ${spec.parent}, mode ${spec.mode}`,
};
