// What a sandbox should have, from the documents: a pure function. A sandbox is selected by the
// labels podnet derives from its CNI identity (standalone) and by the PodNetworkConfigs of its own
// namespace; a Network is reachable only when its namespaceSelector admits that namespace. What
// cannot be honoured is a Problem naming the document, the field and the reason, and is left out
// (the rest of the sandbox's desired state still applies).
import { formatCidr, formatIp, networkAddress, parseCidr, parseIp, sameIp } from './cidr.ts';
import type { AppliedConfig, AttachmentRecord, Network, NetworkSelection, PodNetworkConfig, Problem, Route, Rule } from '../protocol/validate.ts';
import { networksAnnotation, type AnnotationRequest } from './annotation.ts';
import { selects, type Labels } from './selector.ts';
import { linkSettingNames, type Bandwidth, type Family, type LinkSettingName, type LinkSettings, type ResolvedRoute, type ResolvedRule, type ResolvedSysctl } from './state.ts';
import { sysctlKnob, sysctlPath } from './sysctl.ts';
import type { AskedMac } from './macs.ts';
import { addressesGiven, attachmentRefusal, type AttachmentAsks } from './kinds/index.ts';
import type { RefusedGeneration } from './refusal.ts';

export const podNameLabel = 'podnetwork.opdev.io/pod-name';
export const podNamespaceLabel = 'podnetwork.opdev.io/pod-namespace';
export const namespaceNameLabel = 'kubernetes.io/metadata.name';

/** Why part of a desired state is not applied: the document ("PodNetworkConfig tenant-a/fast"), the field ("spec.attachments[0].network") and the reason. */
export type { Problem } from '../protocol/validate.ts';

export interface DesiredAttachment {
  network: Network;
  interface: string;
  ips?: string[];
  bandwidth?: Bandwidth;
  /** The config that asked for it. */
  from: string;
  /** Where in `from` it was asked: "spec.attachments[0]". */
  field: string;
}

export interface DesiredTuning {
  interface: string;
  settings: LinkSettings;
  /** Which config set each setting. */
  from: Partial<Record<LinkSettingName, string>>;
}

export interface DesiredSandbox {
  /** The PodNetworkConfigs that select the sandbox (documentName), in merge order. */
  configs: string[];
  attachments: DesiredAttachment[];
  tuning: DesiredTuning[];
  routes: ResolvedRoute[];
  rules: ResolvedRule[];
  sysctls: ResolvedSysctl[];
  /** The MACs asked among `tuning`, with the document and field that asked each (checked across pods: model/macs.ts). */
  macs: AskedMac[];
  problems: Problem[];
  /** The generation of each PodNetworkConfig the sandbox gets whole (desiredWhole): what its applied state keeps. */
  whole?: AppliedConfig[];
  /**
   * Who asked each thing, by its origin key (originKey): "PodNetworkConfig ns/x spec.routes[0]",
   * what a step's failure names (the planner stamps it on the step).
   */
  origins?: Map<string, string>;
  /** Which of `problems` are conflicts between documents rather than a document's own. */
  conflicts?: ReadonlySet<Problem>;
}

export interface SandboxIdentity {
  namespace: string;
  name: string;
  labels: Labels;
  /** Its namespace's labels, which Networks' namespaceSelector matches; standalone, the name label alone. */
  namespaceLabels?: Labels;
  /** What its podnetwork.opdev.io/networks annotation asks (Kubernetes only). */
  annotation?: AnnotationRequest;
  /** The interface its primary CNI plugin made (the runtime's CNI_IFNAME, eth0 under a kubelet): never podnet's to attach. */
  primaryInterface?: string;
}

/** What a node's admin bounds for every pod on it (podnet daemon's flags). */
export interface NodeLimits {
  /** Interfaces podnet attaches to one pod: each may hold addresses of a shared range and a host link. */
  attachmentsPerPod: number;
  /** Addresses podnet gives one pod across its attachments (from Networks' ranges, or its own): each may be one of a shared range. */
  addressesPerPod: number;
  /**
   * Whether a config may change the MAC of a pod's primary interface. Off unless the admin turns it
   * on: on the primary network, a pod taking another's MAC takes its traffic.
   */
  primaryMac: boolean;
}

