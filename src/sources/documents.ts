// Documents from text: YAML or JSON (JSON is YAML), several per file, each validated against the
// schema of its kind. A document that fails is a Problem naming the file, the document and the
// field; the file's other documents still count.
import { parseAllDocuments } from 'yaml';
import { PodnetError } from '../errors.ts';
import type { Problem } from '../model/desired.ts';
import { maxJsonDepth, nestingPast, nestsDeeperThan } from '../protocol/bounded-json.ts';
import { parseDocument, type Network, type PodNetworkConfig } from '../protocol/validate.ts';

export type ApiDocument = Network | PodNetworkConfig;

export interface ParsedDocuments {
  documents: ApiDocument[];
  problems: Problem[];
}

export function parseDocuments(text: string, source: string): ParsedDocuments {
  const out: ParsedDocuments = { documents: [], problems: [] };
  // Flow collections ([ and {) past the bound cost the parser time by the level (10 s for a MiB
  // of them): counted first, in one pass. Block nesting grows with indentation, bounded by the size.
  if (nestingPast(text, maxJsonDepth) !== undefined) {
    out.problems.push({ document: source, field: '(syntax)', reason: `nests mappings and lists more than ${maxJsonDepth} deep` });
    return out;
  }
  parseAllDocuments(text).forEach((doc, i) => {
    const where = `${source} document ${i + 1}`;
    if (doc.errors.length > 0) {
      // The parser's own recursion gives out on a deep enough document: said as what it is.
      const tooDeep = doc.errors.some((e) => e.message.startsWith('Maximum call stack size exceeded'));
      const reason = tooDeep ? `nests mappings and lists more than ${maxJsonDepth} deep` : doc.errors.map((e) => e.message).join('; ');
      out.problems.push({ document: where, field: '(syntax)', reason });
      return;
    }
    let value: unknown;
    try {
      // yaml's own bound on aliases (100) throws past it: an alias bomb is this document's problem.
      value = doc.toJS();
    } catch (err) {
      out.problems.push({ document: where, field: '(syntax)', reason: (err as Error).message });
      return;
    }
    if (value === null || value === undefined) return; // an empty document between separators
    if (nestsDeeperThan(value)) {
      out.problems.push({ document: where, field: '(syntax)', reason: `nests mappings and lists more than ${maxJsonDepth} deep` });
      return;
    }
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
