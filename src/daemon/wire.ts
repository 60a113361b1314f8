// The one place a reconciler is put together from the real parts: the node's kernel (ip, tc and
// /proc/sys through the netns runner), the state dir's stores, the node's IPAM, the CNI plugins of
// cni Networks and the system clock. The daemon and `podnet uninstall` both take theirs from here.
import type { NodeLimits } from '../model/desired.ts';
import { join } from 'node:path';
import { DelegatedLifecycle } from '../delegate/lifecycle.ts';
import { PluginRunner, type PluginRunnerOptions } from '../delegate/plugin.ts';
import { DelegatedStore } from '../delegate/store.ts';
import { NodeIpam } from '../ipam/ipam.ts';
import type { Logger } from '../log.ts';
import { netnsObserver } from '../netns/observe.ts';
import { networkNamespaceSight } from '../netns/probe.ts';
import { netnsRunner } from '../netns/runner.ts';
import { stateLayout } from '../protocol/paths.ts';
import { AppliedStore } from '../registry/applied.ts';
import { removeTempFiles } from '../registry/atomic-file.ts';
import { kernelStateDirs } from '../registry/boot.ts';
import type { Registry } from '../registry/registry.ts';
import { systemClock, systemTimer } from '../retry.ts';
import type { DesiredSource } from '../sources/source.ts';
import type { PassMetrics, PluginMetrics } from '../metrics.ts';
import { Reconciler } from './reconciler.ts';

export interface ReconcilerParts {
  stateDir: string;
  registry: Registry;
  source: DesiredSource;
  /** Where cni Networks' plugins are found, and how long one may take. */
  plugins: PluginRunnerOptions;
  /** What this node's admin bounds per pod. */
  limits?: NodeLimits;
  log: Logger;
  afterPass?: () => void;
  /** Told how passes and plugin calls go (none: metrics are off). */
  metrics?: PassMetrics & PluginMetrics;
}

/** A reconciler on this node's kernel and `stateDir`; the writes a crash cut short there are removed first. */
export function wireReconciler({ stateDir, registry, source, plugins, limits, log, afterPass, metrics }: ReconcilerParts): Reconciler {
  for (const dir of [stateDir, ...[...kernelStateDirs, stateLayout.delegated].map((d) => join(stateDir, d))]) {
    const removed = removeTempFiles(dir);
    if (removed.length > 0) log.info('removed the temp files of writes a crash cut short', { dir, files: removed.length });
  }
  const observe = netnsObserver(netnsRunner);
  const records = new DelegatedStore(stateDir, registry.quarantine.told('what its plugins made for a sandbox is not taken back'));
  const delegated = new DelegatedLifecycle({
    records,
    plugins: new PluginRunner(plugins, metrics),
    sight: networkNamespaceSight,
    podLinks: (netns) => observe.links({ netns }),
    recorded: (containerId) => registry.list().some((r) => r.containerId === containerId),
    clock: systemClock,
    log,
  });
  return new Reconciler({
    stateDir,
    records: registry,
    source,
    run: netnsRunner,
    observe,
    sight: networkNamespaceSight,
    applied: new AppliedStore(stateDir, registry.quarantine.told('what podnet applied there is left in place, not taken back')),
    quarantined: registry.quarantine.told('the pass it journaled is not taken back'),
    ipam: NodeIpam.open(stateDir),
    delegated,
    clock: systemClock,
    timer: systemTimer,
    ...(limits ? { limits } : {}),
    log,
    ...(afterPass ? { afterPass } : {}),
    ...(metrics ? { metrics } : {}),
  });
}
