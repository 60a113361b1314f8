// Documents from text: YAML or JSON (JSON is YAML), several per file, each validated against the
// schema of its kind. A document that fails is a Problem naming the file, the document and the
// field; the file's other documents still count.
import { isAlias, isCollection, isMap, isPair, isScalar, parseAllDocuments, type Document } from 'yaml';
import type { Problem } from '../model/desired.ts';
import { allowingNothing } from '../model/permissions.ts';
import { maxJsonDepth, nestsDeeperThan } from '../protocol/bounded-json.ts';
import { violationsOf, type Network, type PodNetworkConfig, type PodNetworkPermission } from '../protocol/validate.ts';

export type ApiDocument = Network | PodNetworkConfig | PodNetworkPermission;

export interface ParsedDocuments {
  documents: ApiDocument[];
  problems: Problem[];
}

/** The most syntax errors a document's problem names: a file of nothing but errors says a few, and how many more. */
const maxSyntaxErrorsNamed = 8;

const tooDeep = `nests mappings and lists more than ${maxJsonDepth} deep`;

/**
 * The documents of `text` and the problems of those that fail. The yaml parser's time grows with
 * the size of the text, a few microseconds a byte on the worst shapes found (errors on every
 * byte, flow collections nested or unclosed), so the size bound of whoever read the text is its
 * time bound; what is refused here is refused before the parser's slow paths.
 */
export function parseDocuments(text: string, source: string): ParsedDocuments {
  const out: ParsedDocuments = { documents: [], problems: [] };
  // Flow collections ([ and {) nested deep cost the parser seconds by the MiB: counted first.
  if (flowNestingPast(text, maxJsonDepth)) {
    out.problems.push({ document: source, field: '(syntax)', reason: tooDeep });
    return out;
  }
  for (const [i, doc] of parseYaml(text).entries()) {
    const where = `${source} document ${i + 1}`;
    const problem = (field: string, reason: string) => out.problems.push({ document: where, field, reason });
    if (doc.errors.length > 0) {
      // The parser's own recursion gives out on a deep enough document: said as what it is.
      if (doc.errors.some((e) => e.message.startsWith('Maximum call stack size exceeded'))) problem('(syntax)', tooDeep);
      else problem('(syntax)', syntaxErrors(doc.errors.map((e) => e.message)));
      continue;
    }
    const shape = shapeProblem(doc);
    if (shape !== undefined) {
      problem('(syntax)', shape);
      continue;
    }
    let value: unknown;
    try {
      // yaml's own bound on aliases (100) throws past it: an alias bomb is this document's problem.
      value = doc.toJS();
    } catch (err) {
      problem('(syntax)', (err as Error).message);
      continue;
    }
    if (value === null || value === undefined) continue; // an empty document between separators
    // Aliases count now: one inside its own anchor (&a { kind: *a }) nests without end.
    if (nestsDeeperThan(value)) {
      problem('(syntax)', tooDeep);
      continue;
    }
    const kind = typeof value === 'object' && 'kind' in value ? (value as { kind: unknown }).kind : undefined;
    if (kind !== 'Network' && kind !== 'PodNetworkConfig' && kind !== 'PodNetworkPermission') {
      problem('kind', `kind must be Network, PodNetworkConfig or PodNetworkPermission, not ${JSON.stringify(kind)}`);
      continue;
    }
    // The problem names the file and document already: its reason is the violations alone.
    const violations = violationsOf(kind, value);
    if (violations === undefined) {
      out.documents.push(value as ApiDocument);
      continue;
    }
    problem(kind, violations);
    // A permission that cannot be read stands, allowing nothing (model/permissions.ts).
    const standIn = kind === 'PodNetworkPermission' ? allowingNothing(value) : undefined;
    if (standIn) out.documents.push(standIn);
  }
  return out;
}

/**
 * The yaml parser's documents, made without a stack trace for each of its errors: a text of
 * nothing but errors has one every byte or two, and their traces were most of its time.
 */
function parseYaml(text: string): Document.Parsed[] {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  try {
    const parsed = parseAllDocuments(text, { prettyErrors: false });
    return Array.isArray(parsed) ? parsed : [parsed];
  } finally {
    Error.stackTraceLimit = limit;
  }
}

function syntaxErrors(messages: string[]): string {
  const more = messages.length - maxSyntaxErrorsNamed;
  return messages.slice(0, maxSyntaxErrorsNamed).join('; ') + (more > 0 ? `; and ${more} more syntax errors` : '');
}

/**
 * What makes a parsed document unfit to turn into values, found without recursion before toJS
 * recurses: nesting past maxJsonDepth, or a key that is a mapping or list (or an alias), which
 * toJS turns into a string of the whole collection, re-indented at each level (400 nested
 * explicit keys, 800 bytes, took 17 s). A document's keys are names and numbers.
 */
function shapeProblem(doc: Document.Parsed): string | undefined {
  const stack: [unknown, number][] = [[doc.contents, 0]];
  while (stack.length > 0) {
    const [node, depth] = stack.pop()!;
    if (!isCollection(node)) continue;
    if (depth + 1 > maxJsonDepth) return tooDeep;
    for (const item of node.items) {
      if (isPair(item)) {
        if (item.key !== null && !isScalar(item.key)) {
          return `a mapping has a ${isAlias(item.key) ? 'alias' : isMap(item.key) ? 'mapping' : 'list'} as a key: keys are names and numbers`;
        }
        stack.push([item.value, depth + 1]);
      } else {
        stack.push([item, depth + 1]);
      }
    }
  }
  return undefined;
}

/**
 * Whether the flow collections of YAML `text` nest deeper than `max`, counted in one pass: a
 * bracket in a comment or a quoted scalar does not count. A quote opens a scalar only where a
 * value begins (not inside a plain scalar such as it's or b-"c), as in YAML.
 */
function flowNestingPast(text: string, max: number): boolean {
  let depth = 0;
  let valueMayBegin = true;
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === '#' && (i === 0 || /\s/.test(text[i - 1]!))) {
      while (i < text.length && text[i] !== '\n') i++;
      valueMayBegin = true;
    } else if ((c === '"' || c === "'") && valueMayBegin) {
      // To the closing quote: a backslash escapes in "..."; '' is a quote in '...'.
      for (i++; i < text.length; i++) {
        if (c === '"' && text[i] === '\\') i++;
        else if (text[i] === c && !(c === "'" && text[i + 1] === "'")) break;
        else if (c === "'" && text[i] === "'") i++;
      }
      valueMayBegin = false;
    } else if (c === '[' || c === '{') {
      if (++depth > max) return true;
      valueMayBegin = true;
    } else if (c === ']' || c === '}') {
      if (depth > 0) depth--;
      valueMayBegin = false;
    } else if (c === ',' || c === '\n') {
      valueMayBegin = true;
    } else if (c === ':' || c === '-' || c === '?') {
      // An indicator only before a space or a line's end: in a-"b or a:"b the quote is the plain scalar's.
      const next = text[i + 1];
      valueMayBegin = next === undefined || next === ' ' || next === '\t' || next === '\n' || next === '\r';
    } else if (c !== ' ' && c !== '\t' && c !== '\r') {
      valueMayBegin = false;
    }
  }
  return false;
}
