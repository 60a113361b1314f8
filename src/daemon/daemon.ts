// The node daemon's lifecycle: open the registry (which replays the spool), serve the socket, keep
// replaying what plugins spool while it runs, stop cleanly on SIGTERM. A SIGKILL at any moment is
// also fine: every change is on disk before it is acknowledged, and the next start repairs the rest.
import { resolve } from 'node:path';
import { watch, type FSWatcher } from 'node:fs';
import { Registry } from '../registry/registry.ts';
import { dropStateOfEarlierBoot } from '../registry/boot.ts';
import { spoolDir } from '../registry/spool.ts';
import { startServer, type RunningServer } from './server.ts';
import { acquireStateLock } from './lock.ts';
import type { Reconciler } from './reconciler.ts';
import { wireReconciler } from './wire.ts';
import { coalesce } from '../coalesce.ts';
import { ConfigDirSource } from '../sources/config-dir.ts';
import { emptyDocuments, type DesiredSource } from '../sources/source.ts';
import { QuietPods } from './quiet-pods.ts';
import type { Logger } from '../log.ts';
import { parseDocument, type AttachmentRecord } from '../protocol/validate.ts';
import type { ApiDocument } from '../sources/documents.ts';
import { chainIfMissing, multusPrimary, primaryNetworkName } from '../install/install.ts';
import { adoptCachedAttachments } from '../registry/adopt.ts';
import { networkNamespaceCheck } from '../netns/probe.ts';
import { startToolsWith } from '../netns/runner.ts';
import { executableLauncher } from '../launcher/launcher.ts';
import type { PodnetEntry } from '../install/conflist.ts';
import type { StatusPublisher } from '../kube/publisher.ts';
import type { DraDriver } from '../dra/driver.ts';
import { PodnetError } from '../errors.ts';
import type { PluginRunnerOptions } from '../delegate/plugin.ts';
import type { NodeLimits } from '../model/desired.ts';
import type { MetricsServer, PrometheusMetrics } from './prometheus.ts';

export interface DaemonOptions {
  socketPath: string;
  stateDir: string;
  version: string;
  log: Logger;
  /** How often the spool is replayed even without a change notice (fs.watch can miss events). */
  spoolIntervalMs?: number;
  /** Standalone mode: the directory of Network and PodNetworkConfig documents to follow. */
  configDir?: string;
  /**
   * Kubernetes mode: this node's name, and a kubeconfig file (none: the pod's service account).
   * The desired state is the API's pods on this node, Networks and PodNetworkConfigs.
   */
  /** standardNetworkStatus: also write the k8s.v1.cni.cncf.io/network-status of pods (refused when the primary CNI config is Multus's). */
  /** `dra`: offer the node's Networks to the scheduler as podnet's DRA driver (docs/adr/0033). */
  kube?: { nodeName: string; kubeconfig?: string; standardNetworkStatus?: boolean; dra?: boolean; kubeletDir?: string };
  /** Where delegated Networks' plugins are found, and how long one may take. */
  plugins: PluginRunnerOptions;
  /** What this node's admin bounds per pod (default: defaultLimits in model/desired.ts). */
  limits?: NodeLimits;
  /** How often every sandbox is reconciled even without a change (drift repair). */
  resyncMs?: number;
  /** The runtime's CNI conf dir, to keep podnet chained into the primary's config there, with this entry. */
  cniConf?: { dir: string; entry: PodnetEntry };
  /**
   * The runtime's libcni cache dir (/var/lib/cni): at start, pods that ran before podnet was
   * chained are adopted from its result cache. Only the primary's network when cniConf is given.
   */
  cniCacheDir?: string;
  /**
   * The container runtime's CRI socket: at adoption, asked for the netns of sandboxes whose cache
   * entry names none (a runtime's libcni before 1.2, as containerd 1.6's).
   */
  criSocket?: string;
  /** Where to serve Prometheus metrics (GET /metrics); none: not served. */
  metricsAddress?: { host: string; port: number };
}

export interface RunningDaemon {
  registry: Registry;
  reconciler: Reconciler | undefined;
  stop(): Promise<void>;
}

