// Informers (list, then watch; client-node's ListWatch) on resources of the API server, started
// and stopped together: their caches are what the daemon's source (informers.ts) and the
// controller (src/controller/) read. When the API server is unreachable they keep the last state
// seen. A watch that fails is started again with backoff; one whose resourceVersion expired
// (410 Gone) lists again (ListWatch does it) and the caller hears of it as of any change.
import { ListWatch, type KubernetesObject, type KubernetesListObject } from '@kubernetes/client-node';
import { PodnetError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { ApiMetrics, WatchedResource } from '../metrics.ts';
import { retryWaitMs } from '../retry.ts';
import { metadataOnly, type KubeApi } from './api.ts';

export interface Informer<T extends KubernetesObject> {
  cache: ListWatch<T>;
  synced: boolean;
  /** Its last list found the resource not served (an optional one): the next list is a look again. */
  unserved?: boolean;
}

export class WatchedResources {
  private readonly opts: { api: KubeApi; log: Logger; metrics?: Pick<ApiMetrics, 'watchEventReceived'> | undefined };
  private readonly informers = new Map<WatchedResource, Informer<KubernetesObject>>();
  /** Told of every list and event, with the resource's name (start gives it). */
  private changed: (resource: WatchedResource) => void = () => undefined;
  private stopped = false;
  private readonly timers = new Set<NodeJS.Timeout>();

  constructor(opts: { api: KubeApi; log: Logger; metrics?: Pick<ApiMetrics, 'watchEventReceived'> | undefined }) {
    this.opts = opts;
  }

  /**
   * An informer on `path`, started with the others. `optional`: a resource the cluster may not
   * serve (404): it counts as listed, and empty, until it does. `metadataOnly`: its cache holds
   * each object's metadata alone.
   */
  add<T extends KubernetesObject>(name: WatchedResource, path: string, { fieldSelector, optional = false, metadataOnly: metadata = false }: { fieldSelector?: string; optional?: boolean; metadataOnly?: boolean } = {}): Informer<T> {
    const { api, log, metrics } = this.opts;
    const list = () => {
      // ListWatch lists only at its first start and when the API server said 410 Gone.
      if (entry.synced && !entry.unserved) log.info("the watch's resourceVersion expired (410 Gone); listing again", { resource: name });
      return api.get<KubernetesListObject<T>>(fieldSelector ? `${path}?fieldSelector=${encodeURIComponent(fieldSelector)}` : path, metadata ? metadataOnly.list : undefined).then((answer) => {
        if (entry.unserved) log.info('the API server serves this resource now', { resource: name });
        entry.unserved = false;
        return answer;
      });
    };
    // ListWatch watches again after its reconnect wait even when stopped meanwhile: the wait is
    // one of ours, which stop() cancels, so a stopped set opens no watch.
    const delayFn = (ms: number) => new Promise<void>((resolve) => this.later(ms, resolve));
    const cache = new ListWatch<T>(path, metadata ? api.metadataWatch : api.watch, list, false, undefined, fieldSelector, { delayFn });
    const entry: Informer<T> = { cache, synced: false };
    let failures = 0;
    let failedAt = 0;
    cache.on('change', () => {
      metrics?.watchEventReceived(name);
      this.changed(name);
    });
    cache.on('error', (err: unknown) => {
      if (this.stopped) return;
      // A resource the cluster does not serve (no such CRD) is looked for again, quietly.
      const unserved = optional && err instanceof PodnetError && err.code === 'NOT_FOUND';
      if (unserved) entry.unserved = true;
      if (unserved && !entry.synced) {
        entry.synced = true;
        log.info('the API server does not serve this resource; what names one is refused until it does', { resource: name });
      }
      // A watch that ran a good while before failing starts over from the first wait.
      if (Date.now() - failedAt > 2 * retryWaitMs(Infinity)) failures = 0;
      failedAt = Date.now();
      failures++;
      const waitMs = retryWaitMs(failures);
      if (!unserved) log.warn('a watch of the API server failed; the last state seen stays in force', { resource: name, error: describe(err), retryInMs: waitMs });
      this.later(waitMs, () => void this.startInformer(name, entry as Informer<KubernetesObject>));
    });
    this.informers.set(name, entry as Informer<KubernetesObject>);
    return entry;
  }

  /**
   * Starts every informer; resolves once each has listed (or the set was stopped). A list that
   * fails is tried again with backoff, as a failed watch is.
   */
  async start(changed: (resource: WatchedResource) => void): Promise<void> {
    this.changed = changed;
    for (const [name, entry] of this.informers) void this.startInformer(name, entry);
    // Not a timer of `later`'s: stop() clears those, and this wait must still see that it stopped.
    while (!this.stopped && !this.synced) await new Promise((resolve) => setTimeout(resolve, 100).unref());
  }

  get synced(): boolean {
    return [...this.informers].every(([name, entry]) => this.listed(name, entry));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearTimeout(timer);
    await Promise.all([...this.informers.values()].map((i) => i.cache.stop()));
  }

  /**
   * Whether an informer's cache has held a whole list: ListWatch sets its resourceVersion in the
   * same step that puts a list's items in the cache. Looked at again each time, not only when its
   * start returns: a watch refused 410 Gone at once starts a list that start does not wait for.
   */
  private listed(name: WatchedResource, entry: Informer<KubernetesObject>): boolean {
    if (!entry.synced && entry.cache.latestResourceVersion() !== '') {
      entry.synced = true;
      this.opts.log.info('watching', { resource: name });
    }
    return entry.synced;
  }

  private async startInformer(name: WatchedResource, entry: Informer<KubernetesObject>): Promise<void> {
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
