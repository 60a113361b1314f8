// The Network kinds, one module each, in one table keyed by the schema's spec.type: a type the
// schema gains without an entry here, or an entry the schema lacks, does not compile. Every phase
// asks the table (resolve, desired, document-problems, the planner, explain); adding a kind is
// its module here with its line in the table, plus the schema. Pure.
import { createHash } from 'node:crypto';
import type { AppliedAttachment as AppliedAttachmentRecord, Network, WireguardPeer } from '../../protocol/validate.ts';
import { staticAddressProblem } from '../pools.ts';
import { parseCidr, subnetOf } from '../cidr.ts';
import { canonicalJson } from '../canonical-json.ts';
import { bridgeKind } from './bridge.ts';
import { cniKind } from './cni.ts';
import { geneveKind } from './geneve.ts';
import { greKind } from './gre.ts';
import { endpointRefusal, type AttachmentAsks, type AttachmentRefusal, type DelegatedKind, type HostBridge, type LinkKind, type LinkMaking, type NetworkKind, type NetworkType } from './kind.ts';
import { ipvlanKind } from './ipvlan.ts';
import { macvlanKind } from './macvlan.ts';
import { vlanKind } from './vlan.ts';
import { vxlanKind } from './vxlan.ts';
import { wireguardKind } from './wireguard.ts';

export type * from './kind.ts';

/** A table with one kind per Network type, each under its own type. */
export type NetworkKinds = { readonly [T in NetworkType]: NetworkKind<T> };

// `satisfies`, not a type annotation: each entry keeps its own link spec, which LinkSpec is made of.
export const networkKinds = {
  bridge: bridgeKind,
  macvlan: macvlanKind,
  ipvlan: ipvlanKind,
  vlan: vlanKind,
  vxlan: vxlanKind,
  gre: greKind,
  geneve: geneveKind,
  wireguard: wireguardKind,
  cni: cniKind,
} as const satisfies NetworkKinds;

/** The link podnet makes for an attachment, one shape per kind whose link it makes. */
export type LinkSpec = { [T in NetworkType]: (typeof networkKinds)[T] extends LinkKind<T, infer S> ? S : never }[NetworkType];

/**
 * The kinds whose link podnet makes. Each must be one an applied state may record
 * (schemas/state.schema.json, AppliedAttachment.kind): a record of any other would be set aside when read back.
 */
export type LinkType = RecordedKind<LinkSpec['kind']>;
type RecordedKind<K extends NonNullable<AppliedAttachmentRecord['kind']>> = K;

/** A kind whose link podnet makes, whichever it is. */
export type AnyLinkKind = LinkKind<LinkType, LinkSpec>;

/** The kind of a Network. */
export function kindOf(network: Network): AnyLinkKind | DelegatedKind<NetworkType> {
  return networkKinds[network.spec.type];
}

/** The kind of a link podnet makes. */
export function linkKindOf(link: LinkSpec): AnyLinkKind {
  return networkKinds[link.kind];
}

/**
 * A link as `podnet explain` shows it, and whether it has a host end: one of a kind this build
 * does not know (read from a newer daemon) is shown by its kind alone.
 */
export function describeLink(link: LinkSpec): { text: string; hostEnd: boolean } {
  const kind = Object.hasOwn(networkKinds, link.kind) ? linkKindOf(link) : undefined;
  if (!kind) return { text: link.kind, hostEnd: false };
  return { text: kind.describe(link), hostEnd: 'veth' in kind.making(link) };
}

/**
 * What names the link a spec makes, in 16 hex digits: a link made from another spec (its Network
 * changed a parent, a mode, a remote, a key) is made again (planner/links.ts). Its keys sorted, so
 * that the order a kind writes them in does not count.
 */
export function linkDigest(link: LinkSpec): string {
  return createHash('sha256').update(canonicalJson(link)).digest('hex').slice(0, 16);
}

/** How the planner makes a link, and what it needs on the host first. */
export function makingOf(link: LinkSpec): LinkMaking {
  return linkKindOf(link).making(link);
}

/** The host bridge a link's veth goes on, for a kind made as a veth; undefined for any other. */
export function hostBridgeOf(link: LinkSpec): HostBridge | undefined {
  const making = makingOf(link);
  return 'veth' in making ? making.veth : undefined;
}

/**
 * What of what an attachment asks its Network cannot have, as the field under the attachment
 * (ips, bandwidth, mac) and why: first what its kind refuses, then addresses it brings to a
 * Network without ipam that does not let attachments bring their own (spec.staticAddresses).
 */
