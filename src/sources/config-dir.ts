// Standalone desired state: the documents in a directory (*.yaml, *.yml, *.json), followed as it
// changes. A PodNetworkConfig without a namespace is in `default`.
import { readdirSync, readFileSync, watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import { documentName, type Problem } from '../model/desired.ts';
import type { Network, PodNetworkConfig } from '../protocol/validate.ts';
import { ensurePrivateDir } from '../registry/atomic-file.ts';
import { parseDocuments } from './documents.ts';

export interface DesiredDocuments {
  networks: Map<string, Network>;
  configs: PodNetworkConfig[];
  problems: Problem[];
}

export const documentFile = /\.(ya?ml|json)$/;

export function loadConfigDir(dir: string): DesiredDocuments {
  ensurePrivateDir(dir);
  const out: DesiredDocuments = { networks: new Map(), configs: [], problems: [] };
  const seen = new Map<string, string>();
  for (const file of readdirSync(dir).filter((f) => documentFile.test(f) && !f.startsWith('.')).sort()) {
    const parsed = parseDocuments(readFileSync(join(dir, file), 'utf8'), file);
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
