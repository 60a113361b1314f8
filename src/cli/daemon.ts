import { Command } from 'commander';
import { startDaemon } from '../daemon/daemon.ts';
import { jsonLogger } from '../log.ts';
import { stopOnSignals } from './stop-on-signals.ts';
import { podnetVersion } from '../version.ts';
import { defaultCniBinDir, defaultPluginTimeoutMs, defaultSocketPath, defaultStateDir } from '../protocol/paths.ts';
import { podnetEntry } from '../install/conflist.ts';
import { defaultLimits } from '../model/desired.ts';
import { parseListenAddress } from '../daemon/metrics-address.ts';


export function daemonCommand(): Command {
  return new Command('daemon')
    .description('run the node daemon: record pod sandboxes and serve the podnet socket')
    .option('--socket <path>', 'unix socket to serve', defaultSocketPath)
    .option('--state-dir <dir>', 'state directory (records, spool)', defaultStateDir)
    .option('--config-dir <dir>', 'standalone mode: follow the Network and PodNetworkConfig documents (YAML or JSON) in this directory')
    .option('--node-name <name>', "Kubernetes mode: this node's name (the DaemonSet gives spec.nodeName); follow the API's pods on it, Networks and PodNetworkConfigs")
    .option('--kubeconfig <file>', "with --node-name: the API server and credentials (default: the pod's service account)")
    .option('--resync-seconds <n>', 'reconcile every sandbox this often, repairing drift', '10')
    .option('--cni-conf-dir <dir>', "keep podnet chained into the primary plugin's config in this dir (the primary may rewrite it on upgrade)")
    .option('--cni-cache-dir <dir>', "the runtime's libcni cache dir (/var/lib/cni): at start, adopt the pods it networked before podnet was chained")
    .option('--cri-socket <path>', "the container runtime's CRI socket (/run/containerd/containerd.sock, /run/crio/crio.sock): with --cni-cache-dir, asked for the netns of pods whose cache entry names none (containerd 1.6)")
    .option('--cni-bin-dir <dirs>', "where cni Networks' plugins are found, as CNI_PATH: dirs separated by ':'", defaultCniBinDir)
    .option('--max-attachments-per-pod <n>', 'interfaces podnet attaches to one pod at most; the ones asked beyond it are refused, told on the pod and its config', String(defaultLimits.attachmentsPerPod))
    .option('--max-addresses-per-pod <n>', "addresses podnet gives one pod at most, across its attachments (from Networks' ranges, or its own); the attachments beyond it are refused, told on the pod and its config", String(defaultLimits.addressesPerPod))
    .option('--allow-primary-mac', "let PodNetworkConfigs change the MAC of a pod's primary interface (off: on the primary network a pod could take another's traffic)")
    .option('--allow-primary-vrf', "let PodNetworkConfigs place a pod's primary interface in a VRF (off: the kernel then drops the primary's routes from the pod's main table)")
    .option('--metrics-address <host:port>', 'serve Prometheus metrics (GET /metrics) here, such as 127.0.0.1:9109; not served without it')
    .option('--plugin-timeout-seconds <n>', "how long a cni Network's plugin may take before it is killed (and DEL run)", String(defaultPluginTimeoutMs / 1000))
    .option('--standard-network-status', "with --node-name: also write pods' k8s.v1.cni.cncf.io/network-status (the Network Plumbing WG's, which Multus writes), for tools that read it; refused when the node's primary CNI config is Multus's")
    .option('--dra', "with --node-name: be podnet's DRA driver on this node: offer the Networks it serves to the scheduler as devices (ResourceSlices), prepare the claims on them (Kubernetes 1.34 or later)")
    .option('--kubelet-dir <dir>', "with --dra: the kubelet's root folder, where its plugins_registry and plugins folders are", '/var/lib/kubelet')
    .action(async (options: { dra?: boolean; kubeletDir: string; socket: string; stateDir: string; configDir?: string; nodeName?: string; kubeconfig?: string; resyncSeconds: string; cniConfDir?: string; cniCacheDir?: string; criSocket?: string; cniBinDir: string; pluginTimeoutSeconds: string; maxAttachmentsPerPod: string; maxAddressesPerPod: string; allowPrimaryMac?: boolean; allowPrimaryVrf?: boolean; metricsAddress?: string; standardNetworkStatus?: boolean }) => {
      const log = jsonLogger();
      if (options.kubeconfig && !options.nodeName) throw new Error('--kubeconfig needs --node-name: the daemon follows the pods of its own node');
      if (options.standardNetworkStatus && !options.nodeName) throw new Error('--standard-network-status needs --node-name: it is an annotation of Kubernetes pods');
      if (options.dra && !options.nodeName) throw new Error('--dra needs --node-name: a DRA driver serves a Kubernetes node');
      const resyncMs = Number(options.resyncSeconds) * 1000;
      const timeoutMs = Number(options.pluginTimeoutSeconds) * 1000;
      if (!(timeoutMs >= 100)) throw new Error(`--plugin-timeout-seconds must be a number of at least 0.1, not "${options.pluginTimeoutSeconds}"`);
      const attachmentsPerPod = wholeNumber('--max-attachments-per-pod', options.maxAttachmentsPerPod, 1024);
      const addressesPerPod = wholeNumber('--max-addresses-per-pod', options.maxAddressesPerPod, 4096);
      const metricsAddress = options.metricsAddress !== undefined ? parseListenAddress(options.metricsAddress, '--metrics-address') : undefined;
      if (!(resyncMs >= 1000)) throw new Error(`--resync-seconds must be a number of at least 1, not "${options.resyncSeconds}"`);
      const daemon = await startDaemon({
        socketPath: options.socket,
        stateDir: options.stateDir,
        version: podnetVersion,
        log,
        resyncMs,
        limits: { attachmentsPerPod, addressesPerPod, primaryMac: options.allowPrimaryMac === true, primaryVrf: options.allowPrimaryVrf === true },
        plugins: { binDirs: options.cniBinDir.split(':').filter((d) => d !== ''), timeoutMs },
        ...(options.configDir ? { configDir: options.configDir } : {}),
        ...(options.nodeName ? { kube: { nodeName: options.nodeName, ...(options.kubeconfig ? { kubeconfig: options.kubeconfig } : {}), ...(options.standardNetworkStatus ? { standardNetworkStatus: true } : {}), ...(options.dra ? { dra: true, kubeletDir: options.kubeletDir } : {}) } } : {}),
        ...(options.cniCacheDir ? { cniCacheDir: options.cniCacheDir } : {}),
        ...(options.criSocket ? { criSocket: options.criSocket } : {}),
        ...(metricsAddress ? { metricsAddress } : {}),
        ...(options.cniConfDir
          ? {
              cniConf: {
                dir: options.cniConfDir,
                // The plugin must reach this daemon: its socket and state dir when not the defaults.
                entry: podnetEntry({
                  socketPath: options.socket === defaultSocketPath ? undefined : options.socket,
                  stateDir: options.stateDir === defaultStateDir ? undefined : options.stateDir,
                }),
              },
            }
          : {}),
      });
      stopOnSignals(log, () => daemon.stop());
    });
}

/** A limit flag's value: a whole number from 0 to `max`, else an error naming the flag. */
function wholeNumber(flag: string, text: string, max: number): number {
  // Digits only: Number('') and Number(' ') are 0, which would refuse every attachment.
  const n = /^\d+$/.test(text) ? Number(text) : NaN;
  if (!Number.isInteger(n) || n < 0 || n > max) throw new Error(`${flag} must be a whole number from 0 to ${max}, not "${text}"`);
  return n;
}
