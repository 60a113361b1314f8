// The views a pass plans from (docs/adr/0007): a sandbox's netns and the host as read, what a
// read covered, and whether a kept view still holds for the next pass. Reads go through the
// injected NetnsObserver; everything else here is pure.
import { toPodnetError } from '../errors.ts';
import { hasPodnetPrefix } from '../model/host-links.ts';
import { host } from '../model/step.ts';
import { isEmptyApplied, type AppliedState, type Family, type Observed, type ObservedLink, type Resolved } from '../model/state.ts';
import type { NetnsObserver } from '../netns/observe.ts';
import type { AttachmentRecord } from '../protocol/validate.ts';
import { guardTable } from '../model/wireguard-guard.ts';

/** What a pass sees inside one sandbox's netns. */
export type PodView = Pick<Observed, 'pod' | 'routes' | 'rules' | 'sysctls' | 'marking' | 'markingUnavailable' | 'guards' | 'wireguard'>;

/** What of a netns a plan needs read: its links always, routes and rules of these families, these sysctls, podnet's marking table. */
export interface PodNeeds {
  families: ReadonlySet<Family>;
  paths: ReadonlySet<string>;
  marking: boolean;
  /** The guard tables of its WireGuard ports on the host (model/wireguard-guard.ts), read with its netns: a table gone is written again. */
  guards: ReadonlySet<string>;
  /** The WireGuard interfaces podnet set in it, read back: a peer, key or port changed by hand is set again. */
  wireguard: ReadonlySet<string>;
}

/** A netns as read, and what the read covered. */
export interface PodSight extends PodNeeds {
  view: PodView;
  /** The sandbox's records when it was read (see recordsKey): an ADD or DEL since ran the runtime's plugins in the netns. */
  records: string;
}

/** A sandbox's records as one string: netns, interface and time of each ADD still recorded. */
export function recordsKey(records: readonly AttachmentRecord[]): string {
  return records.map((r) => `${r.netns} ${r.ifname} ${r.createdAt}`).join('\n');
}

/** Routes, rules, sysctls and the marking table are read only where the desired or the applied state has some (routes of both families where an interface is placed in a VRF). */
export function podNeeds(desired: Resolved, applied: AppliedState | undefined): PodNeeds {
  const families = new Set<Family>();
  for (const r of [...desired.routes, ...desired.rules, ...(applied?.routes ?? []), ...(applied?.rules ?? [])]) families.add(r.family);
  // An interface moving into a VRF leaves the main table's routes by it, of either family: podnet keeps them to put back.
  if (desired.tuning.some((t) => t.settings.vrf !== undefined) || (applied?.tuning ?? []).some((t) => t.original.vrf !== undefined)) families.add(4).add(6);
  return {
    families,
    paths: new Set([...desired.sysctls.map((s) => s.path), ...(applied?.sysctls ?? []).map((s) => s.path)]),
    marking: [...desired.attachments, ...desired.delegated].some((a) => a.dscp !== undefined) || (applied?.marking?.length ?? 0) > 0,
    guards: new Set(applied ? applied.attachments.filter((a) => a.wireguard?.remoteRanges).map((a) => guardTable(applied.containerId, a.interface)) : []),
    wireguard: new Set((applied?.attachments ?? []).filter((a) => a.wireguard).map((a) => a.interface)),
  };
}

/** Whether a sandbox has anything for the planner: podnet's own links, tuning, routes, rules, sysctls or marks, wanted or applied. */
export function asksThePlanner(desired: Resolved, applied: AppliedState | undefined): boolean {
  const marks = desired.delegated.filter((d) => d.dscp !== undefined).length;
  const wanted = desired.attachments.length + desired.vrfs.length + desired.tuning.length + desired.routes.length + desired.rules.length + desired.sysctls.length + marks;
  return wanted > 0 || (applied !== undefined && !isEmptyApplied(applied));
}

export function covers(sight: PodSight, needs: PodNeeds): boolean {
  return [...needs.families].every((f) => sight.families.has(f)) && [...needs.paths].every((p) => sight.paths.has(p)) && (sight.marking || !needs.marking) && [...needs.guards].every((g) => sight.guards.has(g)) && [...needs.wireguard].every((w) => sight.wireguard.has(w));
}

/** What a plan sees: a sandbox's netns and the host. */
export function observedWith(pod: PodView, host: HostView): Observed {
  return {
    ...pod,
    host: host.podnetLinks,
    hostLinks: host.links,
    qdiscs: host.qdiscs,
    ...(host.securedPorts ? { securedPorts: host.securedPorts } : {}),
    ...(host.portSecurityUnavailable !== undefined ? { portSecurityUnavailable: host.portSecurityUnavailable } : {}),
  };
}

