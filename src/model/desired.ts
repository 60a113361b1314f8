// What a sandbox should have, from the documents: one merge of its pod's annotation and the
// PodNetworkConfigs that select it (model/identity.ts), the same conflict rules for every part. A
// Network is reachable only when its namespaceSelector admits the pod's namespace, and a part is
// asked only where the namespace's PodNetworkPermissions allow it. What cannot be
// honoured is a Problem naming the document, the field and the reason, and is left out; whole
// configs (ADR 17) are whole-configs.ts's, made from this merge. Pure.
import type { AppliedConfig, Network, NetworkSelection, PodNetworkConfig, Problem, WireguardPeer } from '../protocol/validate.ts';
import { annotationField } from './annotation.ts';
import { documentName, namespaceNameLabel, podDocumentName, selectingConfigs, type SandboxIdentity } from './identity.ts';
import { addressesGiven, attachmentRefusal, type AttachmentAsks } from './kinds/index.ts';
import type { AskedMac } from './macs.ts';
import { noVrfReason, resolveRoute, resolveRule, routeKey, ruleKey } from './routing.ts';
import { mtuRefusal, partRefusal, type PermittedPart } from './permissions.ts';
import { selects } from './selector.ts';
import { linkSettingNames, type ResolvedVrf, type Bandwidth, type LinkSettingName, type LinkSettings, type ResolvedRoute, type ResolvedRule, type ResolvedSysctl } from './state.ts';
import { sysctlKnob, sysctlPath } from './sysctl.ts';

/** Why part of a desired state is not applied: the document ("PodNetworkConfig tenant-a/fast"), the field ("spec.attachments[0].network") and the reason. */
export type { Problem } from '../protocol/validate.ts';

