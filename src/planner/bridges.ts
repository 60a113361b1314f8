// The host bridges a pass needs, planned once for every sandbox before any of them: a bridge is
// shared, so making it is not any one sandbox's step, and sandboxes can then be planned and
// applied side by side. So is podnet's port security table, when a secured port needs it.
import type { ObservedLink, ResolvedAttachment } from '../model/state.ts';
import { host, type Step } from '../model/step.ts';
import { ownerMark } from '../model/host-links.ts';
import { portSecurityRuleset } from '../model/port-security.ts';
import { addrLine, markLine, settingLine } from '../model/undo.ts';

/**
 * The steps, and the bridges they create: podnet removes only bridges it made, once nothing uses
 * them. Apart, the port security table's (`table`), when a secured port needs it and
 * `securedPorts` is undefined (the table is not there): its failure (no nft on the node) is no
 * bridge's, nor any pod's without a secured port.
 */
export function planBridges(
  attachments: readonly ResolvedAttachment[],
  observedHost: ReadonlyMap<string, ObservedLink>,
  securedPorts?: ReadonlySet<string>,
): { steps: Step[]; created: string[]; table: Step[] } {
  const steps: Step[] = [];
  const created: string[] = [];
  // Put again over a table someone removed: each sandbox then puts its port's entries back.
  const secures = securedPorts === undefined && attachments.some((a) => a.link.kind === 'bridge' && a.link.portSecurity);
  const table = secures ? portSecurityRuleset().map((line): Step => ({ where: host, tool: 'nft', line })) : [];
  const planned = new Set<string>();
  for (const want of attachments) {
    if (want.link.kind !== 'bridge' || planned.has(want.link.bridge)) continue;
    const spec = want.link;
    planned.add(spec.bridge);
    const bridge = observedHost.get(spec.bridge);
    if (!bridge) {
      const mark = ownerMark('bridge');
      // Frames to link-local groups (LLDP, 802.1X) are learned before any filter sees them: a
      // pod could teach the bridge another's MAC with one. Nothing of podnet's needs them learned.
      steps.push({ where: host, tool: 'ip', line: `link add name ${spec.bridge} type bridge no_linklocal_learn 1`, undo: { where: host, action: 'link-del', dev: spec.bridge, mark } });
      steps.push({ where: host, tool: 'ip', line: markLine(spec.bridge, mark) });
      created.push(spec.bridge);
    }
    if (want.mtu && bridge?.mtu !== want.mtu) steps.push({ where: host, tool: 'ip', line: settingLine(spec.bridge, 'mtu', want.mtu) });
    if (!bridge?.up) steps.push({ where: host, tool: 'ip', line: settingLine(spec.bridge, 'up', true) });
    for (const address of spec.bridgeAddresses) {
      if (!bridge?.addresses.includes(address)) {
        steps.push({ where: host, tool: 'ip', line: addrLine('add', address, spec.bridge), undo: { where: host, action: 'addr-del', dev: spec.bridge, address } });
      }
    }
  }
  return { steps, created, table };
}
