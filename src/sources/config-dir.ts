// Standalone desired state: the documents in a directory (*.yaml, *.yml, *.json), followed as it
// changes. A PodNetworkConfig without a namespace is in `default`.
import { readdirSync, readFileSync, watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import { documentName, type Problem } from '../model/desired.ts';
import type { Network, PodNetworkConfig } from '../protocol/validate.ts';
import { ensurePrivateDir } from '../registry/atomic-file.ts';
import { parseDocuments, type ParsedDocuments } from './documents.ts';

export interface DesiredDocuments {
  networks: Map<string, Network>;
  configs: PodNetworkConfig[];
  problems: Problem[];
}

export const documentFile = /\.(ya?ml|json)$/;

/**
 * A reader of the documents in `dir`: every call reads each file, and parses again only a file
 * whose text changed (a pass reads the directory, and most passes follow one file's change).
 */
export function configDirReader(dir: string): () => DesiredDocuments {
  const parsedFiles = new Map<string, { text: string; parsed: ParsedDocuments }>();
  return () => {
    ensurePrivateDir(dir);
    const out: DesiredDocuments = { networks: new Map(), configs: [], problems: [] };
    const seen = new Map<string, string>();
    const files = readdirSync(dir).filter((f) => documentFile.test(f) && !f.startsWith('.')).sort();
    const present = new Set(files);
    for (const gone of [...parsedFiles.keys()].filter((f) => !present.has(f))) parsedFiles.delete(gone);
    for (const file of files) {
      const text = readFileSync(join(dir, file), 'utf8');
      let cached = parsedFiles.get(file);
      if (cached?.text !== text) parsedFiles.set(file, (cached = { text, parsed: parseDocuments(text, file) }));
      const { parsed } = cached!;
      out.problems.push(...parsed.problems);
      for (const doc of parsed.documents) {
        const name = documentName(doc);
        const first = seen.get(name);
        if (first) {
          out.problems.push({ document: `${name} in ${file}`, field: 'metadata.name', reason: `${name} is also defined in ${first}; the first one counts` });
          continue;
        }
        seen.set(name, file);
        if (doc.kind === 'Network') out.networks.set(doc.metadata.name, doc);
        else out.configs.push(doc);
      }
    }
    return out;
  };
}

/** `docs` with `extra` on top: a document of the same kind and name replaces the one there. */
export function withDocuments(docs: DesiredDocuments, extra: readonly (Network | PodNetworkConfig)[]): DesiredDocuments {
  const replaced = new Set(extra.map(documentName));
  const out: DesiredDocuments = { networks: new Map(docs.networks), configs: docs.configs.filter((c) => !replaced.has(documentName(c))), problems: [...docs.problems] };
  for (const doc of extra) {
    if (doc.kind === 'Network') out.networks.set(doc.metadata.name, doc);
    else out.configs.push(doc);
  }
  return out;
}

/**
 * Calls `onChange` on every change of the directory's files, at once: a burst of events (an
 * atomic write is a create and a rename) costs no more than one extra pass, since the reconciler
 * coalesces requests that arrive during a pass. Returns the watcher.
 */
export function watchConfigDir(dir: string, onChange: () => void): FSWatcher {
  return watch(dir, (_event, file) => {
    if (file === null || !file.startsWith('.')) onChange();
  });
}
