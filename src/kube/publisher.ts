// Tells the API server what this node did after each pass: the pods' network-status annotation
// (a merge patch of that one key), this node's part of each PodNetworkConfig's and Network's status
// (server-side apply with the field manager podnet/<node>, so nodes never overwrite each other's
// entries), and an Event for every attach, detach and failure. Nothing is written when nothing
// changed; a write that fails is tried again after the next pass (or the retry timer's).
import type { ApiMetrics, WrittenResource } from '../metrics.ts';
import type { Logger } from '../log.ts';
import { documentName } from '../model/identity.ts';
import { formatNetworkStatus, networkStatusAnnotation, standardNetworkStatus, standardNetworkStatusAnnotation } from '../model/annotation.ts';
import type { AttachmentRecord, NetworkStatus, NetworkStatusEntry, PodNetworkConfigStatus, Problem } from '../protocol/validate.ts';
import { systemClock, type Clock } from '../retry.ts';
import type { KubeSource } from './informers.ts';
import { apiGroup, apiVersion, nodeFieldManager, statusPath, type ApiObject, type PodObject } from './resources.ts';
import {
  configNodeEntry,
  configStatus,
  networkNodeEntry,
  networkStatus,
  podEventsBetween,
  sameStatus,
  toldEntries,
  unrecordedNetworkStatus,
  unrecordedPods,
  type SandboxFacts,
  type ToldEntry,
  type NodePod,
  type UnrecordedPod,
} from '../status/status.ts';
import type { KubeApi } from './api.ts';
import { eventRequest, type EventSpec } from './events.ts';
import { coalesce } from '../coalesce.ts';
import type { DesiredDocuments } from '../sources/source.ts';

/** The objects whose last write the publisher remembers (see StatusPublisher.wrote). */
type Memoized = Exclude<WrittenResource, 'events'>;

/** How long a failed write waits for a pass before it is tried again on its own. */
const retryMs = 5000;

export interface PublisherOptions {
  api: KubeApi;
  source: KubeSource;
  /** The sandboxes whose pod is on this node, as the last pass left them. */
  reconciler: PassResults;
  /** The sandboxes the runtime recorded: a pod with none is one podnet cannot change. */
  records: { list(): AttachmentRecord[] };
  log: Logger;
  /** Told of each write, and of each that fails (none: metrics are off). */
  metrics?: ApiMetrics;
  /** What a pod's time without a record is counted on (default: the system's). */
  clock?: Clock;
  /** Also write the standard k8s.v1.cni.cncf.io/network-status (podnet daemon --standard-network-status). */
  standardNetworkStatus?: boolean;
}

/** What the publisher reads of the passes: the sandboxes as the last one left them, and the documents' problems as the passes judge them. */
export interface PassResults {
  facts(): SandboxFacts[];
  judge(docs: DesiredDocuments): Problem[];
}

/** What every status of one publishing round is computed from. */
interface Round {
  docs: DesiredDocuments;
  /** What is wrong with each document (documentProblems), by documentName: "field: reason". */
  problems: ReadonlyMap<string, string[]>;
  /** The PodNetworkConfigs as the API server holds them, by documentName (what `from` says). */
  configs: ReadonlyMap<string, ApiObject>;
  /** The pods of this node that ask for something and that podnet has no sandbox of. */
  unrecorded: readonly UnrecordedPod[];
  now: string;
}

export class StatusPublisher {
  private readonly opts: PublisherOptions;
  private readonly node: string;
  private readonly fieldManager: string;
  /** What each pod's network-status last said, as this daemon wrote or found it: the Events are the differences. */
  private readonly told = new Map<string, ToldEntry[]>();
  /** Each config's problems last told in an Event (by documentName), so one is not told again every pass. */
  private readonly toldProblems = new Map<string, string>();
  /**
   * The unrecorded pods told, by namespace/name: why (the Event and log line go once while it
   * lasts), and the network-status written, taken back when the pod no longer asks.
   */
  private readonly toldUnrecorded = new Map<string, { reason: string; status: string }>();
  /** When this daemon first saw each running pod of its node without a record of it. */
  private unrecordedSince: ReadonlyMap<string, number> = new Map();
  private readonly clock: Clock;
  /**
   * What this node last wrote of each object (by resource, then namespace/name or documentName), and the object's
   * resourceVersion in the informer's cache when it did. While the cache still shows that version
   * it has not caught up with the write: writing the same again would be a write too many, and
   * each write is a watch event for every node.
   */
  private readonly wrote: Record<Memoized, Map<string, { over: string | undefined; value: unknown }>> = { pods: new Map(), podnetworkconfigs: new Map(), networks: new Map() };
  private retry: NodeJS.Timeout | undefined;
  readonly publish = coalesce(() => this.run().catch((err: Error) => this.opts.log.error('publishing status failed', { error: err.message })));