export async function startDaemon(opts: DaemonOptions): Promise<RunningDaemon> {
  const { log } = opts;
  const lock = acquireStateLock(opts.stateDir);
  let registry: Registry;
  let server: RunningServer;
  // Standalone mode only; the socket answers /v1/sandboxes from it.
  let reconciler: Reconciler | undefined;
  let source: DesiredSource | undefined;
  let publisher: StatusPublisher | undefined;
  let dra: DraDriver | undefined;
  // The plugin's hints are made again after a change of what pods ask (set once they are, below).
  let hintAgain: () => void = () => undefined;
  let metrics: PrometheusMetrics | undefined;
  let metricsServer: MetricsServer | undefined;
  if (opts.configDir && opts.kube) throw new PodnetError('INVALID_CONFIG', 'follow either a config dir (standalone) or the Kubernetes API (--node-name), not both');
  // It goes into the pods' field selector and every status this node writes.
  if (opts.kube) parseDocument('Name', opts.kube.nodeName, '--node-name (a Kubernetes node name)', 'INVALID_CONFIG');
  // The tools passes run are started by a small child of the daemon, not by forking it (ADR 22).
  const tools = executableLauncher();
  startToolsWith(tools?.start);
  const stopTools = () => {
    startToolsWith(undefined);
    tools?.close();
  };
  try {
    // Before anything reads applied/, ipam/, journal/ or records/: what they say of an earlier boot's kernel and sandboxes is void.
    if (dropStateOfEarlierBoot(opts.stateDir)) log.info('dropped what an earlier boot recorded of its kernel objects and sandboxes', { stateDir: opts.stateDir });
    registry = await Registry.open(opts.stateDir, log);
    if (opts.cniCacheDir) await adopt(registry, opts.cniCacheDir, opts.cniConf?.dir, opts.criSocket, log);
    if (opts.metricsAddress) {
      const open = registry;
      // Loaded only when asked: prom-client and the builtins it needs cost every daemon
      // megabytes of memory otherwise (bench/resync).
      const { PrometheusMetrics } = await import('./prometheus.ts');
      metrics = new PrometheusMetrics(
        { attachments: () => reconciler?.attachmentStates() ?? [], spoolBacklog: () => open.spoolPending(), quarantined: () => open.quarantined().length },
        opts.version,
      );
    }
    const reported = metrics ? { metrics } : {};
    if (opts.kube) {
      // Two writers of one annotation would overwrite each other at every pass.
      const multus = opts.kube.standardNetworkStatus && opts.cniConf ? multusPrimary(opts.cniConf.dir) : undefined;
      if (multus) throw new PodnetError('INVALID_CONFIG', `--standard-network-status: the node's primary CNI config ${multus} is Multus's, which writes k8s.v1.cni.cncf.io/network-status itself; podnet writes podnetwork.opdev.io/network-status alone here`);
      const { KubeApi, KubeSource, StatusPublisher } = await import('../kube/mode.ts');
      const api = KubeApi.load(opts.kube.kubeconfig);
      const kubeSource = new KubeSource({ api, nodeName: opts.kube.nodeName, log, ...reported });
      source = kubeSource;
      const afterPass = () => {
        void publisher?.publish();
        dra?.afterPass();
      };
      reconciler = wireReconciler({ stateDir: opts.stateDir, registry, source, plugins: opts.plugins, ...(opts.limits ? { limits: opts.limits } : {}), log, afterPass, ...reported });
      const wired = reconciler;
      if (opts.kube.dra) {
        dra = await (await import('../dra/driver.ts')).startDraDriver({
          api,
          source: kubeSource,
          stateDir: opts.stateDir,
          kubeletDir: opts.kube.kubeletDir ?? '/var/lib/kubelet',
          addressesHeldOutsideClaims: () => wired.addressesHeldOutsideClaims(),
          networksAttachedOutsideClaims: () => wired.networksAttachedOutsideClaims(),
          facts: () => wired.facts(),
          ...(opts.limits ? { limits: opts.limits } : {}),
          claimsChanged: () => {
            void wired.schedule();
            hintAgain();
          },
          onCorrupt: registry.quarantine.told("a claim the kubelet had podnet prepare is forgotten: its pods' networks from it are not made"),
          log,
        });
      }
      publisher = new StatusPublisher({ api, source: kubeSource, reconciler, records: registry, log, ...reported, ...(opts.kube.standardNetworkStatus ? { standardNetworkStatus: true } : {}) });
    } else if (opts.configDir) {
      source = new ConfigDirSource(opts.configDir);
      reconciler = wireReconciler({ stateDir: opts.stateDir, registry, source, plugins: opts.plugins, ...(opts.limits ? { limits: opts.limits } : {}), log, ...reported });
    }
    if (metrics && opts.metricsAddress) metricsServer = await (await import('./prometheus.ts')).serveMetrics(metrics, opts.metricsAddress);
    await reconciler?.recover();
    const following = reconciler;
    server = await startServer({
      socketPath: opts.socketPath,
      registry,
      version: opts.version,
      log,
      ...(opts.configDir ? { configDir: resolve(opts.configDir) } : {}),
      ...(following
        ? {
            sandboxes: () => following.list(),
            portSecuritySeen: () => following.portSecuritySeen(),
            diff: (documents: ApiDocument[]) => following.diff(documents),
            firstPass: (record: AttachmentRecord, waitMs: number) => following.firstPass(record, waitMs),
            passBy: (deadline: number) => following.passBy(deadline),
          }
        : {}),
    });
  } catch (err) {
    await dra?.stop();
    await metricsServer?.close();
    stopTools();
    lock.release();
    throw err;
  }
  log.info('serving', {
    socket: opts.socketPath,
    version: opts.version,
    stateDir: opts.stateDir,
    attachments: registry.size,
    quarantined: registry.quarantined().length,
    ...(metricsServer ? { metrics: `http://${metricsServer.address.host}:${metricsServer.address.port}/metrics` } : {}),
  });

  // A burst of spool writes raises a burst of watch events: they merge into one more replay. A
  // pass follows only when records changed (here or in a replay a socket read made): the periodic
  // replay must not become a pass every 2 s over every sandbox.
  let reconciledAt = -1;
  const drain = coalesce(() =>
    registry.drainSpool().then(
      () => {
        if (!reconciler || registry.changeCount === reconciledAt) return;
        reconciledAt = registry.changeCount;
        void reconciler.schedule();
      },
      (err: Error) => log.error('spool replay failed', { error: err.message }),
    ),
  );
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(spoolDir(opts.stateDir), () => void drain());
    watcher.on('error', (err) => log.warn('spool watch failed; the periodic replay remains', { error: err.message }));
  } catch (err) {
    log.warn('spool watch unavailable; the periodic replay remains', { error: (err as Error).message });
  }
  const timer = setInterval(() => void drain(), opts.spoolIntervalMs ?? 2000);

  // The plugin's hints of pods that ask for nothing (ADR 28), from the documents and pods of now:
  // a burst of changes makes one update, after it.
  const quietPods = new QuietPods(opts.stateDir, log);
  const hinting = source;
  const hint = coalesce(async () => {
    await new Promise((resolve) => setImmediate(resolve));
    if (!hinting) quietPods.update(emptyDocuments(), undefined);
    else if (hinting.synced) quietPods.update(hinting.documents(), hinting.nodePods?.());
  });
  hintAgain = () => void hint();
  void hint();
  let resync: NodeJS.Timeout | undefined;
  if (reconciler && source) {
    const r = reconciler;
    // The first pass follows the source's first whole view; the API server may be down now.
    void source
      .start(() => {
        void r.schedule();
        void hint();
      })
      .then(() => {
        void hint();
        return r.schedule('resync');
      });
    if (opts.configDir) log.info('following documents', { configDir: opts.configDir });
    resync = setInterval(() => {
      void r.schedule('resync');
      // A change the source's watch missed reaches the hints too.
      void hint();
    }, opts.resyncMs ?? 10_000);
  }

  // Multus may come to the node after the daemon started (it writes its config once the default
  // network's is there): from then on it writes the standard network-status, and podnet stops (ADR 29).
  let multusSeen = false;
  const primaryChanged = (dir: string) => {
    if (!opts.kube?.standardNetworkStatus || multusSeen) return;
    const multus = multusPrimary(dir);
    if (!multus) return;
    multusSeen = true;
    publisher?.stopStandardNetworkStatus();
    log.error('Multus is the primary CNI config now, and writes k8s.v1.cni.cncf.io/network-status itself: podnet no longer writes it (--standard-network-status)', { config: multus });
  };
  if (opts.kube?.standardNetworkStatus && !opts.cniConf) log.warn('--standard-network-status without --cni-conf-dir: podnet cannot tell whether Multus runs on this node and writes the annotation too');
  const chaining = opts.cniConf ? keepChained(opts.cniConf.dir, opts.cniConf.entry, log, primaryChanged) : undefined;

  return {
    registry,
    reconciler,
    async stop() {
      clearInterval(timer);
      clearInterval(resync);
      chaining?.stop();
      watcher?.close();
      await source?.stop();
      await reconciler?.close();
      await dra?.stop();
      await publisher?.close();
      await server.close();
      await metricsServer?.close();
      await drain.idle();
      await hint.idle();
      await registry.drainSpool().catch(() => undefined);
      stopTools();
      lock.release();
      log.info('stopped');
    },
  };
}

