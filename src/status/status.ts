// What a node tells the API about its sandboxes, derived from one pass's reports: each pod's
// network-status annotation, its entries in the PodNetworkConfigs that select it, its entry in
// each Network, the conditions they add up to, and the Events between one pass and the next. Pure.
import type { DesiredAttachment, DesiredSandbox, Problem } from '../model/desired.ts';
import { documentName, podDocumentName, selectingConfigs, type RequiredAttachment, type SandboxIdentity } from '../model/identity.ts';
import type { AppliedState, ObservedLink } from '../model/state.ts';
import type { AttachmentRecord, Condition, Network, NetworkStatusEntry, PodNetworkConfig, PodNetworkConfigStatus, NetworkStatus } from '../protocol/validate.ts';
import { networksAnnotation } from '../model/annotation.ts';
import { readableResult, resultFor } from '../model/cni-config.ts';
import type { DelegatedRecord } from '../protocol/validate.ts';
import { byCodeUnits } from '../order.ts';

/** One sandbox as a pass left it. */
export interface SandboxFacts {
  record: AttachmentRecord;
  namespace: string;
  name: string;
  wanted: DesiredSandbox;
  applied: AppliedState | undefined;
  problems: readonly Problem[];
  lastError?: string;
  /** Its delegated attachments that are there, with their plugins' results. */
  delegated?: readonly DelegatedRecord[];
  /** The pod's links as last read: MAC and MTU. */
  links?: ReadonlyMap<string, ObservedLink> | undefined;
  /**
   * The attachments ("network interface") the pod asked when the daemon first took its sandbox
   * that were not there when its ADD was answered: with a record the plugin marked
   * startedWithoutNetwork, those made since were made after its containers started
   * (docs/adr/0028). Undefined until a pass took it with its pod known.
   */
  awaitedAtStart?: ReadonlySet<string>;
  /**
   * Why the last pass refused a config's new generation whole (ADR 17): a part of it the node could
   * not make. For a required attachment of that config whose own field it is not, the node's
   * trouble elsewhere, not the attachment's own reason (docs/adr/0028).
   */
  refusedByPass?: readonly Problem[];
}

/** How awaitedAtStart keys an attachment. */
export function attachmentKey(network: string, podInterface: string): string {
  return `${network} ${podInterface}`;
}

/** The attachments the sandbox has, podnet's own links and its delegated plugins' alike, as attachmentKey. */
export function attachedKeys(facts: Pick<SandboxFacts, 'applied' | 'delegated'>): Set<string> {
  return new Set([...(facts.applied?.attachments ?? []), ...(facts.delegated ?? [])].map((a) => attachmentKey(a.network, a.interface)));
}

type ConfigNodeEntry = NonNullable<PodNetworkConfigStatus['nodes']>[number];
type NodeEntry = NonNullable<NetworkStatus['nodes']>[number];

/** "198.18.5.2/24" → "198.18.5.2": network-status lists plain addresses, as Multus does. */
function plain(cidr: string): string {
  const slash = cidr.indexOf('/');
  return slash < 0 ? cidr : cidr.slice(0, slash);
}

/**
 * The pod's network-status: its primary interface (from the primary plugin's result), each
 * attachment podnet made, and each it could not make with the reason; the whole truth each time.
 */
/** A problem within what an entry holds (1024 characters): the status stays one podnet can read back. */
function bounded(problem: string): string {
  return problem.length <= 1024 ? problem : `${problem.slice(0, 1023)}…`;
}

