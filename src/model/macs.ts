// Values one interface on a node may have and no other: a static MAC, an address a pod brings on
// a Network without ipam. A value one pod asks is never one another pod's interface has, nor one
// of the node's own interfaces, nor one another pod asks at the same time (neither gets it then:
// there is no fair order between them). Whoever has it already keeps it. Pure.
import { addRefusal, type Refusal } from './refusal.ts';

/** A value a document asks for one of a pod's interfaces. */
export interface AskedValue {
  interface: string;
  value: string;
  from: string;
  field: string;
}

export interface ValueClaims {
  containerId: string;
  asked: readonly AskedValue[];
  /** The values its interfaces have, as last seen or as podnet recorded giving them. */
  has: readonly string[];
}

/** How a kind of value is compared and told. */
interface ValueKind {
  /** One spelling of a value, for comparing. */
  norm: (value: string) => string;
  /** "MAC 02:..." or "address 198.18.0.7": the value as the problem names it. */
  name: (value: string) => string;
  /** How a value of the node's own interfaces is told. */
  onHost: string;
  /** Why two interfaces must not share one, after the reason. */
  why: string;
  /** Why no interface may have this value at all, if so. */
  never?: (value: string) => string | undefined;
}

/** Per sandbox, the interfaces whose asked value it may not have, each with the problem to tell. */
function refusedValues(sandboxes: readonly ValueClaims[], hostValues: ReadonlySet<string>, kind: ValueKind): Map<string, Refusal[]> {
  const holders = new Map<string, Set<string>>();
  const askers = new Map<string, Set<string>>();
  for (const s of sandboxes) {
    for (const v of s.has) holders.set(kind.norm(v), (holders.get(kind.norm(v)) ?? new Set()).add(s.containerId));
    for (const a of s.asked) askers.set(kind.norm(a.value), (askers.get(kind.norm(a.value)) ?? new Set()).add(s.containerId));
  }
  const host = new Set([...hostValues].map(kind.norm));
  const refused = new Map<string, Refusal[]>();
  for (const s of sandboxes) {
    for (const a of s.asked) {
      const value = kind.norm(a.value);
      const others = (set: Set<string> | undefined) => [...(set ?? [])].some((c) => c !== s.containerId);
      const holds = holders.get(value)?.has(s.containerId) ?? false;
      const never = kind.never?.(value);
      if (never !== undefined) {
        addRefusal(refused, s.containerId, { interface: a.interface, problem: { document: a.from, field: a.field, reason: `${kind.name(a.value)} ${never}` } });
        continue;
      }
      const why = host.has(value)
        ? kind.onHost
        : others(holders.get(value))
          ? "is in use by another pod's interface on this node"
          : !holds && others(askers.get(value))
            ? 'is asked for another pod on this node too; neither gets it'
            : undefined;
      if (why === undefined) continue;
      const problem = { document: a.from, field: a.field, reason: `${kind.name(a.value)} ${why}: ${kind.why}` };
      addRefusal(refused, s.containerId, { interface: a.interface, problem });
    }
  }
  return refused;
}

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
  /** The MACs its interfaces have, as last seen or as podnet recorded giving them. */
  has: readonly string[];
}

const macKind: ValueKind = {
  norm: (mac) => mac.toLowerCase(),
  name: (mac) => `MAC ${mac}`,
  onHost: "is the MAC of one of the node's own interfaces",
  why: "a MAC shared on a network takes another's traffic",
  // The schema's pattern admits it (a pattern without look-ahead cannot refuse it alone); the kernel does not.
  never: (mac) => (mac === '00:00:00:00:00:00' ? 'is no interface\'s: the kernel refuses an all-zero MAC' : undefined),
};

/** Per sandbox, the interfaces whose asked MAC it may not have, each with the problem to tell. */
export function refusedMacs(sandboxes: readonly MacClaims[], hostMacs: ReadonlySet<string>): Map<string, Refusal[]> {
  return refusedValues(sandboxes.map((s) => ({ ...s, asked: s.asked.map(({ mac, ...a }) => ({ ...a, value: mac })) })), hostMacs, macKind);
}

/**
 * Per sandbox, the interfaces whose own addresses (brought on a Network without ipam, keyed
 * "network address") it may not have: ipam never hands out one address twice, and these are
 * checked the same way across the node.
 */
export function refusedOwnAddresses(sandboxes: readonly ValueClaims[], hostAddresses: ReadonlySet<string>): Map<string, Refusal[]> {
  return refusedValues(sandboxes, hostAddresses, {
    norm: (key) => key,
    name: (key) => `address ${key.slice(key.indexOf(' ') + 1)}`,
    onHost: "is an address of one of the node's own interfaces",
    why: 'an address shared on a network takes another\'s traffic',
  });
}
