// What is wrong with each Network, PodNetworkConfig and PodNetworkPermission on its own, whatever pod it selects: the one
// check of each document kind that `podnet apply -f`, `podnet diff`, the daemon's socket and the
// Kubernetes status all call, so a document is judged the same wherever it is shown. Pure.
import { rangesProblem } from './pools.ts';
import type { Network, PodNetworkConfig, PodNetworkPermission } from '../protocol/validate.ts';
import { defaultLimits, desiredFor, type NodeLimits, type Problem } from './desired.ts';
import { documentName, namespaceNameLabel, namespaceOf } from './identity.ts';
import { kindOf } from './kinds/index.ts';
import { permissionProblems, permissionsByNamespace } from './permissions.ts';
import { noVrfReason } from './routing.ts';

/** The documents in force, and those a source could not read (each a problem naming it). */
export interface Documents {
  networks: ReadonlyMap<string, Network>;
  configs: readonly PodNetworkConfig[];
  permissions: readonly PodNetworkPermission[];
  problems: readonly Problem[];
}

/** A namespace's labels, where a source knows them; else only its name's label, as Kubernetes sets. */
export type NamespaceLabels = (namespace: string) => Record<string, string> | undefined;

/** The problems of a Network's spec, each naming its field. */
export function networkProblems(network: Network, networks: ReadonlyMap<string, Network>): Problem[] {
  const document = documentName(network);
  const problems: Problem[] = [];
  const ranges = network.spec.ipam?.ranges;
  const range = ranges ? rangesProblem(network.metadata.name, ranges) : undefined;
  if (range) problems.push({ document, field: `spec.ipam.ranges[${range.index}]`, reason: range.reason });
  for (const { field, reason } of kindOf(network).specProblems(network, networks)) problems.push({ document, field, reason });
  return problems;
}

/**
 * What is wrong with a PodNetworkConfig whatever pod it selects (an unknown or unoffered Network,
 * a route or rule that cannot be, a sysctl not allowed, a part its namespace's permissions do not
 * allow): the config alone, as if it selected one pod of its namespace, so that its problems are
 * told even while it selects no pod.
 */
export function configProblems(
  config: PodNetworkConfig,
  networks: ReadonlyMap<string, Network>,
  namespaceLabels: Record<string, string>,
  limits: NodeLimits = defaultLimits,
  permissions: readonly PodNetworkPermission[] = [],
  namespaceVrfs: ReadonlySet<string> = new Set(),
): Problem[] {
  const namespace = namespaceOf(config.metadata.namespace);
  const alone = { ...config, spec: { ...config.spec, podSelector: {} } };
  const name = documentName(config);
  // A VRF may be another config's: naming one that a config of the namespace has (`namespaceVrfs`) is no problem of this one alone.
  const elsewhere = new Set([...namespaceVrfs].map(noVrfReason));
  // A kubelet names every pod's primary interface eth0.
  return desiredFor({ namespace, name: '(any pod)', labels: {}, namespaceLabels, permissions, primaryInterface: 'eth0' }, networks, [alone], [], limits).problems.filter((p) => p.document === name && !elsewhere.has(p.reason));
}

/**
 * Every document's problems: those its source told (it could not be read whole) and its spec's.
 * A source's problem with a field (a NetworkAttachmentDefinition it could not read) says more
 * than the spec check's of the same field, which is then left out.
 */
export function documentProblems(docs: Documents, labelsOf: NamespaceLabels = () => undefined, limits: NodeLimits = defaultLimits): Problem[] {
  const permissions = permissionsByNamespace(docs.permissions);
  const vrfs = vrfsByNamespace(docs.configs);
  const checked = [
    ...[...docs.networks.values()].flatMap((n) => networkProblems(n, docs.networks)),
    ...docs.configs.flatMap((c) => {
      const namespace = namespaceOf(c.metadata.namespace);
      return configProblems(c, docs.networks, labelsOf(namespace) ?? { [namespaceNameLabel]: namespace }, limits, permissions.get(namespace), vrfs.get(namespace));
    }),
    ...docs.permissions.flatMap(permissionProblems),
  ];
  const told = new Set(docs.problems.map((p) => `${p.document}\n${p.field}`));
  return [...docs.problems, ...checked.filter((p) => !told.has(`${p.document}\n${p.field}`))];
}

/** The names of the VRFs each namespace's configs make: what a config of it judged alone may name. */
function vrfsByNamespace(configs: readonly PodNetworkConfig[]): Map<string, Set<string>> {
  const by = new Map<string, Set<string>>();
  for (const c of configs) {
    const namespace = namespaceOf(c.metadata.namespace);
    for (const vrf of c.spec.vrfs ?? []) by.set(namespace, (by.get(namespace) ?? new Set()).add(vrf.name));
  }
  return by;
}