/**
 * Adopts the pods the runtime networked before podnet was chained (src/registry/adopt.ts). With
 * a conf dir, only the primary's network: the one whose pods the runtime hands podnet from now on.
 */
async function adopt(registry: Registry, cacheDir: string, confDir: string | undefined, criSocket: string | undefined, log: Logger): Promise<void> {
  let network: string | undefined;
  if (confDir !== undefined) {
    try {
      network = primaryNetworkName(confDir);
    } catch (err) {
      log.warn('cannot tell the primary network; no pod is adopted', { dir: confDir, error: (err as Error).message });
      return;
    }
    if (network === undefined) return;
  }
  // Loaded only when asked: gRPC is the daemon's largest dependency and serves only this.
  const runtime = criSocket !== undefined ? (await import('../cri/runtime-service.ts')).connectRuntimeService({ socketPath: criSocket, timeoutMs: criTimeoutMs }) : undefined;
  try {
    await adoptCachedAttachments(registry, {
      cacheDir,
      ...(network !== undefined ? { adoptsNetwork: (name: string) => name === network } : {}),
      isNetworkNamespace: networkNamespaceCheck(),
      ...(runtime ? { runtime } : {}),
      log,
    });
  } finally {
    runtime?.close();
  }
}

/** Per CRI call: a runtime answers in milliseconds; a hung one must not hold the daemon's start for long. */
const criTimeoutMs = 5000;