export function networkStatusOf(facts: SandboxFacts): NetworkStatusEntry[] {
  const { record, links } = facts;
  const entries: NetworkStatusEntry[] = [primaryEntry(record, links)];
  const late = record.startedWithoutNetwork === true ? facts.awaitedAtStart : undefined;
  for (const a of attachedOf(facts)) {
    const link = links?.get(a.interface);
    const mac = link?.mac ?? a.mac;
    entries.push({
      name: a.network,
      interface: a.interface,
      ips: a.addresses.map(plain),
      ...(mac ? { mac } : {}),
      ...(link ? { mtu: link.mtu } : {}),
      ...(a.gateway?.length ? { gateway: a.gateway } : {}),
      ...(a.dns && Object.keys(a.dns).length > 0 ? { dns: a.dns } : {}),
      ...(late?.has(attachmentKey(a.network, a.interface)) ? { madeAfterStart: true } : {}),
      ...(a.publicKey ? { publicKey: a.publicKey } : {}),
    });
  }
  for (const want of facts.wanted.attachments) {
    if (!isAttached(facts, want)) entries.push({ name: want.network.metadata.name, interface: want.interface, problem: bounded(missingReason(facts, want) ?? notAttachedYet) });
  }
  // What the pod's own annotation asked and cannot have (an unknown Network, an unreadable value);
  // an attachment it asked that failed has its own entry above.
  const pod = podDocumentName(facts);
  const listed = new Set(facts.wanted.attachments.filter((w) => w.from === pod).map((w) => w.field));
  for (const p of facts.problems) {
    if (p.document === pod && p.field.startsWith('metadata.annotations') && !listed.has(p.field)) entries.push({ name: networksAnnotation, problem: bounded(`${p.field}: ${p.reason}`) });
  }
  return entries;
}

/** A network-status entry and the document that asked for it (a PodNetworkConfig, or the pod's annotation): what Events are told from. */
export interface ToldEntry {
  entry: NetworkStatusEntry;
  from?: string;
}

/** The pod's network-status, each entry with who asked for it. */
export function toldEntries(facts: SandboxFacts): ToldEntry[] {
  return networkStatusOf(facts).map((entry) => {
    const from = facts.wanted.attachments.find((w) => w.interface === entry.interface && w.network.metadata.name === entry.name)?.from;
    return from ? { entry, from } : { entry };
  });
}

/** An Event for the pod, or with `config` (its documentName) for that PodNetworkConfig. */
export interface StatusEvent {
  config?: string;
  type: 'Normal' | 'Warning';
  reason: 'Attached' | 'AttachedAfterStart' | 'Detached' | 'AttachFailed' | 'InvalidAnnotation';
  message: string;
}

/** What an interface asked and not attached has, when nothing is known against it: it is under way. */
const notAttachedYet = 'not attached yet';

/**
 * The Events between two network-status of a pod: each interface attached, detached or newly
 * failing, on the pod and on the PodNetworkConfig that asked for it. After a restart `before` is
 * the pod's annotation as read, without `from`: a detach then is told on the pod alone.
 */
