// Desired state from Kubernetes: informers (list, then watch; client-node's ListWatch) on this
// node's pods, the namespaces, the Networks, the PodNetworkConfigs and PodNetworkPermissions. Their caches are what a pass
// reads: when the API server is unreachable they keep the last state seen, so the daemon keeps
// working from them and from its registry. A watch that fails is started again with backoff; one
// whose resourceVersion expired (410 Gone) lists again (ListWatch does it) and a pass follows.
import { parseBoundedJson } from '../protocol/bounded-json.ts';
import { ListWatch, type KubernetesObject, type KubernetesListObject } from '@kubernetes/client-node';
import type { Logger } from '../log.ts';
import { PodnetError } from '../errors.ts';
import { retryWaitMs } from '../retry.ts';
import type { Problem } from '../model/desired.ts';
import { documentName, type SandboxIdentity } from '../model/identity.ts';
import { allowingNothing } from '../model/permissions.ts';
import type { AttachmentRecord } from '../protocol/validate.ts';
import type { KubeApi } from './api.ts';
import { parseApiObject, paths, podIdentityOf, type ApiObject, type PodObject } from './resources.ts';
import type { ApiMetrics, WatchedResource } from '../metrics.ts';
import type { ApiDocument } from '../sources/documents.ts';
import { addDocument, emptyDocuments, type DesiredDocuments, type DesiredSource } from '../sources/source.ts';

/** A NetworkAttachmentDefinition: what podnet reads of it. */
type DefinitionObject = KubernetesObject & { metadata: { name: string; namespace: string }; spec?: { config?: unknown } };

interface Informer<T extends KubernetesObject> {
  cache: ListWatch<T>;
  synced: boolean;
  /** Its last list found the resource not served (an optional one): the next list is a look again. */
  unserved?: boolean;
}

export class KubeSource implements DesiredSource {
  readonly nodeName: string;
  private readonly api: KubeApi;
  private readonly log: Logger;
  /** Told of every list and event (start gives it). */
  private changed: () => void = () => undefined;
  private readonly informers: {
    pods: Informer<PodObject>;
    namespaces: Informer<KubernetesObject>;
    networks: Informer<ApiObject>;
    configs: Informer<ApiObject>;
    permissions: Informer<ApiObject>;
    definitions: Informer<DefinitionObject>;
  };
  private stopped = false;
  private readonly timers = new Set<NodeJS.Timeout>();
  /**
   * The documents as last made, until a Network, config, definition or namespace changes: one
   * object for the pass and the status publisher, so that what judges it (the reconciler's
   * judge) judges it once.
   */
  private view: DesiredDocuments | undefined;
  /** Parsed documents by uid and resourceVersion: a pass reads every document, most unchanged. */
  private readonly parsed = new Map<string, { version: string | undefined; result: ApiDocument | Problem }>();

  constructor(opts: { api: KubeApi; nodeName: string; log: Logger; metrics?: Pick<ApiMetrics, 'watchEventReceived'> }) {
    this.api = opts.api;
    this.nodeName = opts.nodeName;
    this.log = opts.log;
    /** optional: a resource the cluster may not serve (404): it counts as listed, and empty, until it does. */
    const informer = <T extends KubernetesObject>(name: WatchedResource, path: string, fieldSelector?: string, optional = false): Informer<T> => {
      const list = () => {
        // ListWatch lists only at its first start and when the API server said 410 Gone.
        if (entry.synced && !entry.unserved) this.log.info('the watch\'s resourceVersion expired (410 Gone); listing again', { resource: name });
        return this.api.get<KubernetesListObject<T>>(fieldSelector ? `${path}?fieldSelector=${encodeURIComponent(fieldSelector)}` : path).then((answer) => {
          if (entry.unserved) this.log.info('the API server serves this resource now', { resource: name });
          entry.unserved = false;
          return answer;
        });
      };
      // ListWatch watches again after its reconnect wait even when stopped meanwhile: the wait is
      // one of ours, which stop() cancels, so a stopped source opens no watch.
      const delayFn = (ms: number) => new Promise<void>((resolve) => this.later(ms, resolve));
      const cache = new ListWatch<T>(path, this.api.watch, list, false, undefined, fieldSelector, { delayFn });
      const entry: Informer<T> = { cache, synced: false };
      let failures = 0;
      let failedAt = 0;
      // Every list and every event: a pass follows (the reconciler merges a burst into one).
      cache.on('change', () => {
        opts.metrics?.watchEventReceived(name);
        // What the documents and their problems are made of; a pod's change is neither.
        if (name !== 'pods') this.view = undefined;
        this.changed();
      });
      cache.on('error', (err: unknown) => {
        if (this.stopped) return;
        // A resource the cluster does not serve (no such CRD) is looked for again, quietly.
        const unserved = optional && err instanceof PodnetError && err.code === 'NOT_FOUND';
        if (unserved) entry.unserved = true;
        if (unserved && !entry.synced) {
          entry.synced = true;
          this.log.info('the API server does not serve this resource; what names one is refused until it does', { resource: name });
        }
        // A watch that ran a good while before failing starts over from the first wait.
        if (Date.now() - failedAt > 2 * retryWaitMs(Infinity)) failures = 0;
        failedAt = Date.now();
        failures++;
        const waitMs = retryWaitMs(failures);
        if (!unserved) this.log.warn('a watch of the API server failed; the last state seen stays in force', { resource: name, error: describe(err), retryInMs: waitMs });
        this.later(waitMs, () => void this.startInformer(name, entry));
      });
      return entry;
    };
    this.informers = {
      pods: informer<PodObject>('pods', paths.pods, `spec.nodeName=${opts.nodeName}`),
      namespaces: informer('namespaces', paths.namespaces),
      networks: informer<ApiObject>('networks', paths.networks),
      configs: informer<ApiObject>('podnetworkconfigs', paths.podNetworkConfigs),
      // Not optional: its CRD ships with the others, and a list that failed must not read as "no permission".
      permissions: informer<ApiObject>('podnetworkpermissions', paths.podNetworkPermissions),
      definitions: informer<DefinitionObject>('network-attachment-definitions', paths.networkAttachmentDefinitions, undefined, true),
    };
  }

