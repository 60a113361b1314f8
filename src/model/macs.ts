// Static MACs across the pods of a node: a MAC one pod asks is never one another pod's interface
// has, nor one of the node's own interfaces, nor one another pod asks at the same time (neither
// gets it then: there is no fair order between them). Whoever has it already keeps it. Pure.
import type { Problem } from '../protocol/validate.ts';

/** A MAC a document asks for one of a pod's interfaces. */
export interface AskedMac {
  interface: string;
  mac: string;
  from: string;
  field: string;
}

export interface MacClaims {
  containerId: string;
  asked: readonly AskedMac[];
  /** The MACs its interfaces have, as last seen. */
  has: readonly string[];
}

/** Per sandbox, the interfaces whose asked MAC it may not have, each with the problem to tell. */
export function refusedMacs(sandboxes: readonly MacClaims[], hostMacs: ReadonlySet<string>): Map<string, { interface: string; problem: Problem }[]> {
  const norm = (mac: string) => mac.toLowerCase();
  const holders = new Map<string, Set<string>>();
  const askers = new Map<string, Set<string>>();
  for (const s of sandboxes) {
    for (const mac of s.has) holders.set(norm(mac), (holders.get(norm(mac)) ?? new Set()).add(s.containerId));
    for (const a of s.asked) askers.set(norm(a.mac), (askers.get(norm(a.mac)) ?? new Set()).add(s.containerId));
  }
  const host = new Set([...hostMacs].map(norm));
  const refused = new Map<string, { interface: string; problem: Problem }[]>();
  for (const s of sandboxes) {
    for (const a of s.asked) {
      const mac = norm(a.mac);
      const others = (set: Set<string> | undefined) => [...(set ?? [])].some((c) => c !== s.containerId);
      const holds = holders.get(mac)?.has(s.containerId) ?? false;
      const why = host.has(mac)
        ? 'is the MAC of one of the node\'s own interfaces'
        : others(holders.get(mac))
          ? 'is in use by another pod\'s interface on this node'
          : !holds && others(askers.get(mac))
            ? 'is asked for another pod on this node too; neither gets it'
            : undefined;
      if (why === undefined) continue;
      const problem = { document: a.from, field: a.field, reason: `MAC ${a.mac} ${why}: a MAC shared on a network takes another's traffic` };
      refused.set(s.containerId, [...(refused.get(s.containerId) ?? []), { interface: a.interface, problem }]);
    }
  }
  return refused;
}
