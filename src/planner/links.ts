// Attachments: the interface in the pod, made as its Network's kind says (model/kinds). A veth
// kind's (bridge) host end goes on its host bridge (made before, see bridges.ts), with port
// security and rate limits. Any other kind's link is created from the host, where its parent or
// underlay is, directly inside the pod (ip's `netns PATH`), so there is never a moment it exists
// on the host under the pod's name; except an ip tunnel's (gre), which routes in the netns it is
// made in: made on the host under a pnt name of podnet's and moved in (docs/adr/0034). A link
// made from the host keeps the digest of its spec: when its Network changes the spec (a parent, a
// mode, a remote, a key) it is made again, beside the old one where its kind allows (inPodSteps),
// and what the pass tunes, routes or sets of it follows (the parts see it in `creates`, its routes
// in `remade`); a new MTU is set in place.
import { originKey } from '../model/desired.ts';
import { linkDigest, makingOf, type HostBridge, type LinkMaking } from '../model/kinds/index.ts';
import type { AppliedAttachment, Bandwidth, ObservedLink, ResolvedAttachment } from '../model/state.ts';
import { host, stamp, type Step } from '../model/step.ts';
import { bearsMark, hostInterfaceName, ownerMark } from '../model/host-links.ts';
import { linkLocalOf, podMacOf, portSecurityTable, releasePortLine, sameSecuredPort, securePortLine, type SecuredPort } from '../model/port-security.ts';
import { guardDelLine, guardFingerprint, guardLine, guardTable } from '../model/wireguard-guard.ts';
import { hasWhatWasSet } from '../model/wireguard-config.ts';
import { addrLine, linkDelLine, markLine, qdiscDelLine, settingLine, tbfLine, wgPortLine, wgSetLine, type UndoAction } from '../model/undo.ts';
import { cannotMake, emptyPart, podProblem, type Part, type PlanContext } from './part.ts';

/**
 * Whether the link podnet made for an attachment was made from another spec than its Network now
 * gives (a parent, a mode, a remote, a key): it is made again. A record of an older podnet, with no
 * digest, takes the link as it is.
 */
function remakes(mine: AppliedAttachment | undefined, want: ResolvedAttachment): boolean {
  return mine?.made !== undefined && mine.made !== linkDigest(want.link);
}

function sameAttachment(a: AppliedAttachment, b: ResolvedAttachment): boolean {
  return a.interface === b.interface && a.network === b.network && a.kind === b.link.kind;
}

