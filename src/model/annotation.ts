// The pod annotations podnet reads and writes, in the Network Plumbing WG's formats so that tools
// made for Multus read them: podnetwork.opdev.io/networks (what a tenant asks, on the pod) and
// podnetwork.opdev.io/network-status (what the pod has, written by podnet alone). Pure.
import { parseBoundedJson } from '../protocol/bounded-json.ts';
import { PodnetError } from '../errors.ts';
import { parseDocument, type NetworkSelection, type NetworkStatusEntry } from '../protocol/validate.ts';

export const networksAnnotation = 'podnetwork.opdev.io/networks';
export const networkStatusAnnotation = 'podnetwork.opdev.io/network-status';

/** Where in a pod the networks annotation is, as problems name it; with `index`, its entry. */
export function annotationField(index?: number): string {
  const base = `metadata.annotations["${networksAnnotation}"]`;
  return index === undefined ? base : `${base}[${index}]`;
}

/** The annotation's selections, or why it could not be read (the pod's other networking still applies). */
export type AnnotationRequest = { selections: NetworkSelection[] } | { problem: string };

/**
 * Reads the networks annotation: a JSON list of {name, interface, ips, mac}, or the short form
 * "net-a, net-b@net9" (a Network's name, and after @ the interface in the pod). An empty value
 * asks for nothing.
 */
export function parseNetworksAnnotation(text: string): AnnotationRequest {
  const trimmed = text.trim();
  if (trimmed === '') return { selections: [] };
  let value: unknown;
  if (trimmed.startsWith('[') || trimmed.startsWith('{')) {
    try {
      // The API server bounds an object's annotations to 256 KiB in all.
      value = parseBoundedJson(trimmed, networksAnnotation, { maxBytes: 256 * 1024 });
    } catch (err) {
      return { problem: (err as Error).message };
    }
  } else {
    const shortForm = shortFormSelections(trimmed);
    if ('problem' in shortForm) return shortForm;
    value = shortForm.selections;
  }
  try {
    return { selections: parseDocument('NetworkSelectionList', value, `${networksAnnotation} annotation`) };
  } catch (err) {
    return { problem: (err as PodnetError).message };
  }
}

/** "net-a, net-b@net9" as selections, checked by the schema after; a namespace is refused here, with why. */
function shortFormSelections(text: string): { selections: Record<string, string>[] } | { problem: string } {
  const selections: Record<string, string>[] = [];
  for (const [i, part] of text.split(',').entries()) {
    const item = part.trim();
    const at = item.indexOf('@');
    const name = at < 0 ? item : item.slice(0, at);
    if (name.includes('/')) {
      return { problem: `${networksAnnotation} entry ${i + 1} "${item}" names a namespace: podnet's Networks are cluster-scoped, write the Network's name alone` };
    }
    selections.push(at < 0 ? { name } : { name, interface: item.slice(at + 1) });
  }
  return { selections };
}

/** The network-status value podnet writes: compact JSON, as Multus writes its own. */
export function formatNetworkStatus(entries: readonly NetworkStatusEntry[]): string {
  return JSON.stringify(entries);
}

/**
 * The Network Plumbing WG's own annotation, which Multus writes and tools built on its client
 * library read: podnet writes it too when its daemon is told to (--standard-network-status) and no
 * other meta plugin does.
 */
export const standardNetworkStatusAnnotation = 'k8s.v1.cni.cncf.io/network-status';

/**
 * The standard annotation's value for podnet's network-status value: the interfaces the pod has,
 * in the standard's fields alone (podnet's `problem` entries and `madeAfterStart` are its own);
 * null when that leaves none.
 */
export function standardNetworkStatus(value: string): string | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value);
  } catch {
    return null;
  }
  // A value podnet did not write (someone's edit): nothing of podnet's to list.
  if (!Array.isArray(parsed)) return null;
  const entries = (parsed as NetworkStatusEntry[]).filter((e) => e.problem === undefined).map(({ madeAfterStart: _late, problem: _problem, publicKey: _key, ...entry }) => entry);
  return entries.length === 0 ? null : JSON.stringify(entries);
}