/** The host as one pass sees it, sorted once for every sandbox: its links, podnet's among them, their names, the qdiscs on podnet's links. */
export interface HostView {
  links: ReadonlyMap<string, ObservedLink>;
  /** Whether the qdiscs were read (only when some sandbox has or wants a rate limit). */
  shaped: boolean;
  /** The links podnet names (prefix pn): the only host links a plan may change or remove. */
  podnetLinks: ReadonlyMap<string, ObservedLink>;
  names: ReadonlySet<string>;
  qdiscs: ReadonlyMap<string, { root?: string; ingress: boolean }>;
  /** Whether podnet's port security table was read (only when some sandbox has or wants a secured port). */
  secured: boolean;
  /** The ports in it; undefined when it is not there, or was not read. */
  securedPorts?: ReadonlySet<string>;
  /** Why it is not there: its read failed (no nft on the node); after a pass tried to put it, why that did not make it whole. */
  portSecurityUnavailable?: string;
}

/**
 * podnet's port security table as a pass's latest read of the host found it: the ports it filtered
 * (none when it was not whole, or the read failed), and the secured ports podnet had made by then,
 * the ones that read can judge.
 */
export interface TableSeen {
  filtered?: ReadonlySet<string>;
  judged: ReadonlySet<string>;
}

/** What a host read covers beyond the links: the qdiscs (`shaped`), the port security table (`secured`). */
export interface HostReads {
  shaped: boolean;
  secured: boolean;
}

export function hostViewOf(
  links: ReadonlyMap<string, ObservedLink>,
  qdiscs: ReadonlyMap<string, { root?: string; ingress: boolean }>,
  reads: HostReads,
  securedPorts?: ReadonlySet<string>,
  portSecurityUnavailable?: string,
): HostView {
  return {
    links,
    ...reads,
    podnetLinks: new Map([...links].filter(([name]) => hasPodnetPrefix(name))),
    names: new Set(links.keys()),
    qdiscs,
    ...(securedPorts ? { securedPorts } : {}),
    ...(!securedPorts && portSecurityUnavailable !== undefined ? { portSecurityUnavailable } : {}),
  };
}

/** The host's links and what `reads` asks beyond them, read at once. */
export async function readHost(observe: NetnsObserver, reads: HostReads): Promise<HostView> {
  let unread: string | undefined;
  const [links, qdiscs, securedPorts] = await Promise.all([
    observe.links(host),
    reads.shaped ? observe.qdiscs() : new Map<string, { root?: string; ingress: boolean }>(),
    // A table that cannot be read (no nft on the node) is taken as not there, and why is kept:
    // the passes that would secure a port fail then, saying it, and no other pod's pass does.
    reads.secured
      ? observe.securedPorts().catch((err: unknown) => {
          unread = toPodnetError(err).message;
          return undefined;
        })
      : undefined,
  ]);
  return hostViewOf(links, qdiscs, reads, securedPorts, unread);
}

/** Whether a view read what `reads` asks. */
export function readsEnough(view: HostView, reads: HostReads): boolean {
  return (view.shaped || !reads.shaped) && (view.secured || !reads.secured);
}

/** Whether `needs` asks for a netns's links alone: a read that can end a pass's last batch in it (executor ReadBack). */
export function linksAlone(needs: PodNeeds): boolean {
  return needs.families.size === 0 && needs.paths.size === 0 && !needs.marking && needs.guards.size === 0 && needs.wireguard.size === 0;
}

/** A sight of links alone (linksAlone), read at the end of a pass's last batch. */
export function sightOfLinks(needs: PodNeeds, records: string, pod: Map<string, ObservedLink>): PodSight {
  return { ...needs, records, view: { pod, routes: [], rules: [], sysctls: new Map() } };
}

/** A sandbox's netns as it is now: its links, and the routes, rules, sysctls, marking table and WireGuard interfaces `needs` names, read at once. */
export async function readPod(observe: NetnsObserver, netns: string, records: string, needs: PodNeeds): Promise<PodSight> {
  const where = { netns };
  const [pod, routing, sysctls, marking, guards, wireguard] = await Promise.all([
    observe.links(where),
    Promise.all([...needs.families].map((family) => observe.routing(where, family))),
    observe.sysctls(where, [...needs.paths]),
    // A table that cannot be read (no nft) fails the marking alone, saying why, as port security does.
    needs.marking
      ? observe.marking(where).then(
          (fingerprint) => (fingerprint !== undefined ? { marking: fingerprint } : {}),
          (err: unknown) => ({ markingUnavailable: toPodnetError(err).message }),
        )
      : {},
    // Not read (no nft): nothing is written again for it; the guard's own write says why.
    needs.guards.size > 0 ? observe.guards([...needs.guards]).then((there) => ({ guards: there }), () => ({})) : {},
    // Not read (no wg, an interface of another kind under the name): nothing is set again for it.
    needs.wireguard.size > 0 ? observe.wireguard(where, [...needs.wireguard]).then((there) => ({ wireguard: there }), () => ({})) : {},
  ]);
  return { ...needs, records, view: { pod, routes: routing.flatMap((r) => r.routes), rules: routing.flatMap((r) => r.rules), sysctls, ...marking, ...guards, ...wireguard } };
}