export function podEventsBetween(pod: { namespace: string; name: string }, before: readonly ToldEntry[], after: readonly ToldEntry[]): StatusEvent[] {
  const own = podDocumentName(pod);
  const config = (from: string | undefined) => (from && from !== own ? from : undefined);
  const made = (list: readonly ToldEntry[]) => new Map(list.filter(({ entry: e }) => !e.default && e.problem === undefined).map((t) => [`${t.entry.name} ${t.entry.interface}`, t]));
  const [was, is] = [made(before), made(after)];
  const events: StatusEvent[] = [];
  const both = (from: string | undefined, event: StatusEvent) => {
    events.push(event);
    const asked = config(from);
    if (asked) events.push({ ...event, config: asked, message: `pod ${pod.name}: ${event.message}` });
  };
  for (const [key, { entry: e, from }] of is) {
    if (was.get(key)?.entry.madeAfterStart === undefined && was.has(key) && e.madeAfterStart) {
      // Told attached before the plugin's mark came in: what it is now known to be.
      both(from, { type: 'Warning', reason: 'AttachedAfterStart', message: `${e.interface} on Network ${e.name} was attached after the pod's containers had started: podnet's daemon did not make it within the pod's ADD` });
    }
    if (was.has(key)) continue;
    const message = `attached ${e.interface} to Network ${e.name}${e.ips?.length ? ` with ${e.ips.join(', ')}` : ''}`;
    // Asked at the pod's creation and made after its containers started: a CNF that needs it at start did without.
    const told = e.madeAfterStart
      ? { type: 'Warning' as const, reason: 'AttachedAfterStart' as const, message: `${message} after the pod's containers had started: podnet's daemon did not make it within the pod's ADD` }
      : { type: 'Normal' as const, reason: 'Attached' as const, message };
    events.push({ ...told, message: `${told.message} (asked by ${config(from) ?? 'the pod annotation'})` });
    if (config(from)) events.push({ ...told, config: config(from)!, message: `pod ${pod.name}: ${told.message}` });
  }
  for (const [key, { entry: e, from }] of was) {
    if (!is.has(key)) both(from, { type: 'Normal', reason: 'Detached', message: `detached ${e.interface} from Network ${e.name}` });
  }
  // An entry without an interface is the pod's annotation itself (unreadable, or asking what cannot be).
  const problem = (e: NetworkStatusEntry) => (e.interface === undefined ? e.problem! : `${e.interface} (Network ${e.name}): ${e.problem}`);
  const had = new Set(before.filter(({ entry: e }) => e.problem !== undefined).map(({ entry }) => problem(entry)));
  for (const { entry: e, from } of after) {
    // An attachment under way is no failure: a Warning for it would cry wolf on every busy node.
    if (e.problem === undefined || e.problem === notAttachedYet || had.has(problem(e))) continue;
    both(from, { type: 'Warning', reason: e.interface === undefined ? 'InvalidAnnotation' : 'AttachFailed', message: problem(e) });
  }
  return events;
}

function primaryEntry(record: AttachmentRecord, links: ReadonlyMap<string, ObservedLink> | undefined): NetworkStatusEntry {
  const given = resultFor(readableResult(record.prevResult), record.ifname);
  const link = links?.get(record.ifname);
  const mac = link?.mac ?? given.mac;
  return { name: record.network, interface: record.ifname, ips: given.ips.map(plain), ...(mac ? { mac } : {}), ...(link ? { mtu: link.mtu } : {}), default: true };
}

/** An interface attached to the pod: a link podnet made, or one a delegated Network's plugins made. */
interface Attached {
  interface: string;
  network: string;
  addresses: readonly string[];
  mac?: string;
  gateway?: string[];
  dns?: NetworkStatusEntry['dns'];
  /** A wireguard interface's public key. */
  publicKey?: string;
}

/** What is attached to the pod, podnet's own links and its delegated plugins' alike. */
function attachedOf(facts: SandboxFacts): Attached[] {
  const own = (facts.applied?.attachments ?? []).map((a): Attached => ({ interface: a.interface, network: a.network, addresses: a.addresses, ...(a.wireguard?.publicKey ? { publicKey: a.wireguard.publicKey } : {}) }));
  const delegated = (facts.delegated ?? []).map((d): Attached => {
    const given = resultFor(d.result, d.interface);
    return { interface: d.interface, network: d.network, addresses: given.ips, ...(given.mac ? { mac: given.mac } : {}), gateway: given.gateways, ...(d.result?.dns ? { dns: d.result.dns } : {}) };
  });
  return [...own, ...delegated];
}

function isAttached(facts: SandboxFacts, want: DesiredAttachment): boolean {
  return attachedOf(facts).some((a) => a.interface === want.interface && a.network === want.network.metadata.name);
}

/**
 * Why a desired attachment is not there: the problem resolving it (its addresses; a problem of its
 * own document and field) or planning it (about its pod interface or its Network,
 * src/planner/links.ts), else the pass's error; undefined when nothing tells.
 */
function missingReason(facts: SandboxFacts, want: DesiredAttachment): string | undefined {
  return missingProblem(facts, want)?.reason ?? unrefusedError(facts);
}