export function planLinks(ctx: PlanContext): Part<AppliedAttachment> & { creates: Set<string>; remade: Set<string> } {
  const part: Part<AppliedAttachment> & { creates: Set<string>; remade: Set<string> } = { ...emptyPart<AppliedAttachment>(), creates: new Set<string>(), remade: new Set<string>() };
  const { observed, applied, desired, pod } = ctx;

  // Take back attachments no longer wanted: deleting one end of a veth deletes both. A host link
  // of the recorded name that someone else marked is not podnet's: the pod end goes instead.
  for (const was of applied.attachments) {
    if (desired.attachments.some((w) => sameAttachment(was, w))) continue;
    const mine = (name: string | undefined) => ownsHostLink(ctx, name, was.interface);
    if (mine(was.hostIf)) part.takeBack.push({ where: host, tool: 'ip', line: linkDelLine(was.hostIf!) });
    else if (observed.pod.has(was.interface)) part.takeBack.push({ where: pod, tool: 'ip', line: linkDelLine(was.interface) });
    if (mine(was.ifb)) part.takeBack.push({ where: host, tool: 'ip', line: linkDelLine(was.ifb!) });
    // The guard of its port on the node goes after the interface, whose socket it guards.
    if (was.wireguard?.remoteRanges) part.takeBack.push({ where: host, tool: 'nft', line: guardDelLine(guardTable(applied.containerId, was.interface)) });
    // A link made on the host that an interrupted pass left there, before its move into the pod.
    const unmoved = hostInterfaceName(applied.containerId, was.interface, 'pnt');
    if (mine(unmoved)) part.takeBack.push({ where: host, tool: 'ip', line: linkDelLine(unmoved) });
    part.takeBack.push(...besideLeft(ctx, was.interface));
    if (was.hostIf && was.portSecurity) part.takeBack.push(releasePort(was.hostIf, was.portSecurity));
  }

  for (const want of desired.attachments) {
    const mark = part.apply.length;
    try {
      const mine = applied.attachments.find((a) => sameAttachment(a, want));
      // One of the name this pass takes back (its Network's kind changed) is gone by the time this is made.
      const goes = applied.attachments.some((a) => a.interface === want.interface && !desired.attachments.some((w) => sameAttachment(a, w)));
      const existing = goes ? undefined : observed.pod.get(want.interface);
      if (existing && !mine) {
        cannotMake(part, ctx, originKey.attachment(want.interface), podProblem(`pod interface ${want.interface}`, 'interface', `${want.interface} already exists in the pod and podnet did not make it`));
        continue;
      }
      // What cannot be done now leaves what was applied recorded, so that it is never taken for
      // someone else's (and its address never handed out twice) and is taken back when unwanted.
      const making = makingOf(want.link);
      const needs = 'veth' in making ? undefined : making.hostInterface;
      if (needs !== undefined && !observed.hostLinks.has(needs)) {
        cannotMake(part, ctx, originKey.attachment(want.interface), podProblem(`Network ${want.network}`, `spec.${want.link.kind}`, `the host has no interface ${needs}`));
        if (mine) part.next.push(mine);
        continue;
      }
      let fresh: boolean;
      let mac: string | undefined;
      let portSecurity: SecuredPort | undefined;
      if ('veth' in making) {
        const bridge = making.veth;
        // Bridges are the pass's, made before any sandbox is planned (planBridges).
        // Without its bridge (the pass could not make it) the next pass tries again.
        if (!observed.host.has(bridge.name)) {
          cannotMake(part, ctx, originKey.attachment(want.interface), podProblem(`Network ${want.network}`, 'spec.bridge', `the host has no bridge ${bridge.name}`));
          if (mine) part.next.push(mine);
          continue;
        }
        // A port security table that is not there whole (nft could not put it, or a chain of its
        // name is someone else's) filters nothing: the port's entries would count it as secured
        // while frames from any MAC pass. The interface waits, and the sandbox fails with why.
        if (bridge.portSecurity && observed.securedPorts === undefined) {
          const why = `port security cannot secure the port of ${want.interface} on this node: ${observed.portSecurityUnavailable ?? `podnet's table (${portSecurityTable}) is not whole`}`;
          part.problems.push(podProblem(`Network ${want.network}`, 'spec.bridge.portSecurity', why));
          part.unavailable ??= why;
          if (mine) part.next.push(mine);
          continue;
        }
        // The host ends are named by a hash: a link of the name is this attachment's only when it
        // bears its mark and podnet's records give it the name (or its mark is this attachment's:
        // made by a pass that died before recording it). Any other is someone else's (another
        // pod's, a hand-made one), never deleted or used.
        const mark = ownerMark({ containerId: applied.containerId, podInterface: want.interface });
        const foreign = [want.hostIf, ...(want.bandwidth?.egressRate !== undefined ? [want.ifb] : [])].find((name) => {
          const link = observed.host.get(name);
          return link !== undefined && link.alias !== mark && !(bearsMark(link, mark) && (name === mine?.hostIf || name === mine?.ifb));
        });
        if (foreign !== undefined) {
          cannotMake(part, ctx, originKey.attachment(want.interface), podProblem(`pod interface ${want.interface}`, 'interface', `the host already has an interface ${foreign}, which podnet did not make for this attachment; it is left alone`));
          if (mine) part.next.push(mine);
          continue;
        }
        // The port's entries go in before the veth exists: there is no moment its port admits anything.
        mac = macOf(ctx, want, mine, existing);
        const tuned = desired.tuning.find((t) => t.interface === want.interface)?.settings.mac?.toLowerCase();
        portSecurity = portSteps(ctx, want, bridge, mine, mac, tuned, part.apply);
        // Made with the MAC a config asks, when one does: the kernel derives its IPv6 link-local
        // address from the MAC the link has when it comes up.
        fresh = vethSteps(ctx, want, bridge, existing, tuned ?? mac, part.apply);
      } else if ('createInPod' in making) {
        fresh = !existing || remakes(mine, want);
        if (fresh) inPodSteps(ctx, want, making, existing, part.apply);
        else part.apply.push(...besideLeft(ctx, want.interface));
      } else {
        fresh = !existing || remakes(mine, want);
        if (!hostMadeSteps(ctx, want, making, fresh, existing !== undefined, part)) {
          if (mine) part.next.push(mine);
          continue;
        }
      }
      if (fresh) part.creates.add(want.interface);
      if (fresh && existing) part.remade.add(want.interface);
      if (!fresh && existing && !('veth' in making)) mtuInPlace(ctx, want, making.hostInterface, existing, part);
      // Up, unless the request tunes it down (the tuning part owns that setting then).
      const tunedDown = desired.tuning.some((t) => t.interface === want.interface && t.settings.up === false);
      // Its IPv6 link-local address from its MAC, the one its port admits, whatever the pod's default.
      if (fresh && portSecurity) part.apply.push({ where: pod, tool: 'ip', line: `link set dev ${want.interface} addrgenmode eui64` });
      if (!tunedDown && (fresh || !existing?.up)) part.apply.push({ where: pod, tool: 'ip', line: settingLine(want.interface, 'up', true) });
      const present = new Set(fresh ? [] : existing?.addresses);
      for (const address of want.addresses) {
        if (!present.has(address)) {
          part.apply.push({ where: pod, tool: 'ip', line: addrLine('add', address, want.interface), undo: { where: pod, action: 'addr-del', dev: want.interface, address } });
        }
      }
      for (const address of mine?.addresses ?? []) {
        if (!want.addresses.includes(address) && present.has(address)) part.apply.push({ where: pod, tool: 'ip', line: addrLine('del', address, want.interface) });
      }
      // Rate limits are shaped on a veth's host end: only a veth kind's attachment may ask them (model/kinds).
      const bandwidth = 'veth' in making ? bandwidthSteps(ctx, want, mine, fresh, part.apply) : {};
      const wireguard = want.link.kind === 'wireguard' && want.wireguard ? wireguardSteps(ctx, want.interface, want.link.listenPort, want.wireguard, mine, fresh, existing !== undefined, part.apply) : undefined;
      part.next.push({
        interface: want.interface,
        network: want.network,
        kind: want.link.kind,
        ...('veth' in making ? { bridge: making.veth.name, hostIf: want.hostIf } : {}),
        ...(bandwidth.egressRate !== undefined ? { ifb: want.ifb } : {}),
        ...(mac ? { mac } : {}),
        ...(portSecurity ? { portSecurity } : {}),
        addresses: [...want.addresses],
        ...(Object.keys(bandwidth).length > 0 ? { bandwidth } : {}),
        ...('veth' in making ? {} : { made: linkDigest(want.link) }),
        ...(want.remote !== undefined ? { remote: want.remote } : {}),
        ...(wireguard ? { wireguard } : {}),
      });
    } finally {
      // What this one thing's planning added names who asked for it: a failure says so.
      stamp(part.apply, mark, ctx.causeOf(originKey.attachment(want.interface)));
    }
  }
  return part;
}