/**
 * Keeps podnet chained into the primary's config: primaries (Calico, Cilium, ...) rewrite their
 * file on upgrade, which drops podnet from the chain. Checked on every change to the conf dir, and
 * every few seconds in case a change notice is missed (a conf dir that is a mount may give none).
 */
function keepChained(dir: string, configured: PodnetEntry, log: Logger, primaryChanged: (dir: string) => void = () => undefined): { stop(): void } {
  let lastError: string | undefined;
  // The waits the admin's install wrote (ADR 28's firstPassTimeoutMs among them), as last seen: a
  // primary that rewrote its file gets podnet back with them, not with the defaults.
  let entry = configured;
  const remember = (waits: Pick<PodnetEntry, 'timeoutMs' | 'firstPassTimeoutMs'>) => {
    const { timeoutMs: _t, firstPassTimeoutMs: _f, ...placed } = configured;
    entry = { ...placed, ...waits };
  };
  const check = () => {
    try {
      const chained = chainIfMissing(dir, entry, remember);
      if (chained) log.info('chained podnet into the primary CNI config again', { file: chained });
      lastError = undefined;
    } catch (err) {
      const message = (err as Error).message;
      // Once per distinct problem, not every few seconds.
      if (message !== lastError) log.warn('could not chain podnet into the primary CNI config', { dir, error: message });
      lastError = message;
    }
    try {
      primaryChanged(dir);
    } catch {
      // A primary config that cannot be read is told above.
    }
  };
  check();
  let watcher: FSWatcher | undefined;
  try {
    watcher = watch(dir, (_event, file) => {
      if (file === null || !file.startsWith('.')) check();
    });
    watcher.on('error', () => undefined);
  } catch (err) {
    log.warn('cannot watch the CNI conf dir; checking it every few seconds', { dir, error: (err as Error).message });
  }
  const timer = setInterval(check, 5000);
  timer.unref();
  return {
    stop() {
      clearInterval(timer);
      watcher?.close();
    },
  };
}