export function attachmentRefusal(network: Network, asked: AttachmentAsks): AttachmentRefusal | undefined {
  const kind = kindOf(network);
  const refused = kind.refusedAsks(network);
  for (const field of ['bandwidth', 'ips', 'mac', 'dscp'] as const) {
    const reason = refused[field];
    if (asked[field] !== undefined && reason !== undefined) return { field, reason };
  }
  const remote = remoteAskRefusal(network, asked.remote);
  if (remote) return { field: 'remote', reason: remote };
  const peers = asked.peers ? peersRefusal(network, asked.peers) : undefined;
  if (peers) return peers;
  if (asked.ips && kind.attachedBy === 'podnet' && !network.spec.ipam && network.spec.staticAddresses !== true) {
    return { field: 'ips', reason: `Network ${network.metadata.name} has no ipam and does not let attachments bring their own addresses (its spec.staticAddresses is not true)` };
  }
  // An address the Network's ranges cannot give is this document's problem, not the pass's to find.
  const outside = asked.ips && kind.attachedBy === 'podnet' && network.spec.ipam ? staticAddressProblem(network.metadata.name, network.spec.ipam.ranges, asked.ips) : undefined;
  if (outside) return { field: `ips[${outside.index}]`, reason: outside.reason };
  return undefined;
}

/** Whether each attachment to the Network chooses its tunnel's remote (within its remoteRanges): then a node has one attachment per remote, not one. */
export function choosesRemote(network: Network): boolean {
  return kindOf(network).tunnelRemote?.(network).ranges !== undefined;
}

/**
 * Why an attachment's tunnel remote (or none) cannot be: a Network of a kind with no remote, or
 * one that fixes its remote, takes none; one whose remoteRanges let attachments choose needs one,
 * unicast and inside them.
 */
function remoteAskRefusal(network: Network, remote: string | undefined): string | undefined {
  const kind = kindOf(network);
  const tunnel = kind.tunnelRemote?.(network);
  const name = network.metadata.name;
  if (remote === undefined) return tunnel?.ranges ? `Network ${name} lets each attachment choose its tunnel's remote within ${tunnel.field}Ranges (${tunnel.ranges.join(', ')}); this one gives none` : undefined;
  if (!tunnel) return `a ${kind.type} link has no remote endpoint to choose`;
  if (!tunnel.ranges) return `Network ${name} fixes its tunnel's remote (${tunnel.field}); an attachment chooses none`;
  return endpointRefusal(kind.type, remote, name, `${tunnel.field}Ranges`, tunnel.ranges);
}

/**
 * Why an attachment's WireGuard peers cannot be: a Network of another kind, an endpoint outside
 * its remoteRanges, a peer named twice, a subnet two peers allow (WireGuard gives a subnet to one
 * peer: the last set takes it from the other, which would read back as changed at every pass).
 */
function peersRefusal(network: Network, peers: readonly WireguardPeer[]): AttachmentRefusal | undefined {
  const ranges = network.spec.wireguard?.remoteRanges;
  if (!ranges) return { field: 'peers', reason: `a ${network.spec.type} link has no WireGuard peers` };
  for (const [i, peer] of peers.entries()) {
    if (peers.findIndex((p) => p.publicKey === peer.publicKey) < i) return { field: `peers[${i}].publicKey`, reason: `the peer ${peer.publicKey} is named twice` };
    const notSubnet = peer.allowedIPs.findIndex((c) => parseCidr(c) === undefined);
    if (notSubnet >= 0) return { field: `peers[${i}].allowedIPs[${notSubnet}]`, reason: `${peer.allowedIPs[notSubnet]} is not an address with a prefix length` };
    for (const [j, allowed] of peer.allowedIPs.entries()) {
      const subnet = subnetOf(allowed);
      const earlier = peers.slice(0, i).findIndex((p) => p.allowedIPs.some((a) => subnetOf(a) === subnet));
      if (earlier >= 0) return { field: `peers[${i}].allowedIPs[${j}]`, reason: `peers[${earlier}] allows ${subnet} too: WireGuard sends a subnet to one peer` };
    }
    const address = peer.endpoint?.address;
    if (address === undefined) continue;
    const wrong = endpointRefusal('wireguard', address, network.metadata.name, 'spec.wireguard.remoteRanges', ranges);
    if (wrong) return { field: `peers[${i}].endpoint.address`, reason: wrong };
  }
  return undefined;
}

/** How many addresses podnet gives an attachment that brings none: one from each of its Network's ranges, none where plugins choose them. */
export function addressesGiven(network: Network): number {
  return kindOf(network).attachedBy === 'plugins' ? 0 : (network.spec.ipam?.ranges.length ?? 0);
}

/** Whether an attachment brings addresses of its own: on a Network that has no ipam and is podnet's to address. */
export function bringsOwnAddresses(attachment: { network: Network; ips?: readonly string[] }): boolean {
  const { network, ips } = attachment;
  return ips !== undefined && kindOf(network).attachedBy === 'podnet' && !network.spec.ipam;
}
