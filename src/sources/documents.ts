// Documents from text: YAML or JSON (JSON is YAML), several per file, each validated against the
// schema of its kind. A document that fails is a Problem naming the file, the document and the
// field; the file's other documents still count.
import { parseAllDocuments } from 'yaml';
import { PodnetError } from '../errors.ts';
import type { Problem } from '../model/desired.ts';
import { parseDocument, type Network, type PodNetworkConfig } from '../protocol/validate.ts';

export type ApiDocument = Network | PodNetworkConfig;

export interface ParsedDocuments {
  documents: ApiDocument[];
  problems: Problem[];
}

export function parseDocuments(text: string, source: string): ParsedDocuments {
  const out: ParsedDocuments = { documents: [], problems: [] };
  parseAllDocuments(text).forEach((doc, i) => {
    const where = `${source} document ${i + 1}`;
    if (doc.errors.length > 0) {
      out.problems.push({ document: where, field: '(syntax)', reason: doc.errors.map((e) => e.message).join('; ') });
      return;
    }
    const value: unknown = doc.toJS();
    if (value === null || value === undefined) return; // an empty document between separators
    const kind = typeof value === 'object' && 'kind' in value ? (value as { kind: unknown }).kind : undefined;
    if (kind !== 'Network' && kind !== 'PodNetworkConfig') {
      out.problems.push({ document: where, field: 'kind', reason: `kind must be Network or PodNetworkConfig, not ${JSON.stringify(kind)}` });
      return;
    }
    try {
      out.documents.push(parseDocument(kind, value, `${kind} in ${where}`));
    } catch (err) {
      out.problems.push({ document: where, field: kind, reason: (err as PodnetError).message });
    }
  });
  return out;
}