export interface DesiredAttachment {
  network: Network;
  interface: string;
  ips?: string[];
  bandwidth?: Bandwidth;
  /** The DSCP marked on what the pod sends out of it (model/marking.ts). */
  dscp?: number;
  /** Its tunnel's remote, chosen within its Network's remoteRanges (model/kinds). */
  remote?: string;
  /** A wireguard attachment's peers. */
  peers?: WireguardPeer[];
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

/** A VRF device a config asks in the pod. */
export interface DesiredVrf extends ResolvedVrf {
  from: string;
  field: string;
}

export interface DesiredSandbox {
  /** The PodNetworkConfigs that select the sandbox (documentName), in merge order. */
  configs: string[];
  attachments: DesiredAttachment[];
  vrfs: DesiredVrf[];
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
  /**
   * Whether a config may place a pod's primary interface in a VRF. Off unless the admin turns it
   * on: the kernel then drops the primary's routes from the main table (podnet puts them back when
   * it leaves), which takes the pod off its cluster network unless its VRF routes it.
   */
  primaryVrf: boolean;
}

export const defaultLimits: NodeLimits = { attachmentsPerPod: 32, addressesPerPod: 64, primaryMac: false, primaryVrf: false };

/** An attachment podnet made earlier: an annotation's selection without an interface keeps the name it got. */
export interface EarlierAttachment {
  network: string;
  interface: string;
  /** The tunnel remote its attachment chose (AppliedAttachment.remote), where it chose one. */
  remote?: string;
}

/**
 * What the documents want for one pod, before names and addresses: its annotation, then the
 * configs that select it by name, merged by one set of conflict rules. `had`: the configs the pod
 * has already (documentName); in a conflict with one it does not have yet, they keep their settings.
 */
export function desiredFor(
  identity: SandboxIdentity,
  networks: ReadonlyMap<string, Network>,
  configs: readonly PodNetworkConfig[],
  earlier: readonly EarlierAttachment[] = [],
  limits: NodeLimits = defaultLimits,
  had: ReadonlySet<string> = new Set(),
): DesiredSandbox {
  const merge = new Merge(identity, networks, had);
  const selecting = selectingConfigs(identity, configs);
  // Bounded: what a pod has of each config is kept in its applied state.
  for (const config of selecting.slice(maxConfigsPerPod)) {
    merge.problem({ document: documentName(config), field: 'spec.podSelector', reason: `the pod is selected by more than ${maxConfigsPerPod} PodNetworkConfigs; podnet applies the first ${maxConfigsPerPod} by name` });
  }
  merge.annotation();
  merge.claims();
  // Every config's VRFs first: a route or an interface of one config may name another's VRF.
  merge.vrfs(selecting.slice(0, maxConfigsPerPod));
  for (const config of selecting.slice(0, maxConfigsPerPod)) merge.config(config, limits);
  return merge.result(earlier, limits);
}

/**
 * Why a pod of this namespace on this node may not attach to the Network (its namespaceSelector,
 * its nodeSelector), or undefined when it may: the one rule for configs, annotations and claims.
 */
export function networkRefusal(network: Network, where: Pick<SandboxIdentity, 'namespace' | 'namespaceLabels' | 'nodeLabels'>): string | undefined {
  const name = network.metadata.name;
  const namespaceLabels = where.namespaceLabels ?? { [namespaceNameLabel]: where.namespace };
  if (!network.spec.namespaceSelector || !selects(network.spec.namespaceSelector, namespaceLabels)) return `Network ${name} does not admit namespace ${where.namespace}`;
  if (!servedOn(network, where.nodeLabels)) return `Network ${name} is not served on this node: its spec.nodeSelector does not match the node's labels`;
  return undefined;
}

/**
 * Whether a node of these labels serves the Network: its nodeSelector matches them, or it has none.
 * Without labels (standalone, no Node to select) every Network is served.
 */
export function servedOn(network: Network, nodeLabels: Readonly<Record<string, string>> | undefined): boolean {
  return network.spec.nodeSelector === undefined || nodeLabels === undefined || selects(network.spec.nodeSelector, nodeLabels);
}

/** Who of two documents asking one thing differently keeps it: the first or the second, or neither. */
type Keeper = (first: string, second: string) => 'first' | 'second' | undefined;

/**
 * One pod's merge of what its annotation and configs ask. The same thing asked the same way twice
 * is one; asked differently, the document the pod has keeps it over one it has not, else neither
 * applies and both documents are told (a conflict is not resolved by picking a side).
 */
class Merge {
  private readonly identity: SandboxIdentity;
  private readonly networks: ReadonlyMap<string, Network>;
  private readonly had: ReadonlySet<string>;
  private readonly out: DesiredSandbox = { configs: [], attachments: [], vrfs: [], tuning: [], routes: [], rules: [], sysctls: [], macs: [], problems: [] };
  /** The problems that are conflicts between documents, not a document's own. */
  private readonly conflicts = new Set<Problem>();
  /** What two documents asked differently and neither gets: "attach:net1", "tune:eth0:mtu". */
  private readonly conflicted = new Set<string>();
  private readonly attachmentBy = new Map<string, DesiredAttachment>();
  private readonly tuningBy = new Map<string, DesiredTuning & { fields: Partial<Record<LinkSettingName, string>> }>();
  private readonly routes: KeyedOnce<ResolvedRoute>;
  private readonly rules: KeyedOnce<ResolvedRule>;
  private readonly sysctls: KeyedOnce<{ name: string; value: string }>;
  /** The VRFs no conflict took, by name: what routes, rules and interfaces may name. */
  private readonly vrfTables = new Map<string, DesiredVrf>();
  /** Attachments that name no interface: named once every named one is known (nameUnnamed). */
  private readonly unnamed: UnnamedSelection[] = [];
  /** The MACs the annotation's entries ask: set only on an interface the entry did attach (a conflict refuses both). */
  private readonly macs: AnnotationMac[] = [];
  /** Who asked each thing, by originKey. */
  private readonly origins = new Map<string, string>();