/** The problem that tells why a desired attachment is not there, when one does. */
function missingProblem(facts: SandboxFacts, want: DesiredAttachment): Problem | undefined {
  const about = new Set([`pod interface ${want.interface}`, `Network ${want.network.metadata.name}`]);
  return facts.problems.find((p) => (p.document === want.from && p.field === want.field) || about.has(p.document));
}

/** A required attachment a sandbox lacks, and why. */
export interface UnmetAttachment extends RequiredAttachment {
  reason: string;
  /**
   * Whether the reason is the attachment's own: a problem of its document (its field, or the
   * config refused whole), of its pod interface or Network, or its own step failing. Not when the
   * pass failed on another part of the pod's network and took it back with the rest.
   */
  own: boolean;
}

/**
 * The required attachments the sandbox lacks, each with why: the problem of its document and field
 * (an unknown Network, one that does not admit the pod's namespace, a config the node refuses
 * whole), or why the attachment it was resolved to is not there.
 */
export function unmetRequired(facts: SandboxFacts, required: readonly RequiredAttachment[]): UnmetAttachment[] {
  return required.flatMap((ask): UnmetAttachment[] => {
    const want = facts.wanted.attachments.find((w) => w.from === ask.document && w.field === ask.field);
    if (want && isAttached(facts, want)) return [];
    const ofDocument = facts.problems.filter((p) => p.document === ask.document);
    const atField = (p: Problem) => p.field === ask.field || p.field.startsWith(`${ask.field}.`);
    const problem = want ? missingProblem(facts, want) : (ofDocument.find(atField) ?? ofDocument[0]);
    const byPassElsewhere = problem !== undefined && !atField(problem) && (facts.refusedByPass ?? []).some((r) => r.document === problem.document && r.field === problem.field && r.reason === problem.reason);
    // A failed step names who asked it first (`${document} ${field}: ...`, model/step.ts stamp).
    const origin = `${ask.document} ${ask.field}`;
    const ownStep = facts.lastError !== undefined && (facts.lastError.startsWith(`${origin}:`) || facts.lastError.startsWith(`${origin},`));
    const name = want?.interface ?? ask.interface;
    const reason = problem?.reason ?? facts.lastError ?? notAttachedYet;
    return [{ ...ask, ...(name === undefined ? {} : { interface: name }), reason, own: (problem !== undefined && !byPassElsewhere) || ownStep }];
  });
}

/**
 * Why a pod lacks part of a PodNetworkConfig that selects it: what of the config it cannot have,
 * naming the field, or its last error; undefined when it has all the config asks.
 */
export function configPodProblem(config: PodNetworkConfig, facts: SandboxFacts): string | undefined {
  const from = documentName(config);
  // Each once: an attachment's own problem is also why it is missing.
  const problems = new Set(facts.problems.filter((p) => p.document === from).map((p) => `${p.field}: ${p.reason}`));
  for (const tuning of facts.wanted.tuning) {
    if (!Object.values(tuning.from).includes(from)) continue;
    // The planner tells a tuning it cannot apply (no such interface) of the pod interface, not of the config.
    const unapplied = facts.problems.find((p) => p.document === `pod interface ${tuning.interface}` && (p.field === 'interfaces' || (p.field === 'interfaces.vrf' && tuning.from.vrf === from)));
    if (unapplied) problems.add(`${unapplied.document}: ${unapplied.reason}`);
  }
  // And a VRF it cannot make, of the VRF.
  for (const vrf of facts.wanted.vrfs) {
    const unmade = vrf.from === from ? facts.problems.find((p) => p.document === `VRF ${vrf.name}` && p.field === 'vrfs') : undefined;
    if (unmade) problems.add(`${vrf.field}: ${unmade.reason}`);
  }
  for (const want of facts.wanted.attachments) {
    if (want.from !== from || isAttached(facts, want)) continue;
    // One under way is no failure.
    const reason = missingReason(facts, want);
    if (reason) problems.add(`${want.field}: ${reason}`);
  }
  const lastError = unrefusedError(facts);
  if (lastError && problems.size === 0) problems.add(lastError);
  return problems.size > 0 ? [...problems].join('; ') : undefined;
}