/**
 * A link made from the host straight inside the pod. One made again (`replaces`) is made beside
 * the old one under its pnt name where its kind allows, then takes the old one's name: a kernel
 * that refuses the new link leaves the pod its old one.
 */
function inPodSteps(ctx: PlanContext, want: ResolvedAttachment, making: Extract<LinkMaking, { createInPod: unknown }>, replaces: ObservedLink | undefined, steps: Step[]): void {
  const dev = want.interface;
  const made = (name: string) => making.createInPod({ interface: name, mtu: want.mtu, netns: ctx.netns });
  // A link left beside may hold what the new one needs (a VLAN id on the parent): it goes first.
  steps.push(...besideLeft(ctx, dev));
  if (!replaces || !making.besideOld(replaces)) {
    if (replaces) steps.push({ where: ctx.pod, tool: 'ip', line: linkDelLine(dev) });
    steps.push({ where: host, tool: 'ip', line: made(dev), undo: { where: ctx.pod, action: 'link-del', dev } });
    return;
  }
  const beside = hostInterfaceName(ctx.applied.containerId, dev, 'pnt');
  steps.push({ where: host, tool: 'ip', line: made(beside), undo: { where: ctx.pod, action: 'link-del', dev: beside } });
  steps.push({ where: ctx.pod, tool: 'ip', line: linkDelLine(dev) });
  steps.push({ where: ctx.pod, tool: 'ip', line: `link set dev ${beside} name ${dev}`, undo: { where: ctx.pod, action: 'link-del', dev } });
}

/**
 * The delete of a link made beside the pod's `dev` that the pod still has under its pnt name: one
 * an undo could not delete. It may hold what its kind's links hold on the node (a VLAN id on its
 * parent), so it goes whenever it is seen, and before another is made beside.
 */