export const defaultLimits: NodeLimits = { attachmentsPerPod: 32, addressesPerPod: 64, primaryMac: false };

/** An attachment podnet made earlier: an annotation's selection without an interface keeps the name it got. */
export interface EarlierAttachment {
  network: string;
  interface: string;
}

/** The identity a runtime gave (namespace `default` when it gave none) and the labels from it. */
export function identityOf(record: AttachmentRecord): SandboxIdentity {
  const namespace = record.pod.namespace ?? 'default';
  const name = record.pod.name ?? record.containerId;
  return { namespace, name, labels: { [podNameLabel]: name, [podNamespaceLabel]: namespace }, primaryInterface: record.ifname };
}

/** "Network blue" or "PodNetworkConfig tenant-a/fast": how problems and `from` name a document (or an API object). */
export function documentName(doc: { kind?: string; metadata: { name: string; namespace?: string } }): string {
  return doc.kind === 'Network' ? `Network ${doc.metadata.name}` : `PodNetworkConfig ${doc.metadata.namespace ?? 'default'}/${doc.metadata.name}`;
}

/** The document a pod's own annotation counts as, in problems and in `from`. */
export function podDocumentName(identity: { namespace: string; name: string }): string {
  return `Pod ${identity.namespace}/${identity.name}`;
}