/** What a pass that refused generations whole (ADR 17) failed with: their problems, told at each field. */
export function refusalMessage(refused: readonly Problem[]): string {
  return refused.map((p) => `${p.document} ${p.field}: ${p.reason}`).join('; ');
}

/**
 * The sandbox's last error, unless it is only the refusal of generations whole: that failure is
 * theirs, told by their own problems, and no other config's or attachment's.
 */
function unrefusedError(facts: SandboxFacts): string | undefined {
  const refused = facts.refusedByPass ?? [];
  return refused.length > 0 && facts.lastError === refusalMessage(refused) ? undefined : facts.lastError;
}

/** A pod of this node that asks podnet for something and has no sandbox podnet recorded. */
export interface UnrecordedPod {
  namespace: string;
  name: string;
  /** The documents that ask (its annotation, the configs that select it), by documentName. */
  askedBy: string[];
  reason: string;
}

/** How long a running pod may be seen without a record before it is told: its ADD's record may be on its way. */
export const unrecordedGraceMs = 30_000;

/** Why podnet cannot change the network of a pod it has no record of. */
export const unrecordedReason = {
  hostNetwork: "the pod runs in the node's network namespace: podnet changes only a pod's own",
  notRecorded:
    "podnet has no record of this pod's sandbox: it started before podnet was chained into the node's CNI config, and the runtime's cache does not name its network namespace (containerd 1.6 and older); delete the pod to have it made again with podnet chained",
};

/**
 * Whether a pod of this node asks podnet for something it cannot give, having no record of any
 * sandbox of it: it is running and has been seen so for unrecordedGraceMs (`unrecordedSince`: a
 * new sandbox's ADD, after a reboot say, is long done by then), and its annotation or a config
 * asks for something. `identity` is who the pod is; `recorded` whether podnet has a record of it.
 */
export function unrecordedPod(
  pod: { namespace: string; name: string; running: boolean; hostNetwork: boolean; unrecordedSince: number },
  identity: SandboxIdentity,
  configs: readonly PodNetworkConfig[],
  recorded: boolean,
  now: number,
): UnrecordedPod | undefined {
  if (recorded || !pod.running || now - pod.unrecordedSince < unrecordedGraceMs) return undefined;
  const askedBy = [...(identity.annotation ? [podDocumentName(pod)] : []), ...selectingConfigs(identity, configs).map(documentName)];
  if (askedBy.length === 0) return undefined;
  return { namespace: pod.namespace, name: pod.name, askedBy, reason: pod.hostNetwork ? unrecordedReason.hostNetwork : unrecordedReason.notRecorded };
}

/** A pod of this node as the API server shows it: whether it runs, in its own netns or the node's, and who it is (asked only of a pod that may be told). */
export interface NodePod {
  namespace: string;
  name: string;
  running: boolean;
  hostNetwork: boolean;
  identity: () => SandboxIdentity;
}

/**
 * The pods of this node that ask for something podnet cannot give, having no record of them
 * (unrecordedPod), and when each running pod without a record was first seen so: `since` carried
 * over for the pods still so, `now` for the new ones, the others dropped. `recorded`: the
 * namespace/name of every pod with a record.
 */
export function unrecordedPods(
  pods: readonly NodePod[],
  recorded: ReadonlySet<string>,
  configs: readonly PodNetworkConfig[],
  since: ReadonlyMap<string, number>,
  now: number,
): { lacking: UnrecordedPod[]; since: Map<string, number> } {
  const seen = new Map<string, number>();
  const lacking: UnrecordedPod[] = [];
  for (const pod of pods) {
    const key = `${pod.namespace}/${pod.name}`;
    if (!pod.running || recorded.has(key)) continue;
    const first = since.get(key) ?? now;
    seen.set(key, first);
    const told = unrecordedPod({ ...pod, unrecordedSince: first }, pod.identity(), configs, false, now);
    if (told) lacking.push(told);
  }
  return { lacking, since: seen };
}

