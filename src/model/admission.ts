// Node admission: what the documents want for each sandbox of a node, with what the node refuses
// across its sandboxes left out and told at its field. A Network's quota per namespace
// (quotas.ts), the addresses pods bring on Networks without ipam and static MACs (macs.ts) are
// judged across every sandbox at once: no one sandbox's desired state can tell them. A config's
// generation the node refuses any part of gives the pod nothing of it (ADR 17), so refusals come
// in rounds until they settle. Every input is passed in: the pass and `podnet diff` call the same
// function with the same kind of facts. Pure.
import { formatIp, parseCidr, parseIp } from './cidr.ts';
import type { AppliedConfig, Network, PodNetworkConfig, PodNetworkPermission, Problem } from '../protocol/validate.ts';
import type { DesiredSandbox, EarlierAttachment, NodeLimits } from './desired.ts';
import { documentName, selectingConfigs, type SandboxIdentity } from './identity.ts';
import { desiredWhole, generationOf } from './whole-configs.ts';
import { bringsOwnAddresses } from './kinds/index.ts';
import { refusedMacs, refusedOwnAddresses } from './macs.ts';
import { permissionsByNamespace } from './permissions.ts';
import { overQuota } from './quotas.ts';
import type { Refusal, Refusals, RefusedGeneration } from './refusal.ts';
import { isEmptyApplied, type AppliedState, type ObservedLink, type Resolved } from './state.ts';

/** One live sandbox as admission sees it: who its pod is, and what it has now. */
export interface AdmissionSandbox {
  containerId: string;
  /** Its pod as the desired state's source knows it; none: it wants nothing of podnet's. */
  pod: SandboxIdentity | undefined;
  /** What podnet applied to it. */
  applied: AppliedState | undefined;
  /** Its delegated attachments (cni Networks) that are there. */
  delegated: readonly EarlierAttachment[];
  /** The MACs its interfaces had when its netns was last read. */
  seenMacs: readonly string[];
}

/** What admission judges against besides the sandboxes. */
export interface AdmissionFacts {
  networks: ReadonlyMap<string, Network>;
  configs: readonly PodNetworkConfig[];
  /** What each namespace may ask (model/permissions.ts). */
  permissions: readonly PodNetworkPermission[];
  limits: NodeLimits;
  /** The node's own links as last read: no pod may take their MACs or addresses. */
  hostLinks: readonly Pick<ObservedLink, 'mac' | 'addresses'>[];
}

export interface Admission {
  /** What each sandbox gets, in the order given: the node's refusals of an annotation's part left out, and of a config's part the whole generation. */
  wanted: DesiredSandbox[];
  /** Static MACs refused, by container id: taken out of the tuning once names and addresses are decided (withoutRefusedMacs). */
  macs: Refusals;
  /** Set when the rounds did not settle (not seen in practice): what the log should say. */
  unsettled?: { refusing: boolean; containerIds: string[] };
  /**
   * What the sandbox at `index` gets when these generations are refused too, on top of what the
   * node refused it: for a pass that finds it cannot make a part of a config's new generation
   * (ADR 17). Only the sandbox itself is made again: a config it no longer gets frees what the
   * node counted for it, which the next pass gives the others.
   */
  again(index: number, refused: readonly RefusedGeneration[]): DesiredSandbox;
}

/** Rounds of node checks after which what is still refused is left out alone, as an annotation's part is. */
const maxRefusalRounds = 8;

/**
 * What each sandbox should have, judged across the node. Each round refuses at least one
 * generation more, of at most two per config (the one asked, the one had); once none is new, it
 * gives back those that no longer hold (givenBack). Only the sandboxes whose refusals changed are
 * made again.
 */