export function desiredFor(
  identity: SandboxIdentity,
  networks: ReadonlyMap<string, Network>,
  configs: readonly PodNetworkConfig[],
  earlier: readonly EarlierAttachment[] = [],
  limits: NodeLimits = defaultLimits,
  /** The configs the pod has already (documentName): in a conflict with one it does not have yet, they keep their settings. */
  had: ReadonlySet<string> = new Set(),
): DesiredSandbox {
  const out: DesiredSandbox = { configs: [], attachments: [], tuning: [], routes: [], rules: [], sysctls: [], macs: [], problems: [] };
  /** Who of two documents asking one thing differently keeps it: the one the pod has, over one it has not; else neither. */
  const keeper = (first: string, second: string): 'first' | 'second' | undefined =>
    had.has(first) && !had.has(second) ? 'first' : had.has(second) && !had.has(first) ? 'second' : undefined;
  const namespaceLabels = identity.namespaceLabels ?? { [namespaceNameLabel]: identity.namespace };
  /** The Network an attachment names, when it exists and admits the pod's namespace; else a problem. */
  const reachable = (name: string, from: string, field: string): Network | undefined => {
    const network = networks.get(name);
    if (!network) return void out.problems.push({ document: from, field, reason: `no Network named ${name}` });
    if (!network.spec.namespaceSelector || !selects(network.spec.namespaceSelector, namespaceLabels)) {
      return void out.problems.push({ document: from, field, reason: `Network ${name} does not admit namespace ${identity.namespace}` });
    }
    return network;
  };
  const selecting = selectingConfigs(identity, configs);
  // Bounded: what a pod has of each config is kept in its applied state.
  for (const config of selecting.slice(maxConfigsPerPod)) {
    out.problems.push({ document: documentName(config), field: 'spec.podSelector', reason: `the pod is selected by more than ${maxConfigsPerPod} PodNetworkConfigs; podnet applies the first ${maxConfigsPerPod} by name` });
  }
  const mine = selecting.slice(0, maxConfigsPerPod);
  /** The problems that are conflicts between documents, not a document's own. */
  const conflicts = new Set<Problem>();
  const tellConflict = (...problems: Problem[]) => {
    for (const p of problems) conflicts.add(p);
    out.problems.push(...problems);
  };

  const attachmentBy = new Map<string, { at: DesiredAttachment; field: string }>();
  const tuningBy = new Map<string, DesiredTuning & { fields: Partial<Record<LinkSettingName, string>> }>();
  const conflicted = new Set<string>();
  const routes = keyedOnce<ResolvedRoute>(tellConflict, keeper);
  const rules = keyedOnce<ResolvedRule>(tellConflict, keeper);
  const sysctls = keyedOnce<{ name: string; value: string }>(tellConflict, keeper);

  const attach: Attach = (at, field) => {
    if (at.interface === identity.primaryInterface) {
      out.problems.push({ document: at.from, field: `${field}.interface`, reason: `${at.interface} is the pod's primary interface, made by its primary CNI plugin; attach under another name` });
      return;
    }
    const earlier = attachmentBy.get(at.interface);
    if (earlier && !conflicted.has(`attach:${at.interface}`)) {
      const what = `interface ${at.interface}`;
      const kept = keeper(earlier.at.from, at.from);
      if (kept === 'first') return void tellConflict(refusedFor(at.from, field, earlier.at.from, earlier.field, what));
      if (kept === undefined) {
        conflicted.add(`attach:${at.interface}`);
        return void tellConflict(...conflict(at.from, field, earlier.at.from, earlier.field, what));
      }
      tellConflict(refusedFor(earlier.at.from, earlier.field, at.from, field, what));
    } else if (earlier) {
      return void tellConflict(...conflict(at.from, field, earlier.at.from, earlier.field, `interface ${at.interface}`));
    }
    attachmentBy.set(at.interface, { at: { ...at, field }, field });
  };
  const tune = (name: string, settings: LinkSettings, from: string, fieldOf: (setting: LinkSettingName) => string): void => {
    const entry = tuningBy.get(name) ?? { interface: name, settings: {}, from: {}, fields: {} };
    tuningBy.set(name, entry);
    for (const setting of linkSettingNames) {
      const value = settings[setting];
      if (value === undefined) continue;
      const field = fieldOf(setting);
      const earlier = entry.settings[setting];
      if (earlier !== undefined && earlier !== value) {
        const what = `the ${setting} of ${name}`;
        const kept = conflicted.has(`tune:${name}:${setting}`) ? undefined : keeper(entry.from[setting]!, from);
        if (kept === 'first') {
          tellConflict(refusedFor(from, field, entry.from[setting]!, entry.fields[setting]!, what));
          continue;
        }
        if (kept === undefined) {
          conflicted.add(`tune:${name}:${setting}`);
          tellConflict(...conflict(from, field, entry.from[setting]!, entry.fields[setting]!, what));
          continue;
        }
        tellConflict(refusedFor(entry.from[setting]!, entry.fields[setting]!, from, field, what));
      }
      (entry.settings as Record<string, unknown>)[setting] = value;
      entry.from[setting] = from;
      entry.fields[setting] = field;
    }
  };

  // The pod's own annotation, then the configs: one merge, the same conflict rules.
  // An annotation entry's MAC is set only on an interface it did attach (a conflict refuses both).
  const macs: AnnotationMac[] = [];
  const unnamed = annotationAttachments(identity, out.problems, reachable, attach, macs);
  for (const config of mine) {
    const from = documentName(config);
    out.configs.push(from);
    (config.spec.attachments ?? []).forEach((a, i) => {
      const field = `spec.attachments[${i}]`;
      const network = reachable(a.network, from, `${field}.network`);
      if (!network || !attachable(network, a, from, field, out.problems)) return;
      const at = { network, from, ...(a.ips ? { ips: [...a.ips] } : {}), ...(a.bandwidth ? { bandwidth: { ...a.bandwidth } } : {}) };
      // Without an interface it is named with the annotation's unnamed ones, once every named one is known.
      if (a.interface === undefined) unnamed.push({ at, field });
      else attach({ ...at, interface: a.interface }, field);
    });
    (config.spec.interfaces ?? []).forEach((tuning, i) => {
      let settings: LinkSettings = tuning;
      if (tuning.mac !== undefined && tuning.name === identity.primaryInterface && !limits.primaryMac) {
        out.problems.push({ document: from, field: `spec.interfaces[${i}].mac`, reason: `changing the MAC of the pod's primary interface ${tuning.name} is off on this node: on the primary network it could take another pod's traffic` });
        const { mac: _refused, ...rest } = tuning;
        settings = rest;
      }
      tune(tuning.name, settings, from, (setting) => `spec.interfaces[${i}].${setting}`);
    });
    (config.spec.routes ?? []).forEach((r, i) => {
      const field = `spec.routes[${i}]`;
      const route = resolveRoute(r);
      if ('reason' in route) return out.problems.push({ document: from, field: `${field}.${route.field}`, reason: route.reason });
      routes.keep(routeKey(route), route, from, field, `the route to ${route.to} in table ${route.table}`);
    });
    (config.spec.rules ?? []).forEach((r, i) => {
      const field = `spec.rules[${i}]`;
      const rule = resolveRule(r);
      if ('reason' in rule) return out.problems.push({ document: from, field: `${field}.${rule.field}`, reason: rule.reason });
      rules.keep(ruleKey(rule), rule, from, field, `the IPv${rule.family} rule at priority ${rule.priority}`);
    });
    (config.spec.sysctls ?? []).forEach((entry, i) => {
      // The kernel shows integers in their plain form: "01" is read back as "1".
      const value = entry.value.trim().split(/\s+/).map((n) => String(BigInt(n))).join(' ');
      // Two spellings of one kernel knob are one setting: they conflict like the same key.
      sysctls.keep(sysctlKnob(entry.name), { name: entry.name, value }, from, `spec.sysctls[${i}]`, `sysctl ${sysctlKnob(entry.name)}`);
    });
  }
  nameUnnamed(unnamed, attachmentBy, earlier, macs, identity.primaryInterface);
  for (const { interface: name, mac, from, field } of macs) {
    if (attachmentBy.has(name) && !conflicted.has(`attach:${name}`)) tune(name, { mac }, from, () => field);
  }
  // A conflict is not resolved by picking a side: neither applies, and both documents say why.
  let addresses = 0;
  // Those of the configs the pod has first, then in the merge order (the annotation, then the
  // configs by name): the same ones win every pass, and a new config never takes a place one the pod has holds.
  const counted = [...attachmentBy].sort(([, a], [, b]) => Number(had.has(b.at.from)) - Number(had.has(a.at.from)));
  for (const [name, { at, field }] of counted) {
    if (conflicted.has(`attach:${name}`)) continue;
    if (out.attachments.length >= limits.attachmentsPerPod) {
      out.problems.push({ document: at.from, field, reason: `the pod would have more attachments than the ${limits.attachmentsPerPod} this node's admin allows per pod (podnet daemon --max-attachments-per-pod)` });
      continue;
    }
    const more = addressesOf(at);
    if (addresses + more > limits.addressesPerPod) {
      out.problems.push({ document: at.from, field, reason: `the pod would hold more addresses than the ${limits.addressesPerPod} this node's admin allows per pod (podnet daemon --max-addresses-per-pod)` });
      continue;
    }
    addresses += more;
    out.attachments.push(at);
  }
  const origins = new Map<string, string>();
  const origin = (key: string, from: string, field: string) => origins.set(key, [origins.get(key), `${from} ${field}`].filter(Boolean).join(', '));
  for (const at of out.attachments) origin(originKey.attachment(at.interface), at.from, at.field);
  const attachedTo = new Map(out.attachments.map((a) => [a.interface, a.network]));
  for (const asked of tuningBy.values()) {
    const { interface: name, settings, fields } = asked;
    let from = asked.from;
    const kept: LinkSettings = {};
    for (const setting of linkSettingNames) {
      if (settings[setting] !== undefined && !conflicted.has(`tune:${name}:${setting}`)) (kept as Record<string, unknown>)[setting] = settings[setting];
    }
    // A MAC of the tenant's own only where the admin's Network allows one (the primary's has its own switch above).
    const network = attachedTo.get(name);
    if (kept.mac !== undefined && name !== identity.primaryInterface && network?.spec.staticMacs !== true) {
      const reason = network
        ? `Network ${network.metadata.name} does not let pods give their attachments a MAC of their own (its spec.staticMacs is not true)`
        : `podnet sets a MAC only on an interface it attaches from a Network whose spec.staticMacs is true, and it attaches no ${name} to this pod`;
      out.problems.push({ document: from.mac!, field: fields.mac!, reason });
      delete kept.mac;
      const { mac: _refused, ...others } = from;
      from = others;
    }
    if (Object.keys(kept).length > 0) out.tuning.push({ interface: name, settings: kept, from });
    for (const setting of Object.keys(kept) as LinkSettingName[]) origin(originKey.tuning(name), from[setting]!, fields[setting]!);
    if (kept.mac !== undefined) out.macs.push({ interface: name, mac: kept.mac, from: from.mac!, field: fields.mac! });
  }
  out.routes.push(...routes.kept().map((e) => e.value));
  out.rules.push(...rules.kept().map((e) => e.value));
  for (const e of routes.kept()) origin(routeKey(e.value), e.from, e.field);
  for (const e of rules.kept()) origin(ruleKey(e.value), e.from, e.field);
  const managed = new Set(out.attachments.map((a) => a.interface));
  for (const { value: { name, value }, from, field } of sysctls.kept()) {
    const allowed = sysctlPath(name, managed);
    if ('reason' in allowed) out.problems.push({ document: from, field: `${field}.name`, reason: allowed.reason });
    else {
      out.sysctls.push({ name, path: allowed.path, value });
      origin(originKey.sysctl(allowed.path), from, field);
    }
  }
  out.origins = origins;
  out.conflicts = conflicts;
  return out;
}