function besideLeft(ctx: PlanContext, dev: string): Step[] {
  const beside = hostInterfaceName(ctx.applied.containerId, dev, 'pnt');
  return ctx.observed.pod.has(beside) ? [{ where: ctx.pod, tool: 'ip', line: linkDelLine(beside) }] : [];
}

/**
 * When `fresh`: a link made on the host under its pnt name, marked, and moved into the pod under
 * the pod's name in one `ip link set`; false, with the problem told, when a link of that name on
 * the host is someone else's, or the host lacks what the kind needs of its underlay. One an
 * interrupted pass left there (it bears this attachment's mark, or none) is deleted, also when
 * the pod has its link already. Taken back before the move, the host link goes (its delete checks
 * the mark); after, the pod's.
 */
function hostMadeSteps(ctx: PlanContext, want: ResolvedAttachment, making: Extract<LinkMaking, { createOnHost: unknown }>, fresh: boolean, inPod: boolean, part: Part<AppliedAttachment>): boolean {
  const name = hostInterfaceName(ctx.applied.containerId, want.interface, 'pnt');
  const mark = ownerMark({ containerId: ctx.applied.containerId, podInterface: want.interface });
  const left = ctx.observed.host.get(name);
  if (!fresh) {
    if (left && bearsMark(left, mark)) part.apply.push({ where: host, tool: 'ip', line: linkDelLine(name) });
    return true;
  }
  if (left && !bearsMark(left, mark)) {
    cannotMake(part, ctx, originKey.attachment(want.interface), podProblem(`pod interface ${want.interface}`, 'interface', `the host already has an interface ${name}, which podnet did not make for this attachment; it is left alone`));
    return false;
  }
  const underlay = making.hostInterface === undefined ? undefined : ctx.observed.hostLinks.get(making.hostInterface);
  const line = making.createOnHost({ name, ...(want.mtu ? { mtu: want.mtu } : {}), underlayAddresses: underlay?.addresses ?? [] });
  if (typeof line !== 'string') {
    cannotMake(part, ctx, originKey.attachment(want.interface), podProblem(`Network ${want.network}`, `spec.${want.link.kind}`, line.problem));
    return false;
  }
  if (left) part.apply.push({ where: host, tool: 'ip', line: linkDelLine(name) });
  // Made again (its spec changed): the pod's link goes first. A tunnel moved into the pod stays in
  // the host's tunnel table, where the new one, of the same ends and key (a new ttl alone), would
  // be refused beside it.
  if (inPod) part.apply.push({ where: ctx.pod, tool: 'ip', line: linkDelLine(want.interface) });
  part.apply.push({ where: host, tool: 'ip', line, undo: { where: host, action: 'link-del', dev: name, mark } });
  part.apply.push({ where: host, tool: 'ip', line: markLine(name, mark) });
  part.apply.push({ where: host, tool: 'ip', line: `link set dev ${name} netns ${ctx.netns} name ${want.interface}`, undo: { where: ctx.pod, action: 'link-del', dev: want.interface } });
  return true;
}

/**
 * The Network's MTU changed: set in place on a link made from the host, unless a config tunes it
 * (the tuning part owns it then), or its parent's MTU is lower (the kernel would refuse it at every
 * pass: told on the Network instead). A veth's two ends keep theirs until the pair is made again.
 */
function mtuInPlace(ctx: PlanContext, want: ResolvedAttachment, parent: string | undefined, existing: ObservedLink, part: Part<AppliedAttachment>): void {
  const dev = want.interface;
  if (want.mtu === undefined || existing.mtu === want.mtu) return;
  if (ctx.desired.tuning.some((t) => t.interface === dev && t.settings.mtu !== undefined) || ctx.applied.tuning.some((t) => t.interface === dev && t.original.mtu !== undefined)) return;
  const parentMtu = parent === undefined ? undefined : ctx.observed.hostLinks.get(parent)?.mtu;
  if (parentMtu !== undefined && parentMtu < want.mtu) {
    part.problems.push(podProblem(`Network ${want.network}`, 'spec.mtu', `${want.mtu} is above the MTU of its parent ${parent} (${parentMtu}): ${dev} keeps ${existing.mtu}`));
    return;
  }
  part.apply.push({ where: ctx.pod, tool: 'ip', line: settingLine(dev, 'mtu', want.mtu), undo: { where: ctx.pod, action: 'link-set', dev, setting: 'mtu', value: existing.mtu } });
}