  constructor(identity: SandboxIdentity, networks: ReadonlyMap<string, Network>, had: ReadonlySet<string>) {
    this.identity = identity;
    this.networks = networks;
    this.had = had;
    const tell = (...problems: Problem[]) => this.tellConflict(...problems);
    const keeper: Keeper = (first, second) => this.keeper(first, second);
    this.routes = new KeyedOnce(tell, keeper);
    this.rules = new KeyedOnce(tell, keeper);
    this.sysctls = new KeyedOnce(tell, keeper);
  }

  problem(problem: Problem): void {
    this.out.problems.push(problem);
  }

  /**
   * The pod's annotation: selections that name their interface are attached at once, the others
   * named later. A selection's MAC is a tuning of its interface, from the pod.
   */
  annotation(): void {
    const { identity } = this;
    const request = identity.annotation;
    if (!request) return;
    const from = podDocumentName(identity);
    const base = annotationField();
    // An unreadable value asks for nothing: what it held cannot be told apart from a typo.
    if ('problem' in request) return this.problem({ document: from, field: base, reason: request.problem });
    request.selections.forEach((selection: NetworkSelection, i) => {
      const field = annotationField(i);
      this.askAttachment(selection.name, selection, from, field, `${field}.name`);
    });
  }

  /**
   * The pod's prepared ResourceClaims (docs/adr/0033): each allocated device an attachment to its
   * Network, as the claim's parameters ask it, under the same rules as the annotation's entries.
   */
  claims(): void {
    for (const claim of this.identity.claims ?? []) {
      const from = claim.document;
      for (const asked of claim.attachments) {
        const { field } = asked;
        if (claim.refused !== undefined) {
          this.problem({ document: from, field, reason: claim.refused });
          continue;
        }
        this.askAttachment(asked.network, asked, from, field, `${field}.network`);
      }
    }
  }

  /**
   * One attachment asked (an annotation's entry, a config's, a claim's device), under the rules
   * every one keeps: the namespace may ask it (and its rate limits), its Network admits the pod
   * here, its kind allows what it brings. Without an interface it is named once every named one
   * is known; a MAC it asks is a tuning of its interface.
   */
  private askAttachment(networkName: string, asked: AttachmentAsks & { interface?: string | undefined }, from: string, field: string, networkField: string): void {
    if (!this.permitted('attachments', from, field)) return;
    if (asked.bandwidth && !this.permitted('bandwidth', from, `${field}.bandwidth`)) return;
    if (asked.dscp !== undefined && !this.permitted('marking', from, `${field}.dscp`)) return;
    const network = this.reachable(networkName, from, networkField);
    if (!network || !this.attachable(network, asked, from, field)) return;
    const at = { network, from, ...(asked.ips ? { ips: [...asked.ips] } : {}), ...(asked.bandwidth ? { bandwidth: { ...asked.bandwidth } } : {}), ...(asked.dscp !== undefined ? { dscp: asked.dscp } : {}), ...(asked.remote !== undefined ? { remote: asked.remote } : {}), ...(asked.peers ? { peers: asked.peers.map((p) => ({ ...p })) } : {}) };
    if (asked.interface === undefined) return void this.unnamed.push({ at, field, ...(asked.mac ? { mac: asked.mac } : {}) });
    this.attach({ ...at, interface: asked.interface }, field);
    if (asked.mac) this.macs.push({ interface: asked.interface, mac: asked.mac, from, field: `${field}.mac` });
  }