/** How many PodNetworkConfigs podnet applies to one pod, the first by name: each is kept in its applied state. */
export const maxConfigsPerPod = 64;

/** The configs that select a pod, in the merge order (by name), whatever order the documents arrived in. */
export function selectingConfigs(identity: SandboxIdentity, configs: readonly PodNetworkConfig[]): PodNetworkConfig[] {
  return configs
    .filter((c) => (c.metadata.namespace ?? 'default') === identity.namespace && selects(c.spec.podSelector, identity.labels))
    .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0));
}

/** The keys of `origins`: one per thing a pod can be asked to have (routes and rules: routeKey, ruleKey). */
export const originKey = {
  attachment: (podInterface: string) => `attach ${podInterface}`,
  tuning: (podInterface: string) => `tune ${podInterface}`,
  sysctl: (path: string) => `sysctl ${path}`,
};

/**
 * What the documents want for a pod, each PodNetworkConfig whole or not at all (docs/adr/0017): a
 * config with any problem for this pod gives it nothing of that generation; the generation the pod
 * last had whole (`had`) stays instead, while it can still be had whole, and otherwise nothing of
 * the config does. In a conflict with a config the pod does not have yet, the one it has keeps its
 * settings. `whole` is the generation of each config the pod gets: what its applied state keeps.
 * `refusedByNode`: generations the node refused after an earlier call (a quota, an address or MAC
 * another pod has): each is failing, as one with a problem of its own is.
 */
