// Every document podnet keeps in its state dir (records, spool entries, applied state, host
// objects, delegated records, journals) is written and read here, so one rule holds for all: a
// file carries its format's version (FormatVersion in schemas/protocol.schema.json), and is read
// against its schema before anything in it is used, since its names reach command lines.
import { parseBoundedJson } from '../protocol/bounded-json.ts';
import { readFileSync } from 'node:fs';
import { parseDocument, type DocumentName, type DocumentTypes } from '../protocol/validate.ts';

/**
 * A state file podnet writes is at most a record holding a plugin config and its result (the
 * plugin reads 1 MiB of stdin at most): anything larger was not written by podnet.
 */
export const maxStateDocumentBytes = 4 * 1024 * 1024;

/** The format podnet writes. A file without a version, of an older podnet, is read as version 1. */
export const formatVersion = 1;

/** A document as the code holds it: its format's version is the file's, not the document's. */
export type Unversioned<T> = T extends unknown ? Omit<T, 'version'> : never;

/** The text of a state file holding `doc`, with the format's version. */
export function stateDocumentText(doc: object): string {
  return `${JSON.stringify({ version: formatVersion, ...doc }, null, 2)}\n`;
}

/**
 * The text of a state file as the named document, or throws naming why not (not JSON, or each
 * violation of its schema): what a store's reader sets aside.
 */
export function parseStateDocument<N extends DocumentName>(name: N, text: string, what: string): Unversioned<DocumentTypes[N]> {
  const value = parseBoundedJson(text, what, { maxBytes: maxStateDocumentBytes }, 'IO_FAILURE');
  const { version: _format, ...doc } = parseDocument(name, value, what, 'IO_FAILURE') as object & { version?: number };
  return doc as Unversioned<DocumentTypes[N]>;
}

/** The file at `path` as the named document (see parseStateDocument). */
export function readStateDocument<N extends DocumentName>(name: N, path: string, what: string): Unversioned<DocumentTypes[N]> {
  return parseStateDocument(name, readFileSync(path, 'utf8'), what);
}