  /**
   * The VRFs of the configs that select the pod: one name, one table. A name asked with two tables,
   * or a table asked under two names (the kernel would let two VRFs share a table, and their
   * routes would mix), is a conflict; a VRF named as the primary interface is refused.
   */
  vrfs(configs: readonly PodNetworkConfig[]): void {
    const byName = new KeyedOnce<ResolvedVrf>((...p) => this.tellConflict(...p), (a, b) => this.keeper(a, b));
    for (const config of configs) {
      const from = documentName(config);
      (config.spec.vrfs ?? []).forEach((vrf, i) => {
        const field = `spec.vrfs[${i}]`;
        if (!this.permitted('vrfs', from, field)) return;
        if (vrf.name === this.identity.primaryInterface) return this.problem({ document: from, field: `${field}.name`, reason: `${vrf.name} is the pod's primary interface, made by its primary CNI plugin; name the VRF otherwise` });
        byName.keep(vrf.name, { name: vrf.name, table: vrf.table }, from, field, `VRF ${vrf.name}`);
      });
    }
    const byTable = new KeyedOnce<string>((...p) => this.tellConflict(...p), (a, b) => this.keeper(a, b));
    const kept = byName.kept();
    for (const { value, from, field } of kept) byTable.keep(String(value.table), value.name, from, `${field}.table`, `table ${value.table} as a VRF's`);
    const tableHeld = new Set(byTable.kept().map((e) => e.value));
    for (const { value, from, field } of kept) {
      if (!tableHeld.has(value.name)) continue;
      // Bounded: a pod's VRFs are kept in its applied state.
      if (this.vrfTables.size >= maxVrfsPerPod) this.problem({ document: from, field, reason: `the pod would have more than ${maxVrfsPerPod} VRFs; podnet makes the first ${maxVrfsPerPod}` });
      else this.vrfTables.set(value.name, { ...value, from, field });
    }
  }

  /** One config that selects the pod: its attachments, interfaces, routes, rules and sysctls. */
  config(config: PodNetworkConfig, limits: NodeLimits): void {
    const from = documentName(config);
    this.out.configs.push(from);
    (config.spec.attachments ?? []).forEach((a, i) => {
      const field = `spec.attachments[${i}]`;
      this.askAttachment(a.network, a, from, field, `${field}.network`);
    });
    (config.spec.interfaces ?? []).forEach((tuning, i) => {
      if (!this.permitted('interfaces', from, `spec.interfaces[${i}]`)) return;
      const mtu = tuning.mtu === undefined ? undefined : mtuRefusal(this.identity.permissions ?? [], tuning.mtu, from, `spec.interfaces[${i}].mtu`);
      if (mtu) return this.problem(mtu);
      let settings: LinkSettings = tuning;
      if (tuning.mac !== undefined && tuning.name === this.identity.primaryInterface && !limits.primaryMac) {
        this.problem({ document: from, field: `spec.interfaces[${i}].mac`, reason: `changing the MAC of the pod's primary interface ${tuning.name} is off on this node: on the primary network it could take another pod's traffic` });
        const { mac: _refused, ...rest } = settings;
        settings = rest;
      }
      if (tuning.vrf !== undefined) {
        const refused = this.vrfRefusal(tuning.name, tuning.vrf, from, `spec.interfaces[${i}].vrf`, limits);
        if (refused) {
          this.problem(refused);
          const { vrf: _refused, ...rest } = settings;
          settings = rest;
        }
      }
      this.tune(tuning.name, settings, from, (setting) => `spec.interfaces[${i}].${setting}`);
    });
    (config.spec.routes ?? []).forEach((r, i) => {
      const field = `spec.routes[${i}]`;
      if (!this.permitted('routes', from, field)) return;
      const route = resolveRoute(r, this.tableOfVrf);
      if ('reason' in route) return this.problem({ document: from, field: `${field}.${route.field}`, reason: route.reason });
      this.routes.keep(routeKey(route), route, from, field, `the route to ${route.to} in table ${route.table}`);
    });
    (config.spec.rules ?? []).forEach((r, i) => {
      const field = `spec.rules[${i}]`;
      if (!this.permitted('rules', from, field)) return;
      const rule = resolveRule(r, this.tableOfVrf);
      if ('reason' in rule) return this.problem({ document: from, field: `${field}.${rule.field}`, reason: rule.reason });
      this.rules.keep(ruleKey(rule), rule, from, field, `the IPv${rule.family} rule at priority ${rule.priority}`);
    });
    (config.spec.sysctls ?? []).forEach((entry, i) => {
      if (!this.permitted('sysctls', from, `spec.sysctls[${i}]`)) return;
      // The kernel shows integers in their plain form: "01" is read back as "1".
      const value = entry.value.trim().split(/\s+/).map((n) => String(BigInt(n))).join(' ');
      // An interface's IPv6 MTU is an MTU too: the namespace's bounds hold for it.
      const mtu = entry.name.endsWith('.mtu') ? mtuRefusal(this.identity.permissions ?? [], Number(value), from, `spec.sysctls[${i}].value`) : undefined;
      if (mtu) return this.problem(mtu);
      // Two spellings of one kernel knob are one setting: they conflict like the same key.
      this.sysctls.keep(sysctlKnob(entry.name), { name: entry.name, value }, from, `spec.sysctls[${i}]`, `sysctl ${sysctlKnob(entry.name)}`);
    });
  }

