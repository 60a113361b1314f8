// What a sandbox should have, from the documents: a pure function. A sandbox is selected by the
// labels podnet derives from its CNI identity (standalone) and by the PodNetworkConfigs of its own
// namespace; a Network is reachable only when its namespaceSelector admits that namespace. What
// cannot be honoured is a Problem naming the document, the field and the reason, and is left out
// (the rest of the sandbox's desired state still applies).
import type { AttachmentRecord, Network, PodNetworkConfig } from '../protocol/validate.ts';
import { selects, type Labels } from './selector.ts';

export const podNameLabel = 'podnetwork.opdev.io/pod-name';
export const podNamespaceLabel = 'podnetwork.opdev.io/pod-namespace';
export const namespaceNameLabel = 'kubernetes.io/metadata.name';

export interface Problem {
  /** "PodNetworkConfig tenant-a/fast" or "Network blue". */
  document: string;
  /** A JSON path into it: "spec.attachments[0].network". */
  field: string;
  reason: string;
}

export interface DesiredAttachment {
  network: Network;
  interface: string;
  ips?: string[];
  /** The config that asked for it. */
  from: string;
}

export interface DesiredTuning {
  interface: string;
  mtu?: number;
  from: string;
}

export interface DesiredSandbox {
  attachments: DesiredAttachment[];
  tuning: DesiredTuning[];
  problems: Problem[];
}

export interface SandboxIdentity {
  namespace: string;
  name: string;
  labels: Labels;
}

/** The identity a runtime gave (namespace `default` when it gave none) and the labels from it. */
export function identityOf(record: AttachmentRecord): SandboxIdentity {
  const namespace = record.pod.namespace ?? 'default';
  const name = record.pod.name ?? record.containerId;
  return { namespace, name, labels: { [podNameLabel]: name, [podNamespaceLabel]: namespace } };
}

export function documentName(doc: Network | PodNetworkConfig): string {
  return doc.kind === 'Network' ? `Network ${doc.metadata.name}` : `PodNetworkConfig ${doc.metadata.namespace ?? 'default'}/${doc.metadata.name}`;
}

export function desiredFor(
  identity: SandboxIdentity,
  networks: ReadonlyMap<string, Network>,
  configs: readonly PodNetworkConfig[],
): DesiredSandbox {
  const out: DesiredSandbox = { attachments: [], tuning: [], problems: [] };
  const mine = configs
    .filter((c) => (c.metadata.namespace ?? 'default') === identity.namespace && selects(c.spec.podSelector, identity.labels))
    // A deterministic merge order, whatever order the documents arrived in.
    .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0));

  const attachmentBy = new Map<string, { at: DesiredAttachment; field: string }>();
  const tuningBy = new Map<string, { at: DesiredTuning; field: string }>();
  const conflicted = new Set<string>();

  for (const config of mine) {
    const from = documentName(config);
    (config.spec.attachments ?? []).forEach((a, i) => {
      const field = `spec.attachments[${i}]`;
      const network = networks.get(a.network);
      if (!network) return out.problems.push({ document: from, field: `${field}.network`, reason: `no Network named ${a.network}` });
      const admits = network.spec.namespaceSelector && selects(network.spec.namespaceSelector, { [namespaceNameLabel]: identity.namespace });
      if (!admits) {
        return out.problems.push({ document: from, field: `${field}.network`, reason: `Network ${a.network} does not admit namespace ${identity.namespace}` });
      }
      const earlier = attachmentBy.get(a.interface);
      if (earlier) {
        conflicted.add(`attach:${a.interface}`);
        out.problems.push(...conflict(from, field, earlier.at.from, earlier.field, `interface ${a.interface}`));
        return;
      }
      const at: DesiredAttachment = { network, interface: a.interface, from, ...(a.ips ? { ips: [...a.ips] } : {}) };
      attachmentBy.set(a.interface, { at, field });
    });
    (config.spec.interfaces ?? []).forEach((tuning, i) => {
      const field = `spec.interfaces[${i}]`;
      const earlier = tuningBy.get(tuning.name);
      if (earlier && earlier.at.mtu !== tuning.mtu) {
        conflicted.add(`tune:${tuning.name}`);
        out.problems.push(...conflict(from, `${field}.mtu`, earlier.at.from, `${earlier.field}.mtu`, `the MTU of ${tuning.name}`));
        return;
      }
      if (!earlier) tuningBy.set(tuning.name, { at: { interface: tuning.name, from, ...(tuning.mtu ? { mtu: tuning.mtu } : {}) }, field });
    });
  }
  // A conflict is not resolved by picking a side: neither applies, and both documents say why.
  for (const [name, { at }] of attachmentBy) if (!conflicted.has(`attach:${name}`)) out.attachments.push(at);
  for (const [name, { at }] of tuningBy) if (!conflicted.has(`tune:${name}`)) out.tuning.push(at);
  return out;
}

/** A conflict is reported on both documents. */
function conflict(doc: string, field: string, otherDoc: string, otherField: string, what: string): Problem[] {
  const reason = (by: string, at: string) => `${what} is also set, differently, by ${by} (${at}); neither applies`;
  return [
    { document: doc, field, reason: reason(otherDoc, otherField) },
    { document: otherDoc, field: otherField, reason: reason(doc, field) },
  ];
}
