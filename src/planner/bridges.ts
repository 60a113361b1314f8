// The host bridges a pass needs, planned once for every sandbox before any of them: a bridge is
// shared, so making it is not any one sandbox's step, and sandboxes can then be planned and
// applied side by side. So is podnet's port security table, when a secured port needs it.
import { hostBridgeOf } from '../model/kinds/index.ts';
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
  const secures = securedPorts === undefined && attachments.some((a) => hostBridgeOf(a.link)?.portSecurity === true);
  const table = secures ? portSecurityRuleset().map((line): Step => ({ where: host, tool: 'nft', line })) : [];
  const planned = new Set<string>();
  for (const want of attachments) {
    // A kind made as a veth says the bridge its host end goes on (model/kinds).
    const spec = hostBridgeOf(want.link);
    if (!spec || planned.has(spec.name)) continue;
    planned.add(spec.name);
    const bridge = observedHost.get(spec.name);
    if (!bridge) {
      const mark = ownerMark('bridge');
      // Frames to link-local groups (LLDP, 802.1X) are learned before any filter sees them: a
      // pod could teach the bridge another's MAC with one. Nothing of podnet's needs them learned.
      steps.push({ where: host, tool: 'ip', line: `link add name ${spec.name} type bridge no_linklocal_learn 1`, undo: { where: host, action: 'link-del', dev: spec.name, mark } });
      steps.push({ where: host, tool: 'ip', line: markLine(spec.name, mark) });
      created.push(spec.name);
    }
    if (want.mtu && bridge?.mtu !== want.mtu) steps.push({ where: host, tool: 'ip', line: settingLine(spec.name, 'mtu', want.mtu) });
    if (!bridge?.up) steps.push({ where: host, tool: 'ip', line: settingLine(spec.name, 'up', true) });
    for (const address of spec.addresses) {
      if (!bridge?.addresses.includes(address)) {
        steps.push({ where: host, tool: 'ip', line: addrLine('add', address, spec.name), undo: { where: host, action: 'addr-del', dev: spec.name, address } });
      }
    }
  }
  return { steps, created, table };
}