/** Its network-status: one entry, for the first document that asks, saying why nothing can be. */
export function unrecordedNetworkStatus(pod: UnrecordedPod): NetworkStatusEntry[] {
  return [{ name: pod.askedBy[0]!, problem: pod.reason }];
}

/** The failing pods a node names in a config's status, first by name: the rest are counted. */
export const maxFailingPodsNamed = 5;
/** How much of a failing pod's reason a config's status keeps. */
const maxReasonChars = 1024;

/**
 * This node's entry in a PodNetworkConfig that selects `sandboxes` here: how many it selects, how
 * many have all of it, and a few of those that do not with why. Its size does not grow with the
 * pods; undefined when it selects none here.
 */
export function configNodeEntry(config: PodNetworkConfig, sandboxes: readonly SandboxFacts[], node: string, unrecorded: readonly UnrecordedPod[] = []): ConfigNodeEntry | undefined {
  const lacking = unrecorded.filter((p) => p.askedBy.includes(documentName(config)));
  const selected = sandboxes.length + lacking.length;
  if (selected === 0) return undefined;
  const failing = [
    ...sandboxes.flatMap((facts) => {
      const reason = configPodProblem(config, facts);
      return reason === undefined ? [] : [{ name: facts.name, reason }];
    }),
    ...lacking.map((p) => ({ name: p.name, reason: p.reason })),
  ]
    .map(({ name, reason }) => ({ name, reason: reason.length > maxReasonChars ? `${reason.slice(0, maxReasonChars - 3)}...` : reason }))
    .sort((a, b) => byCodeUnits(a.name, b.name));
  return {
    name: node,
    selected,
    ready: selected - failing.length,
    ...(failing.length > 0 ? { failingPods: failing.slice(0, maxFailingPodsNamed) } : {}),
  };
}

/** This node's entry in a Network: whether every pod here that asks for it has it, and how many do. */
export function networkNodeEntry(network: Network, sandboxes: readonly SandboxFacts[], node: string): NodeEntry | undefined {
  const name = network.metadata.name;
  let attachedPods = 0;
  let wanting = 0;
  let message: string | undefined;
  for (const facts of sandboxes) {
    if (attachedOf(facts).some((a) => a.network === name)) attachedPods++;
    for (const want of facts.wanted.attachments) {
      if (want.network.metadata.name !== name) continue;
      wanting++;
      if (!isAttached(facts, want)) message ??= `${facts.namespace}/${facts.name} ${want.interface}: ${missingReason(facts, want) ?? notAttachedYet}`;
    }
  }
  // A node with nothing to say about a Network does not write to it.
  if (attachedPods === 0 && wanting === 0) return undefined;
  return { name: node, ready: message === undefined, attachedPods, ...(message ? { message } : {}) };
}

/** A condition, keeping its lastTransitionTime while its status stays what it was. */
export function condition(type: Condition['type'], status: boolean, reason: string, message: string, previous: readonly Condition[] | undefined, now: string, generation?: number): Condition {
  const value = status ? 'True' : 'False';
  const before = previous?.find((c) => c.type === type);
  return {
    type,
    status: value,
    reason,
    message,
    lastTransitionTime: before && before.status === value ? before.lastTransitionTime : now,
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
  };
}

/**
 * A PodNetworkConfig's status as this node applies it: its own entry, and the conditions and ready
 * count over every node's entries (the others' as the API server last showed them).
 */
