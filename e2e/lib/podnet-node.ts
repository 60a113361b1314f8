// podnet installed on a real node (e2e/cluster/node.ts) the way an admin does it: its image known
// to the node's containerd, and daemonset/ applied with kubectl through an overlay that changes only
// what the test machine lacks. The node tests and bench/kube-attach use it.
import { execa } from 'execa';
import { copyFile, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import { dir } from 'tmp-promise';
import { stringify } from 'yaml';
import { buildImage } from '../../scripts/image.ts';
import type { Cluster, Owner } from '../cluster/cluster.ts';
import type { Node } from '../cluster/node.ts';
import { until } from './engine.ts';
import { repoRoot } from './env.ts';
import { uniqueName } from './netns.ts';

/** The DaemonSet and the controller as shipped, with only what this machine lacks: the image's tag of this run, and the apiserver's address (no kube-proxy; for the controller, the node's network). */
export async function overlay(t: Owner, cluster: Cluster, imageTag: string, base: 'install' | 'uninstall'): Promise<string> {
  const folder = await dir({ unsafeCleanup: true, prefix: 'podnet-overlay-' });
  t.teardown(folder.cleanup);
  // kustomize takes a folder from anywhere but a file only from inside the overlay's own.
  if (base === 'uninstall') await copyFile(`${repoRoot}daemonset/uninstall.yaml`, join(folder.path, 'uninstall.yaml'));
  const resources = base === 'install' ? [relative(folder.path, `${repoRoot}daemonset`)] : ['uninstall.yaml'];
  const server = new URL(cluster.server);
  await writeFile(
    join(folder.path, 'kustomization.yaml'),
    stringify({
      apiVersion: 'kustomize.config.k8s.io/v1beta1',
      kind: 'Kustomization',
      resources,
      images: [{ name: 'localhost/podnet', newTag: imageTag }],
      patches: [
        {
          target: { kind: 'DaemonSet', name: 'podnet' },
          patch: stringify([
            { op: 'add', path: '/spec/template/spec/containers/0/env/-', value: { name: 'KUBERNETES_SERVICE_HOST', value: server.hostname } },
            { op: 'add', path: '/spec/template/spec/containers/0/env/-', value: { name: 'KUBERNETES_SERVICE_PORT', value: server.port } },
          ]),
        },
        // The API server is on the node's loopback alone: the controller reaches it from the node's network.
        ...(base === 'install'
          ? [
              {
                target: { kind: 'Deployment', name: 'podnet-controller' },
                patch: stringify([
                  { op: 'add', path: '/spec/template/spec/hostNetwork', value: true },
                  { op: 'add', path: '/spec/template/spec/containers/0/env', value: [{ name: 'KUBERNETES_SERVICE_HOST', value: server.hostname }, { name: 'KUBERNETES_SERVICE_PORT', value: server.port }] },
                ]),
              },
            ]
          : []),
      ],
    }),
  );
  return folder.path;
}

/** podnet's image of this run, under a tag of its own, made known to the node's containerd. */
export async function podnetImage(t: Owner, node: Node): Promise<string> {
  const tag = uniqueName('e2e-node-');
  const image = buildImage(`localhost/podnet:${tag}`);
  t.teardown(() => execa('podman', ['rmi', '--force', image], { reject: false }));
  await node.importImage(image);
  return tag;
}

/** podnet installed with `kubectl apply -k` and its DaemonSet rolled out (Ready) on the node. */
export async function installPodnet(t: Owner, cluster: Cluster, node: Node, imageTag: string): Promise<void> {
  await node.kubectl(['apply', '-k', await overlay(t, cluster, imageTag, 'install')]);
  await node.kubectl(['rollout', 'status', '-n', 'podnet-system', 'daemonset/podnet', '--timeout=180s']);
}

/** Until RBAC lets tenant-a create `resource` in its namespace, tenant-a (a moment after its roles change: `why`). */
export function tenantMayCreate(kubectl: Node['kubectl'], resource: string, why: string): Promise<true> {
  return until(`tenant-a may create ${resource} (${why})`, async () => ((await kubectl(['-n', 'tenant-a', 'auth', 'can-i', 'create', resource], { as: 'tenant-a', reject: false })).stdout === 'yes' ? true : undefined), 60_000);
}