export function desiredWhole(
  identity: SandboxIdentity,
  networks: ReadonlyMap<string, Network>,
  configs: readonly PodNetworkConfig[],
  earlier: readonly EarlierAttachment[] = [],
  limits: NodeLimits = defaultLimits,
  had: readonly AppliedConfig[] = [],
  refusedByNode: readonly RefusedGeneration[] = [],
): DesiredSandbox & { whole: AppliedConfig[] } {
  const hadBy = new Map(had.map((c) => [c.name, canonicalJson(c.spec)]));
  // Only the configs that select the pod: each round words every one of them as JSON, and a node's
  // configs are many (every pod's sandboxes against every config was 2.5 x the pods, 5 x the time).
  const current = selectingConfigs(identity, configs);
  const told: Problem[] = [];
  const fellBack = new Set<string>();
  /** Every config that selects the pod, refused or not: each says what it gives the pod, or why not. */
  let selecting: string[] | undefined;
  // Each round falls back or drops at least one config, each at most once: at most two rounds a config.
  for (;;) {
    // Has: the very generation it has. An edited config is new until it applies whole.
    const has = new Set(current.filter((c) => hadBy.get(documentName(c)) === canonicalJson(c.spec)).map(documentName));
    const wanted = desiredFor(identity, networks, current, earlier, limits, has);
    selecting ??= wanted.configs;
    const generation = new Map(current.map((c) => [documentName(c), generationOf(c.spec)]));
    const problemsOf = (name: string, conflictsToo: boolean) => [
      ...wanted.problems.filter((p) => p.document === name && (conflictsToo || !wanted.conflicts?.has(p))),
      ...refusedByNode.filter((r) => r.config === name && r.generation === generation.get(name)).map((r) => r.problem),
    ];
    // Configs with problems of their own go first: a conflict with one of them may be no conflict once it is gone.
    const own = wanted.configs.filter((name) => problemsOf(name, false).length > 0);
    const failing = own.length > 0 ? own : wanted.configs.filter((name) => problemsOf(name, true).length > 0);
    if (failing.length === 0) {
      const specOf = new Map(current.map((c) => [documentName(c), c.spec]));
      const whole = wanted.configs.map((name) => ({ name, spec: specOf.get(name)! }));
      return { ...wanted, configs: selecting, problems: [...told, ...wanted.problems], whole };
    }
    for (const name of failing) {
      told.push(...problemsOf(name, own.length === 0));
      const index = current.findIndex((c) => documentName(c) === name);
      const config = current[index]!;
      const before = had.find((c) => c.name === name)?.spec;
      if (before !== undefined && !fellBack.has(name) && canonicalJson(before) !== canonicalJson(config.spec)) {
        fellBack.add(name);
        current[index] = { ...config, spec: before };
        told.push({ document: name, field: 'spec', reason: 'this generation cannot be applied whole to the pod: the one it had before stays' });
      } else {
        current.splice(index, 1);
        told.push({ document: name, field: 'spec', reason: 'nothing of it applies to the pod until all of it can' });
      }
    }
  }
}