  /** Whether the standard network-status is written too: from the options, until Multus is seen on the node. */
  private standard: boolean;

  constructor(opts: PublisherOptions) {
    this.opts = opts;
    this.standard = opts.standardNetworkStatus === true;
    this.node = opts.source.nodeName;
    this.fieldManager = nodeFieldManager(this.node);
    this.clock = opts.clock ?? systemClock;
  }

  /** Stops writing the standard network-status (Multus came to the node, and writes it itself); what was written stays. */
  stopStandardNetworkStatus(): void {
    this.standard = false;
  }

  async close(): Promise<void> {
    clearTimeout(this.retry);
    await this.publish.idle();
    clearTimeout(this.retry);
  }

  private async run(): Promise<void> {
    const { source } = this.opts;
    if (!source.synced) return;
    const facts = this.opts.reconciler.facts();
    // One view of the documents and one time for every status of this round.
    const configs = new Map(source.objects('PodNetworkConfig').map((o) => [documentName({ kind: 'PodNetworkConfig', metadata: o.metadata }), o]));
    const docs = source.documents();
    const problems = new Map<string, string[]>();
    for (const p of this.opts.reconciler.judge(docs)) {
      problems.set(p.document, [...(problems.get(p.document) ?? []), `${p.field}: ${p.reason}`]);
    }
    const now = this.clock();
    // Any record of the pod counts, also one whose netns could not be looked at this pass.
    const recorded = new Set(this.opts.records.list().map((r) => `${r.pod.namespace}/${r.pod.name}`));
    const nodePods = source.pods().map((pod): NodePod => ({
      namespace: pod.metadata.namespace,
      name: pod.metadata.name,
      running: pod.status?.phase === 'Running',
      hostNetwork: pod.spec?.hostNetwork === true,
      identity: () => source.podIdentity(pod),
    }));
    const { lacking: unrecorded, since } = unrecordedPods(nodePods, recorded, docs.configs, this.unrecordedSince, now);
    this.unrecordedSince = since;
    const round: Round = { docs, problems, configs, unrecorded, now: new Date(now).toISOString() };
    // What was told of pods and configs that are gone is not needed again.
    const pods = new Set(facts.map((f) => `${f.namespace}/${f.name}`));
    for (const key of this.told.keys()) if (!pods.has(key)) this.told.delete(key);
    for (const key of this.wrote.pods.keys()) if (!pods.has(key) && !this.toldUnrecorded.has(key)) this.wrote.pods.delete(key);
    const lacking = new Set(unrecorded.map((p) => `${p.namespace}/${p.name}`));
    const untold: Promise<void>[] = [];
    for (const [key, { status }] of this.toldUnrecorded) {
      if (lacking.has(key)) continue;
      // A recorded pod's own network-status replaces it (publishPod); one that asks for nothing any
      // more has none: taken back while it is still what this node wrote, whether the cache shows
      // that write yet or not, and forgotten only once taken back.
      const [namespace, name] = key.split('/') as [string, string];
      const pod = source.pod(namespace, name);
      const wrote = this.wrote.pods.get(key);
      const ours = pod && (pod.metadata.annotations?.[networkStatusAnnotation] === status || (wrote?.value === status && wrote.over === pod.metadata.resourceVersion));
      if (!pod || recorded.has(key) || !ours) {
        this.toldUnrecorded.delete(key);
        continue;
      }
      untold.push(this.networkStatus(pod, null).then(() => void this.toldUnrecorded.delete(key)));
    }
    for (const key of this.toldProblems.keys()) if (!configs.has(key)) this.toldProblems.delete(key);
    for (const key of this.wrote.podnetworkconfigs.keys()) if (!configs.has(key)) this.wrote.podnetworkconfigs.delete(key);
    const results = await Promise.allSettled([
      ...facts.map((f) => this.publishPod(f, round)),
      ...unrecorded.map((p) => this.publishUnrecorded(p)),
      ...untold,
      ...this.publishConfigs(facts, round),
      ...this.publishNetworks(facts, round),
    ]);
    const failed = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    if (failed.length === 0) return;
    this.opts.log.warn('could not write status to the API server; trying again', { failed: failed.length, error: (failed[0]!.reason as Error).message });
    clearTimeout(this.retry);
    this.retry = setTimeout(() => void this.publish(), retryMs);
    this.retry.unref();
  }

