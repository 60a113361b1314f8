// podnet's side of the API, shared by the informers and the publisher: its group and version, the
// collections a node watches, and the objects' shapes as podnet reads them.
import type { KubernetesObject } from '@kubernetes/client-node';
import { networksAnnotation, parseNetworksAnnotation } from '../model/annotation.ts';
import type { Problem } from '../model/desired.ts';
import { documentName, namespaceNameLabel, type SandboxIdentity } from '../model/identity.ts';
import { parseDocument } from '../protocol/validate.ts';
import type { ApiDocument } from '../sources/documents.ts';

export const apiGroup = 'podnetwork.opdev.io';
export const apiVersion = 'v1alpha1';

/** The resources a node watches, by the path of their collection. */
export const paths = {
  networks: `/apis/${apiGroup}/${apiVersion}/networks`,
  podNetworkConfigs: `/apis/${apiGroup}/${apiVersion}/podnetworkconfigs`,
  podNetworkPermissions: `/apis/${apiGroup}/${apiVersion}/podnetworkpermissions`,
  namespaces: '/api/v1/namespaces',
  pods: '/api/v1/pods',
  nodes: '/api/v1/nodes',
  /** DRA (resource.k8s.io/v1, Kubernetes 1.34 and later): the slices podnet publishes, the claims it prepares. */
  resourceSlices: '/apis/resource.k8s.io/v1/resourceslices',
  /** Multus's NetworkAttachmentDefinitions, which a cni Network may name; a cluster may not serve them. */
  networkAttachmentDefinitions: '/apis/k8s.cni.cncf.io/v1/network-attachment-definitions',
};

/** Where a namespace's ResourceClaim is; its status is at `/status` below it. */
export function resourceClaimPath(namespace: string, name: string): string {
  return `/apis/resource.k8s.io/v1/namespaces/${encodeURIComponent(namespace)}/resourceclaims/${encodeURIComponent(name)}`;
}

/** Where a Network or PodNetworkConfig is. */
export function objectPath(kind: 'Network' | 'PodNetworkConfig', metadata: { name: string; namespace?: string }): string {
  return kind === 'Network' ? `${paths.networks}/${metadata.name}` : `/apis/${apiGroup}/${apiVersion}/namespaces/${metadata.namespace}/podnetworkconfigs/${metadata.name}`;
}

/** Where a Network's or PodNetworkConfig's status is written (its status subresource). */
export function statusPath(kind: 'Network' | 'PodNetworkConfig', metadata: { name: string; namespace?: string }): string {
  return `${objectPath(kind, metadata)}/status`;
}

/** The field manager a node's daemon writes its status entries as (server-side apply): `podnet/<node>`. */
export function nodeFieldManager(node: string): string {
  return `podnet/${node}`;
}

/** The node whose daemon a field manager is (nodeFieldManager), if it is one. */
export function nodeOfFieldManager(manager: string | undefined): string | undefined {
  return manager?.startsWith('podnet/') ? manager.slice('podnet/'.length) : undefined;
}

/** What podnet reads of a pod. */
export interface PodObject extends KubernetesObject {
  metadata: { name: string; namespace: string; uid: string; resourceVersion?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: { nodeName?: string; hostNetwork?: boolean; resourceClaims?: { name?: string; resourceClaimName?: string }[] };
  status?: { phase?: string; podIP?: string; startTime?: string; resourceClaimStatuses?: { name?: string; resourceClaimName?: string }[] };
}

/** A Network or PodNetworkConfig as the API server holds it, status included. */
export type ApiObject = KubernetesObject & { metadata: { name: string; namespace?: string; uid?: string; generation?: number; resourceVersion?: string }; status?: Record<string, unknown> };

/** Who a pod is, from its object and its namespace's labels (the name label alone while they are not known): its labels and its annotation. */
export function podIdentityOf(pod: PodObject, namespaceLabels: Record<string, string> | undefined): SandboxIdentity {
  const { namespace, name } = pod.metadata;
  const annotation = pod.metadata.annotations?.[networksAnnotation];
  return {
    namespace,
    name,
    labels: pod.metadata.labels ?? {},
    namespaceLabels: namespaceLabels ?? { [namespaceNameLabel]: namespace },
    ...(annotation !== undefined ? { annotation: parseNetworksAnnotation(annotation) } : {}),
  };
}

/**
 * The names of the ResourceClaims a pod uses: those it names, and those made for it from a
 * template (its status tells them once the claim controller made them).
 */
export function claimNamesOf(pod: PodObject): string[] {
  const named = [...(pod.spec?.resourceClaims ?? []), ...(pod.status?.resourceClaimStatuses ?? [])].map((c) => c.resourceClaimName);
  return [...new Set(named.filter((n): n is string => typeof n === 'string' && n !== ''))];
}

/** A Network, PodNetworkConfig or PodNetworkPermission through podnet's schema (the CRD's is looser: it prunes rather than refuses). */
export function parseApiObject(kind: ApiDocument['kind'], object: ApiObject): ApiDocument | Problem {
  const { status: _status, ...spec } = object as ApiObject & Record<string, unknown>;
  const doc = { ...spec, metadata: { ...object.metadata } };
  try {
    return parseDocument(kind, doc, kind);
  } catch (err) {
    return { document: documentName({ kind, metadata: object.metadata }), field: 'spec', reason: (err as Error).message };
  }
}