export function admit(sandboxes: readonly AdmissionSandbox[], given: AdmissionFacts): Admission {
  const facts: Facts = { ...given, permissionsOf: permissionsByNamespace(given.permissions) };
  const node = nodeOf(sandboxes, facts);
  const refusedByNode = new Map<string, RefusedGeneration[]>();
  const wanted = sandboxes.map((s) => wantedOf(s, facts));
  let refused = node.refusals(wanted);
  let unsettled: Admission['unsettled'];
  for (let round = 0; ; round++) {
    let changed = refusedConfigs(sandboxes, wanted, refused, refusedByNode);
    const refusing = changed.size > 0;
    if (!refusing) changed = givenBack(sandboxes, wanted, facts, node, refusedByNode);
    if (changed.size === 0) break;
    if (round === maxRefusalRounds) {
      unsettled = { refusing, containerIds: [...changed] };
      break;
    }
    for (const [i, sandbox] of sandboxes.entries()) {
      if (changed.has(sandbox.containerId)) wanted[i] = wantedOf(sandbox, facts, refusedByNode.get(sandbox.containerId));
    }
    refused = node.refusals(wanted);
  }
  const kept = withoutRefused(withoutRefused(wanted, sandboxes, refused.quotas), sandboxes, refused.addresses);
  const again = (index: number, more: readonly RefusedGeneration[]): DesiredSandbox => {
    const sandbox = [sandboxes[index]!];
    const alone = [wantedOf(sandbox[0]!, facts, [...(refusedByNode.get(sandbox[0]!.containerId) ?? []), ...more])];
    return withoutRefused(withoutRefused(alone, sandbox, refused.quotas), sandbox, refused.addresses)[0]!;
  };
  return { wanted: kept, macs: node.macRefusals(kept), again, ...(unsettled ? { unsettled } : {}) };
}

/** `desired` without the MACs `refused` names (admit's `macs`), the problems told. */
export function withoutRefusedMacs(desired: Resolved, problems: readonly Problem[], refused: readonly Refusal[] | undefined): { desired: Resolved; problems: Problem[] } {
  if (!refused) return { desired, problems: [...problems] };
  const interfaces = new Set(refused.map((r) => r.interface));
  const tuning = desired.tuning.flatMap((t) => {
    if (!interfaces.has(t.interface)) return [t];
    const { mac: _refused, ...settings } = t.settings;
    return Object.keys(settings).length > 0 ? [{ ...t, settings }] : [];
  });
  return { desired: { ...desired, tuning }, problems: [...problems, ...refused.map((r) => r.problem)] };
}

/** The node's refusals of each kind. */
interface NodeRefusals {
  quotas: Refusals;
  addresses: Refusals;
  macs: Refusals;
}

/** The checks across the node, bound to what the sandboxes have and the host's links. */
interface NodeChecks {
  refusals(wanted: readonly DesiredSandbox[]): NodeRefusals;
  macRefusals(wanted: readonly DesiredSandbox[]): Refusals;
}

function nodeOf(sandboxes: readonly AdmissionSandbox[], { hostLinks }: AdmissionFacts): NodeChecks {
  const hostMacs = new Set(hostLinks.flatMap((l) => (l.mac ? [l.mac] : [])));
  const hostIps = hostLinks.flatMap((l) => l.addresses.map(plainAddress));
  const held = sandboxes.map((s) => new Map(earlierOf(s).map((e) => [`${e.network}/${e.interface}`, e.remote] as const)));
  // As last seen, and as podnet recorded giving them: a first pass after a start has seen nothing yet.
  const macsHad = sandboxes.map((s) => [...s.seenMacs, ...(s.applied?.attachments ?? []).flatMap((a) => [a.mac, a.portSecurity?.mac].filter((m): m is string => m !== undefined))]);
  const addressesHad = sandboxes.map((s) => (s.applied?.attachments ?? []).flatMap((a) => a.addresses.map((ip) => `${a.network} ${plainAddress(ip)}`)));
  const macRefusals = (wanted: readonly DesiredSandbox[]) => refusedMacs(sandboxes.map((s, i) => ({ containerId: s.containerId, asked: wanted[i]!.macs, has: macsHad[i]! })), hostMacs);
  /**
   * The attachments whose own addresses (brought on a Network without ipam) another pod on the
   * node has, the node itself has, or another pod asks in the same pass: ipam never gives one
   * address twice, and neither does this.
   */
  const addressRefusals = (wanted: readonly DesiredSandbox[]): Refusals => {
    const claims = sandboxes.map((s, i) => ({
      containerId: s.containerId,
      asked: wanted[i]!.attachments.filter(bringsOwnAddresses).flatMap((a) => a.ips!.map((ip) => ({ interface: a.interface, value: `${a.network.metadata.name} ${plainAddress(ip)}`, from: a.from, field: `${a.field}.ips` }))),
      has: addressesHad[i]!,
    }));
    if (!claims.some((c) => c.asked.length > 0)) return new Map();
    const networks = new Set(claims.flatMap((c) => c.asked.map((a) => a.value.slice(0, a.value.indexOf(' ')))));
    return refusedOwnAddresses(claims, new Set([...networks].flatMap((n) => hostIps.map((ip) => `${n} ${ip}`))));
  };
  return {
    // Quotas are counted across every sandbox before any address is taken; the addresses of the rest.
    refusals: (wanted) => {
      const quotas = overQuota(sandboxes.map((s, i) => ({ containerId: s.containerId, namespace: s.pod?.namespace ?? '', attachments: wanted[i]!.attachments, has: held[i]! })));
      return { quotas, addresses: addressRefusals(withoutRefused(wanted, sandboxes, quotas)), macs: macRefusals(wanted) };
    },
    macRefusals,
  };
}

