// podnet's side of the API, shared by the informers and the publisher: its group and version, the
// collections a node watches, and the objects' shapes as podnet reads them.
import type { KubernetesObject } from '@kubernetes/client-node';

export const apiGroup = 'podnetwork.opdev.io';
export const apiVersion = 'v1alpha1';

/** The resources a node watches, by the path of their collection. */
export const paths = {
  networks: `/apis/${apiGroup}/${apiVersion}/networks`,
  podNetworkConfigs: `/apis/${apiGroup}/${apiVersion}/podnetworkconfigs`,
  namespaces: '/api/v1/namespaces',
  pods: '/api/v1/pods',
  /** Multus's NetworkAttachmentDefinitions, which a cni Network may name; a cluster may not serve them. */
  networkAttachmentDefinitions: '/apis/k8s.cni.cncf.io/v1/network-attachment-definitions',
};

/** What podnet reads of a pod. */
export interface PodObject extends KubernetesObject {
  metadata: { name: string; namespace: string; uid: string; resourceVersion?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  spec?: { nodeName?: string; hostNetwork?: boolean };
  status?: { phase?: string; podIP?: string; startTime?: string };
}

/** A Network or PodNetworkConfig as the API server holds it, status included. */
export type ApiObject = KubernetesObject & { metadata: { name: string; namespace?: string; uid?: string; generation?: number; resourceVersion?: string }; status?: Record<string, unknown> };