export function configStatus(
  generation: number | undefined,
  mine: ConfigNodeEntry | undefined,
  current: PodNetworkConfigStatus | undefined,
  documentProblems: readonly string[],
  node: string,
  now: string,
): PodNetworkConfigStatus {
  // By node name: every node then words the shared fields alike, and a node that changed nothing writes nothing.
  const all = byName([...(current?.nodes ?? []).filter((n) => n.name !== node), ...(mine ? [mine] : [])]);
  const selected = all.reduce((n, e) => n + e.selected, 0);
  const failing = selected - all.reduce((n, e) => n + e.ready, 0);
  // A pod's reason repeats the spec's problems (they keep it from what it asks): the message tells them once.
  const told = new Set(documentProblems);
  const podProblems = all.flatMap((e) =>
    (e.failingPods ?? []).flatMap((p) => {
      let own = p.reason;
      for (const problem of told) own = own.split(problem).join('');
      const rest = own.split('; ').filter((part) => part.trim() !== '');
      return rest.length > 0 ? [`pod ${p.name}: ${rest.join('; ')}`] : [];
    }),
  );
  const problems = [...documentProblems, ...podProblems];
  const degraded = problems.length > 0 || failing > 0;
  const conditions = [
    condition('Ready', !degraded, degraded ? 'NotApplied' : 'Applied', readyMessage(failing, selected, documentProblems.length > 0), current?.conditions, now, generation),
    condition('Degraded', degraded, degraded ? (documentProblems.length > 0 ? 'InvalidSpec' : 'ApplyFailed') : 'AsExpected', degraded ? problems.slice(0, 5).join('; ') : '', current?.conditions, now, generation),
  ];
  return {
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    ready: `${selected - failing}/${selected}`,
    conditions,
    nodes: mine ? [mine] : [],
  };
}

/** Node entries in the order of their names. */
function byName<E extends { name: string }>(entries: E[]): E[] {
  return entries.sort((a, b) => byCodeUnits(a.name, b.name));
}

function readyMessage(failing: number, selected: number, specProblems: boolean): string {
  if (failing > 0) return `${failing} of ${selected} selected pods lack part of the config`;
  if (specProblems) return 'the spec cannot be applied as it is (see Degraded)';
  return `${selected} selected pods have what the config asks`;
}

/**
 * A Network's status as this node applies it: its own entry, and what the spec's problems and the
 * nodes' entries add up to.
 */
export function networkStatus(entry: NodeEntry | undefined, current: NetworkStatus | undefined, specProblems: readonly string[], node: string, now: string): NetworkStatus {
  const all = byName([...(current?.nodes ?? []).filter((n) => n.name !== node), ...(entry ? [entry] : [])]);
  const down = all.filter((n) => !n.ready);
  const problems = [...specProblems, ...down.map((n) => `${n.name}: ${n.message ?? 'not ready'}`)];
  const degraded = problems.length > 0;
  const reason = specProblems.length > 0 ? 'InvalidSpec' : degraded ? 'NodesNotReady' : 'AsExpected';
  return {
    ready: `${all.length - down.length}/${all.length}`,
    conditions: [condition('Degraded', degraded, reason, problems.slice(0, 5).join('; '), current?.conditions, now)],
    nodes: entry ? [entry] : [],
  };
}

/**
 * Whether applying `next` would change what the API server holds, this node's entries and the
 * shared fields, whatever the order of keys; transition times are kept, so they do not count.
 */
export function sameStatus(next: object, current: object | undefined, node: string): boolean {
  if (!current) return false;
  const canonical = (value: unknown, key?: string): unknown => {
    if (Array.isArray(value)) {
      // The other nodes' entries are theirs to write: only this node's are compared.
      const own = key === 'nodes' ? value.filter((e: { name?: string }) => e.name === node) : value;
      return own.map((v) => canonical(v));
    }
    if (typeof value !== 'object' || value === null) return value;
    return Object.fromEntries(
      Object.keys(value)
        .filter((k) => k !== 'lastTransitionTime')
        .sort()
        .map((k) => [k, canonical((value as Record<string, unknown>)[k], k)]),
    );
  };
  return JSON.stringify(canonical(next)) === JSON.stringify(canonical(current));
}
