// Standalone desired state: the documents in a directory (*.yaml, *.yml, *.json), followed as it
// changes. A PodNetworkConfig without a namespace is in `default`.
import { readdirSync, readFileSync, watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import { documentName, identityOf } from '../model/desired.ts';
import { ensurePrivateDir } from '../registry/atomic-file.ts';
import { parseDocuments, type ParsedDocuments } from './documents.ts';
import type { DesiredDocuments, DesiredSource } from './source.ts';

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

/**
 * The documents of a directory, followed: every change of its files calls `changed` at once; a
 * burst of events (an atomic write is a create and a rename) costs no more than one extra pass,
 * since the reconciler coalesces requests that arrive during a pass. A sandbox is who its
 * runtime recorded (labels from its CNI identity).
 */
export class ConfigDirSource implements DesiredSource {
  readonly documents: () => DesiredDocuments;
  readonly identity = identityOf;
  readonly synced = true;
  private readonly dir: string;
  private watcher: FSWatcher | undefined;

  constructor(dir: string) {
    this.dir = dir;
    this.documents = configDirReader(dir);
  }

  async start(changed: () => void): Promise<void> {
    ensurePrivateDir(this.dir);
    this.watcher = watch(this.dir, (_event, file) => {
      if (file === null || !file.startsWith('.')) changed();
    });
  }

  async stop(): Promise<void> {
    this.watcher?.close();
  }
}
