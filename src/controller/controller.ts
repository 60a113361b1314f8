// podnet's controller (ADR 32), one per cluster: it removes from every Network's and
// PodNetworkConfig's status the entries of nodes that are gone, which no daemon may remove. It
// looks when a Node is deleted, at its start, and every `sweepMs` besides. An entry goes only once the API server says its Node does not exist: its
// cache of Nodes may lag behind a node that has just joined.
import type { KubernetesObject } from '@kubernetes/client-node';
import { coalesce } from '../coalesce.ts';
import { toPodnetError, type PodnetError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { systemClock, type Clock } from '../retry.ts';
import type { KubeApi } from '../kube/api.ts';
import { eventRequest } from '../kube/events.ts';
import { apiGroup, apiVersion, objectPath, paths, statusPath, type ApiObject } from '../kube/resources.ts';
import { WatchedResources } from '../kube/watched.ts';
import { goneManagerLines, unknownNodes, withoutNodes, type AnyStatus, type StatusKind } from './gone-nodes.ts';

/** How many writes one look makes of an object whose version moved on under it. */
const writeAttempts = 3;

/** The field manager of the controller's writes: not podnet/<name>, which a node of that name would be. */
export const controllerManager = 'podnet-controller';

/** What the controller reads, as its informers last saw it. */
export interface ControllerView {
  /** Whether the Node cache has a node of that name. */
  knowsNode(name: string): boolean;
  objects(kind: StatusKind): readonly ApiObject[];
}

export interface GoneNodesOptions {
  api: Pick<KubeApi, 'get' | 'patch' | 'post'>;
  view: ControllerView;
  log: Logger;
  clock?: Clock;
}

export class GoneNodes {
  private readonly opts: GoneNodesOptions;

  constructor(opts: GoneNodesOptions) {
    this.opts = opts;
  }

  /** One look at every status: the entries of nodes the API server does not have are removed, each object once. */
  async sweep(): Promise<void> {
    const { view } = this.opts;
    // Asked once a look, whatever the number of objects naming it.
    const asked = new Map<string, Promise<boolean>>();
    const gone = (node: string) => {
      let answer = asked.get(node);
      if (!answer) asked.set(node, (answer = this.nodeGone(node)));
      return answer;
    };
    for (const kind of ['PodNetworkConfig', 'Network'] as const) {
      for (const object of view.objects(kind)) {
        const unknown = unknownNodes({ status: object.status as AnyStatus | undefined, managedFields: object.metadata.managedFields }, (node) => view.knowsNode(node));
        const confirmed = new Set<string>();
        for (const node of unknown) if (await gone(node)) confirmed.add(node);
        if (confirmed.size === 0) continue;
        const written = await this.removeFromCurrent(kind, object, confirmed);
        if (written) await this.forgetManagers(kind, written, confirmed);
      }
    }
  }

  /**
   * The gone nodes' entries removed from the object, read again from the API server after a write
   * that did not take: the cache may lag behind a live node's write of its own entry, and a look
   * every sweep would lose that race as long as the live node writes. At most writeAttempts.
   */
  private async removeFromCurrent(kind: StatusKind, object: ApiObject, gone: ReadonlySet<string>): Promise<ApiObject | undefined> {
    let current = object;
    for (let attempt = 1; ; attempt++) {
      if (!(current.status as AnyStatus | undefined)?.nodes?.some((n) => gone.has(n.name))) return current;
      const outcome = await this.remove(kind, current, gone);
      if (!(outcome instanceof Error)) return outcome;
      const again = attempt < writeAttempts ? await this.opts.api.get<ApiObject>(objectPath(kind, current.metadata)).catch(() => undefined) : undefined;
      if (!again) {
        this.opts.log.warn("could not remove gone nodes' entries; looking again at the next change or sweep", { object: nameOf(kind, current), nodes: [...gone].sort(), error: outcome.message });
        return undefined;
      }
      current = again;
    }
  }

  /** Whether the API server says node `name` does not exist; any other answer, or none, is no. */
  private async nodeGone(name: string): Promise<boolean> {
    try {
      await this.opts.api.get(`${paths.nodes}/${encodeURIComponent(name)}`);
      return false;
    } catch (err) {
      const e = toPodnetError(err);
      // The API server's own NotFound, not any 404 (a proxy's page says nothing of the node).
      if (e.code === 'NOT_FOUND' && e.details === 'NotFound') return true;
      this.opts.log.warn('could not ask whether a node exists; its entries stay until the next look', { node: name, error: e.message });
      return false;
    }
  }

  /**
   * The object's status without the gone nodes' entries, written over the version read (a JSON
   * patch that tests its resourceVersion: a write raced with is looked at again, not overwritten),
   * and one Event of it, told by the write that took.
   */
  private async remove(kind: StatusKind, object: ApiObject, gone: ReadonlySet<string>): Promise<ApiObject | PodnetError> {
    const { api, log, clock = systemClock } = this.opts;
    const now = new Date(clock()).toISOString();
    const status = withoutNodes(kind, object.status as AnyStatus, gone, now);
    const what = nameOf(kind, object);
    const nodes = [...gone].sort();
    let written: ApiObject;
    try {
      written = (await api.patch(
        statusPath(kind, object.metadata),
        [
          { op: 'test', path: '/metadata/resourceVersion', value: object.metadata.resourceVersion },
          { op: 'replace', path: '/status', value: status },
        ],
        controllerManager,
      )) as unknown as ApiObject;
    } catch (err) {
      return toPodnetError(err);
    }
    log.info("removed gone nodes' entries", { object: what, nodes, ready: status.ready });
    const message = `${nodes.length === 1 ? `node ${nodes[0]} is` : `nodes ${nodes.join(', ')} are`} gone from the cluster: removed from status.nodes (READY ${status.ready ?? ''})`;
    const involved = { kind, apiVersion: `${apiGroup}/${apiVersion}`, name: object.metadata.name, namespace: object.metadata.namespace ?? '', ...(object.metadata.uid ? { uid: object.metadata.uid } : {}) };
    const { path, body } = eventRequest({ object: involved, type: 'Normal', reason: 'NodeGone', message }, { instance: 'controller' }, now);
    await api.post(path, body).catch((err: unknown) => log.warn('could not post an Event', { object: what, error: toPodnetError(err).message }));
    return written;
  }

  /**
   * The gone nodes' lines of the object's managedFields removed, over the version written: each
   * node applies the fields all nodes share as the others do, so its line outlives its entry
   * (about 250 bytes an object), and a cluster whose nodes come and go would grow every object
   * by one a node. A status write cannot change managedFields: this is a write of the object,
   * which the admission policy holds to that.
   */
  private async forgetManagers(kind: StatusKind, object: ApiObject, gone: ReadonlySet<string>): Promise<void> {
    const lines = goneManagerLines(object.metadata.managedFields, gone);
    if (lines.length === 0) return;
    const what = nameOf(kind, object);
    try {
      await this.opts.api.patch(
        objectPath(kind, object.metadata),
        [{ op: 'test', path: '/metadata/resourceVersion', value: object.metadata.resourceVersion }, ...lines.map((i) => ({ op: 'remove', path: `/metadata/managedFields/${i}` }))],
        controllerManager,
      );
    } catch (err) {
      this.opts.log.warn("could not remove gone nodes' field managers; looking again at the next change or sweep", { object: what, nodes: [...gone].sort(), error: toPodnetError(err).message });
    }
  }
}

/** "PodNetworkConfig ns/name", "Network name": how the log names an object. */
function nameOf(kind: StatusKind, object: ApiObject): string {
  return `${kind} ${object.metadata.namespace ? `${object.metadata.namespace}/` : ''}${object.metadata.name}`;
}

/** The controller running: its informers, a look at each Node's deletion (a burst as one) and every `sweepMs`. */
export async function startController({ api, log, sweepMs }: { api: KubeApi; log: Logger; sweepMs: number }): Promise<{ stop(): Promise<void> }> {
  const watched = new WatchedResources({ api, log });
  // A Node is large (its images, addresses, conditions) and only its name counts here.
  const nodes = watched.add<KubernetesObject>('nodes', paths.nodes, { metadataOnly: true });
  const networks = watched.add<ApiObject>('networks', paths.networks);
  const configs = watched.add<ApiObject>('podnetworkconfigs', paths.podNetworkConfigs);
  const view: ControllerView = {
    knowsNode: (name) => nodes.cache.get(name) !== undefined,
    objects: (kind) => (kind === 'Network' ? networks : configs).cache.list(),
  };
  const goneNodes = new GoneNodes({ api, view, log });
  const sweep = coalesce(() => goneNodes.sweep().catch((err: unknown) => log.error('a look for gone nodes failed', { error: toPodnetError(err).message })));
  let stopped = false;
  // A Node deleted starts a look; a burst of deletions (an autoscaler's) is one, a second after the
  // first. Nothing else does: every node's heartbeat and every write of an entry is a change, and
  // the look every sweepMs finds what they bring.
  let soon: NodeJS.Timeout | undefined;
  const deleted = () => {
    if (stopped || soon) return;
    soon = setTimeout(() => {
      soon = undefined;
      void sweep();
    }, 1000);
  };
  nodes.cache.on('delete', deleted);
  await watched.start(() => undefined);
  log.info('controller started', { nodes: nodes.cache.list().length, networks: networks.cache.list().length, configs: configs.cache.list().length });
  void sweep();
  const every = setInterval(() => void sweep(), sweepMs);
  return {
    async stop() {
      stopped = true;
      clearInterval(every);
      if (soon) clearTimeout(soon);
      await watched.stop();
      await sweep.idle();
    },
  };
}
