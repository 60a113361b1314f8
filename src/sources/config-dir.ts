// Standalone desired state: the documents in a directory (*.yaml, *.yml, *.json), followed as it
// changes. A PodNetworkConfig without a namespace is in `default`.
import { closeSync, constants, fstatSync, openSync, readdirSync, readSync, watch, type FSWatcher, type Stats } from 'node:fs';
import { join } from 'node:path';
import { documentName, identityOf } from '../model/identity.ts';
import { ensurePrivateDir } from '../registry/atomic-file.ts';
import { parseDocuments, type ParsedDocuments } from './documents.ts';
import { addDocument, emptyDocuments, type DesiredDocuments, type DesiredSource } from './source.ts';

export const documentFile = /\.(ya?ml|json)$/;

/**
 * A documents file is a few KiB; one past this is not read (a symlink to /dev/zero would never
 * end). The yaml parser takes a few microseconds a byte, on good documents as on the worst shapes
 * found: 256 KiB (a thousand documents or more) costs the daemon at most about a second per change.
 */
export const maxDocumentFileBytes = 256 * 1024;

/** What a file of the dir is taken to say: unreadable, it keeps the documents it last had. */
const keptNote = 'the documents it held when last read whole stay until it can be read again';

/**
 * A reader of the documents in `dir`: every call reads each file, and parses again only a file
 * whose text changed (a pass reads the directory, and most passes follow one file's change).
 * A file that cannot be read, or not as YAML (an editor's write caught halfway, a file swapped for
 * something else), is its problem, and keeps the documents it held when last read whole: its
 * configs are not taken for deleted, so pods keep their networking (ADR 17). A file removed from
 * the dir takes its documents with it.
 */
export function configDirReader(dir: string): () => DesiredDocuments {
  const parsedFiles = new Map<string, { text: string; parsed: ParsedDocuments }>();
  /** Each file's documents when last read whole (no file or syntax problem). */
  const lastWhole = new Map<string, ParsedDocuments['documents']>();
  return () => {
    ensurePrivateDir(dir);
    const out = emptyDocuments();
    const seen = new Map<string, string>();
    const files = readdirSync(dir).filter((f) => documentFile.test(f) && !f.startsWith('.')).sort();
    const present = new Set(files);
    for (const gone of [...parsedFiles.keys(), ...lastWhole.keys()].filter((f) => !present.has(f))) {
      parsedFiles.delete(gone);
      lastWhole.delete(gone);
    }
    for (const file of files) {
      const read = documentText(join(dir, file));
      let documents: ParsedDocuments['documents'];
      if ('problem' in read) {
        // That file's problem alone: every other document of the dir still counts.
        parsedFiles.delete(file);
        out.problems.push({ document: file, field: '(file)', reason: lastWhole.has(file) ? `${read.problem}; ${keptNote}` : read.problem });
        documents = lastWhole.get(file) ?? [];
      } else {
        const { text } = read;
        let cached = parsedFiles.get(file);
        if (cached?.text !== text) parsedFiles.set(file, (cached = { text, parsed: parseDocuments(text, file) }));
        const { parsed } = cached!;
        // An editor's write truncates, then fills: a file that held documents and is read empty is
        // taken for that write caught between the two, not for a deletion (deleting the file is).
        const emptied = text.trim() === '' && (lastWhole.get(file)?.length ?? 0) > 0;
        const unreadable = emptied || parsed.problems.some((p) => p.field === '(syntax)');
        if (emptied) out.problems.push({ document: file, field: '(file)', reason: `is empty; ${keptNote} (delete the file to delete its documents)` });
        if (!unreadable) lastWhole.set(file, parsed.documents);
        const kept = unreadable ? lastWhole.get(file) : undefined;
        out.problems.push(...parsed.problems.map((p) => (kept && p.field === '(syntax)' ? { ...p, reason: `${p.reason}; ${keptNote}` } : p)));
        documents = kept ?? parsed.documents;
      }
      for (const doc of documents) {
        const name = documentName(doc);
        const first = seen.get(name);
        if (first) {
          out.problems.push({ document: `${name} in ${file}`, field: 'metadata.name', reason: `${name} is also defined in ${first}; the first one counts` });
          continue;
        }
        seen.set(name, file);
        addDocument(out, doc);
      }
    }
    return out;
  };
}

/**
 * A file of the config dir as text, or why podnet does not read it: only a regular file (or a
 * symlink to one) of at most maxDocumentFileBytes. Opened without blocking and judged by what is
 * open, so a FIFO (which would block the daemon until someone writes), a device or a folder under
 * a document's name, also one swapped in after the folder was listed, is refused, never read.
 */
function documentText(path: string): { text: string } | { problem: string } {
  let fd: number;
  try {
    fd = openSync(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    return { problem: code === 'ENOENT' ? 'is a symlink to nothing' : `cannot be opened: ${code ?? (err as Error).message}` };
  }
  try {
    const info = fstatSync(fd);
    if (!info.isFile()) return { problem: `is ${kindOf(info)}, not a regular file: podnet reads only regular files (and symlinks to them)` };
    if (info.size > maxDocumentFileBytes) return { problem: `is ${info.size} bytes, more than the ${maxDocumentFileBytes} podnet reads` };
    const text = documentsFileText(fd);
    return text === undefined ? { problem: `grew past the ${maxDocumentFileBytes} bytes podnet reads` } : { text };
  } catch (err) {
    return { problem: `cannot be read: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}` };
  } finally {
    closeSync(fd);
  }
}

/**
 * What `fd` holds as text, read to its end but no further than maxDocumentFileBytes; undefined
 * when there is more. The one bounded read of a documents file: the daemon's of the dir and
 * `podnet apply -f`'s.
 */
export function documentsFileText(fd: number): string | undefined {
  const buffer = Buffer.allocUnsafe(maxDocumentFileBytes + 1);
  let length = 0;
  for (let n = 1; n > 0 && length < buffer.length; length += n) n = readSync(fd, buffer, length, buffer.length - length, null);
  return length > maxDocumentFileBytes ? undefined : buffer.subarray(0, length).toString('utf8');
}

function kindOf(info: Stats): string {
  if (info.isDirectory()) return 'a folder';
  if (info.isFIFO()) return 'a FIFO';
  if (info.isCharacterDevice() || info.isBlockDevice()) return 'a device';
  if (info.isSocket()) return 'a socket';
  return 'not a file';
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
