// What `podnet uninstall` does to pods and the host, with the daemon stopped: one pass of the
// standalone reconciler against no documents at all, which takes back every attachment, tuning,
// route, rule, sysctl and rate limit podnet applied, then the bridges it made.
import { Registry } from '../registry/registry.ts';
import { dropStateOfEarlierBoot } from '../registry/boot.ts';
import { wireReconciler } from './wire.ts';
import { noDocuments } from '../sources/source.ts';
import { acquireStateLock } from './lock.ts';
import type { Logger } from '../log.ts';
import { PodnetError } from '../errors.ts';
import type { PluginRunnerOptions } from '../delegate/plugin.ts';

export interface TakeBackOutcome {
  /** Sandboxes whose changes were taken back. */
  sandboxes: number;
}

/**
 * Takes back everything podnet applied on this node, as recorded in `stateDir`. Refused while a
 * daemon holds the state dir (it would put it all back). Throws naming the pods it could not
 * take back, after trying every one.
 */
export async function takeBackEverything(stateDir: string, log: Logger, plugins: PluginRunnerOptions): Promise<TakeBackOutcome> {
  const lock = acquireStateLock(stateDir);
  try {
    dropStateOfEarlierBoot(stateDir);
    const registry = await Registry.open(stateDir, log);
    const reconciler = wireReconciler({ stateDir, registry, source: noDocuments, plugins, log });
    await reconciler.recover();
    await reconciler.schedule('resync');
    await reconciler.close();
    const items = reconciler.list().items;
    const failed = items.filter((i) => i.lastError !== undefined);
    if (failed.length > 0) {
      throw new PodnetError('IO_FAILURE', `could not take back podnet's changes in ${failed.map((i) => `${i.namespace}/${i.name} (${i.lastError})`).join(', ')}`);
    }
    return { sandboxes: items.filter((i) => i.lastSteps.length > 0).length };
  } finally {
    lock.release();
  }
}