/** What names a config's generation: its spec, whatever order its keys came in. */
export function generationOf(spec: PodNetworkConfig['spec']): string {
  return canonicalJson(spec);
}

/** JSON with every object's keys sorted: two specs that say the same compare equal, however their keys came. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) => (v && typeof v === 'object' && !Array.isArray(v) ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) : v));
}

type Attach = (at: Omit<DesiredAttachment, 'field'>, field: string) => void;

/** The addresses podnet gives an attachment: those it brings, or those its Network's kind gives (model/kinds). */
function addressesOf(at: Omit<DesiredAttachment, 'field'>): number {
  return at.ips ? at.ips.length : addressesGiven(at.network);
}

/**
 * Whether what an attachment asks (addresses, rate limits, a MAC) can be had on its Network, as
 * its kind and the Network allow (model/kinds); else a problem naming the field.
 */
function attachable(network: Network, asked: AttachmentAsks, from: string, field: string, problems: Problem[]): boolean {
  const refused = attachmentRefusal(network, asked);
  if (refused) problems.push({ document: from, field: `${field}.${refused.field}`, reason: refused.reason });
  return refused === undefined;
}

/** The MAC an annotation entry asks for its interface. */
interface AnnotationMac {
  interface: string;
  mac: string;
  from: string;
  field: string;
}

interface UnnamedSelection {
  at: Omit<DesiredAttachment, 'interface' | 'field'>;
  field: string;
  mac?: string;
}

/**
 * The annotation's selections: those that name their interface are attached at once, the others
 * are returned to be named once every named one is known. A selection's MAC is a tuning of its
 * interface, from the pod.
 */