/**
 * The guard of a WireGuard interface's port on the node (model/wireguard-guard.ts): written when
 * the interface is made, or when its port or ranges change from what was written (`was`); undone,
 * written back as the node had it (`before`: the guard of the link this one replaces), or deleted.
 */
function guardSteps(ctx: PlanContext, dev: string, listenPort: number, ranges: readonly string[], was: AppliedAttachment['wireguard'], before: AppliedAttachment['wireguard'], steps: Step[]): void {
  const table = guardTable(ctx.applied.containerId, dev);
  // Read with the pod (daemon/views.ts): one deleted (a flush of the node's ruleset) or changed by hand is written again.
  const drifted = ctx.observed.guards !== undefined && ctx.observed.guards.get(table) !== guardFingerprint(listenPort, ranges);
  if (was && !drifted && was.listenPort === listenPort && JSON.stringify(was.remoteRanges) === JSON.stringify(ranges)) return;
  const back = before?.remoteRanges ? { listenPort: before.listenPort, remoteRanges: before.remoteRanges } : {};
  steps.push({ where: host, tool: 'nft', line: guardLine(table, listenPort, ranges), undo: { where: host, action: 'wireguard-guard', table, ...back } });
}

/**
 * A WireGuard interface's port, key and peers, given by wg when it is made, when they change from
 * what it was given (peers it no longer has removed; one whose endpoint is no longer asked removed
 * first, wg keeping an endpoint otherwise), or when the interface read back no longer has them (a
 * peer, key or port changed by hand: its peers not asked removed too); what it has then. Undone,
 * it gets back what podnet had given it.
 */
function wireguardSteps(ctx: PlanContext, dev: string, listenPort: number, wg: NonNullable<ResolvedAttachment['wireguard']>, mine: AppliedAttachment | undefined, fresh: boolean, replaces: boolean, steps: Step[]): NonNullable<AppliedAttachment['wireguard']> {
  const now = { publicKey: wg.publicKey ?? '', listenPort, peers: wg.peers, remoteRanges: wg.remoteRanges };
  const was = fresh ? undefined : mine?.wireguard;
  const seen = was && ctx.observed.wireguard?.get(dev);
  const changedByHand = seen !== undefined && !hasWhatWasSet(seen, was!);
  // Made: the port claimed first (a port in use fails here, before the node's firewall is touched),
  // then guarded, then the key and peers that make the interface speak.
  if (fresh) steps.push({ where: ctx.pod, tool: 'wg', line: wgPortLine(dev, listenPort) });
  guardSteps(ctx, dev, listenPort, wg.remoteRanges, was, replaces ? mine?.wireguard : undefined, steps);
  if (was && !changedByHand && was.listenPort === listenPort && JSON.stringify(was.peers) === JSON.stringify(wg.peers) && was.publicKey === now.publicKey) return now;
  const keyOf = (p: { publicKey: string }) => p.publicKey;
  // Peers added by hand are removed with those no longer asked.
  const gone = [...new Set([...(was?.peers ?? []), ...(changedByHand ? seen.peers : [])].filter((p) => !wg.peers.some((w) => w.publicKey === p.publicKey)).map(keyOf))];
  const lostEndpoint = (was?.peers ?? []).filter((p) => p.endpoint && wg.peers.some((w) => w.publicKey === p.publicKey && !w.endpoint)).map(keyOf);
  // Undone: the peers podnet had given it, as they were, and those this pass added removed (not
  // what a hand added: a later pass would remove it again, and its list is the hand's, unbounded).
  const added = wg.peers.filter((p) => !(was?.peers ?? []).some((w) => w.publicKey === p.publicKey)).map(keyOf);
  const undo = was ? { where: ctx.pod, action: 'wireguard' as const, dev, listenPort: was.listenPort, privateKeyFile: wg.privateKeyFile, peers: was.peers, removed: added } : undefined;
  if (lostEndpoint.length > 0) steps.push({ where: ctx.pod, tool: 'wg', line: wgSetLine(dev, wg.privateKeyFile, listenPort, [], lostEndpoint), ...(undo ? { undo } : {}) });
  steps.push({ where: ctx.pod, tool: 'wg', line: wgSetLine(dev, wg.privateKeyFile, listenPort, wg.peers, gone), ...(undo ? { undo } : {}) });
  return now;
}