  private async publishPod(facts: SandboxFacts, round: Round): Promise<void> {
    const pod = this.opts.source.pod(facts.namespace, facts.name);
    if (!pod) return;
    const key = `${facts.namespace}/${facts.name}`;
    const told = toldEntries(facts);
    const value = formatNetworkStatus(told.map((t) => t.entry));
    const current = pod.metadata.annotations?.[networkStatusAnnotation];
    const before = this.told.get(key) ?? parseEntries(current).map((entry) => ({ entry }));
    if (!this.shows(pod, value) && !this.written('pods', key, pod.metadata.resourceVersion, (v) => v === value)) {
      await this.networkStatus(pod, value);
    }
    this.told.set(key, told);
    const podRef = { kind: 'Pod', apiVersion: 'v1', name: pod.metadata.name, namespace: pod.metadata.namespace, uid: pod.metadata.uid };
    const events = podEventsBetween(facts, before, told).flatMap((e): EventSpec[] => {
      if (e.config === undefined) return [{ ...e, object: podRef }];
      // A config deleted since is not told.
      const config = round.configs.get(e.config);
      return config ? [{ ...e, object: configRef(config) }] : [];
    });
    await Promise.all(events.map((e) => this.event(e)));
  }

  /** This node's part of every PodNetworkConfig's status. */
  private publishConfigs(facts: readonly SandboxFacts[], { docs, problems, configs, unrecorded, now }: Round): Promise<void>[] {
    const parsed = new Map(docs.configs.map((c) => [documentName(c), c]));
    // Each config's sandboxes, gathered once: a node's configs times its sandboxes is a lot of looking.
    const selectedBy = new Map<string, SandboxFacts[]>();
    for (const f of facts) {
      for (const name of f.wanted.configs) {
        const list = selectedBy.get(name);
        if (list) list.push(f);
        else selectedBy.set(name, [f]);
      }
    }
    const writes: Promise<void>[] = [];
    for (const [name, object] of configs) {
      const config = parsed.get(name);
      const mine = config ? configNodeEntry(config, selectedBy.get(name) ?? [], this.node, unrecorded) : undefined;
      const current = object.status as PodNetworkConfigStatus | undefined;
      const specProblems = problems.get(name) ?? [];
      const hadEntry = (current?.nodes ?? []).some((n) => n.name === this.node);
      const degraded = current?.conditions?.some((c) => c.type === 'Degraded' && c.status === 'True') ?? false;
      // A node with nothing to say of a config (no pod of its selected, none before, no spec
      // problem to tell or take back) leaves its status alone: with thousands of configs, every
      // node writing each would be thousands of writes a node, each an event for every other.
      if (!mine && !hadEntry && specProblems.length === 0 && !degraded) continue;
      const status = configStatus(object.metadata.generation, mine, current, specProblems, this.node, now);
      if (sameStatus(status, current, this.node) || this.written('podnetworkconfigs', name, object.metadata.resourceVersion, (v) => sameStatus(status, v as PodNetworkConfigStatus, this.node))) {
        // What the status says was told by whoever wrote it.
        this.toldProblems.set(name, degradedMessage(current));
        continue;
      }
      writes.push(this.configEvents(name, object, status));
      writes.push(this.apply('podnetworkconfigs', name, statusPath('PodNetworkConfig', object.metadata), object, status));
    }
    return writes;
  }

