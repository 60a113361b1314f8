// JSON that entered from outside (a runtime's stdin, a socket body, an annotation, a file of the
// state or config dir), parsed only once its size and nesting are known to be within bounds. A
// value nested 20,000 deep parses, and then overflows the stack of whatever walks it next (the
// schema's validator, a copy, a stringify), far from where it came in and long after: a spool
// entry that did so blocked every entry behind it. The nesting is counted in one pass over the
// text, without recursion, before JSON.parse sees it.
import { PodnetError, type ErrorCode } from '../errors.ts';

/**
 * How deep any document podnet reads may nest. The deepest it writes or is given is a delegated
 * plugin's result inside a record (about 8); plugin configs nest as their authors wrote them.
 */
export const maxJsonDepth = 64;

export interface JsonBounds {
  /** Bytes of UTF-8 text at most. */
  maxBytes: number;
  /** Nesting of arrays and objects at most (maxJsonDepth by default). */
  maxDepth?: number;
}

/** The first nesting depth past `max` in JSON `text` (strings skipped, escapes honoured), or undefined when it stays within. */
export function nestingPast(text: string, max: number): number | undefined {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c) i++; // a backslash: the next character is escaped
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) return depth;
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return undefined;
}

/**
 * `text` parsed, or a PodnetError with `code` naming `what` and what was wrong: too many bytes,
 * nested too deep, or not JSON.
 */
export function parseBoundedJson(text: string, what: string, bounds: JsonBounds, code: ErrorCode = 'INVALID_REQUEST'): unknown {
  const maxDepth = bounds.maxDepth ?? maxJsonDepth;
  // UTF-16 units are at most the UTF-8 bytes: only a text near the bound pays for counting them.
  if (text.length > bounds.maxBytes || (text.length * 3 > bounds.maxBytes && Buffer.byteLength(text) > bounds.maxBytes)) {
    throw new PodnetError(code, `${what} is ${Buffer.byteLength(text)} bytes, more than the ${bounds.maxBytes} podnet reads`);
  }
  if (nestingPast(text, maxDepth) !== undefined) throw new PodnetError(code, `${what} nests arrays and objects more than ${maxDepth} deep`);
  try {
    return JSON.parse(text);
  } catch (err) {
    throw new PodnetError(code, `${what} is not JSON: ${(err as Error).message}`);
  }
}

/**
 * Whether a value already parsed (a YAML document, an object from the API server) nests deeper
 * than `max`: walked with a stack of its own, never by recursion.
 */
export function nestsDeeperThan(value: unknown, max = maxJsonDepth): boolean {
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (typeof item !== 'object' || item === null) continue;
    if (depth + 1 > max) return true;
    for (const child of Array.isArray(item) ? item : Object.values(item)) stack.push([child, depth + 1]);
  }
  return false;
}