  /**
   * Starts every informer; resolves once each has listed, so that the first pass knows every pod
   * and document (a pass before would take back what a config still asks). A list that fails is
   * tried again with backoff, as a failed watch is.
   */
  async start(changed: () => void): Promise<void> {
    this.changed = changed;
    for (const [name, entry] of Object.entries(this.informers)) void this.startInformer(name, entry as Informer<KubernetesObject>);
    // Not a timer of `later`'s: stop() clears those, and this wait must still see that it stopped.
    while (!this.stopped && !this.synced) await new Promise((resolve) => setTimeout(resolve, 100).unref());
    this.log.info('listed the API server', { node: this.nodeName, pods: this.informers.pods.cache.list().length, networks: this.informers.networks.cache.list().length, configs: this.informers.configs.cache.list().length });
  }

  get synced(): boolean {
    return Object.entries(this.informers).every(([name, entry]) => this.listed(name, entry as Informer<KubernetesObject>));
  }

  /**
   * Whether an informer's cache has held a whole list: ListWatch sets its resourceVersion in the
   * same step that puts a list's items in the cache. Looked at again each time, not only when its
   * start returns: a watch refused 410 Gone at once starts a list that start does not wait for.
   */
  private listed(name: string, entry: Informer<KubernetesObject>): boolean {
    if (!entry.synced && entry.cache.latestResourceVersion() !== '') {
      entry.synced = true;
      this.log.info('watching', { resource: name });
    }
    return entry.synced;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    await Promise.all(Object.values(this.informers).map((i) => i.cache.stop()));
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

  /** Who a pod of this node is, from its object alone: its labels, its namespace's, its annotation. */
  podIdentity(pod: PodObject): SandboxIdentity {
    return podIdentityOf(pod, this.namespaceLabels(pod.metadata.namespace));
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

  private async startInformer(name: string, entry: Informer<KubernetesObject>): Promise<void> {
    if (this.stopped) return;
    // ListWatch lists (when it holds no resourceVersion) and watches; a failure of either reaches
    // the 'error' handler, which schedules the next start.
    await entry.cache.start();
    this.listed(name, entry);
  }

  private later(ms: number, run: () => void): void {
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      run();
    }, ms);
    timer.unref();
    this.timers.add(timer);
  }
}

function describe(err: unknown): string {
  if (err instanceof Error) return err.message;
  if (typeof err === 'object' && err !== null && 'message' in err) return String((err as { message: unknown }).message);
  return String(err);
}

/**
 * The UID the runtime's CNI_ARGS give a pod's sandbox (K8S_POD_UID): the object's own, but for a
 * static pod, whose object in the API is a mirror with a UID of its own; the kubelet's UID of the
 * pod is then the mirror's kubernetes.io/config.mirror annotation.
 */
function runtimeUidOf(pod: PodObject): string | undefined {
  return pod.metadata.annotations?.['kubernetes.io/config.mirror'] ?? pod.metadata.uid;
}