function annotationAttachments(
  identity: SandboxIdentity,
  problems: Problem[],
  reachable: (name: string, from: string, field: string) => Network | undefined,
  attach: Attach,
  macs: AnnotationMac[],
): UnnamedSelection[] {
  const request = identity.annotation;
  if (!request) return [];
  const from = podDocumentName(identity);
  const base = `metadata.annotations["${networksAnnotation}"]`;
  // An unreadable value asks for nothing: what it held cannot be told apart from a typo.
  if ('problem' in request) {
    problems.push({ document: from, field: base, reason: request.problem });
    return [];
  }
  const unnamed: UnnamedSelection[] = [];
  request.selections.forEach((selection: NetworkSelection, i) => {
    const field = `${base}[${i}]`;
    const network = reachable(selection.name, from, `${field}.name`);
    if (!network || !attachable(network, selection, from, field, problems)) return;
    const at = { network, from, ...(selection.ips ? { ips: [...selection.ips] } : {}) };
    if (selection.interface === undefined) return void unnamed.push({ at, field, ...(selection.mac ? { mac: selection.mac } : {}) });
    attach({ ...at, interface: selection.interface }, field);
    if (selection.mac) macs.push({ interface: selection.interface, mac: selection.mac, from, field: `${field}.mac` });
  });
  return unnamed;
}

/**
 * Names the attachments that gave no interface (the annotation's, then the configs'): the name an earlier attachment to the
 * same Network had, while it is free, else the first free of net1, net2, ... (what Multus picks).
 */
function nameUnnamed(
  unnamed: readonly UnnamedSelection[],
  taken: Map<string, { at: DesiredAttachment; field: string }>,
  earlier: readonly EarlierAttachment[],
  macs: AnnotationMac[],
  primaryInterface: string | undefined,
): void {
  const claimed = new Set([...taken.keys(), ...(primaryInterface ? [primaryInterface] : [])]);
  const named: { selection: UnnamedSelection; name: string }[] = [];
  const pending: UnnamedSelection[] = [];
  for (const selection of unnamed) {
    const kept = earlier.find((e) => e.network === selection.at.network.metadata.name && !claimed.has(e.interface));
    if (!kept) {
      pending.push(selection);
      continue;
    }
    claimed.add(kept.interface);
    named.push({ selection, name: kept.interface });
  }
  let n = 1;
  for (const selection of pending) {
    while (claimed.has(`net${n}`)) n++;
    claimed.add(`net${n}`);
    named.push({ selection, name: `net${n}` });
  }
  for (const { selection, name } of named) {
    taken.set(name, { at: { ...selection.at, interface: name, field: selection.field }, field: selection.field });
    if (selection.mac) macs.push({ interface: name, mac: selection.mac, from: selection.at.from, field: `${selection.field}.mac` });
  }
}

/**
 * Entries of one kind across configs, one per key: the same key asked the same way twice is one;
 * asked differently, neither applies and both documents are told (into `problems`).
 */
function keyedOnce<T>(tell: (...problems: Problem[]) => void, keeper: (first: string, second: string) => 'first' | 'second' | undefined) {
  const entries = new Map<string, { value: T; from: string; field: string; conflicted: boolean }>();
  return {
    keep(key: string, value: T, from: string, field: string, what: string): void {
      const earlier = entries.get(key);
      if (!earlier) return void entries.set(key, { value, from, field, conflicted: false });
      if (JSON.stringify(earlier.value) === JSON.stringify(value)) return;
      const kept = earlier.conflicted ? undefined : keeper(earlier.from, from);
      if (kept === 'first') return void tell(refusedFor(from, field, earlier.from, earlier.field, what));
      if (kept === 'second') {
        tell(refusedFor(earlier.from, earlier.field, from, field, what));
        return void entries.set(key, { value, from, field, conflicted: false });
      }
      earlier.conflicted = true;
      tell(...conflict(from, field, earlier.from, earlier.field, what));
    },
    kept(): { value: T; from: string; field: string }[] {
      return [...entries.values()].filter((e) => !e.conflicted);
    },
  };
}

/** One route per family, table, destination and metric, as the kernel keys them. */
export function routeKey(r: { family: Family; table: number; to: string; metric?: number }): string {
  return `route ${r.family} ${r.table} ${r.to} ${r.metric ?? defaultMetric(r.family)}`;
}

/** The metric the kernel gives a route that names none. */
export function defaultMetric(family: Family): number {
  return family === 4 ? 0 : 1024;
}

/** One rule per family and priority: podnet's rules are told apart by priority. */
export function ruleKey(r: { family: Family; priority: number }): string {
  return `rule ${r.family} ${r.priority}`;
}