  /** What the pod gets of it all: unnamed attachments named, within the node's limits per pod, each thing with who asked it. */
  result(earlier: readonly EarlierAttachment[], limits: NodeLimits): DesiredSandbox {
    this.nameUnnamed(earlier);
    for (const { interface: name, mac, from, field } of this.macs) {
      if (this.attachmentBy.has(name) && !this.conflicted.has(`attach:${name}`)) this.tune(name, { mac }, from, () => field);
    }
    this.vrfsBesideAttachments();
    this.attachmentsWithin(limits);
    this.vrfsKept();
    this.tuningKept();
    this.routingKept();
    this.sysctlsKept();
    return { ...this.out, origins: this.origins, conflicts: this.conflicts };
  }

  private readonly tableOfVrf = (name: string): number | undefined => this.vrfTables.get(name)?.table;

  /** Why an interface may not be placed in the VRF: the namespace may not ask it, the pod gets no such VRF, or it is the primary interface and the node does not allow that. */
  private vrfRefusal(name: string, vrf: string, from: string, field: string, limits: NodeLimits): Problem | undefined {
    const refused = partRefusal(this.identity.permissions ?? [], 'vrfs', from, field);
    if (refused) return refused;
    if (!this.vrfTables.has(vrf)) return { document: from, field, reason: noVrfReason(vrf) };
    if (name === this.identity.primaryInterface && !limits.primaryVrf) {
      return { document: from, field, reason: `placing the pod's primary interface ${name} in a VRF is off on this node: it takes the pod's cluster routes out of its main table` };
    }
    return undefined;
  }

  /**
   * A VRF and an attachment of one name are a conflict like any other: the document the pod has
   * keeps its own, else neither applies and both are told. What names a VRF that goes is refused
   * where the pod's interfaces are kept (tuningKept).
   */
  private vrfsBesideAttachments(): void {
    for (const vrf of [...this.vrfTables.values()]) {
      const at = this.attachmentBy.get(vrf.name);
      if (!at || this.conflicted.has(`attach:${vrf.name}`)) continue;
      const what = `interface ${vrf.name}`;
      const kept = this.keeper(vrf.from, at.from);
      if (kept !== 'second') {
        this.vrfTables.delete(vrf.name);
        if (kept === undefined) this.conflicted.add(`attach:${vrf.name}`);
      }
      if (kept === 'first') this.tellConflict(refusedFor(at.from, at.field, vrf.from, `${vrf.field}.name`, what));
      else if (kept === 'second') this.tellConflict(refusedFor(vrf.from, `${vrf.field}.name`, at.from, at.field, what));
      else this.tellConflict(...conflict(vrf.from, `${vrf.field}.name`, at.from, at.field, what));
    }
  }

  /** The VRFs the pod gets, each with who asked it. */
  private vrfsKept(): void {
    for (const vrf of this.vrfTables.values()) {
      this.out.vrfs.push(vrf);
      this.origin(originKey.vrf(vrf.name), vrf.from, vrf.field);
    }
  }

  private tellConflict(...problems: Problem[]): void {
    for (const p of problems) this.conflicts.add(p);
    this.out.problems.push(...problems);
  }

  private keeper(first: string, second: string): 'first' | 'second' | undefined {
    return this.had.has(first) && !this.had.has(second) ? 'first' : this.had.has(second) && !this.had.has(first) ? 'second' : undefined;
  }

