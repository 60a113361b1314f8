// The e2e harness's cluster (e2e/cluster) as the Kubernetes benchmarks use it: torn down by the
// benchmark's cleanup, with podnet's namespace, CRDs and RBAC, and the DaemonSet's service account.
import { startCluster, type Cluster, type Owner } from '../../e2e/cluster/cluster.ts';
import { clientsAs, createManifest, crdsServe, type Clients } from '../../e2e/lib/kube.ts';
import { KubeApi } from '../../src/kube/api.ts';
import { onCleanup } from './harness.ts';

/** What the cluster needs of its owner: its teardowns go to the benchmark's cleanup. */
export const benchOwner: Owner = { teardown: (fn) => onCleanup('the cluster', fn), passing: () => true };

export interface PodnetCluster {
  cluster: Cluster;
  admin: Clients;
  /** The admin's, for plain requests. */
  api: KubeApi;
  /** A kubeconfig of the DaemonSet's service account (podnet-system/podnet): what a daemon runs as. */
  daemonKubeconfig: string;
}

/** A cluster serving podnet's CRDs, with its RBAC (no admission policy: it wants node-bound tokens). */
export async function podnetCluster(): Promise<PodnetCluster> {
  const cluster = await startCluster(benchOwner);
  const admin = clientsAs(cluster, 'admin');
  for (const manifest of ['namespace.yaml', 'crds.yaml', 'rbac.yaml']) await createManifest(admin, manifest);
  await crdsServe(admin);
  return { cluster, admin, api: KubeApi.load(cluster.kubeconfig('admin')), daemonKubeconfig: await cluster.serviceAccountKubeconfig('podnet-system', 'podnet') };
}