const mainTable = 254;
type Refused = { field: string; reason: string };

/** A subnet in canonical form; refused when host bits are set, as the kernel would. */
function canonicalSubnet(text: string, field: string): { cidr: string; family: Family } | Refused {
  const cidr = parseCidr(text);
  if (!cidr) return { field, reason: `${text} is not an address with a prefix length` };
  if (!sameIp(networkAddress(cidr), cidr.ip)) return { field, reason: `${text} has host bits set; the subnet is ${formatIp(networkAddress(cidr))}/${cidr.prefix}` };
  return { cidr: formatCidr(cidr), family: cidr.ip.family };
}

function canonicalIp(text: string, family: Family, field: string): string | Refused {
  const ip = parseIp(text);
  if (!ip) return { field, reason: `${text} is not an IP address` };
  if (ip.family !== family) return { field, reason: `${text} is IPv${ip.family}, the route is IPv${family}` };
  return formatIp(ip);
}

function resolveRoute(r: Route): ResolvedRoute | Refused {
  const to = canonicalSubnet(r.to, 'to');
  if ('reason' in to) return to;
  const route: ResolvedRoute = { family: to.family, to: to.cidr, table: r.table === 'main' ? mainTable : r.table };
  if (r.metric !== undefined) route.metric = r.metric;
  if (r.via !== undefined) {
    const via = canonicalIp(r.via, to.family, 'via');
    if (typeof via !== 'string') return via;
    route.via = via;
  }
  if (r.dev !== undefined) route.dev = r.dev;
  if (r.src !== undefined) {
    const src = canonicalIp(r.src, to.family, 'src');
    if (typeof src !== 'string') return src;
    route.src = src;
  }
  if (r.seg6) {
    if (!r.dev) return { field: 'dev', reason: 'an SRv6 route needs the interface it leaves by (dev)' };
    const segments: string[] = [];
    for (const [i, text] of r.seg6.segments.entries()) {
      const segment = canonicalIp(text, 6, `seg6.segments[${i}]`);
      if (typeof segment !== 'string') return segment;
      segments.push(segment);
    }
    const mode = r.seg6.mode ?? 'encap';
    if (mode === 'inline' && to.family === 4) return { field: 'seg6.mode', reason: 'inline SRv6 applies to IPv6 routes only; use encap' };
    route.seg6 = { mode, segments };
  }
  return route;
}

function resolveRule(r: Rule): ResolvedRule | Refused {
  const families = new Set<Family>();
  const rule: Partial<ResolvedRule> = { priority: r.priority, table: r.table === 'main' ? mainTable : r.table };
  for (const side of ['from', 'to'] as const) {
    const text = r[side];
    if (text === undefined) continue;
    const subnet = canonicalSubnet(text, side);
    if ('reason' in subnet) return subnet;
    // A /0 selects everything, which the kernel stores (and shows) as no selector at all.
    if (!subnet.cidr.endsWith('/0')) rule[side] = subnet.cidr;
    families.add(subnet.family);
  }
  if (r.family) families.add(r.family === 'ipv4' ? 4 : 6);
  if (families.size > 1) return { field: 'family', reason: 'from, to and family name different address families' };
  if (r.fwmark !== undefined) rule.fwmark = r.fwmark;
  return { ...rule, family: [...families][0] ?? 4 } as ResolvedRule;
}

/** A conflict with a config the pod has already: told on the one that does not apply. */
function refusedFor(doc: string, field: string, holder: string, holderField: string, what: string): Problem {
  return { document: doc, field, reason: `${what} is set, differently, by ${holder} (${holderField}), which the pod has already; this one does not apply` };
}

/** A conflict is reported on both documents. */
function conflict(doc: string, field: string, otherDoc: string, otherField: string, what: string): Problem[] {
  const reason = (by: string, at: string) => `${what} is also set, differently, by ${by} (${at}); neither applies`;
  return [
    { document: doc, field, reason: reason(otherDoc, otherField) },
    { document: otherDoc, field: otherField, reason: reason(doc, field) },
  ];
}