  /**
   * A pod that asks for something podnet cannot give, having no record of its sandbox: its
   * network-status says why, and an Event and a log line tell it once.
   */
  private async publishUnrecorded(lacking: UnrecordedPod): Promise<void> {
    const pod = this.opts.source.pod(lacking.namespace, lacking.name);
    if (!pod) return;
    const value = formatNetworkStatus(unrecordedNetworkStatus(lacking));
    const key = `${lacking.namespace}/${lacking.name}`;
    if (!this.shows(pod, value) && !this.written('pods', key, pod.metadata.resourceVersion, (v) => v === value)) {
      await this.networkStatus(pod, value);
    }
    const before = this.toldUnrecorded.get(key);
    this.toldUnrecorded.set(key, { reason: lacking.reason, status: value });
    if (before?.reason === lacking.reason) return;
    this.opts.log.warn('a pod asks for what podnet cannot give it', { pod: key, askedBy: lacking.askedBy, reason: lacking.reason });
    const podRef = { kind: 'Pod', apiVersion: 'v1', name: lacking.name, namespace: lacking.namespace, uid: pod.metadata.uid };
    await this.event({ object: podRef, type: 'Warning', reason: 'NotRecorded', message: `${lacking.askedBy.join(', ')}: ${lacking.reason}` });
  }

  /**
   * A Warning when this node's write changes a config's Degraded message to a new problem. Told by
   * the node whose write changed it, not by every node: the message is shared, and a hundred nodes
   * would post a hundred Events of it; a node whose status computes as the one it sees writes
   * nothing and tells nothing.
   */
  private async configEvents(key: string, object: ApiObject, status: PodNetworkConfigStatus): Promise<void> {
    const message = degradedMessage(status);
    const told = this.toldProblems.get(key);
    this.toldProblems.set(key, message);
    if (message === '' || message === degradedMessage(object.status as PodNetworkConfigStatus | undefined) || message === told) return;
    await this.event({ object: configRef(object), type: 'Warning', reason: 'Degraded', message });
  }


  /** This node's entry in every Network it serves or has served. */
  private publishNetworks(facts: readonly SandboxFacts[], { docs, problems, now }: Round): Promise<void>[] {
    const { source } = this.opts;
    const writes: Promise<void>[] = [];
    const names = new Set<string>();
    for (const object of source.objects('Network')) {
      const network = docs.networks.get(object.metadata.name);
      const name = documentName({ kind: 'Network', metadata: object.metadata });
      names.add(name);
      const current = object.status as NetworkStatus | undefined;
      const specProblems = problems.get(name) ?? [];
      const entry = network ? networkNodeEntry(network, facts, this.node) : undefined;
      const hadEntry = (current?.nodes ?? []).some((n) => n.name === this.node);
      const degraded = current?.conditions?.some((c) => c.type === 'Degraded' && c.status === 'True') ?? false;
      // A node with nothing to say of a Network leaves its status alone; any node tells a spec problem, and that it is gone.
      if (!entry && !hadEntry && specProblems.length === 0 && !degraded) continue;
      const status = networkStatus(entry, current, specProblems, this.node, now);
      if (sameStatus(status, current, this.node) || this.written('networks', name, object.metadata.resourceVersion, (v) => sameStatus(status, v as NetworkStatus, this.node))) continue;
      writes.push(this.apply('networks', name, statusPath('Network', object.metadata), object, status));
    }
    // What was written of Networks that are gone is not needed again.
    for (const key of this.wrote.networks.keys()) if (!names.has(key)) this.wrote.networks.delete(key);
    return writes;
  }

  /** Whether this node wrote `key` of `resource` while the cache showed `version`, and what it wrote passes `same`. */
  private written(resource: Memoized, key: string, version: string | undefined, same: (value: unknown) => boolean): boolean {
    const wrote = this.wrote[resource].get(key);
    return wrote !== undefined && wrote.over === version && same(wrote.value);
  }

  /** Every write goes through here: counted, and its failure counted, by resource. */
  private async write(resource: WrittenResource, request: Promise<unknown>): Promise<void> {
    try {
      await request;
    } catch (err) {
      this.opts.metrics?.apiWriteFailed(resource);
      throw err;
    }
    this.opts.metrics?.apiWritten(resource);
  }

