// The wireguard kind: a WireGuard interface in the pod, made from the node straight into it.
// WireGuard keeps its UDP socket in the netns it was made in, so the socket is the node's and the
// encrypted packets leave by the node's routes, as a vxlan's do; the port is the node's, so a node
// has one attachment to the Network. The interface's private key is made on the node and never
// leaves it (daemon/wireguard-keys.ts); its peers are each attachment's, set by wg
// (planner/links.ts). Its endpoints are checked against the Network's remoteRanges (index.ts).
import { mtuArgument, noHostEndToShape, tunnelRemoteProblems, type LinkKind } from './kind.ts';

export interface WireguardLink {
  kind: 'wireguard';
  listenPort: number;
}

export const wireguardKind: LinkKind<'wireguard', WireguardLink> = {
  type: 'wireguard',
  attachedBy: 'podnet',
  refusedAsks: () => ({ bandwidth: noHostEndToShape('wireguard'), mac: 'a wireguard interface carries IP packets and has no MAC' }),
  specProblems: (network, networks) => {
    const port = network.spec.wireguard?.listenPort;
    // One port, one socket on the node: two Networks on it would each fail where the other is.
    const sharing = [...networks.values()].find((n) => n !== network && n.metadata.name !== network.metadata.name && n.spec.type === 'wireguard' && n.spec.wireguard?.listenPort === port);
    return [
      ...tunnelRemoteProblems('wireguard', undefined, network.spec.wireguard?.remoteRanges),
      ...(sharing ? [{ field: 'spec.wireguard.listenPort', reason: `Network ${sharing.metadata.name} listens on port ${port} too: a node's port is one socket; give each Network its own` }] : []),
    ];
  },
  onePerNode: "its UDP port is the node's",
  // The schema requires spec.wireguard on a wireguard Network.
  linkSpec: (network) => ({ kind: 'wireguard', listenPort: network.spec.wireguard!.listenPort }),
  making: () => ({
    // Its port is given after the old link is gone.
    besideOld: () => true,
    createInPod: (pod) => `link add name ${pod.interface} netns ${pod.netns}${mtuArgument(pod)} type wireguard`,
  }),
  describe: (spec) => `wireguard, port ${spec.listenPort}`,
};
