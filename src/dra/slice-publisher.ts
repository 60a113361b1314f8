// This node's pool of podnet's DRA devices, kept in the API server (docs/adr/0033): after a pass, and
// whenever the Networks or the node's labels change, the devices are made again from what the node
// serves and holds (devices.ts); when they differ from what was last written, the slices are
// written with the pool's next generation and the slices no longer needed are deleted. A write
// that fails is tried again with backoff; runs are serialized and merged. The kubelet deletes a
// node's slices at its start and 30 s after a driver's plugin went away: what was written is
// looked at again every verifyEveryMs, and at once when the kubelet registers the plugin.
import { coalesce } from '../coalesce.ts';
import { PodnetError, toPodnetError } from '../errors.ts';
import type { Logger } from '../log.ts';
import { retryWaitMs, systemTimer, type Timer } from '../retry.ts';
import type { KubeApi, Json } from '../kube/api.ts';
import { nodeFieldManager, paths } from '../kube/resources.ts';
import { driverName, poolSlices, type SliceDevice } from './devices.ts';

export interface SlicePublisherOptions {
  api: Pick<KubeApi, 'get' | 'apply' | 'delete'>;
  nodeName: string;
  log: Logger;
  /** This node's Node uid, once its Node is known (the slices' owner); undefined before. */
  nodeUid: () => string | undefined;
  /** The devices the node offers now; undefined while the daemon has no whole view yet. */
  devices: () => SliceDevice[] | undefined;
  timer?: Timer;
  clock?: () => number;
  /** How often slices written and unchanged since are looked for in the API server (default 30 s). */
  verifyEveryMs?: number;
}

interface SliceList {
  items: { metadata: { name: string; uid?: string }; spec: { pool?: { generation?: number; resourceSliceCount?: number }; devices?: unknown[] } }[];
}

export class SlicePublisher {
  private readonly opts: SlicePublisherOptions;
  /** The devices as last written whole; undefined before the first write. */
  private written: string | undefined;
  /** The pool's generation last written; learned from the API server at the first run. */
  private generation: number | undefined;
  /** How many slices the pool was last written in. */
  private sliceCount = 0;
  private failures = 0;
  /** When the slices were last found as written. */
  private verifiedAt = Number.NEGATIVE_INFINITY;
  private cancelRetry: (() => void) | undefined;
  private stopped = false;

  constructor(opts: SlicePublisherOptions) {
    this.opts = opts;
  }

  readonly publish = coalesce(async () => {
    if (this.stopped) return;
    this.cancelRetry?.();
    this.cancelRetry = undefined;
    try {
      await this.run();
      this.failures = 0;
    } catch (err) {
      this.failures++;
      const waitMs = retryWaitMs(this.failures);
      this.opts.log.warn('publishing the node\'s DRA devices failed; trying again', { error: toPodnetError(err).message, retryInMs: waitMs });
      this.cancelRetry = (this.opts.timer ?? systemTimer)(waitMs, () => void this.publish());
    }
  });

  /** The next run looks whether the slices are still there (the kubelet registered the plugin: it may have wiped them). */
  verifyNow(): Promise<void> {
    this.verifiedAt = Number.NEGATIVE_INFINITY;
    return this.publish();
  }

  stop(): void {
    this.stopped = true;
    this.cancelRetry?.();
  }

  private async run(): Promise<void> {
    const uid = this.opts.nodeUid();
    const devices = this.opts.devices();
    if (uid === undefined || devices === undefined) return;
    const text = JSON.stringify(devices);
    const now = (this.opts.clock ?? Date.now)();
    if (text === this.written && now - this.verifiedAt < (this.opts.verifyEveryMs ?? 30_000)) return;
    const { nodeName, api } = this.opts;
    const selector = encodeURIComponent(`spec.nodeName=${nodeName},spec.driver=${driverName}`);
    const existing = (await api.get<SliceList>(`${paths.resourceSlices}?fieldSelector=${selector}`)).items;
    const whole = (count: number) => existing.length === count && existing.every((s) => s.spec.pool?.generation === this.generation && s.spec.pool?.resourceSliceCount === count);
    if (text === this.written && whole(this.sliceCount)) {
      this.verifiedAt = now;
      return;
    }
    // Higher than any the pool had, also across a restart: the scheduler reads the highest generation's slices.
    const generation = Math.max(this.generation ?? 0, ...existing.map((s) => s.spec.pool?.generation ?? 0)) + 1;
    const slices = poolSlices({ name: nodeName, uid }, devices, generation);
    for (const slice of slices) await api.apply(`${paths.resourceSlices}/${slice.metadata.name}`, slice as unknown as Json, nodeFieldManager(nodeName));
    const kept = new Set(slices.map((s) => s.metadata.name));
    for (const stale of existing.filter((s) => !kept.has(s.metadata.name))) {
      try {
        await api.delete(`${paths.resourceSlices}/${stale.metadata.name}`, stale.metadata.uid);
      } catch (err) {
        if (!(err instanceof PodnetError && err.code === 'NOT_FOUND')) throw err;
      }
    }
    this.generation = generation;
    this.sliceCount = slices.length;
    this.written = text;
    this.verifiedAt = now;
    this.opts.log.info("published the node's DRA devices", { slices: slices.length, devices: devices.length, generation });
  }
}