/**
 * The veth between pod and bridge; true when the pair is made anew in this pass. Made from the
 * host in one command: the host end on the bridge and up, the pod end straight into the pod.
 */
function vethSteps(ctx: PlanContext, want: ResolvedAttachment, bridge: HostBridge, existing: ObservedLink | undefined, mac: string, steps: Step[]): boolean {
  const hostEnd = ctx.observed.host.get(want.hostIf);
  const mark = ownerMark({ containerId: ctx.applied.containerId, podInterface: want.interface });
  const fresh = !existing || !hostEnd;
  if (fresh) {
    // A pod end without its host end (or the reverse) is drift: make the pair anew.
    if (existing) steps.push({ where: ctx.pod, tool: 'ip', line: linkDelLine(want.interface) });
    else if (hostEnd) steps.push({ where: host, tool: 'ip', line: linkDelLine(want.hostIf) });
    const mtu = want.mtu ? ` mtu ${want.mtu}` : '';
    steps.push({
      where: host,
      tool: 'ip',
      line: `link add name ${want.hostIf}${mtu} master ${bridge.name} up type veth peer name ${want.interface} address ${mac}${mtu} netns ${ctx.netns}`,
      undo: { where: host, action: 'link-del', dev: want.hostIf, mark },
    });
  } else if (hostEnd.master !== bridge.name || !hostEnd.up) {
    steps.push({ where: host, tool: 'ip', line: `link set dev ${want.hostIf} master ${bridge.name} up` });
  }
  // A fresh link, or one an older podnet made without a mark, gets it now.
  if (fresh || hostEnd?.alias === undefined) steps.push({ where: host, tool: 'ip', line: markLine(want.hostIf, mark) });
  return fresh;
}

/**
 * Rate limits on the host end, as the reference bandwidth plugin sets them: traffic into the pod
 * leaves the host end, so a tbf there shapes the pod's ingress; the pod's egress arrives at the
 * host end and is redirected (ingress qdisc, u32 match-all, mirred) to an ifb shaped by a tbf.
 * Changed in place (qdisc replace) when the request changes. Returns what is in place after.
 */
function bandwidthSteps(ctx: PlanContext, want: ResolvedAttachment, mine: AppliedAttachment | undefined, fresh: boolean, steps: Step[]): Bandwidth {
  const { observed } = ctx;
  const had = mine?.bandwidth ?? {};
  const wanted = want.bandwidth ?? {};
  const qdiscs = fresh ? { ingress: false } : (observed.qdiscs.get(want.hostIf) ?? { ingress: false });
  const tc = (line: string, undo?: UndoAction): Step => ({ where: host, tool: 'tc', line, ...(undo ? { undo } : {}) });

  if (wanted.ingressRate !== undefined && wanted.ingressBurst !== undefined) {
    const changed = had.ingressRate !== wanted.ingressRate || had.ingressBurst !== wanted.ingressBurst;
    if (changed || qdiscs.root !== 'tbf') {
      const back: UndoAction =
        qdiscs.root === 'tbf' && had.ingressRate !== undefined && had.ingressBurst !== undefined
          ? { where: host, action: 'tbf', dev: want.hostIf, rate: had.ingressRate, burst: had.ingressBurst }
          : { where: host, action: 'qdisc-del', dev: want.hostIf, parent: 'root' };
      steps.push(tc(tbfLine(want.hostIf, wanted.ingressRate, wanted.ingressBurst), back));
    }
  } else if (had.ingressRate !== undefined && qdiscs.root === 'tbf') {
    steps.push(tc(qdiscDelLine(want.hostIf, 'root')));
  }

  const ifb = observed.host.get(want.ifb);
  if (wanted.egressRate !== undefined && wanted.egressBurst !== undefined) {
    const mark = ownerMark({ containerId: ctx.applied.containerId, podInterface: want.interface });
    if (!ifb) {
      steps.push({ where: host, tool: 'ip', line: `link add name ${want.ifb} type ifb`, undo: { where: host, action: 'link-del', dev: want.ifb, mark } });
    }
    if (ifb?.alias === undefined) steps.push({ where: host, tool: 'ip', line: markLine(want.ifb, mark) });
    if (!ifb?.up) steps.push({ where: host, tool: 'ip', line: settingLine(want.ifb, 'up', true) });
    if (!qdiscs.ingress) {
      steps.push(tc(`qdisc add dev ${want.hostIf} handle ffff: ingress`, { where: host, action: 'qdisc-del', dev: want.hostIf, parent: 'ingress' }));
      steps.push(tc(`filter add dev ${want.hostIf} parent ffff: protocol all u32 match u32 0 0 action mirred egress redirect dev ${want.ifb}`));
    }
    const changed = had.egressRate !== wanted.egressRate || had.egressBurst !== wanted.egressBurst;
    if (!ifb || changed || observed.qdiscs.get(want.ifb)?.root !== 'tbf') steps.push(tc(tbfLine(want.ifb, wanted.egressRate, wanted.egressBurst)));
  } else if (had.egressRate !== undefined) {
    if (qdiscs.ingress) steps.push(tc(qdiscDelLine(want.hostIf, 'ingress')));
    if (ownsHostLink(ctx, want.ifb, want.interface)) steps.push({ where: host, tool: 'ip', line: linkDelLine(want.ifb) });
  }
  const out: Bandwidth = {};
  if (wanted.ingressRate !== undefined && wanted.ingressBurst !== undefined) Object.assign(out, { ingressRate: wanted.ingressRate, ingressBurst: wanted.ingressBurst });
  if (wanted.egressRate !== undefined && wanted.egressBurst !== undefined) Object.assign(out, { egressRate: wanted.egressRate, egressBurst: wanted.egressBurst });
  return out;
}

