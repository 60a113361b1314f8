import { Command } from 'commander';
import { jsonLogger } from '../log.ts';
import { stopOnSignals } from './stop-on-signals.ts';

export function controllerCommand(): Command {
  return new Command('controller')
    .description("run podnet's controller, one per cluster: remove from Networks' and PodNetworkConfigs' status the entries of nodes that left the cluster")
    .option('--kubeconfig <file>', "the API server and credentials (default: the pod's service account)")
    .option('--sweep-seconds <n>', "look for entries of gone nodes this often, besides at each Node's deletion", '10')
    .action(async (options: { kubeconfig?: string; sweepSeconds: string }) => {
      const sweepMs = Number(options.sweepSeconds) * 1000;
      if (!(sweepMs >= 1000)) throw new Error(`--sweep-seconds must be a number of at least 1, not "${options.sweepSeconds}"`);
      const log = jsonLogger();
      // Loaded when it runs, as the daemon's Kubernetes mode is: the API client costs every other command its load.
      const [{ startController }, { KubeApi }] = await Promise.all([import('../controller/controller.ts'), import('../kube/api.ts')]);
      const controller = await startController({ api: KubeApi.load(options.kubeconfig), log, sweepMs });
      stopOnSignals(log, () => controller.stop());
    });
}