  /** A write of `key` of `resource` made over the cached `over`, remembered (written) once it succeeded. */
  private async remembered(resource: Memoized, key: string, request: Promise<unknown>, over: string | undefined, value: unknown): Promise<void> {
    await this.write(resource, request);
    this.wrote[resource].set(key, { over, value });
  }

  /**
   * Sets (or with null, removes) a pod's network-status annotation, and the standard one made from
   * it when the daemon writes that too: a merge patch of those keys alone, over the pod as cached.
   */
  private networkStatus(pod: PodObject, value: string | null): Promise<void> {
    const { namespace, name, resourceVersion } = pod.metadata;
    const request = this.opts.api.merge(`/api/v1/namespaces/${namespace}/pods/${name}`, { metadata: { annotations: this.annotationsOf(pod, value) } });
    return this.remembered('pods', `${namespace}/${name}`, request, resourceVersion, value);
  }

  /**
   * The annotations a network-status value is written as on `pod`. The standard one only with the
   * flag; where the value leaves it nothing to list (no interface the pod has), it is removed only
   * while it is podnet's own (made from podnet's annotation as the pod shows it), never another
   * writer's (ADR 29).
   */
  private annotationsOf(pod: PodObject, value: string | null): Record<string, string | null> {
    if (!this.standard) return { [networkStatusAnnotation]: value };
    const standard = value === null ? null : standardNetworkStatus(value);
    if (standard !== null) return { [networkStatusAnnotation]: value, [standardNetworkStatusAnnotation]: standard };
    const shown = pod.metadata.annotations ?? {};
    const own = shown[standardNetworkStatusAnnotation] !== undefined && shown[networkStatusAnnotation] !== undefined && standardNetworkStatus(shown[networkStatusAnnotation]) === shown[standardNetworkStatusAnnotation];
    return own ? { [networkStatusAnnotation]: value, [standardNetworkStatusAnnotation]: null } : { [networkStatusAnnotation]: value };
  }

  /** Whether the pod, as the cache has it, shows the network-status `value` already, in every annotation it is written as. */
  private shows(pod: PodObject, value: string): boolean {
    const annotations = pod.metadata.annotations ?? {};
    return Object.entries(this.annotationsOf(pod, value)).every(([key, wanted]) => (annotations[key] ?? null) === wanted);
  }

  /** This node's entries of an object's status, by server-side apply as podnet/<node>. */
  private apply(resource: 'podnetworkconfigs' | 'networks', key: string, path: string, object: ApiObject, status: object): Promise<void> {
    const metadata = { name: object.metadata.name, ...(object.metadata.namespace ? { namespace: object.metadata.namespace } : {}) };
    const request = this.opts.api.apply(path, { apiVersion: `${apiGroup}/${apiVersion}`, kind: object.kind!, metadata, status }, this.fieldManager);
    return this.remembered(resource, key, request, object.metadata.resourceVersion, status);
  }

  private async event(e: EventSpec): Promise<void> {
    const { path, body } = eventRequest(e, { instance: this.node, host: this.node }, new Date().toISOString());
    await this.write('events', this.opts.api.post(path, body));
  }
}

/** A config status's Degraded message while it is degraded; '' when it is not. */
function degradedMessage(status: PodNetworkConfigStatus | undefined): string {
  const degraded = status?.conditions?.find((c) => c.type === 'Degraded');
  return degraded?.status === 'True' ? degraded.message : '';
}

/** What an Event on a PodNetworkConfig names it by. */
function configRef(object: ApiObject): EventSpec['object'] {
  return { kind: 'PodNetworkConfig', apiVersion: `${apiGroup}/${apiVersion}`, name: object.metadata.name, namespace: object.metadata.namespace!, ...(object.metadata.uid ? { uid: object.metadata.uid } : {}) };
}

function parseEntries(text: string | undefined): NetworkStatusEntry[] {
  if (text === undefined) return [];
  try {
    const value: unknown = JSON.parse(text);
    return Array.isArray(value) ? (value as NetworkStatusEntry[]) : [];
  } catch {
    return [];
  }
}