/** Whether the host has the link `name` and it is the one podnet made for the pod's `podInterface` (it bears that mark, or none). */
function ownsHostLink(ctx: PlanContext, name: string | undefined, podInterface: string): boolean {
  const link = name === undefined ? undefined : ctx.observed.host.get(name);
  return link !== undefined && bearsMark(link, ownerMark({ containerId: ctx.applied.containerId, podInterface }));
}

/**
 * The MAC of a bridge attachment's pod end: the one podnet gave it (a hash, model/port-security.ts),
 * or, on a link an older podnet made, the one it has. What a config asks for is a tuning of it.
 */
function macOf(ctx: PlanContext, want: ResolvedAttachment, mine: AppliedAttachment | undefined, existing: ObservedLink | undefined): string {
  if (mine?.mac) return mine.mac;
  // An older podnet's link: the MAC it had before a config tuned it, else the one it has.
  const beforeTuning = ctx.applied.tuning.find((t) => t.interface === want.interface)?.original.mac;
  return (mine && (beforeTuning ?? existing?.mac)) || podMacOf(ctx.applied.containerId, want.interface);
}

/**
 * The nft steps that make the port admit what the pod is now (its MAC, tuned or its own, and its
 * addresses), when the table does not have it so already; and what the port then admits.
 */
function portSteps(
  ctx: PlanContext,
  want: ResolvedAttachment,
  bridge: HostBridge,
  mine: AppliedAttachment | undefined,
  mac: string,
  tuned: string | undefined,
  steps: Step[],
): SecuredPort | undefined {
  const had = mine?.portSecurity;
  if (!bridge.portSecurity) {
    if (had) steps.push(releasePort(want.hostIf, had));
    return undefined;
  }
  const addresses = want.addresses.map((a) => a.slice(0, a.indexOf('/')));
  // A link whose MAC a config changed keeps the link-local address of the one it came up with.
  const secured: SecuredPort = { mac: tuned ?? mac, addresses: tuned && tuned !== mac ? [...addresses, linkLocalOf(mac)] : addresses };
  if (sameSecuredPort(had, secured)) {
    if (ctx.observed.securedPorts?.has(want.hostIf)) return secured;
    // Its entries gone from a table put again (flushed by hand): put back, and never taken out by
    // an undo of this pass, which would leave the port it had open.
    steps.push({ where: host, tool: 'nft', line: securePortLine(want.hostIf, secured) });
    return secured;
  }
  // One nft batch, one transaction: the old entries out and the new in at once. Taken back, the
  // new entries go and the old come back: a port that was secured never ends up open.
  if (had) steps.push({ ...releasePort(want.hostIf, had), undo: { where: host, action: 'port-secure', port: want.hostIf, secured: had } });
  steps.push({ where: host, tool: 'nft', line: securePortLine(want.hostIf, secured), undo: { where: host, action: 'port-release', port: want.hostIf, secured } });
  return secured;
}

function releasePort(port: string, secured: SecuredPort): Step {
  return { where: host, tool: 'nft', line: releasePortLine(port, secured) };
}