/** The facts with each namespace's permissions found once. */
interface Facts extends AdmissionFacts {
  permissionsOf: ReadonlyMap<string, readonly PodNetworkPermission[]>;
}

/** What the documents want for one sandbox, before names and addresses are decided. */
function wantedOf(sandbox: AdmissionSandbox, { networks, configs, limits, permissionsOf }: Facts, refusedByNode: readonly RefusedGeneration[] = []): DesiredSandbox {
  const { applied } = sandbox;
  if (!sandbox.pod) return nothingWanted();
  const permissions = permissionsOf.get(sandbox.pod.namespace);
  const pod = permissions ? { ...sandbox.pod, permissions } : sandbox.pod;
  // A state an older podnet wrote names no configs: the pod has those that select it now (ADR 17).
  const had: AppliedConfig[] = applied?.configs ?? (applied && !isEmptyApplied(applied) ? selectingConfigs(pod, configs).map((c) => ({ name: documentName(c), spec: c.spec })) : []);
  return desiredWhole(pod, networks, configs, earlierOf(sandbox), limits, had, refusedByNode);
}

/** The attachments a sandbox has: podnet's links and delegated ones alike. An annotation's unnamed selections keep the names they got. */
function earlierOf(sandbox: AdmissionSandbox): EarlierAttachment[] {
  return [...(sandbox.applied?.attachments ?? []), ...sandbox.delegated];
}

/** What a sandbox whose pod the source does not know should have: nothing of podnet's. */
function nothingWanted(): DesiredSandbox {
  return { configs: [], attachments: [], vrfs: [], tuning: [], routes: [], rules: [], sysctls: [], macs: [], problems: [] };
}

/** An address without its prefix length, in one spelling. */
function plainAddress(address: string): string {
  const ip = parseCidr(address)?.ip ?? parseIp(address);
  return ip ? formatIp(ip) : address;
}

/**
 * Adds to `refusedByNode` each generation of a config a sandbox would have whole whose part the
 * node refuses; the sandboxes it added one for.
 */
function refusedConfigs(sandboxes: readonly AdmissionSandbox[], wanted: readonly DesiredSandbox[], refused: NodeRefusals, refusedByNode: Map<string, RefusedGeneration[]>): Set<string> {
  const changed = new Set<string>();
  for (const [i, { containerId }] of sandboxes.entries()) {
    for (const refusal of refusedGenerations(containerId, wanted[i]!, refused)) {
      const known = refusedByNode.get(containerId) ?? [];
      if (known.some((r) => r.config === refusal.config && r.generation === refusal.generation && r.problem.field === refusal.problem.field)) continue;
      refusedByNode.set(containerId, [...known, refusal]);
      changed.add(containerId);
    }
  }
  return changed;
}