  private origin(key: string, from: string, field: string): void {
    this.origins.set(key, [this.origins.get(key), `${from} ${field}`].filter(Boolean).join(', '));
  }

  /** Whether the namespace's PodNetworkPermissions let it ask `part`; else a problem naming the permission. */
  private permitted(part: PermittedPart, from: string, field: string): boolean {
    const refused = partRefusal(this.identity.permissions ?? [], part, from, field);
    if (refused) this.problem(refused);
    return refused === undefined;
  }

  /** The Network an attachment names, when it exists and admits the pod's namespace; else a problem. */
  private reachable(name: string, from: string, field: string): Network | undefined {
    const network = this.networks.get(name);
    if (!network) return void this.problem({ document: from, field, reason: `no Network named ${name}` });
    const refused = networkRefusal(network, this.identity);
    if (refused) return void this.problem({ document: from, field, reason: refused });
    return network;
  }

  /** Whether what an attachment asks (addresses, rate limits, a MAC) can be had on its Network, as its kind and the Network allow (model/kinds); else a problem naming the field. */
  private attachable(network: Network, asked: AttachmentAsks, from: string, field: string): boolean {
    const refused = attachmentRefusal(network, asked);
    if (refused) this.problem({ document: from, field: `${field}.${refused.field}`, reason: refused.reason });
    return refused === undefined;
  }

  private attach(at: Omit<DesiredAttachment, 'field'>, field: string): void {
    if (at.interface === this.identity.primaryInterface) {
      return this.problem({ document: at.from, field: `${field}.interface`, reason: `${at.interface} is the pod's primary interface, made by its primary CNI plugin; attach under another name` });
    }
    const earlier = this.attachmentBy.get(at.interface);
    const what = `interface ${at.interface}`;
    if (earlier && this.conflicted.has(`attach:${at.interface}`)) return this.tellConflict(...conflict(at.from, field, earlier.from, earlier.field, what));
    if (earlier) {
      const kept = this.keeper(earlier.from, at.from);
      if (kept === 'first') return this.tellConflict(refusedFor(at.from, field, earlier.from, earlier.field, what));
      if (kept === undefined) {
        this.conflicted.add(`attach:${at.interface}`);
        return this.tellConflict(...conflict(at.from, field, earlier.from, earlier.field, what));
      }
      this.tellConflict(refusedFor(earlier.from, earlier.field, at.from, field, what));
    }
    this.attachmentBy.set(at.interface, { ...at, field });
  }

  private tune(name: string, settings: LinkSettings, from: string, fieldOf: (setting: LinkSettingName) => string): void {
    const entry = this.tuningBy.get(name) ?? { interface: name, settings: {}, from: {}, fields: {} };
    this.tuningBy.set(name, entry);
    for (const setting of linkSettingNames) {
      const value = settings[setting];
      if (value === undefined) continue;
      const field = fieldOf(setting);
      const earlier = entry.settings[setting];
      if (earlier !== undefined && earlier !== value) {
        const what = `the ${setting} of ${name}`;
        const kept = this.conflicted.has(`tune:${name}:${setting}`) ? undefined : this.keeper(entry.from[setting]!, from);
        if (kept === 'first') {
          this.tellConflict(refusedFor(from, field, entry.from[setting]!, entry.fields[setting]!, what));
          continue;
        }
        if (kept === undefined) {
          this.conflicted.add(`tune:${name}:${setting}`);
          this.tellConflict(...conflict(from, field, entry.from[setting]!, entry.fields[setting]!, what));
          continue;
        }
        this.tellConflict(refusedFor(entry.from[setting]!, entry.fields[setting]!, from, field, what));
      }
      (entry.settings as Record<string, unknown>)[setting] = value;
      entry.from[setting] = from;
      entry.fields[setting] = field;
    }
  }

