// What a tenant sees of a pod's podnet network with `kubectl podnet` (src/cli/kubectl.ts): made from
// the objects a tenant with the built-in view role may read (the pod, the namespace's
// PodNetworkConfigs with their status, the pod's Events), never from the node. Pure.
import { annotationField, networkStatusAnnotation } from '../model/annotation.ts';
import { documentName, podDocumentName, selectingConfigs } from '../model/identity.ts';
import { parseBoundedJson } from '../protocol/bounded-json.ts';
import { isDocument, type Condition, type NetworkStatusEntry, type PodNetworkConfig, type PodNetworkView } from '../protocol/validate.ts';
import { parseApiObject, podIdentityOf, type ApiObject, type PodObject } from './resources.ts';
import { byCodeUnits } from '../order.ts';

/** A core/v1 Event, as far as the view reads it. */
export interface EventObject {
  type?: string;
  reason?: string;
  message?: string;
  count?: number;
  lastTimestamp?: string | null;
  eventTime?: string | null;
  series?: { count?: number; lastObservedTime?: string };
}

/** The Events a view keeps, newest last. */
export const viewEvents = 20;

type Asked = PodNetworkView['askedBy'][number];
type ViewProblem = PodNetworkView['problems'][number];

/** The pod's network-status, or why it cannot be read. */
function interfacesOf(pod: PodObject): { interfaces: NetworkStatusEntry[]; problem?: string } {
  const text = pod.metadata.annotations?.[networkStatusAnnotation];
  if (text === undefined) return { interfaces: [] };
  try {
    const value = parseBoundedJson(text, networkStatusAnnotation, { maxBytes: 256 * 1024 });
    if (isDocument('NetworkStatusList', value)) return { interfaces: value };
  } catch {
    // Told below, as not podnet's.
  }
  return { interfaces: [], problem: `the ${networkStatusAnnotation} annotation is not one podnet wrote (not a network-status list)` };
}

/** What the config asks of the pod beside attachments, one line each kind. */
function alsoAsked(config: PodNetworkConfig): string[] {
  const { interfaces = [], routes = [], rules = [], sysctls = [] } = config.spec;
  const plural = (n: number, one: string) => `${n} ${one}${n === 1 ? '' : 's'}`;
  return [
    ...interfaces.map(({ name, ...settings }) => `${name}: ${Object.entries(settings).map(([k, v]) => `${k} ${String(v)}`).join(', ')}`),
    ...(routes.length > 0 ? [plural(routes.length, 'route')] : []),
    ...(rules.length > 0 ? [plural(rules.length, 'rule')] : []),
    ...(sysctls.length > 0 ? [plural(sysctls.length, 'sysctl')] : []),
  ];
}

function readyOf(object: ApiObject): { ready: 'True' | 'False' | 'Unknown'; message?: string } {
  const conditions = (object.status?.['conditions'] ?? []) as Condition[];
  const ready = conditions.find((c) => c.type === 'Ready');
  const degraded = conditions.find((c) => c.type === 'Degraded' && c.status === 'True');
  const message = degraded?.message || (ready?.status === 'False' ? ready.message : undefined);
  return { ready: ready?.status ?? 'Unknown', ...(message ? { message } : {}) };
}

/** A namespace's PodNetworkConfigs read once for all its pods: parsed, the problems of those that do not parse, or why they cannot be listed. */
export interface NamespaceConfigs {
  objects: readonly ApiObject[];
  parsed: PodNetworkConfig[];
  problems: ViewProblem[];
  /** Why the caller may not list them (then which select a pod is not known). */
  unlisted?: string;
}

export function namespaceConfigs(objects: readonly ApiObject[] | { unlisted: string }): NamespaceConfigs {
  if ('unlisted' in objects) return { objects: [], parsed: [], problems: [], unlisted: objects.unlisted };
  const parsed: PodNetworkConfig[] = [];
  const problems: ViewProblem[] = [];
  for (const object of objects) {
    const doc = parseApiObject('PodNetworkConfig', object);
    if ('reason' in doc) problems.push(doc);
    else parsed.push(doc as PodNetworkConfig);
  }
  return { objects, parsed, problems };
}

/** The pod's network as a tenant may see it. */
export function podNetworkView(pod: PodObject, namespace: NamespaceConfigs, events: readonly EventObject[]): PodNetworkView {
  const identity = podIdentityOf(pod, undefined);
  const own = podDocumentName(identity);
  const askedBy: Asked[] = [];
  const problems: ViewProblem[] = [];
  const request = identity.annotation;
  if (request && 'problem' in request) problems.push({ document: own, field: annotationField(), reason: request.problem });
  if (request && 'selections' in request) {
    request.selections.forEach((s, i) => askedBy.push({ document: own, field: annotationField(i), network: s.name, ...(s.interface ? { interface: s.interface } : {}), ...(s.required ? { required: true } : {}) }));
  }

  problems.push(...namespace.problems);
  if (namespace.unlisted) problems.push({ document: `PodNetworkConfigs of namespace ${identity.namespace}`, reason: `${namespace.unlisted}: which of them select the pod is not known` });
  const selecting = selectingConfigs(identity, namespace.parsed);
  const configObjects = namespace.objects;
  const configs = selecting.map((config) => {
    const document = documentName(config);
    (config.spec.attachments ?? []).forEach((a, i) => askedBy.push({ document, field: `spec.attachments[${i}]`, network: a.network, ...(a.interface ? { interface: a.interface } : {}), ...(a.required ? { required: true } : {}) }));
    const object = configObjects.find((o) => o.metadata.name === config.metadata.name)!;
    const state = readyOf(object);
    if (state.message) problems.push({ document, reason: state.message });
    const also = alsoAsked(config);
    return { name: config.metadata.name, ...state, ...(also.length > 0 ? { also } : {}) };
  });

  const { interfaces, problem } = interfacesOf(pod);
  if (problem) problems.push({ document: own, field: `metadata.annotations["${networkStatusAnnotation}"]`, reason: problem });
  for (const entry of interfaces) {
    if (entry.problem === undefined) continue;
    // Who asked the interface that is not there: its entry names the Network and interface.
    const asker = askedBy.find((a) => a.network === entry.name && (a.interface === undefined || a.interface === entry.interface));
    problems.push({ document: asker?.document ?? own, ...(asker ? { field: asker.field } : {}), ...(entry.interface ? { interface: entry.interface } : {}), reason: entry.problem });
  }

  const when = (e: EventObject) => e.series?.lastObservedTime ?? e.lastTimestamp ?? e.eventTime ?? '';
  const recent = [...events].sort((a, b) => byCodeUnits(when(a), when(b))).slice(-viewEvents);
  return {
    namespace: identity.namespace,
    name: identity.name,
    ...(pod.spec?.nodeName ? { node: pod.spec.nodeName } : {}),
    interfaces,
    askedBy,
    configs,
    problems,
    events: recent.map((e) => ({
      type: e.type ?? 'Normal',
      reason: e.reason ?? '',
      message: e.message ?? '',
      ...(e.series?.count ?? e.count ? { count: e.series?.count ?? e.count } : {}),
      ...(when(e) ? { lastSeen: when(e) } : {}),
    })),
  };
}