/** The generations of configs a sandbox would have whole whose part the node refuses, each with why. */
function refusedGenerations(containerId: string, wanted: DesiredSandbox, refused: NodeRefusals): RefusedGeneration[] {
  const problems = [refused.quotas, refused.addresses, refused.macs].flatMap((r) => (r.get(containerId) ?? []).map((x) => x.problem));
  return problems.flatMap((problem) => {
    const config = wanted.whole?.find((c) => c.name === problem.document);
    return config === undefined ? [] : [{ config: config.name, generation: generationOf(config.spec), problem }];
  });
}

/**
 * Gives back the generations the node refused that it would not refuse now: a refusal another
 * sandbox's claim caused (a quota place it took, a MAC or address it asked too) does not hold once
 * that sandbox lost the config that claimed it. Each refused generation is judged alone, given
 * back to its sandbox against what every other sandbox wants now; those it would not refuse alone
 * are judged again together (two that ask one MAC are refused together again; of two a quota has
 * one place for, the first keeps it), and those it would not refuse together are given back. One
 * it still refuses is told its reasons of now. Adds and removes in `refusedByNode`; returns the
 * sandboxes whose refusals changed.
 */
function givenBack(sandboxes: readonly AdmissionSandbox[], wanted: readonly DesiredSandbox[], facts: Facts, node: NodeChecks, refusedByNode: Map<string, RefusedGeneration[]>): Set<string> {
  const changed = new Set<string>();
  const sameGeneration = (a: RefusedGeneration, b: RefusedGeneration) => a.config === b.config && a.generation === b.generation;
  const candidates: { index: number; refusal: RefusedGeneration }[] = [];
  for (const [index, sandbox] of sandboxes.entries()) {
    const cid = sandbox.containerId;
    const mine = refusedByNode.get(cid) ?? [];
    for (const refusal of mine.filter((r, i) => mine.findIndex((o) => sameGeneration(o, r)) === i)) {
      const alone = [...wanted];
      alone[index] = wantedOf(sandbox, facts, mine.filter((r) => !sameGeneration(r, refusal)));
      const now = refusedGenerations(cid, alone[index]!, node.refusals(alone)).filter((r) => sameGeneration(r, refusal));
      if (now.length === 0) candidates.push({ index, refusal });
      else if (JSON.stringify(now.map((r) => r.problem)) !== JSON.stringify(mine.filter((r) => sameGeneration(r, refusal)).map((r) => r.problem))) {
        refusedByNode.set(cid, [...(refusedByNode.get(cid) ?? []).filter((r) => !sameGeneration(r, refusal)), ...now]);
        changed.add(cid);
      }
    }
  }
  if (candidates.length === 0) return changed;
  const together = [...wanted];
  for (const index of new Set(candidates.map((c) => c.index))) {
    const sandbox = sandboxes[index]!;
    const mine = refusedByNode.get(sandbox.containerId) ?? [];
    together[index] = wantedOf(sandbox, facts, mine.filter((r) => !candidates.some((c) => c.index === index && sameGeneration(c.refusal, r))));
  }
  const refused = node.refusals(together);
  for (const { index, refusal } of candidates) {
    const cid = sandboxes[index]!.containerId;
    if (refusedGenerations(cid, together[index]!, refused).some((r) => sameGeneration(r, refusal))) continue;
    const rest = (refusedByNode.get(cid) ?? []).filter((r) => !sameGeneration(r, refusal));
    if (rest.length > 0) refusedByNode.set(cid, rest);
    else refusedByNode.delete(cid);
    changed.add(cid);
  }
  return changed;
}

/** `wanted` without the attachments `refused` names, each sandbox told why at its field. */
function withoutRefused(wanted: readonly DesiredSandbox[], sandboxes: readonly AdmissionSandbox[], refused: Refusals): DesiredSandbox[] {
  return wanted.map((w, i) => {
    const mine = refused.get(sandboxes[i]!.containerId);
    if (!mine) return w;
    const interfaces = new Set(mine.map((r) => r.interface));
    return { ...w, attachments: w.attachments.filter((a) => !interfaces.has(a.interface)), problems: [...w.problems, ...mine.map((r) => r.problem)] };
  });
}