  /**
   * Names the attachments that gave no interface (the annotation's, then the configs'): the name an
   * earlier attachment to the same Network had, while it is free, else the first free of net1,
   * net2, ... (what Multus picks).
   */
  private nameUnnamed(earlier: readonly EarlierAttachment[]): void {
    const primary = this.identity.primaryInterface;
    const claimed = new Set([...this.attachmentBy.keys(), ...this.vrfTables.keys(), ...(primary ? [primary] : [])]);
    const named: { selection: UnnamedSelection; name: string }[] = [];
    const pending: UnnamedSelection[] = [];
    for (const selection of this.unnamed) {
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
      this.attachmentBy.set(name, { ...selection.at, interface: name, field: selection.field });
      if (selection.mac) this.macs.push({ interface: name, mac: selection.mac, from: selection.at.from, field: `${selection.field}.mac` });
    }
  }

  /**
   * The attachments within the node's limits per pod: those of the configs the pod has first, then
   * in the merge order (the annotation, then the configs by name), so the same ones win every pass
   * and a new config never takes a place one the pod has holds.
   */
  private attachmentsWithin(limits: NodeLimits): void {
    let addresses = 0;
    const counted = [...this.attachmentBy].sort(([, a], [, b]) => Number(this.had.has(b.from)) - Number(this.had.has(a.from)));
    for (const [name, at] of counted) {
      if (this.conflicted.has(`attach:${name}`)) continue;
      if (this.out.attachments.length >= limits.attachmentsPerPod) {
        this.problem({ document: at.from, field: at.field, reason: `the pod would have more attachments than the ${limits.attachmentsPerPod} this node's admin allows per pod (podnet daemon --max-attachments-per-pod)` });
        continue;
      }
      const more = at.ips ? at.ips.length : addressesGiven(at.network);
      if (addresses + more > limits.addressesPerPod) {
        this.problem({ document: at.from, field: at.field, reason: `the pod would hold more addresses than the ${limits.addressesPerPod} this node's admin allows per pod (podnet daemon --max-addresses-per-pod)` });
        continue;
      }
      addresses += more;
      this.out.attachments.push(at);
    }
    for (const at of this.out.attachments) this.origin(originKey.attachment(at.interface), at.from, at.field);
  }

  /** The settings of each interface that no conflict took; a MAC only where the admin's Network allows one. */
  private tuningKept(): void {
    const attachedTo = new Map(this.out.attachments.map((a) => [a.interface, a.network]));
    for (const asked of this.tuningBy.values()) {
      const { interface: name, settings, fields } = asked;
      let from = asked.from;
      const kept: LinkSettings = {};
      for (const setting of linkSettingNames) {
        if (settings[setting] !== undefined && !this.conflicted.has(`tune:${name}:${setting}`)) (kept as Record<string, unknown>)[setting] = settings[setting];
      }
      /** A setting refused here: told on who asked it, and left out. */
      const refuse = (setting: 'vrf' | 'mac', reason: string) => {
        this.problem({ document: from[setting]!, field: fields[setting]!, reason });
        delete kept[setting];
        const { [setting]: _refused, ...others } = from;
        from = others;
      };
      // A VRF that an attachment of its name took is not the pod's: nothing is placed in it.
      if (kept.vrf !== undefined && !this.vrfTables.has(kept.vrf)) refuse('vrf', noVrfReason(kept.vrf));
      // The primary interface's MAC has its own switch (config).
      const network = attachedTo.get(name);
      const refused = kept.mac !== undefined && name !== this.identity.primaryInterface ? macRefusal(name, network) : undefined;
      if (refused !== undefined) refuse('mac', refused);
      if (Object.keys(kept).length > 0) this.out.tuning.push({ interface: name, settings: kept, from });
      for (const setting of Object.keys(kept) as LinkSettingName[]) this.origin(originKey.tuning(name), from[setting]!, fields[setting]!);
      if (kept.vrf !== undefined) this.origin(originKey.placement(name), from.vrf!, fields.vrf!);
      if (kept.mac !== undefined) this.out.macs.push({ interface: name, mac: kept.mac, from: from.mac!, field: fields.mac! });
    }
  }

