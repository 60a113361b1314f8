// Who a sandbox is and how documents are named: the labels podnet derives from a sandbox's CNI
// identity, the identity itself, how problems name a document or a pod's annotation, and which
// configs select a pod. Pure.
import type { AttachmentRecord, Bandwidth, PodNetworkConfig, PodNetworkPermission, WireguardPeer } from '../protocol/validate.ts';
import { annotationField, type AnnotationRequest } from './annotation.ts';
import { selects, type Labels } from './selector.ts';
import { byCodeUnits } from '../order.ts';

export const podNameLabel = 'podnetwork.opdev.io/pod-name';
export const podNamespaceLabel = 'podnetwork.opdev.io/pod-namespace';
export const namespaceNameLabel = 'kubernetes.io/metadata.name';

export interface SandboxIdentity {
  namespace: string;
  name: string;
  labels: Labels;
  /** Its namespace's labels, which Networks' namespaceSelector matches; standalone, the name label alone. */
  namespaceLabels?: Labels;
  /** What its podnetwork.opdev.io/networks annotation asks (Kubernetes only). */
  annotation?: AnnotationRequest;
  /** Its namespace's PodNetworkPermissions (model/permissions.ts), set where the documents meet the pod; none: it may ask every part. */
  permissions?: readonly PodNetworkPermission[];
  /** The interface its primary CNI plugin made (the runtime's CNI_IFNAME, eth0 under a kubelet): never podnet's to attach. */
  primaryInterface?: string;
  /**
   * Its node's labels, which Networks' nodeSelector matches (Kubernetes); standalone there is no
   * Node to select, and every Network is served.
   */
  nodeLabels?: Labels;
  /** What its prepared ResourceClaims on podnet's Networks ask (Kubernetes, docs/adr/0033), each claim's attachments. */
  claims?: readonly ClaimAttachments[];
  /** Whether its pod has ResourceClaims at all (spec.resourceClaims): one may be podnet's, not yet prepared. */
  hasClaims?: boolean;
}

/** A prepared ResourceClaim's attachments: one per device allocated from this node's pool. */
export interface ClaimAttachments {
  /** "ResourceClaim shop/net" (claimDocumentName). */
  document: string;
  attachments: ClaimAttachment[];
  /** Why the pod gets none of them (a claim podnet prepared for another pod): each is refused with it. */
  refused?: string;
}

/** One device of a claim: its Network and what the claim's parameters ask of the interface. */
export interface ClaimAttachment {
  network: string;
  /** "spec.devices.requests[blue]": the claim's request it was allocated for. */
  field: string;
  interface?: string;
  ips?: string[];
  mac?: string;
  bandwidth?: Bandwidth;
  dscp?: number;
  remote?: string;
  peers?: WireguardPeer[];
}

/** How problems name a ResourceClaim. */
export function claimDocumentName(claim: { namespace: string; name: string }): string {
  return `${claimKind} ${claim.namespace}/${claim.name}`;
}

/** Whether a document name (an attachment's `from`) is a ResourceClaim's. */
export function isClaimDocument(name: string): boolean {
  return name.startsWith(`${claimKind} `);
}

const claimKind = 'ResourceClaim';

/** The namespace a document or a runtime names, `default` when it names none (as kubectl takes a document). */
export function namespaceOf(named: string | undefined): string {
  return named ?? 'default';
}

/** The identity a runtime gave (namespace `default` when it gave none) and the labels from it. */
export function identityOf(record: AttachmentRecord): SandboxIdentity {
  const namespace = namespaceOf(record.pod.namespace);
  const name = record.pod.name ?? record.containerId;
  return { namespace, name, labels: { [podNameLabel]: name, [podNamespaceLabel]: namespace }, primaryInterface: record.ifname };
}

/** "Network blue", "PodNetworkConfig tenant-a/fast" or "PodNetworkPermission tenant-a/lab": how problems and `from` name a document (or an API object). */
export function documentName(doc: { kind?: string; metadata: { name: string; namespace?: string } }): string {
  if (doc.kind === 'Network') return `Network ${doc.metadata.name}`;
  const kind = doc.kind === 'PodNetworkPermission' ? doc.kind : 'PodNetworkConfig';
  return `${kind} ${namespaceOf(doc.metadata.namespace)}/${doc.metadata.name}`;
}

/** The document a pod's own annotation counts as, in problems and in `from`. */
export function podDocumentName(identity: { namespace: string; name: string }): string {
  return `Pod ${identity.namespace}/${identity.name}`;
}

/** The configs that select a pod, in the merge order (by name), whatever order the documents arrived in. */
export function selectingConfigs(identity: SandboxIdentity, configs: readonly PodNetworkConfig[]): PodNetworkConfig[] {
  return configs
    .filter((c) => namespaceOf(c.metadata.namespace) === identity.namespace && selects(c.spec.podSelector, identity.labels))
    .sort((a, b) => byCodeUnits(a.metadata.name, b.metadata.name));
}

/** An attachment a pod may not be created without (`required: true`), as its document asks it (docs/adr/0028). */
export interface RequiredAttachment {
  /** The pod's annotation (podDocumentName) or a PodNetworkConfig (documentName). */
  document: string;
  /** "metadata.annotations[...][0]" or "spec.attachments[1]". */
  field: string;
  network: string;
  interface?: string;
}

/** What the pod's annotation and the configs that select it mark required. */
export function requiredAttachments(identity: SandboxIdentity, configs: readonly PodNetworkConfig[]): RequiredAttachment[] {
  const asks: RequiredAttachment[] = [];
  const named = (name: string | undefined) => (name === undefined ? {} : { interface: name });
  const request = identity.annotation;
  if (request && 'selections' in request) {
    request.selections.forEach((s, i) => {
      if (s.required) asks.push({ document: podDocumentName(identity), field: annotationField(i), network: s.name, ...named(s.interface) });
    });
  }
  // A claim is the pod's own ask for a network it must start with: each of its attachments is required.
  for (const claim of identity.claims ?? []) for (const a of claim.attachments) asks.push({ document: claim.document, field: a.field, network: a.network, ...named(a.interface) });
  for (const config of selectingConfigs(identity, configs)) {
    (config.spec.attachments ?? []).forEach((a, i) => {
      if (a.required) asks.push({ document: documentName(config), field: `spec.attachments[${i}]`, network: a.network, ...named(a.interface) });
    });
  }
  return asks;
}
