// What a sandbox should have, from the documents: a pure function. A sandbox is selected by the
// labels podnet derives from its CNI identity (standalone) and by the PodNetworkConfigs of its own
// namespace; a Network is reachable only when its namespaceSelector admits that namespace. What
// cannot be honoured is a Problem naming the document, the field and the reason, and is left out
// (the rest of the sandbox's desired state still applies).
import type { AttachmentRecord, Network, PodNetworkConfig } from '../protocol/validate.ts';
import { selects, type Labels } from './selector.ts';
import { linkSettingNames, type LinkSettingName, type LinkSettings } from './state.ts';

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
  settings: LinkSettings;
  /** Which config set each setting. */
  from: Partial<Record<LinkSettingName, string>>;
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
  const tuningBy = new Map<string, DesiredTuning & { fields: Partial<Record<LinkSettingName, string>> }>();
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
      const entry = tuningBy.get(tuning.name) ?? { interface: tuning.name, settings: {}, from: {}, fields: {} };
      tuningBy.set(tuning.name, entry);
      for (const setting of linkSettingNames) {
        const value = tuning[setting];
        if (value === undefined) continue;
        const field = `spec.interfaces[${i}].${setting}`;
        const earlier = entry.settings[setting];
        if (earlier !== undefined && earlier !== value) {
          conflicted.add(`tune:${tuning.name}:${setting}`);
          out.problems.push(...conflict(from, field, entry.from[setting]!, entry.fields[setting]!, `the ${setting} of ${tuning.name}`));
          continue;
        }
        (entry.settings as Record<string, unknown>)[setting] = value;
        entry.from[setting] = from;
        entry.fields[setting] = field;
      }
    });
  }
  // A conflict is not resolved by picking a side: neither applies, and both documents say why.
  for (const [name, { at }] of attachmentBy) if (!conflicted.has(`attach:${name}`)) out.attachments.push(at);
  for (const { interface: name, settings, from } of tuningBy.values()) {
    const kept: LinkSettings = {};
    for (const setting of linkSettingNames) {
      if (settings[setting] !== undefined && !conflicted.has(`tune:${name}:${setting}`)) (kept as Record<string, unknown>)[setting] = settings[setting];
    }
    if (Object.keys(kept).length > 0) out.tuning.push({ interface: name, settings: kept, from });
  }
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
