// `podnet apply -f` and `podnet delete -f` share this: read a file of documents (or stdin), refuse
// it whole when any document fails, and name the config-dir file each document lives in.
import { closeSync, openSync } from 'node:fs';
import { join } from 'node:path';
import { PodnetError } from '../errors.ts';
import { namespaceOf } from '../model/identity.ts';
import { documentsFileText, maxDocumentFileBytes } from '../sources/config-dir.ts';
import { parseDocuments, type ApiDocument } from '../sources/documents.ts';

/**
 * The text of `file` (`-`: stdin), read no further than the config dir's bound, which is what
 * the daemon would read of the file written there: `-f /dev/zero` ends with an error, at once.
 */
function documentsText(file: string): string {
  const name = file === '-' ? 'stdin' : file;
  let fd: number | undefined;
  try {
    fd = file === '-' ? 0 : openSync(file, 'r');
    const text = documentsFileText(fd);
    if (text === undefined) throw new PodnetError('INVALID_REQUEST', `nothing applied; ${name} is more than the ${maxDocumentFileBytes} bytes podnet reads of a documents file`);
    return text;
  } catch (err) {
    if (err instanceof PodnetError) throw err;
    const code = (err as NodeJS.ErrnoException).code;
    const why = code === 'ENOENT' ? 'there is no such file' : code === 'EISDIR' ? 'it is a folder' : code === 'EACCES' ? 'permission denied' : (err as Error).message;
    throw new PodnetError('INVALID_REQUEST', `cannot read ${name}: ${why}`);
  } finally {
    if (fd !== undefined && fd !== 0) closeSync(fd);
  }
}

export function readDocumentsFile(file: string): ApiDocument[] {
  const text = documentsText(file);
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
    : join(configDir, `${doc.kind.toLowerCase()}.${namespaceOf(doc.metadata.namespace)}.${doc.metadata.name}.yaml`);
}
