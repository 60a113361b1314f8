// What podnet takes back on the host when its reason went: a gone sandbox's host links and its
// ports' entries in the port security table, and the bridges podnet made that nothing uses. Only
// links that bear podnet's mark for that owner are deleted: one of the recorded name that someone
// else made or marked is left alone. Pure.
import { bearsMark, hostInterfaceName, ownerMark } from '../model/host-links.ts';
import { releasePortLine } from '../model/port-security.ts';
import type { AppliedState, ObservedLink } from '../model/state.ts';
import { host, type Step } from '../model/step.ts';
import { linkDelLine } from '../model/undo.ts';
import { guardDelLine, guardTable } from '../model/wireguard-guard.ts';

/**
 * The host steps that take back a gone sandbox: its pod ends went with its netns; its host ends
 * and ifbs go, a link made on the host that an interrupted pass left there before its move into
 * the pod (pnt), and its ports' entries in the port security table (they are keyed by a name the
 * next sandbox with the same container and interface would get).
 */
export function planGoneSandbox(state: AppliedState, podnetLinks: ReadonlyMap<string, ObservedLink>): Step[] {
  const names = state.attachments.flatMap((a) => {
    const mark = ownerMark({ containerId: state.containerId, podInterface: a.interface });
    const unmoved = hostInterfaceName(state.containerId, a.interface, 'pnt');
    return [a.hostIf, a.ifb, unmoved].filter((n): n is string => n !== undefined && podnetLinks.has(n) && bearsMark(podnetLinks.get(n)!, mark));
  });
  const ports = state.attachments.flatMap((a): Step[] => (a.hostIf && a.portSecurity ? [{ where: host, tool: 'nft', line: releasePortLine(a.hostIf, a.portSecurity) }] : []));
  // A WireGuard interface went with its netns: the guard of its port on the node goes too.
  const guards = state.attachments.flatMap((a): Step[] => (a.wireguard?.remoteRanges ? [{ where: host, tool: 'nft', line: guardDelLine(guardTable(state.containerId, a.interface)) }] : []));
  return [...ports, ...guards, ...names.map((name): Step => ({ where: host, tool: 'ip', line: linkDelLine(name) }))];
}

/** The bridges podnet made (`made`) that no applied attachment uses: the steps that delete those it still owns, and the bridges it keeps. */
export function planUnusedBridges(made: readonly string[], applied: readonly AppliedState[], links: ReadonlyMap<string, ObservedLink>): { steps: Step[]; keep: string[] } {
  const inUse = new Set(applied.flatMap((s) => s.attachments.flatMap((a) => (a.bridge ? [a.bridge] : []))));
  const mark = ownerMark('bridge');
  const steps = made.filter((b) => !inUse.has(b) && links.has(b) && bearsMark(links.get(b)!, mark)).map((b): Step => ({ where: host, tool: 'ip', line: linkDelLine(b) }));
  return { steps, keep: made.filter((b) => inUse.has(b)) };
}