  private routingKept(): void {
    this.out.routes.push(...this.routes.kept().map((e) => e.value));
    this.out.rules.push(...this.rules.kept().map((e) => e.value));
    for (const e of this.routes.kept()) this.origin(routeKey(e.value), e.from, e.field);
    for (const e of this.rules.kept()) this.origin(ruleKey(e.value), e.from, e.field);
  }

  /** The sysctls no conflict took, where the allowlist lets a pod have them (model/sysctl.ts). */
  private sysctlsKept(): void {
    const managed = new Set(this.out.attachments.map((a) => a.interface));
    for (const { value: { name, value }, from, field } of this.sysctls.kept()) {
      const allowed = sysctlPath(name, managed);
      if ('reason' in allowed) this.problem({ document: from, field: `${field}.name`, reason: allowed.reason });
      else {
        this.out.sysctls.push({ name, path: allowed.path, value });
        this.origin(originKey.sysctl(allowed.path), from, field);
      }
    }
  }
}

/**
 * Why a pod may not set a MAC of its own on an interface other than its primary one: an
 * attachment's kind that cannot have one, a Network that does not allow it, or an interface podnet
 * does not attach. Undefined when it may.
 */
export function macRefusal(name: string, network: Network | undefined): string | undefined {
  if (!network) return `podnet sets a MAC only on an interface it attaches from a Network whose spec.staticMacs is true, and it attaches no ${name} to this pod`;
  const refused = attachmentRefusal(network, { mac: 'asked' });
  if (refused?.field === 'mac') return refused.reason;
  if (network.spec.staticMacs !== true) return `Network ${network.metadata.name} does not let pods give their attachments a MAC of their own (its spec.staticMacs is not true)`;
  return undefined;
}

/** How many VRFs podnet makes in one pod: each is kept in its applied state. */
export const maxVrfsPerPod = 8;

/** How many PodNetworkConfigs podnet applies to one pod, the first by name: each is kept in its applied state. */
export const maxConfigsPerPod = 64;

/** The keys of `origins`: one per thing a pod can be asked to have (routes and rules: routeKey, ruleKey). */
export const originKey = {
  attachment: (podInterface: string) => `attach ${podInterface}`,
  tuning: (podInterface: string) => `tune ${podInterface}`,
  vrf: (name: string) => `vrf ${name}`,
  /** The VRF an interface is placed in: a setting of its tuning, told apart so that a placement that fails names only who asked it. */
  placement: (podInterface: string) => `vrf-of ${podInterface}`,
  sysctl: (path: string) => `sysctl ${path}`,
};

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
 * Entries of one kind across configs, one per key: the same key asked the same way twice is one;
 * asked differently, the keeper's side applies, or neither and both documents are told.
 */
class KeyedOnce<T> {
  private readonly entries = new Map<string, { value: T; from: string; field: string; conflicted: boolean }>();
  private readonly tell: (...problems: Problem[]) => void;
  private readonly keeper: Keeper;

  constructor(tell: (...problems: Problem[]) => void, keeper: Keeper) {
    this.tell = tell;
    this.keeper = keeper;
  }

  keep(key: string, value: T, from: string, field: string, what: string): void {
    const earlier = this.entries.get(key);
    if (!earlier) return void this.entries.set(key, { value, from, field, conflicted: false });
    if (JSON.stringify(earlier.value) === JSON.stringify(value)) return;
    const kept = earlier.conflicted ? undefined : this.keeper(earlier.from, from);
    if (kept === 'first') return this.tell(refusedFor(from, field, earlier.from, earlier.field, what));
    if (kept === 'second') {
      this.tell(refusedFor(earlier.from, earlier.field, from, field, what));
      return void this.entries.set(key, { value, from, field, conflicted: false });
    }
    earlier.conflicted = true;
    this.tell(...conflict(from, field, earlier.from, earlier.field, what));
  }

  kept(): { value: T; from: string; field: string }[] {
    return [...this.entries.values()].filter((e) => !e.conflicted);
  }
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
