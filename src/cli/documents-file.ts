// `podnet apply -f` and `podnet delete -f` share this: read a file of documents (or stdin), refuse
// it whole when any document fails, and name the config-dir file each document lives in.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { PodnetError } from '../errors.ts';
import { parseDocuments, type ApiDocument } from '../sources/documents.ts';

export function readDocumentsFile(file: string): ApiDocument[] {
  let text: string;
  try {
    text = readFileSync(file === '-' ? 0 : file, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'there is no such file' : code === 'EISDIR' ? 'it is a folder' : code === 'EACCES' ? 'permission denied' : (err as Error).message;
    throw new PodnetError('INVALID_REQUEST', `cannot read ${file === '-' ? 'stdin' : file}: ${why}`);
  }
  const parsed = parseDocuments(text, file === '-' ? 'stdin' : file);
  if (parsed.problems.length > 0) {
    const lines = parsed.problems.map((p) => `  ${p.document} ${p.field}: ${p.reason}`);
    throw new PodnetError('INVALID_REQUEST', `nothing applied; ${file} has invalid documents:\n${lines.join('\n')}`);
  }
  if (parsed.documents.length === 0) throw new PodnetError('INVALID_REQUEST', `${file} holds no document`);
  return parsed.documents;
}

/** The file of a document in the config dir; its parts passed the schema's name patterns. */
export function documentPath(configDir: string, doc: ApiDocument): string {
  return doc.kind === 'Network'
    ? join(configDir, `network.${doc.metadata.name}.yaml`)
    : join(configDir, `podnetworkconfig.${doc.metadata.namespace ?? 'default'}.${doc.metadata.name}.yaml`);
}
