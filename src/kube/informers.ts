// Desired state from Kubernetes: informers (watched.ts) on this node's pods, its Node (the labels
// Networks' nodeSelector matches), the namespaces, the Networks, the PodNetworkConfigs and
// PodNetworkPermissions. Their caches are what a pass reads:
// when the API server is unreachable they keep the last state seen, so the daemon keeps working
// from them and from its registry; every list and event is followed by a pass.
import { parseBoundedJson } from '../protocol/bounded-json.ts';
import type { KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from '../log.ts';
import type { Problem } from '../model/desired.ts';
import { documentName, type ClaimAttachments, type SandboxIdentity } from '../model/identity.ts';
import { allowingNothing } from '../model/permissions.ts';
import type { AttachmentRecord } from '../protocol/validate.ts';
import type { KubeApi } from './api.ts';
import { parseApiObject, paths, podIdentityOf, type ApiObject, type PodObject } from './resources.ts';
import { WatchedResources, type Informer } from './watched.ts';
import type { ApiMetrics } from '../metrics.ts';
import type { ApiDocument } from '../sources/documents.ts';
import { addDocument, emptyDocuments, type DesiredDocuments, type DesiredSource } from '../sources/source.ts';

/** A NetworkAttachmentDefinition: what podnet reads of it. */
type DefinitionObject = KubernetesObject & { metadata: { name: string; namespace: string }; spec?: { config?: unknown } };

export class KubeSource implements DesiredSource {
  readonly nodeName: string;
  private readonly log: Logger;
  private readonly watched: WatchedResources;
  private readonly informers: {
    pods: Informer<PodObject>;
    node: Informer<KubernetesObject>;
    namespaces: Informer<KubernetesObject>;
    networks: Informer<ApiObject>;
    configs: Informer<ApiObject>;
    permissions: Informer<ApiObject>;
    definitions: Informer<DefinitionObject>;
  };
  /**
   * The documents as last made, until a Network, config, definition or namespace changes: one
   * object for the pass and the status publisher, so that what judges it (the reconciler's
   * judge) judges it once.
   */
  private view: DesiredDocuments | undefined;
  /** This node's labels as last seen ({} before its Node was ever listed: no nodeSelector matches). */
  private lastNodeLabels: Record<string, string> = {};
  /** A pod's prepared claims: none unless the DRA driver runs. */
  private claimsOf: ((pod: PodObject, uid: string) => ClaimAttachments[]) | undefined;
  /** Parsed documents by uid and resourceVersion: a pass reads every document, most unchanged. */
  private readonly parsed = new Map<string, { version: string | undefined; result: ApiDocument | Problem }>();

  constructor(opts: { api: KubeApi; nodeName: string; log: Logger; metrics?: Pick<ApiMetrics, 'watchEventReceived'> }) {
    this.nodeName = opts.nodeName;
    this.log = opts.log;
    const watched = new WatchedResources(opts);
    this.watched = watched;
    this.informers = {
      pods: watched.add<PodObject>('pods', paths.pods, { fieldSelector: `spec.nodeName=${opts.nodeName}` }),
      // Its labels alone: a Node's status is tens of KB, rewritten at every heartbeat.
      node: watched.add('nodes', paths.nodes, { fieldSelector: `metadata.name=${opts.nodeName}`, metadataOnly: true }),
      namespaces: watched.add('namespaces', paths.namespaces),
      networks: watched.add<ApiObject>('networks', paths.networks),
      configs: watched.add<ApiObject>('podnetworkconfigs', paths.podNetworkConfigs),
      // Not optional: its CRD ships with the others, and a list that failed must not read as "no permission".
      permissions: watched.add<ApiObject>('podnetworkpermissions', paths.podNetworkPermissions),
      definitions: watched.add<DefinitionObject>('network-attachment-definitions', paths.networkAttachmentDefinitions, { optional: true }),
    };
  }

  /**
   * Starts every informer; resolves once each has listed, so that the first pass knows every pod
   * and document (a pass before would take back what a config still asks). A list that fails is
   * tried again with backoff, as a failed watch is.
   */
  async start(changed: () => void): Promise<void> {
    // Every list and every event: a pass follows (the reconciler merges a burst into one). What
    // the documents and their problems are made of changed, unless it was a pod.
    await this.watched.start((resource) => {
      if (resource !== 'pods') this.view = undefined;
      changed();
    });
    this.log.info('listed the API server', { node: this.nodeName, pods: this.informers.pods.cache.list().length, networks: this.informers.networks.cache.list().length, configs: this.informers.configs.cache.list().length });
  }

  get synced(): boolean {
    return this.watched.synced;
  }

  stop(): Promise<void> {
    return this.watched.stop();
  }

  /** The Networks, PodNetworkConfigs and PodNetworkPermissions; one that breaks podnet's schema is a problem naming it. */
  documents(): DesiredDocuments {
    this.view ??= this.readDocuments();
    return this.view;
  }

  private readDocuments(): DesiredDocuments {
    const out = emptyDocuments();
    const live = new Set<string>();
    const kinds = [['Network', this.informers.networks], ['PodNetworkConfig', this.informers.configs], ['PodNetworkPermission', this.informers.permissions]] as const;
    for (const [kind, informer] of kinds) {
      for (const object of informer.cache.list()) {
        const key = `${kind} ${object.metadata.uid ?? `${object.metadata.namespace ?? ''}/${object.metadata.name}`}`;
        live.add(key);
        let cached = this.parsed.get(key);
        if (cached?.version !== object.metadata.resourceVersion || cached === undefined) {
          cached = { version: object.metadata.resourceVersion, result: parseApiObject(kind, object) };
          this.parsed.set(key, cached);
        }
        const doc = cached.result;
        if (!('reason' in doc)) addDocument(out, doc);
        else {
          out.problems.push(doc);
          const standIn = kind === 'PodNetworkPermission' ? allowingNothing(object) : undefined;
          if (standIn) addDocument(out, standIn);
        }
      }
    }
    for (const key of this.parsed.keys()) if (!live.has(key)) this.parsed.delete(key);
    for (const [name, network] of out.networks) {
      const reference = network.spec.cni?.networkAttachmentDefinition;
      if (!reference) continue;
      const config = this.definitionConfig(reference.namespace, reference.name);
      if ('reason' in config) out.problems.push({ document: documentName(network), field: 'spec.cni.networkAttachmentDefinition', reason: config.reason });
      // A definition Multus may run too: a GC from podnet would take the attachments Multus made.
      else out.networks.set(name, { ...network, spec: { ...network.spec, cni: { ...network.spec.cni, config: { ...config.config, disableGC: true } } } });
    }
    return out;
  }

  /** The CNI config a NetworkAttachmentDefinition holds (its spec.config, a JSON text), or why there is none. */
  private definitionConfig(namespace: string, name: string): { config: Record<string, unknown> } | { reason: string } {
    const definition = this.informers.definitions.cache.get(name, namespace);
    const what = `NetworkAttachmentDefinition ${namespace}/${name}`;
    if (!definition) return { reason: `there is no ${what}` };
    const text = definition.spec?.config;
    if (typeof text !== 'string' || text.trim() === '') return { reason: `${what} has no spec.config (podnet does not read configs from the node's files)` };
    try {
      const config: unknown = parseBoundedJson(text, 'spec.config', { maxBytes: 1024 * 1024 });
      if (typeof config === 'object' && config !== null && !Array.isArray(config)) return { config: config as Record<string, unknown> };
      return { reason: `${what}: spec.config is not a JSON object` };
    } catch (err) {
      return { reason: `${what}: spec.config is not JSON: ${(err as Error).message}` };
    }
  }

  /**
   * Who a recorded sandbox is, from its pod object: its labels, its namespace's labels, its
   * annotation. Undefined when the API server has no such pod on this node (it was deleted, or
   * it is another incarnation of the name): such a sandbox should have nothing of podnet's.
   */
  identity(record: AttachmentRecord): SandboxIdentity | undefined {
    const { namespace, name, uid } = record.pod;
    if (namespace === undefined || name === undefined) return undefined;
    const pod = this.informers.pods.cache.get(name, namespace);
    if (!pod || (uid !== undefined && runtimeUidOf(pod) !== uid)) return undefined;
    return { ...this.podIdentity(pod), primaryInterface: record.ifname };
  }

  /** Who a pod of this node is: its labels, its namespace's, its annotation, its node's labels, its prepared claims. */
  podIdentity(pod: PodObject): SandboxIdentity {
    const claims = this.claimsOf?.(pod, runtimeUidOf(pod) ?? '') ?? [];
    // A pod using claims may have one on podnet's Networks not prepared yet: its ADD asks the daemon (DRA driver only).
    const hasClaims = this.claimsOf !== undefined && (pod.spec?.resourceClaims?.length ?? 0) > 0;
    return { ...podIdentityOf(pod, this.namespaceLabels(pod.metadata.namespace)), nodeLabels: this.nodeLabels(), ...(claims.length > 0 ? { claims } : {}), ...(hasClaims ? { hasClaims } : {}) };
  }

  /** Where a pod's prepared ResourceClaims are read from (podnet's DRA driver, src/dra/driver.ts), given the pod and its runtime UID. */
  readClaimsFrom(claimsOf: (pod: PodObject, uid: string) => ClaimAttachments[]): void {
    this.claimsOf = claimsOf;
  }

  /** This node's Node's uid, once it is listed. */
  nodeUid(): string | undefined {
    return this.informers.node.cache.get(this.nodeName)?.metadata?.uid;
  }

  /** This node's labels, as the API server last showed them. */
  nodeLabels(): Record<string, string> {
    // The last labels seen while the Node is away (deleted and registered again): a pass must not
    // take a nodeSelector's Networks from running pods for a Node object between two lives.
    const node = this.informers.node.cache.get(this.nodeName);
    if (node) this.lastNodeLabels = node.metadata?.labels ?? {};
    return this.lastNodeLabels;
  }

  /** The pods bound to this node, as the API server last showed them. */
  nodePods(): { uid: string; identity: SandboxIdentity }[] {
    return this.pods().flatMap((pod) => {
      const uid = runtimeUidOf(pod);
      return uid ? [{ uid, identity: this.podIdentity(pod) }] : [];
    });
  }

  pods(): readonly PodObject[] {
    return this.informers.pods.cache.list();
  }

  /** A namespace's labels as the API server last showed them; undefined while it is not known. */
  namespaceLabels(namespace: string): Record<string, string> | undefined {
    return this.informers.namespaces.cache.get(namespace)?.metadata?.labels;
  }

  pod(namespace: string, name: string): PodObject | undefined {
    return this.informers.pods.cache.get(name, namespace);
  }

  objects(kind: 'Network' | 'PodNetworkConfig'): readonly ApiObject[] {
    return (kind === 'Network' ? this.informers.networks : this.informers.configs).cache.list();
  }

}

/**
 * The UID the runtime's CNI_ARGS give a pod's sandbox (K8S_POD_UID): the object's own, but for a
 * static pod, whose object in the API is a mirror with a UID of its own; the kubelet's UID of the
 * pod is then the mirror's kubernetes.io/config.mirror annotation.
 */
function runtimeUidOf(pod: PodObject): string | undefined {
  return pod.metadata.annotations?.['kubernetes.io/config.mirror'] ?? pod.metadata.uid;
}
