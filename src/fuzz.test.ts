// Every parser of input from outside, fuzzed (issue 17): CNI stdin, environment and CNI_ARGS, the
// networks annotation, YAML and JSON documents, socket bodies and paths, state files (spool
// entries, records, applied state, journals) and IPAM logs. Random and mutated inputs from a
// seeded PRNG, the same cases on every run, asserting that only podnet's own typed errors or the
// documented result come out, each call in bounded time and memory.
//
// Each target runs in a worker thread with a heap limit, watched from here: a call that runs past
// callLimitMs is stopped and reported with its input, as is one that runs the worker out of heap,
// instead of stalling or killing the suite. A finding names the case's seed; to run that case
// alone, PODNET_FUZZ_CASE=<target>:<seed>. PODNET_FUZZ_SEED=<n> draws other cases, and
// PODNET_FUZZ_SCALE=<k> k times as many (with TAP_TIMEOUT=0 past tap's 30 s when run by node).
//
// What the fuzzing found, once fixed, keeps a test of its own below ("found before: ..."), with the
// input that showed it, run whatever the seed.
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import { errorCodes, PodnetError } from './errors.ts';
import { parseCniArgs, podIdentityFromArgs } from './protocol/cni-args.ts';
import { runPlugin, type PluginContext } from './cni/plugin.ts';
import type { Recorder } from './cni/recorder.ts';
import { routeTable, type DaemonParts } from './daemon/routes.ts';
import { MemoryRegistry } from './testing/memory-registry.ts';
import { NodeIpam } from './ipam/ipam.ts';
import { networksAnnotation, parseNetworksAnnotation } from './model/annotation.ts';
import { nestingPast, nestsDeeperThan, parseBoundedJson } from './protocol/bounded-json.ts';
import { isDocument, parseDocument, type AttachmentRecord, type DiffResponse, type DocumentName, type IpRange, type SandboxList } from './protocol/validate.ts';
import { keyOf } from './registry/fold.ts';
import { parseStateDocument, stateDocumentText } from './registry/state-document.ts';
import { parseDocuments } from './sources/documents.ts';

/**
 * The watchdog: a call running longer is stopped as a hang. Far above what any case takes (the
 * slowest, 80 KB of unclosed flow mappings, well under a second), so a loaded machine never trips it.
 */
const callLimitMs = 5000;
/** Each target's worker heap: a parser that needs more for these inputs is a finding. */
const heapLimitMb = 512;
/** The most any message, problem or answer may hold: what comes out stays bounded however bad the input. */
const maxOutputChars = 1024 * 1024;
/** Arrays the generators make are mostly at most this wide, and now and then wideArrayRare. */
const wideArrayMax = 48;
/** A list of thousands of invalid items: ajv's allErrors took minutes on tens of thousands. */
const wideArrayRare = 5000;
const baseSeed = Number(process.env['PODNET_FUZZ_SEED'] ?? 0x70d4e7) >>> 0;
/** Cases per target are multiplied by this (PODNET_FUZZ_SCALE), for a longer search by hand. */
const scale = Math.max(1, Number(process.env['PODNET_FUZZ_SCALE'] ?? 1) || 1);

// ---- a seeded PRNG -----------------------------------------------------------------------------

/** mulberry32: 32 bits of state, good enough to draw inputs, the same sequence for the same seed. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let x = a;
    x = Math.imul(x ^ (x >>> 15), x | 1);
    x ^= x + Math.imul(x ^ (x >>> 7), x | 61);
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296;
  };
}

class Rng {
  readonly next: () => number;
  constructor(seed: number) {
    this.next = mulberry32(seed);
  }
  /** 0 to n - 1. */
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)] as T;
  }
  /** One of the makers, each as likely as its weight. */
  weighted<T>(choices: readonly (readonly [number, () => T])[]): T {
    let roll = this.next() * choices.reduce((sum, [w]) => sum + w, 0);
    for (const [w, make] of choices) {
      roll -= w;
      if (roll < 0) return make();
    }
    return choices[choices.length - 1]![1]();
  }
}

/** The seed of case `i` of `target`: FNV-1a over the base seed, the target and the index. */
function caseSeed(target: string, i: number): number {
  let h = 0x811c9dc5 ^ baseSeed;
  for (const c of `${target}#${i}`) h = Math.imul(h ^ c.charCodeAt(0), 0x01000193);
  return h >>> 0;
}

// ---- what inputs are made of -------------------------------------------------------------------

const chars = (s: string) => [...s];
const alphabets: readonly (readonly string[])[] = [
  chars(' !"#$%&\'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\]^_`abcdefghijklmnopqrstuvwxyz{|}~'),
  chars('abcdefghijklmnopqrstuvwxyz0123456789-.'),
  chars('[]{}"\\:,0123456789-+.eE truefalsn/u'),
  ['\u0000', '\u0001', '\u001f', '\t', '\n', '\r', '\u2028', '\u2029', '\ufeff', '\ud800', '\udfff', '\ud83d\ude00', 'é', '\u00ff', '\u0085', '\u200b', '%', '/', '.', ';', '=', '@', ',', ' ', 'ǅ', '\u0130'],
];

function randomString(rng: Rng, max = 40): string {
  const alphabet = rng.pick(alphabets);
  const length = rng.int(max + 1);
  let s = '';
  for (let i = 0; i < length; i++) s += rng.pick(alphabet);
  return s;
}

/** Strings that mean something to some parser: names, versions, paths, addresses, keywords. */
const words = [
  'eth0', 'net1', 'kindnet', 'blue', 'demo-blue', 'Network', 'PodNetworkConfig', 'add', 'del', 'gc', '0.3.0', '0.4.0', '1.0.0', '1.1.0', '9.9.9',
  '/var/run/netns/cni-5b3c', '/proc/1/ns/net', '/run/netns/../x', '198.18.5.7/24', '198.18.5.7', '2001:db8::1', '2001:db8::/64', '02:00:00:00:00:01',
  'podnetwork.opdev.io/v1alpha1', 'host', 'route', 'link-del', 'replace', 'bridge', 'In', '', ' ', '.', '..', '/', '-', 'a'.repeat(64), 'x'.repeat(254),
  '2026-03-01T12:00:00.000Z', 'true', 'null', '0', '-1', '1e999',
];
const numbers = [0, -0, 1, -1, 0.5, 1e308, -1e308, 5e-324, 2 ** 53, 2 ** 53 + 2, 4294967296, 65536, 60000, 60001, 255, 256, 1500, 9000, 65535, 100, 254];
/** Keys of podnet's documents, and keys an object lookup may trip on. */
const keys = [
  'cniVersion', 'name', 'type', 'prevResult', 'ips', 'interfaces', 'routes', 'dns', 'address', 'gateway', 'interface', 'version', 'containerId',
  'containerID', 'ifname', 'network', 'netns', 'pod', 'namespace', 'uid', 'createdAt', 'op', 'record', 'key', 'gc', 'validAttachments', 'documents',
  'kind', 'apiVersion', 'metadata', 'spec', 'undo', 'pass', 'where', 'action', 'dev', 'attachments', 'hold', 'addresses', 'release', 'lastHandedOut',
  'socketPath', 'stateDir', 'timeoutMs', 'cni.dev/valid-attachments', 'mac', 'mtu', '__proto__', 'constructor', 'prototype', 'toString',
  'hasOwnProperty', 'valueOf', 'length', '',
];
const cniVersions = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] as const;
const oddVersions = ['0.2.0', '0.1.0', '1.2.0', '9.9.9', '1.0', '01.0.0', '1.0.0 ', '', '1.1.0\n', '١.٠.٠', '0.4.0-rc1', '99999999999999999999.0.0', '1.1.0.0'];

/** An own, enumerable property, also for "__proto__", as JSON.parse makes it. */
function setKey(obj: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(obj, key, { value, enumerable: true, writable: true, configurable: true });
}

function randomJson(rng: Rng, depth = 0): unknown {
  switch (rng.int(depth >= 4 ? 6 : 9)) {
    case 0:
      return null;
    case 1:
      return rng.chance(0.5);
    case 2:
      return rng.pick(numbers);
    case 3:
      return (rng.next() - 0.5) * 10 ** rng.int(22);
    case 4:
      return randomString(rng, 24);
    case 5:
      return rng.pick(words);
    case 6:
    case 7:
      return Array.from({ length: rng.int(5) }, () => randomJson(rng, depth + 1));
    default: {
      const obj: Record<string, unknown> = {};
      for (let i = rng.int(5); i > 0; i--) setKey(obj, rng.chance(0.7) ? rng.pick(keys) : randomString(rng, 12), randomJson(rng, depth + 1));
      return obj;
    }
  }
}

/** A copy, own "__proto__" keys and all. */
const clone = <T>(value: T): T => JSON.parse(JSON.stringify(value)) as T;

/** `leaf` inside `depth` arrays and objects. */
function nest(rng: Rng, depth: number, leaf: unknown): unknown {
  let value = leaf;
  for (let i = 0; i < depth; i++) value = rng.chance(0.5) ? [value] : { a: value };
  return value;
}

/** `value` with one to three of its nodes changed: a type swapped, a key dropped or added, a huge string, deep nesting, a wide array. */
function mutateValue(rng: Rng, value: unknown): unknown {
  const box: Record<string, unknown> = { v: clone(value) };
  for (let round = 1 + rng.int(3); round > 0; round--) {
    // Every slot holding a node (parent, key), walked with a stack of its own.
    const slots: [Record<string, unknown> | unknown[], string | number][] = [[box, 'v']];
    for (let i = 0; i < slots.length && slots.length < 4000; i++) {
      const [parent, k] = slots[i]!;
      const node = (parent as Record<string | number, unknown>)[k];
      if (Array.isArray(node)) node.forEach((_, j) => slots.push([node, j]));
      else if (node && typeof node === 'object') for (const key of Object.keys(node)) slots.push([node as Record<string, unknown>, key]);
    }
    const [parent, k] = rng.pick(slots);
    const old = (parent as Record<string | number, unknown>)[k];
    const put = (v: unknown) => {
      if (Array.isArray(parent)) parent[k as number] = v;
      else setKey(parent, k as string, v);
    };
    switch (rng.int(11)) {
      case 0:
        put(randomJson(rng));
        break;
      case 1: // the same content, another type
        put(
          typeof old === 'string' ? (Number(old) || old.length)
          : typeof old === 'number' ? String(old)
          : Array.isArray(old) ? Object.fromEntries(old.map((v, i) => [String(i), v]))
          : old && typeof old === 'object' ? Object.values(old)
          : typeof old === 'boolean' ? String(old)
          : rng.pick([{}, [], '', 0]),
        );
        break;
      case 2:
        if (Array.isArray(parent)) parent.splice(k as number, 1);
        else if (parent !== box) delete (parent as Record<string, unknown>)[k as string];
        else put(undefined);
        break;
      case 3:
        if (old && typeof old === 'object' && !Array.isArray(old)) setKey(old as Record<string, unknown>, rng.pick(keys), randomJson(rng));
        else if (Array.isArray(old)) old.push(randomJson(rng));
        else put(randomJson(rng));
        break;
      case 4:
        put(rng.chance(0.5) ? 'a'.repeat(rng.pick([254, 300, 4097, 70_000])) : randomString(rng, 20).repeat(rng.pick([10, 1000])));
        break;
      case 5:
        put(nest(rng, rng.pick([1, 2, 8, 63, 64, 65, 300]), old));
        break;
      case 6:
        put(Array.from({ length: rng.int((rng.chance(0.02) ? wideArrayRare : wideArrayMax) + 1) }, () => (rng.chance(0.5) ? clone(old ?? null) : randomJson(rng, 3))));
        break;
      case 7:
        put(rng.pick(words));
        break;
      case 8:
        put(rng.pick([...cniVersions, ...oddVersions]));
        break;
      case 9:
        put(rng.pick(numbers));
        break;
      default:
        put(rng.pick([null, true, false, {}, [], '']));
    }
  }
  return box['v'];
}

const tokens = ['{', '}', '[', ']', '"', '\\', '\\u', '\\ud800', '\\"', ',', ':', 'null', '-', '1e999', '0x1F', 'NaN', '\u0000', '\n', '//', '/*', "'", '\ufeff', '-0', '.5', '01', '"\\u0000"', '{"__proto__":{}}', ' '];

/** `text` with one to four edits: a bit flipped, tokens in, a range out or doubled, a cut, deep brackets. */
function mutateText(rng: Rng, text: string, maxLength = 200_000): string {
  let s = text;
  for (let round = 1 + rng.int(4); round > 0; round--) {
    const at = rng.int(s.length + 1);
    const span = 1 + rng.int(24);
    switch (rng.int(10)) {
      case 0:
        if (s.length > 0) {
          const i = Math.min(at, s.length - 1);
          s = s.slice(0, i) + String.fromCharCode(s.charCodeAt(i) ^ (1 << rng.int(16))) + s.slice(i + 1);
        }
        break;
      case 1:
        s = s.slice(0, at) + randomString(rng, 12) + s.slice(at);
        break;
      case 2:
        s = s.slice(0, at) + rng.pick(tokens) + s.slice(at);
        break;
      case 3:
        s = s.slice(0, at) + s.slice(at + span);
        break;
      case 4:
        s = s.slice(0, at + span) + s.slice(at, at + span) + s.slice(at + span);
        break;
      case 5:
        s = s.slice(0, at);
        break;
      case 6: {
        const depth = rng.pick([1, 10, 64, 65, 1000]);
        s = s.slice(0, at) + (rng.chance(0.5) ? '['.repeat(depth) : '{"a":'.repeat(depth)) + s.slice(at);
        break;
      }
      case 7:
        s = s.replace(/-?\d+(\.\d+)?/, rng.pick(['1e999', '-0', '99999999999999999999', '0.0000001', '1.5', '"1"', 'true']));
        break;
      case 8: {
        const j = rng.int(s.length + 1);
        s = `${s.slice(Math.min(at, j), Math.max(at, j))}${s.slice(0, Math.min(at, j))}${s.slice(Math.max(at, j))}`;
        break;
      }
      default:
        s = s.slice(0, at) + s + s.slice(at);
    }
    if (s.length > maxLength) s = s.slice(0, maxLength);
  }
  return s;
}

/** One of `units` repeated up to `maxChars`: what finds a cost per item or per error. */
function repeated(rng: Rng, units: readonly string[], maxChars: number): string {
  const unit = rng.pick(units);
  return unit.repeat(1 + rng.int(Math.max(1, Math.floor(maxChars / unit.length))));
}

/** What a process may read as text: random bytes as UTF-8 (invalid sequences included) or Latin-1. */
function bytesText(rng: Rng): string {
  const bytes = Buffer.from(Array.from({ length: rng.int(300) }, () => rng.int(256)));
  return bytes.toString(rng.chance(0.7) ? 'utf8' : 'latin1');
}

/** Valid JSON nested `depth` deep, brackets and escapes inside its strings too. */
function deepJson(rng: Rng, depth: number): string {
  const open: string[] = [];
  for (let i = 0; i < depth; i++) open.push(rng.pick(['[', '{"k":', '{"[\\"{":', '[1,"]}",', '{"a\\\\":']));
  const close = open.map((o) => (o.startsWith('[') ? ']' : '}')).reverse();
  return `${open.join('')}${JSON.stringify(randomJson(rng, 4))}${close.join('')}`;
}

/** How deep a parsed JSON value nests (an empty array or object counts one), walked with a stack of its own. */
function depthOf(value: unknown): number {
  let deepest = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [item, depth] = stack.pop()!;
    if (typeof item !== 'object' || item === null) continue;
    deepest = Math.max(deepest, depth + 1);
    for (const child of Object.values(item)) stack.push([child, depth + 1]);
  }
  return deepest;
}

// ---- findings, timing, and the watchdog's view -------------------------------------------------

interface Finding {
  seed: number;
  call: string;
  input: string;
  problem: string;
}

interface Report {
  cases: number;
  calls: number;
  /** How the calls ended, by kind: that the cases reach past the first check. */
  outcomes: Record<string, number>;
  findings: Finding[];
  findingCount: number;
  slowest: { ms: number; seed: number; call: string };
  /** How long the cases took, all told. */
  ms?: number;
}

type Outcome<T> = { ok: true; value: T } | { ok: false; error: unknown };

const previewChars = 1200;

/** An input as a finding shows it: whole when short, its start and end when long, escaped. */
function preview(input: string): string {
  if (input.length <= 500) return JSON.stringify(input);
  return `${JSON.stringify(input.slice(0, 300))} ... ${JSON.stringify(input.slice(-100))} (${input.length} chars)`;
}

/** `text` on one line: control characters and line separators escaped, so that TAP reads it as one. */
function oneLine(text: string): string {
  return text.replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}

function describeError(err: unknown): string {
  if (!(err instanceof Error)) return `a thrown ${typeof err}: ${String(err).slice(0, 300)}`;
  const code = (err as { code?: unknown }).code;
  return `${err.constructor.name}${code === undefined ? '' : ` ${String(code)}`}: ${err.message.slice(0, 400)}${err.message.length > 400 ? `... (${err.message.length} chars)` : ''}`;
}

/** The memory the watchdog reads: when the call under way started (0: none), its seed, and what it is. */
class Shared {
  readonly started: Float64Array;
  readonly ints: Uint32Array;
  readonly text: Uint16Array;
  readonly buffer: SharedArrayBuffer;
  constructor(buffer: SharedArrayBuffer) {
    this.buffer = buffer;
    this.started = new Float64Array(buffer, 0, 1);
    this.ints = new Uint32Array(buffer, 8, 2);
    this.text = new Uint16Array(buffer, 16, previewChars);
  }
  static create(): Shared {
    return new Shared(new SharedArrayBuffer(16 + 2 * previewChars));
  }
  write(seed: number, description: string): void {
    const n = Math.min(description.length, previewChars);
    for (let i = 0; i < n; i++) this.text[i] = description.charCodeAt(i);
    this.ints[0] = seed;
    this.ints[1] = n;
  }
  read(): { seed: number; description: string } {
    return { seed: this.ints[0]!, description: String.fromCharCode(...this.text.subarray(0, this.ints[1]!)) };
  }
}

/** Runs the calls of a target's cases, timing each and keeping what went wrong. */
class Probe {
  readonly findings: Finding[] = [];
  findingCount = 0;
  calls = 0;
  cases = 0;
  slowest = { ms: 0, seed: 0, call: '' };
  readonly outcomes: Record<string, number> = {};
  private seed = 0;
  private input = '';
  private readonly shared: Shared;

  constructor(shared: Shared) {
    this.shared = shared;
  }

  /** A new case: its seed and its input, as a finding will show them. */
  begin(seed: number, input: string): void {
    this.seed = seed;
    this.input = preview(input);
    this.cases++;
  }

  run<T>(call: string, fn: () => T): Outcome<T> {
    const t0 = this.start(call);
    try {
      const value = fn();
      this.tally(call, 'ok');
      return { ok: true, value };
    } catch (error) {
      this.tally(call, error);
      return { ok: false, error };
    } finally {
      this.finish(call, t0);
    }
  }

  async runAsync<T>(call: string, fn: () => Promise<T>): Promise<Outcome<T>> {
    const t0 = this.start(call);
    try {
      const value = await fn();
      this.tally(call, 'ok');
      return { ok: true, value };
    } catch (error) {
      this.tally(call, error);
      return { ok: false, error };
    } finally {
      this.finish(call, t0);
    }
  }

  /** Counts how a call ended: "ok" or another word, or an error's class or code. */
  tally(call: string, outcome: unknown): void {
    const kind =
      outcome instanceof PodnetError ? outcome.code
      : outcome instanceof Error ? outcome.constructor.name
      : String(outcome);
    const key = `${call.split(/[ (]/)[0]} ${kind}`;
    this.outcomes[key] = (this.outcomes[key] ?? 0) + 1;
  }

  /** A finding unless `holds`; `problem` is worded only then. */
  expect(holds: boolean, call: string, problem: () => string): void {
    if (holds) return;
    this.findingCount++;
    if (this.findings.length < 25) this.findings.push({ seed: this.seed, call, input: this.input, problem: problem() });
  }

  /** A finding unless what came out is a string of bounded length. */
  bounded(text: unknown, call: string, what: string): void {
    this.expect(typeof text === 'string' && text.length <= maxOutputChars, call, () =>
      typeof text === 'string' ? `${what} is ${text.length} chars, more than ${maxOutputChars}` : `${what} is a ${typeof text}, not a string`,
    );
  }

  report(): Report {
    return { cases: this.cases, calls: this.calls, outcomes: this.outcomes, findings: this.findings, findingCount: this.findingCount, slowest: this.slowest };
  }

  private start(call: string): number {
    this.calls++;
    this.shared.write(this.seed, `${call} <- ${this.input}`);
    this.shared.started[0] = Date.now();
    return performance.now();
  }

  private finish(call: string, t0: number): void {
    this.shared.started[0] = 0;
    const ms = performance.now() - t0;
    if (ms > this.slowest.ms) this.slowest = { ms, seed: this.seed, call };
    this.expect(ms <= callLimitMs, call, () => `took ${ms.toFixed(0)} ms, more than ${callLimitMs}`);
  }
}

/** What an error thrown by podnet must be: a PodnetError with a known code, one of `codes` when given. */
function ownError(probe: Probe, call: string, err: unknown, codes?: readonly string[]): err is PodnetError {
  const own = err instanceof PodnetError && Object.hasOwn(errorCodes, err.code);
  probe.expect(own && (codes === undefined || codes.includes(err.code)), call, () =>
    own ? `threw ${describeError(err)}, not one of ${codes?.join(', ')}` : `threw ${describeError(err)}, not a PodnetError`,
  );
  if (own) probe.bounded(err.message, call, 'the message');
  return own;
}

// ---- the targets -------------------------------------------------------------------------------

interface Target {
  cases: number;
  /** One case; `probe.begin` first. */
  run(probe: Probe, rng: Rng, seed: number, dir: string): void | Promise<void>;
}

// -- bounded JSON: parseBoundedJson, nestingPast, nestsDeeperThan

function jsonInput(rng: Rng): string {
  return rng.weighted<string>([
    [3, () => JSON.stringify(randomJson(rng), null, rng.pick([0, 0, 2, '\t']))],
    [3, () => mutateText(rng, JSON.stringify(randomJson(rng)))],
    [2, () => Array.from({ length: rng.int(120) }, () => rng.pick(tokens)).join('')],
    [2, () => deepJson(rng, rng.pick([0, 1, 2, 10, 62, 63, 64, 65, 66, 200, rng.int(100)]))],
    [1, () => mutateText(rng, deepJson(rng, rng.pick([63, 64, 65, 2000])))],
    [1, () => (rng.chance(0.5) ? '[' : '{"a":').repeat(rng.pick([65, 100_000]))],
    [1, () => repeated(rng, ['[1,', '{"a":[', '"\\"', '\\', '"', '[]', '{}', '[', ']'], 64 * 1024)],
    [1, () => bytesText(rng)],
    [1, () => randomString(rng, 100)],
  ]);
}

const boundedJson: Target = {
  cases: 1500,
  run(probe, rng, seed) {
    const text = jsonInput(rng);
    probe.begin(seed, text);
    let parsed: unknown;
    let parses = false;
    try {
      parsed = JSON.parse(text);
      parses = true;
    } catch {
      // not JSON: nestingPast must still end, with no reference to compare to
    }
    const depth = parses ? depthOf(parsed) : undefined;

    const maxes = new Set([0, 1, 64, rng.int(80), ...(depth === undefined ? [] : [depth - 1, depth, depth + 1].filter((m) => m >= 0))]);
    for (const max of maxes) {
      const got = probe.run('nestingPast', () => nestingPast(text, max));
      if (!got.ok) {
        probe.expect(false, 'nestingPast', () => `max ${max}: threw ${describeError(got.error)}`);
        continue;
      }
      probe.expect(got.value === undefined || got.value === max + 1, 'nestingPast', () => `max ${max}: answered ${got.value}, not ${max + 1} or undefined`);
      if (depth !== undefined) {
        const want = depth > max ? max + 1 : undefined;
        probe.expect(got.value === want, 'nestingPast', () => `max ${max}: answered ${got.value}; JSON.parse reads depth ${depth}, so ${want}`);
      }
    }
    if (parses && depth !== undefined) {
      for (const max of [0, depth - 1, depth, 64]) {
        if (max < 0) continue;
        const got = probe.run('nestsDeeperThan', () => nestsDeeperThan(parsed, max));
        probe.expect(got.ok && got.value === depth > max, 'nestsDeeperThan', () => `max ${max}: ${got.ok ? got.value : describeError(got.error)}; the depth is ${depth}`);
      }
    }

    const what = rng.pick(['request body', 'the line', 'record 1-1-a@eth0.json', 'fuzz (input) [*] $1 \\d+']);
    const code = rng.pick(['INVALID_REQUEST', 'IO_FAILURE', 'DECODE_FAILURE'] as const);
    const bytes = Buffer.byteLength(text);
    const maxBytes = Math.max(0, rng.pick([bytes - 1, bytes, bytes + 1, 1024 * 1024, rng.int(bytes + 2)]));
    const maxDepth = rng.pick([undefined, 0, 1, 2, 63, 64, 65, rng.int(100)]);
    const out = probe.run('parseBoundedJson', () => parseBoundedJson(text, what, { maxBytes, ...(maxDepth === undefined ? {} : { maxDepth }) }, code));
    const depthBound = maxDepth ?? 64;
    const wanted =
      bytes > maxBytes ? `${what} is ${bytes} bytes, more than the ${maxBytes} podnet reads`
      : depth !== undefined ? (depth > depthBound ? `${what} nests arrays and objects more than ${depthBound} deep` : undefined)
      : nestingPast(text, depthBound) !== undefined ? `${what} nests arrays and objects more than ${depthBound} deep`
      : `${what} is not JSON: `;
    const call = `parseBoundedJson(maxBytes ${maxBytes}, maxDepth ${maxDepth}, ${code})`;
    if (out.ok) {
      probe.expect(wanted === undefined, call, () => `returned a value; wanted the error "${wanted}"`);
      if (wanted === undefined && depth !== undefined && depth <= 500) probe.expect(isDeepStrictEqual(out.value, parsed), call, () => 'returned a value other than JSON.parse does');
    } else if (ownError(probe, call, out.error, [code])) {
      const message = out.error.message;
      probe.expect(wanted !== undefined && (wanted.endsWith(': ') ? message.startsWith(wanted) : message === wanted), call, () => `threw "${message.slice(0, 200)}"; wanted ${wanted === undefined ? 'the value' : `"${wanted}"`}`);
    }
  },
};

// -- the CNI plugin: runPlugin on mutated configurations and environments

const netnsPath = '/var/run/netns/cni-5b3c';
const nodeNetns = '/proc/1/ns/net';
const containerId = '5b3c9a0e1f2d';
const kubeletArgs = 'IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=5b3c9a0e1f2d;K8S_POD_UID=7c1e-44aa';
const argKeys = ['K8S_POD_NAMESPACE', 'K8S_POD_NAME', 'K8S_POD_UID', 'K8S_POD_INFRA_CONTAINER_ID', 'IgnoreUnknown', 'K8S_POD_', 'k8s_pod_name', ''];

function prevResult(v: string): Record<string, unknown> {
  const family = v.startsWith('0.');
  return {
    cniVersion: v,
    interfaces: [{ name: 'cni0', mac: '0a:58:0a:f4:00:01' }, { name: 'eth0', mac: '0a:58:0a:f4:00:05', sandbox: netnsPath }],
    ips: [
      { ...(family ? { version: '4' } : {}), address: '10.244.0.5/24', gateway: '10.244.0.1', interface: 1 },
      { ...(family ? { version: '6' } : {}), address: 'fd00::5/64', interface: 1 },
    ],
    routes: [{ dst: '0.0.0.0/0' }],
    dns: {},
  };
}

function pluginConfig(rng: Rng, command: string | undefined): Record<string, unknown> {
  const v = rng.pick(cniVersions);
  const config: Record<string, unknown> = { cniVersion: v, name: rng.pick(['kindnet', 'podman', 'k8s-pod-network']), type: 'podnet' };
  if (command !== 'GC' ? rng.chance(0.85) : rng.chance(0.2)) config['prevResult'] = prevResult(rng.chance(0.8) ? v : rng.pick(cniVersions));
  if (rng.chance(0.2)) config['socketPath'] = '/run/podnet/podnet.sock';
  if (rng.chance(0.2)) config['stateDir'] = '/var/lib/podnet';
  if (rng.chance(0.2)) config['timeoutMs'] = rng.pick([1, 1000, 60000]);
  if (command === 'GC' || rng.chance(0.1)) {
    config['cni.dev/valid-attachments'] = Array.from({ length: rng.int(4) }, () => ({ containerID: rng.chance(0.8) ? containerId : randomString(rng, 20), ifname: rng.pick(['eth0', 'net1', '', 'a/b']) }));
  }
  if (rng.chance(0.2)) config['runtimeConfig'] = { portMappings: [] };
  return config;
}

function cniArgs(rng: Rng): string | undefined {
  return rng.weighted<string | undefined>([
    [3, () => kubeletArgs],
    [3, () => mutateText(rng, kubeletArgs)],
    [4, () =>
      Array.from({ length: rng.int(8) }, () => {
        const value = rng.weighted<string>([
          [3, () => rng.pick(['shop', 'web-0', '7c1e-44aa', containerId, 'Web_0.a', '', '-bad', 'a'.repeat(64), 'a'.repeat(254)])],
          [3, () => randomString(rng, 30)],
          [1, () => `${randomString(rng, 5)}=${randomString(rng, 5)}`],
        ]);
        return rng.chance(0.9) ? `${rng.chance(0.8) ? rng.pick(argKeys) : randomString(rng, 10)}=${value}` : value;
      }).join(rng.pick([';', ';', ';;', '; '])),
    ],
    [1, () => undefined],
    [1, () => ''],
    [1, () => randomString(rng, 200)],
    [1, () => Array.from({ length: 2000 }, (_, i) => `K${i}=${i}`).join(';')],
  ]);
}

function cniEnv(rng: Rng): Record<string, string | undefined> {
  const command = rng.weighted<string | undefined>([
    [9, () => rng.pick(['ADD', 'ADD', 'ADD', 'DEL', 'CHECK', 'STATUS', 'GC', 'VERSION'])],
    [1, () => rng.pick([undefined, '', 'add', 'ADD ', 'FOO', randomString(rng, 10)])],
  ]);
  return {
    CNI_COMMAND: command,
    CNI_CONTAINERID: rng.weighted<string | undefined>([[8, () => containerId], [2, () => rng.pick([undefined, '', '-x', 'a'.repeat(129), '../x', randomString(rng, 30)])]]),
    CNI_NETNS: rng.weighted<string | undefined>([[8, () => netnsPath], [2, () => rng.pick([undefined, '', nodeNetns, '/var/run/netns/../x', 'relative', `/${randomString(rng, 30)}`])]]),
    CNI_IFNAME: rng.weighted<string | undefined>([[8, () => 'eth0'], [2, () => rng.pick([undefined, '', '.', '..', 'a/b', 'eth0:1', 'a-very-long-interface', randomString(rng, 20)])]]),
    CNI_ARGS: cniArgs(rng),
    CNI_PATH: '/opt/cni/bin',
  };
}

const cniPlugin: Target = {
  cases: 3000,
  async run(probe, rng, seed) {
    const env = cniEnv(rng);
    const config = pluginConfig(rng, env['CNI_COMMAND']);
    const stdin = rng.weighted<string>([
      [1, () => JSON.stringify(config)],
      [5, () => JSON.stringify(mutateValue(rng, config)) ?? ''],
      [3, () => mutateText(rng, JSON.stringify(config), 1_100_000)],
      [1, () => JSON.stringify({ ...config, prevResult: randomJson(rng) })],
      [1, () => JSON.stringify({ ...config, cniVersion: rng.pick(oddVersions) })],
      [1, () => rng.pick(['', 'null', '[]', '"x"', '1', '{}', bytesText(rng), `{"padding":"${'a'.repeat(1024 * 1024)}"}`])],
    ]);
    probe.begin(seed, `env ${JSON.stringify(env)} stdin ${stdin}`);
    const failure = rng.chance(0.15) ? new PodnetError(rng.pick(['IO_FAILURE', 'TRY_AGAIN_LATER', 'NOT_AVAILABLE', 'PLUGIN_FAILED'] as const), 'the daemon said no') : undefined;
    const known = rng.chance(0.5);
    const recorder: Recorder = {
      add: async () => {
        if (failure) throw failure;
      },
      del: async () => {
        if (failure) throw failure;
      },
      gc: async () => {
        if (failure) throw failure;
      },
      find: async (key) =>
        known
          ? { ...key, network: 'kindnet', netns: rng.chance(0.8) ? netnsPath : '/var/run/netns/other', cniVersion: '1.1.0', pod: {}, createdAt: '2026-03-01T12:00:00.000Z' }
          : undefined,
      ready: async () => {
        if (failure) throw failure;
      },
      delegatedGone: async () => undefined,
      firstPass: async () => (rng.chance(0.5) ? { outcome: rng.pick(['applied', 'nothing-asked', 'failed', 'pending', 'unknown-pod'] as const) } : undefined),
    };
    const ctx: PluginContext = {
      env,
      stdin,
      openRecorder: () => recorder,
      isNetworkNamespace: (path) => path === netnsPath || path === nodeNetns,
      isNodeNetworkNamespace: (path) => path === nodeNetns,
      netnsIdentity: () => undefined,
      now: () => new Date('2026-03-01T12:00:00.000Z'),
    };
    const command = env['CNI_COMMAND'];
    const call = `runPlugin ${command}`;
    const out = await probe.runAsync(call, () => runPlugin(ctx));
    if (!out.ok) {
      probe.expect(false, call, () => `rejected with ${describeError(out.error)}: a plugin must answer, never throw`);
      return;
    }
    const { stdout, exitCode } = out.value;
    probe.tally(['ADD', 'DEL', 'CHECK', 'STATUS', 'GC', 'VERSION'].includes(command ?? '') ? `${command}` : 'another-command', exitCode === 0 ? 'ok' : `cni-${String(/"code":(\d+)/.exec(stdout)?.[1])}`);
    probe.expect(exitCode === 0 || exitCode === 1, call, () => `exit code ${exitCode}`);
    probe.expect(stdout.length <= stdin.length + maxOutputChars, call, () => `stdout is ${stdout.length} chars for ${stdin.length} of stdin`);
    if (stdout === '') {
      probe.expect(exitCode === 0 && ['DEL', 'CHECK', 'STATUS', 'GC'].includes(command ?? ''), call, () => `nothing on stdout, exit ${exitCode}`);
      return;
    }
    probe.expect(stdout.endsWith('\n') && stdout.indexOf('\n') === stdout.length - 1, call, () => `stdout is not one line: ${preview(stdout)}`);
    let answer: unknown;
    try {
      answer = JSON.parse(stdout);
    } catch {
      probe.expect(false, call, () => `stdout is not JSON: ${preview(stdout)}`);
      return;
    }
    if (typeof answer !== 'object' || answer === null || Array.isArray(answer)) {
      probe.expect(false, call, () => `stdout is not a JSON object: ${preview(stdout)}`);
      return;
    }
    const body = answer as Record<string, unknown>;
    if (exitCode === 1) {
      const cniCodes = new Set<number>(Object.values(errorCodes).map((c) => c.cni));
      probe.expect(
        Object.keys(body).every((k) => ['cniVersion', 'code', 'msg', 'details'].includes(k)) &&
          typeof body['cniVersion'] === 'string' && /^\d+\.\d+\.\d+$/.test(body['cniVersion']) &&
          typeof body['code'] === 'number' && cniCodes.has(body['code']) &&
          typeof body['msg'] === 'string' &&
          (body['details'] === undefined || typeof body['details'] === 'string'),
        call,
        () => `not the spec's error object: ${preview(stdout)}`,
      );
      probe.expect(body['code'] !== errorCodes.INTERNAL.cni, call, () => `an error that is not podnet's came out as INTERNAL: ${preview(String(body['msg']))}`);
      probe.bounded(body['msg'], call, 'msg');
    } else if (command === 'VERSION') {
      probe.expect(typeof body['cniVersion'] === 'string' && Array.isArray(body['supportedVersions']), call, () => `not a version answer: ${preview(stdout)}`);
    } else {
      probe.expect(command === 'ADD', call, () => `${command} succeeded with output ${preview(stdout)}`);
      const declared = (JSON.parse(stdin) as { cniVersion?: unknown }).cniVersion;
      probe.expect(body['cniVersion'] === declared, call, () => `ADD answered in ${String(body['cniVersion'])}, the configuration has ${String(declared)}`);
    }
  },
};

// -- CNI_ARGS: parseCniArgs and podIdentityFromArgs

const cniArgsTarget: Target = {
  cases: 3000,
  run(probe, rng, seed) {
    const raw = cniArgs(rng);
    probe.begin(seed, String(raw));
    const args = probe.run('parseCniArgs', () => parseCniArgs(raw));
    if (!args.ok) {
      probe.expect(false, 'parseCniArgs', () => `threw ${describeError(args.error)}`);
      return;
    }
    // The reference: a regular expression over the text, not a split.
    const reference = new Map<string, string>();
    for (const m of (raw ?? '').matchAll(/(?<=^|;)([^;=]+)=([^;]*)/g)) reference.set(m[1]!, m[2]!);
    probe.expect(args.value instanceof Map && isDeepStrictEqual(args.value, reference), 'parseCniArgs', () =>
      `read ${JSON.stringify([...args.value])}, the reference ${JSON.stringify([...reference])}`.slice(0, 1000),
    );
    const identity = probe.run('podIdentityFromArgs', () => podIdentityFromArgs(args.value));
    if (!identity.ok) {
      probe.expect(false, 'podIdentityFromArgs', () => `threw ${describeError(identity.error)}`);
      return;
    }
    const fields = { namespace: 'K8S_POD_NAMESPACE', name: 'K8S_POD_NAME', uid: 'K8S_POD_UID', infraContainerId: 'K8S_POD_INFRA_CONTAINER_ID' } as const;
    const want: Record<string, string> = {};
    for (const [field, key] of Object.entries(fields)) {
      const value = args.value.get(key);
      if (value && isDocument('PodIdentity', { [field]: value })) want[field] = value;
    }
    probe.expect(isDeepStrictEqual({ ...identity.value }, want), 'podIdentityFromArgs', () => `gave ${JSON.stringify(identity.value)}, wanted ${JSON.stringify(want)}`);
    probe.expect(isDocument('PodIdentity', identity.value), 'podIdentityFromArgs', () => `gave an identity its schema refuses: ${JSON.stringify(identity.value)}`);
  },
};

// -- the networks annotation

function selection(rng: Rng): Record<string, unknown> {
  const s: Record<string, unknown> = { name: rng.pick(['blue', 'red', 'demo-blue', 'Blue', '', 'a.b', 'x'.repeat(254), randomString(rng, 10)]) };
  if (rng.chance(0.5)) s['interface'] = rng.pick(['net1', 'net9', 'eth0', '', '.', 'a-very-long-interface-name', 'a/b', randomString(rng, 16)]);
  if (rng.chance(0.3)) s['ips'] = Array.from({ length: rng.int(3) }, () => rng.pick(['198.18.5.7/24', '2001:db8::5/64', '198.18.5.7', '300.1.1.1/24', '']));
  if (rng.chance(0.3)) s['mac'] = rng.pick(['02:00:00:00:00:01', '01:00:00:00:00:01', '02:00:00:00:00', 'zz']);
  if (rng.chance(0.1)) s['namespace'] = 'other';
  return s;
}

function shortForm(rng: Rng): string {
  return Array.from({ length: rng.int(6) }, () => {
    const name = rng.pick(['blue', 'red', 'Blue', '', 'ns/blue', ' blue ', randomString(rng, 12)]);
    return rng.chance(0.4) ? `${name}@${rng.pick(['net1', '', 'a-very-long-interface-name', '@', randomString(rng, 8)])}` : name;
  }).join(rng.pick([',', ', ', ' ,', ',,', '\n,']));
}

const annotation: Target = {
  cases: 2000,
  run(probe, rng, seed) {
    const list = () => Array.from({ length: rng.int(5) }, () => selection(rng));
    const text = rng.weighted<string>([
      [3, () => JSON.stringify(list())],
      [3, () => JSON.stringify(mutateValue(rng, list())) ?? ''],
      [2, () => mutateText(rng, JSON.stringify(list()))],
      [3, () => shortForm(rng)],
      [1, () => mutateText(rng, shortForm(rng))],
      [1, () => randomString(rng, 60)],
      [1, () => `${rng.pick([' ', '\n', '\t', ''])}${rng.pick(['[', '{'])}${randomString(rng, 30)}`],
      [1, () => '['.repeat(rng.pick([64, 65, 100_000]))],
      [1, () => (rng.chance(0.5) ? `[${repeated(rng, ['1,', '{},', '{"name":"blue"},', 'null,'], 64 * 1024)}1]` : repeated(rng, [',', 'blue,', 'ns/x,', '@,', ' ,'], 64 * 1024))],
      [1, () => rng.pick(['blue,'.repeat(60_000), 'ns/x'.repeat(70_000), JSON.stringify(Array.from({ length: 17 }, () => ({ name: 'blue' }))), ' '.repeat(300_000)])],
    ]);
    probe.begin(seed, text);
    const read = probe.run('parseNetworksAnnotation', () => parseNetworksAnnotation(text));
    if (!read.ok) {
      probe.expect(false, 'parseNetworksAnnotation', () => `threw ${describeError(read.error)}; it answers {selections} or {problem}`);
      return;
    }
    const keysOut = Object.keys(read.value);
    if ('selections' in read.value) {
      probe.expect(keysOut.length === 1 && isDocument('NetworkSelectionList', read.value.selections), 'parseNetworksAnnotation', () => `selections its schema refuses: ${JSON.stringify(read.value).slice(0, 300)}`);
    } else {
      const problem: unknown = read.value.problem;
      probe.expect(keysOut.length === 1 && typeof problem === 'string', 'parseNetworksAnnotation', () => `neither {selections} nor {problem}: ${JSON.stringify(read.value).slice(0, 300)}`);
      probe.bounded(problem, 'parseNetworksAnnotation', 'the problem');
      probe.expect(String(problem).includes(networksAnnotation), 'parseNetworksAnnotation', () => `the problem does not name the annotation: ${String(problem).slice(0, 300)}`);
    }
  },
};

// -- YAML and JSON documents

const networkYaml = `# The admin's part
apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: demo-blue }
spec:
  type: bridge
  bridge: { name: pnbr-demo, gateway: true }
  mtu: 1450
  ipam: { ranges: [{ subnet: 198.18.201.0/24 }, { subnet: "2001:db8:201::/64" }] }
  namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: default } }
`;
const podConfigYaml = `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: demo, namespace: default }
spec:
  podSelector:
    matchExpressions: [{ key: podnetwork.opdev.io/pod-name, operator: In, values: [pod-a, pod-b] }]
  attachments:
    - network: demo-blue
      interface: net1
      bandwidth: { ingressRate: 10000000, ingressBurst: 1000000, egressRate: 10000000, egressBurst: 1000000 }
  interfaces: [{ name: eth0, mtu: 1400 }]
  routes: [{ to: 198.18.202.0/24, via: 198.18.201.1, table: 100 }]
  rules: [{ priority: 100, from: 198.18.201.0/24, table: 100 }]
`;
const yamlScalars = [
  'plain', 'demo-blue', 'Network', 'PodNetworkConfig', '"double \\"quoted\\" \\u00e9 \\x00 \\N"', "'single ''quoted'''", '0x1F', '0o17', '1e3', '.inf', '-.Inf',
  '.NaN', '~', 'null', 'yes', 'on', 'No', '2001-12-14t21:59:43.10-05:00', '!!binary aGVsbG8=', '!!binary "%%%"', '!!str 123', '!!int "12"', '!!float x',
  '!!timestamp 2001-13-45', '!custom x', '!<tag:yaml.org,2002:str> x', '!!null ""', '"\\ud800"', '123456789012345678901234567890', '=', '<<', '? x', '- x',
];
const yamlTokens = ['\t', '&a ', '*a', '*b', '!!binary ', '!!set ', '!!omap ', '!!map ', '!!seq ', '---\n', '...\n', '%YAML 1.1\n', '%YAML 1.2\n', '%TAG ! tag:x,2000:\n', '<<: ', '? ', '- ', ': ', '{', '[', '}', ']', '#', '|', '>-', '|2+', '\ufeff', '"', "'", '\n  ', ',', '&', '*', '!'];

/** A random YAML node at `indent`, block or flow, with anchors, aliases, tags and merge keys. */
function yamlNode(rng: Rng, depth: number, indent: number, anchors: string[]): string {
  const pad = ' '.repeat(indent);
  const decorate = (node: string) => {
    let prefix = '';
    if (rng.chance(0.15)) {
      const name = rng.pick(['a', 'b', 'c', 'x1']);
      anchors.push(name);
      prefix += `&${name} `;
    }
    if (rng.chance(0.1)) prefix += `${rng.pick(['!!map', '!!seq', '!!set', '!!omap', '!!pairs', '!!str', '!!binary', '!foo', '!'])} `;
    return prefix + node;
  };
  if (anchors.length > 0 && rng.chance(0.1)) return `*${rng.pick(anchors)}`;
  const kind = depth >= 4 ? rng.int(2) : rng.int(6);
  switch (kind) {
    case 0:
      return decorate(rng.pick(yamlScalars));
    case 1:
      return decorate(rng.chance(0.5) ? rng.pick(words) || '""' : JSON.stringify(randomString(rng, 10)));
    case 2: {
      const items = Array.from({ length: 1 + rng.int(3) }, () => `${rng.pick(keys) || 'k'}: ${yamlNode(rng, depth + 1, 0, anchors).replace(/\n/g, ' ')}`);
      return decorate(`{ ${items.join(', ')} }`);
    }
    case 3:
      return decorate(`[${Array.from({ length: rng.int(4) }, () => yamlNode(rng, depth + 1, 0, anchors).replace(/\n/g, ' ')).join(', ')}]`);
    case 4: {
      const lines = Array.from({ length: 1 + rng.int(4) }, () => {
        const key = rng.chance(0.1) && anchors.length > 0 ? '<<' : rng.pick(keys) || 'k';
        const value = key === '<<' ? `*${rng.pick(anchors)}` : yamlNode(rng, depth + 1, indent + 2, anchors);
        return value.includes('\n') ? `${pad}${key}:\n${value}` : `${pad}${key}: ${value}`;
      });
      return lines.join('\n');
    }
    default: {
      const lines = Array.from({ length: 1 + rng.int(4) }, () => {
        const value = yamlNode(rng, depth + 1, indent + 2, anchors);
        return value.includes('\n') ? `${pad}-\n${value}` : `${pad}- ${value}`;
      });
      return lines.join('\n');
    }
  }
}

function yamlStream(rng: Rng): string {
  return Array.from({ length: 1 + rng.int(3) }, () => {
    const directive = rng.chance(0.2) ? `${rng.pick(['%YAML 1.1', '%YAML 1.2', '%YAML 2.0', '%TAG !e! tag:e,2000:', '%FOO bar'])}\n---\n` : rng.chance(0.5) ? '---\n' : '';
    const body = rng.weighted<string>([
      [4, () => yamlNode(rng, 0, 0, [])],
      [2, () => `kind: ${rng.pick(['Network', 'PodNetworkConfig', 'Pod', '!!binary TmV0d29yaw==', '[Network]', '*a'])}\n${yamlNode(rng, 1, 0, [])}`],
      [1, () => `a: &a [${'x,'.repeat(9)}x]\nb: &b [${'*a,'.repeat(9)}*a]\nc: &c [${'*b,'.repeat(9)}*b]\nkind: *c\n`],
      [1, () => `&a { kind: ${rng.pick(['*a', 'Network', '[*a]'])} }`],
      [1, () => `${'['.repeat(rng.pick([64, 65, 200, 1500]))}x`],
      [1, () => `kind: ${rng.pick(['|', '>', '|-', '>+2'])}\n${rng.pick(['  Network', '\tNetwork', ' Network\n  x', ''])}\n`],
    ]);
    return `${directive}${body}\n${rng.chance(0.2) ? '...\n' : ''}`;
  }).join('');
}

const documents: Target = {
  cases: 1000,
  run(probe, rng, seed) {
    const base = () => rng.pick([networkYaml, podConfigYaml, `${networkYaml}---\n${podConfigYaml}`]);
    const text = rng.weighted<string>([
      [3, () => yamlStream(rng)],
      [3, () => mutateText(rng, base(), 50_000)],
      [2, () => {
        let s = base();
        for (let i = 1 + rng.int(4); i > 0; i--) {
          const at = rng.int(s.length + 1);
          s = s.slice(0, at) + rng.pick(yamlTokens) + s.slice(at);
        }
        return s;
      }],
      [1, () => JSON.stringify(mutateValue(rng, { apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'Network', metadata: { name: 'n' }, spec: { type: 'bridge' } })) ?? ''],
      [1, () => Array.from({ length: rng.int(200) }, () => rng.pick(yamlTokens)).join('')],
      [1, () => repeated(rng, [']\n', '{]', '- ', '- - ', '? ', '? - ', '&a ', '*a\n', '"\n', 'a: b: c\n', '\tx\n', '!!binary\n', 'a:\n ', '#"\n[', '[{'], 2048)],
      [1, () => bytesText(rng)],
    ]);
    const source = rng.pick(['network.yaml', '/etc/podnet/config.d/a b.yml', 'stdin', 'dir/x (1).json']);
    probe.begin(seed, text);
    const parsed = probe.run('parseDocuments', () => parseDocuments(text, source));
    if (!parsed.ok) {
      probe.expect(false, 'parseDocuments', () => `threw ${describeError(parsed.error)}`);
      return;
    }
    const { documents: docs, problems } = parsed.value;
    probe.expect(Array.isArray(docs) && Array.isArray(problems), 'parseDocuments', () => 'not {documents, problems}');
    for (const doc of docs) {
      probe.expect((doc.kind === 'Network' || doc.kind === 'PodNetworkConfig') && isDocument(doc.kind, doc), 'parseDocuments', () => `a document its schema refuses: ${JSON.stringify(doc).slice(0, 300)}`);
    }
    for (const p of problems) {
      probe.expect(
        typeof p.document === 'string' &&
          // A document by number, or the whole source when it is refused before it is split (nested past the bound).
          ((p.document.startsWith(`${source} document `) && /^[1-9]\d*$/.test(p.document.slice(source.length + 10))) || (p.document === source && p.field === '(syntax)')) &&
          typeof p.field === 'string' &&
          typeof p.reason === 'string',
        'parseDocuments',
        () => `a problem that does not name the source (and document): ${JSON.stringify(p).slice(0, 300)}`,
      );
      probe.bounded(p.reason, 'parseDocuments', 'the reason');
    }
  },
};

// -- state files: spool entries, records, applied state, journals

const record: AttachmentRecord = {
  containerId,
  ifname: 'eth0',
  network: 'kindnet',
  netns: netnsPath,
  cniVersion: '1.1.0',
  pod: { namespace: 'shop', name: 'web-0', uid: '7c1e-44aa', infraContainerId: containerId },
  prevResult: prevResult('1.1.0'),
  createdAt: '2026-03-01T12:00:00.000Z',
};
const stateDocuments: Record<'SpoolEntry' | 'AttachmentRecord' | 'AppliedState' | 'Journal', { what: string; valid: object[] }> = {
  SpoolEntry: {
    what: 'spool entry',
    valid: [
      { op: 'add', record },
      { op: 'del', key: { containerId, ifname: 'eth0' } },
      { op: 'gc', gc: { network: 'kindnet', validAttachments: [{ containerId, ifname: 'eth0' }, { containerId: 'ffff', ifname: 'net1' }] } },
    ],
  },
  AttachmentRecord: { what: 'record', valid: [record, { ...record, adoptedFrom: '/var/lib/cni/results/kindnet-5b3c-eth0' }] },
  AppliedState: {
    what: 'applied state',
    valid: [
      {
        containerId: 'c1',
        pass: 'lq0-1a2b',
        netns: '/run/netns/pod-a',
        attachments: [{ interface: 'net1', network: 'blue', kind: 'bridge', bridge: 'pn-blue', hostIf: 'pnv0123456789', addresses: ['198.18.80.2/24'] }],
        tuning: [{ interface: 'eth0', original: { mtu: 1500, promisc: false } }],
        routes: [{ family: 4, to: '198.18.9.0/24', table: 100, via: '198.18.80.1' }],
        rules: [{ family: 6, priority: 100, table: 100, from: '2001:db8::/64' }],
        sysctls: [{ path: 'net/ipv4/conf/net1/rp_filter', value: '0', original: '1' }],
      },
      { containerId: 'c1', netns: '/run/netns/pod-a' },
    ],
  },
  Journal: {
    what: 'journal',
    valid: [
      { version: 1, pass: 'lq0-1a2b', undo: [] },
      {
        version: 1,
        pass: 'lq0-1a2b',
        undo: [
          { where: 'host', action: 'link-del', dev: 'pn-blue' },
          { where: { netns: '/run/netns/p' }, action: 'link-del', dev: 'net1' },
          { where: 'host', action: 'addr-del', dev: 'pn-blue', address: '198.18.80.1/24' },
          { where: { netns: '/run/netns/p' }, action: 'link-set', dev: 'eth0', setting: 'up', value: true },
          { where: { netns: '/run/netns/p' }, action: 'route', verb: 'replace', route: { family: 6, to: '2001:db8:9::/64', table: 254, dev: 'net1', seg6: { mode: 'encap', segments: ['2001:db8::1'] } } },
          { where: { netns: '/run/netns/p' }, action: 'rule', verb: 'add', rule: { family: 4, priority: 10, table: 100, fwmark: 7 } },
          { where: { netns: '/run/netns/p' }, action: 'sysctl', path: 'net/ipv4/ip_local_port_range', value: '32768 60999' },
          { where: 'host', action: 'tbf', dev: 'pnv0123456789', rate: 8000, burst: 12000 },
          { where: 'host', action: 'qdisc-del', dev: 'pnv0123456789', parent: 'root' },
        ],
      },
    ],
  },
};

const stateFiles: Target = {
  cases: 3000,
  run(probe, rng, seed) {
    const name = rng.pick(Object.keys(stateDocuments) as (keyof typeof stateDocuments)[]);
    const { what: kind, valid } = stateDocuments[name];
    const doc = rng.pick(valid);
    const text = rng.weighted<string>([
      [1, () => stateDocumentText(doc)],
      [5, () => {
        const value = mutateValue(rng, doc);
        // (stateDocumentText spreads what it is given: an object's keys, not a string's characters)
        return value && typeof value === 'object' && !Array.isArray(value) && rng.chance(0.5) ? stateDocumentText(value) : (JSON.stringify(value) ?? '');
      }],
      [3, () => mutateText(rng, stateDocumentText(doc))],
      [1, () => JSON.stringify(randomJson(rng)) ?? ''],
      [1, () => rng.pick(['', '\n', '{}', '[]', 'null', bytesText(rng), `{"version":1,"x":"${'a'.repeat(4 * 1024 * 1024)}"}`])],
    ]);
    const what = `${kind} ${rng.pick(['0001-5b3c@eth0.json', 'c1.json', '(x)*.json', '$1 \\d+ ünï.json', randomString(rng, 12)])}`;
    probe.begin(seed, text);
    const call = `parseStateDocument ${name}`;
    const out = probe.run(call, () => parseStateDocument(name, text, what));
    if (out.ok) {
      const value = JSON.parse(text) as Record<string, unknown>;
      const { version: _v, ...withoutVersion } = value;
      probe.expect(isDocument(name, value) && isDeepStrictEqual(out.value, withoutVersion), call, () => 'returned what its schema refuses, or not the file without its version');
      return;
    }
    const err = out.error;
    // parseStateDocument throws naming `what`; a plain Error would do by its contract, a TypeError or RangeError would not.
    const named = err instanceof Error && (err instanceof PodnetError || err.constructor === Error) && err.message.includes(what);
    probe.expect(named, call, () => `threw ${describeError(err)}, which is not an Error naming "${what}"`);
    if (err instanceof PodnetError) probe.expect(err.code === 'IO_FAILURE', call, () => `threw code ${err.code}, not IO_FAILURE`);
    if (err instanceof Error) probe.bounded(err.message, call, 'the message');
  },
};

// -- socket bodies and paths: the routes' documents, as the server reads them, then their handlers

const network = { apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'Network', metadata: { name: 'demo-blue' }, spec: { type: 'bridge', bridge: { name: 'pnbr-demo', gateway: true }, mtu: 1450, ipam: { ranges: [{ subnet: '198.18.201.0/24' }] } } };
const podConfig = {
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'PodNetworkConfig',
  metadata: { name: 'demo', namespace: 'default' },
  spec: { podSelector: { matchLabels: { app: 'web' } }, attachments: [{ network: 'demo-blue', interface: 'net1' }], interfaces: [{ name: 'eth0', mtu: 1400 }] },
};
const bodies: Partial<Record<DocumentName, object>> = {
  AttachmentRecord: record,
  DiffRequest: { documents: [network, podConfig] },
  GcRequest: { network: 'kindnet', validAttachments: [{ containerId, ifname: 'eth0' }] },
};

/** Percent-encoded as a client would, a lone surrogate as the UTF-8 bytes it cannot have. */
function encodeSegment(text: string): string {
  return [...text]
    .map((c) => {
      try {
        return encodeURIComponent(c);
      } catch {
        return '%ED%A0%80';
      }
    })
    .join('');
}

function pathSegment(rng: Rng, valid: string): string {
  return rng.weighted<string>([
    [6, () => valid],
    [2, () => encodeSegment(randomString(rng, 20))],
    [2, () => rng.pick(['%', '%E0%A4%A', '%00', '%2F', '..', '.', '', '%2e%2e', 'a'.repeat(200), '%ZZ', '%C0%AF', '%ED%A0%80'])],
  ]);
}

const socket: Target = {
  cases: 3000,
  async run(probe, rng, seed) {
    const route = rng.pick(routeTable.filter((r) => r.body !== undefined || r.pattern.source.includes('attachments\\/(')));
    const base = route.body ? bodies[route.body.document] : undefined;
    const text = base
      ? rng.weighted<string>([
          [1, () => JSON.stringify(base)],
          [5, () => JSON.stringify(mutateValue(rng, base)) ?? ''],
          [2, () => mutateText(rng, JSON.stringify(base))],
          [1, () => JSON.stringify(randomJson(rng)) ?? ''],
        ])
      : '';
    const params = [pathSegment(rng, containerId), pathSegment(rng, 'eth0')];
    probe.begin(seed, `${route.method} ${route.pattern.source} params ${JSON.stringify(params)} body ${text}`);
    let body: unknown;
    if (route.body) {
      // What the server does with a body: bounded JSON, then the route's document.
      const { document, what } = route.body;
      const read = probe.run(`parse ${document}`, () => parseDocument(document, parseBoundedJson(text, 'request body', { maxBytes: 1024 * 1024 }), what));
      if (!read.ok) {
        if (ownError(probe, `parse ${document}`, read.error, ['INVALID_REQUEST'])) {
          const message = read.error.message;
          probe.expect(message.startsWith('request body ') || message.startsWith(`invalid ${what}: `), `parse ${document}`, () => `the message does not name the body: ${message.slice(0, 200)}`);
        }
        return;
      }
      probe.expect(isDocument(document, read.value), `parse ${document}`, () => 'returned what its schema refuses');
      body = read.value;
    }
    const registry = new MemoryRegistry();
    if (rng.chance(0.5)) registry.records.set(keyOf(record), record);
    const parts: DaemonParts = {
      registry,
      version: '0.1.0-fuzz',
      sandboxes: () => ({ sandboxes: [] }) as unknown as SandboxList,
      diff: async () => ({}) as DiffResponse,
    };
    const call = `${route.method} ${route.pattern.source}`;
    const answer = await probe.runAsync(call, () => route.handle(parts, { params, body: async () => body }));
    if (answer.ok) probe.expect(answer.value.status === 200, call, () => `answered status ${answer.value.status}`);
    else ownError(probe, call, answer.error, ['INVALID_REQUEST', 'NOT_FOUND']);
  },
};

// -- IPAM logs

const v4: IpRange = { subnet: '198.18.5.0/24' };
const v6: IpRange = { subnet: '2001:db8:5::/64' };

/** A log podnet could have written: a header, holds, releases. */
function ipamLog(rng: Rng): string[] {
  const lines: object[] = [{ version: 1, network: 'blue', lastHandedOut: rng.chance(0.7) ? { '198.18.5.0/24': `198.18.5.${2 + rng.int(20)}` } : {} }];
  const holding: string[] = [];
  for (let i = 0; i < rng.int(12); i++) {
    if (holding.length > 0 && rng.chance(0.25)) {
      lines.push({ release: holding.splice(rng.int(holding.length), 1)[0] });
      continue;
    }
    const owner = `pod-${i}/net1`;
    holding.push(owner);
    const addresses: object[] = [{ address: `198.18.5.${30 + i}/24`, gateway: '198.18.5.1' }];
    if (rng.chance(0.3)) addresses.push({ address: `2001:db8:5::${(30 + i).toString(16)}/64` });
    lines.push({ hold: owner, addresses, ...(rng.chance(0.5) ? { lastHandedOut: { '198.18.5.0/24': `198.18.5.${30 + i}` } } : {}) });
  }
  return lines.map((l) => JSON.stringify(l));
}

function mutateLog(rng: Rng, lines: string[]): string {
  const out = [...lines];
  for (let round = 1 + rng.int(3); round > 0; round--) {
    const i = rng.int(out.length);
    switch (rng.int(8)) {
      case 0:
        out.splice(i, 1);
        break;
      case 1:
        out.splice(i, 0, out[i] ?? '');
        break;
      case 2:
        out[i] = mutateText(rng, out[i] ?? '');
        break;
      case 3:
        out[i] = JSON.stringify(mutateValue(rng, JSON.parse(lines[i] ?? '{}'))) ?? '';
        break;
      case 4:
        out.splice(i, 0, rng.pick(['', ' ', '{}', 'null', '{"release":"nobody"}', '{"version":1,"network":"green","lastHandedOut":{}}', '{"hold":"x","addresses":[{"address":"198.18.5.030/24"}]}', '{"hold":"y","addresses":[{"address":"2001:DB8:5::1/64"}]}', '{"hold":"z","addresses":[{"address":"198.18.5.30/24"}]}']));
        break;
      case 5: {
        const j = rng.int(out.length);
        [out[i], out[j]] = [out[j] ?? '', out[i] ?? ''];
        break;
      }
      case 6:
        out[i] = `${out[i]}\r`;
        break;
      default:
        out.splice(i, 0, JSON.stringify({ hold: `bulk-${i}`, addresses: Array.from({ length: 1 + rng.int(64) }, (_, k) => ({ address: `198.18.5.${100 + k}/24` })) }));
    }
  }
  return rng.weighted<string>([
    [6, () => `${out.join('\n')}\n`],
    [1, () => out.join('\n')],
    [1, () => mutateText(rng, `${out.join('\n')}\n`)],
  ]);
}

const ipam: Target = {
  cases: 800,
  run(probe, rng, seed, dir) {
    const ipamDir = join(dir, 'ipam');
    rmSync(ipamDir, { recursive: true, force: true });
    mkdirSync(ipamDir, { recursive: true, mode: 0o700 });
    const log = rng.chance(0.15) ? `${ipamLog(rng).join('\n')}\n` : mutateLog(rng, ipamLog(rng));
    if (rng.chance(0.9)) writeFileSync(join(ipamDir, 'blue.log'), log);
    if (rng.chance(0.15)) {
      const snapshot = { version: 1, network: 'blue', lastHandedOut: {}, owners: { 'old/net1': [{ address: '198.18.5.200/24', gateway: '198.18.5.1' }] } };
      writeFileSync(join(ipamDir, 'blue.json'), rng.chance(0.5) ? JSON.stringify(snapshot) : mutateText(rng, JSON.stringify(snapshot)));
    }
    if (rng.chance(0.1)) writeFileSync(join(ipamDir, 'green.log'), mutateText(rng, '{"version":1,"network":"green","lastHandedOut":{}}\n'));
    if (rng.chance(0.05)) mkdirSync(join(ipamDir, 'red.log'));
    probe.begin(seed, log);

    const ranges = rng.chance(0.3) ? [v4, v6] : [v4];
    const owner = `new-${rng.int(1000)}/net1`;
    const expectOwn = (call: string, out: Outcome<unknown>) => {
      if (out.ok) return;
      if (!ownError(probe, call, out.error, ['IO_FAILURE', 'TRY_AGAIN_LATER'])) return;
      const message = out.error.message;
      if (out.error.code === 'IO_FAILURE') probe.expect(message.includes(`${ipamDir}/`), call, () => `the IO_FAILURE does not name the file: ${message.slice(0, 300)}`);
      else probe.expect(message.includes('has no free address'), call, () => `TRY_AGAIN_LATER for another reason: ${message.slice(0, 300)}`);
    };
    const nodeIpam = NodeIpam.open(dir);
    expectOwn('held', probe.run('held', () => nodeIpam.held('blue', 'pod-1/net1')));
    expectOwn('preview', probe.run('preview', () => nodeIpam.preview('blue', ranges, owner)));
    const allocated = probe.run('allocate', () => nodeIpam.allocate('blue', ranges, owner));
    expectOwn('allocate', allocated);
    expectOwn('release', probe.run('release', () => nodeIpam.release('blue', `pod-${rng.int(12)}/net1`)));
    const holders = probe.run('holders', () => nodeIpam.holders());
    expectOwn('holders', holders);
    if (holders.ok) probe.expect(holders.value.every((h) => typeof h.network === 'string' && typeof h.owner === 'string'), 'holders', () => 'not {network, owner} pairs');
    if (allocated.ok) {
      // What allocate put on file reads back so, from a new NodeIpam (a daemon restart).
      const again = probe.run('held after a restart', () => NodeIpam.open(dir).held('blue', owner));
      probe.expect(again.ok && isDeepStrictEqual(again.value, allocated.value), 'held after a restart', () =>
        again.ok ? `reads ${JSON.stringify(again.value)}, allocate gave ${JSON.stringify(allocated.value)}` : `the log allocate left is unreadable: ${describeError(again.error)}`,
      );
      // Never an address twice: no other owner on file holds one of them.
      const restarted = NodeIpam.open(dir);
      const others = probe.run('holders after a restart', () => restarted.holders().filter((h) => h.network === 'blue' && h.owner !== owner));
      const mine = new Set(allocated.value.map((a) => a.address.split('/')[0]));
      for (const other of others.ok ? others.value : []) {
        const shared = restarted.held('blue', other.owner).filter((a) => mine.has(a.address.split('/')[0]));
        probe.expect(shared.length === 0, 'allocate', () => `handed out ${shared.map((a) => a.address).join(', ')}, which ${other.owner} holds`);
      }
    }
  },
};

const targets = {
  'bounded JSON': boundedJson,
  'CNI plugin': cniPlugin,
  'CNI_ARGS': cniArgsTarget,
  'networks annotation': annotation,
  'YAML and JSON documents': documents,
  'state files': stateFiles,
  'socket bodies and paths': socket,
  'IPAM logs': ipam,
} satisfies Record<string, Target>;
type TargetName = keyof typeof targets;

// ---- found before: what the fuzzing found, each with the input that showed it ----------------

/** `n` copies of `unit`, comma-separated: the items of a JSON array. */
const items = (unit: string, n: number) => Array<string>(n).fill(unit).join(',');

/** A CNI plugin run on `stdin` for `command`, its stdout as what comes out. */
async function pluginOutput(command: string, stdin: string): Promise<string> {
  const out = await runPlugin({
    env: { CNI_COMMAND: command, CNI_CONTAINERID: containerId, CNI_IFNAME: 'eth0', CNI_NETNS: netnsPath },
    stdin,
    openRecorder: () => {
      throw new PodnetError('NOT_AVAILABLE', 'no daemon here');
    },
    isNetworkNamespace: () => true,
    isNodeNetworkNamespace: () => false,
    netnsIdentity: () => undefined,
    now: () => new Date('2026-03-01T12:00:00.000Z'),
  });
  return out.stdout;
}

/**
 * Each with what it did before it was fixed. Two causes: the schema validators ran with ajv's
 * allErrors, which concatenates each failing item's errors into a new array (quadratic in a
 * list's items) and put every violation in the message (src/protocol/validate.ts now checks to the
 * first violation, and names every one only of a small document, at most 64); and the yaml
 * parser's slow paths (src/sources/documents.ts).
 */
const foundBefore = {
  'networks annotation: a JSON list of 40,000 items (80 KB)': {
    before: 'quadratic validation (ajv concatenates each item\'s errors); a tenant writes this annotation, and the 256 KiB the API server allows take about 70 s',
    input: () => `[${items('1', 40_000)}]`,
    run: (text: string) => parseNetworksAnnotation(text),
  },
  'networks annotation: a short form of 40,000 empty entries (40 KB of commas)': {
    before: 'the same quadratic validation, reached through the short form; 256 KiB of commas take minutes and a problem of 27 MB',
    input: () => ','.repeat(40_000),
    run: (text: string) => parseNetworksAnnotation(text),
  },
  'socket: a GC request body of 20,000 invalid attachments (60 KB)': {
    before: 'quadratic validation of GcRequest.validAttachments, which has no maxItems; the 1 MiB body the server reads takes tens of minutes (so does a spool entry of op gc)',
    input: () => `{"network":"kindnet","validAttachments":[${items('{}', 20_000)}]}`,
    run: (text: string) => parseDocument('GcRequest', parseBoundedJson(text, 'request body', { maxBytes: 1024 * 1024 }), 'GC request'),
  },
  'state file: a journal of 5,000 invalid undo actions (15 KB)': {
    before: 'quadratic validation, a few dozen errors per item (the oneOf of UndoAction), and a message of about 10 MB; maxItems 65536 allows far worse',
    input: () => `{"version":1,"pass":"lq0-1a2b","undo":[${items('{}', 5_000)}]}`,
    run: (text: string) => parseStateDocument('Journal', text, 'journal x'),
  },
  'CNI stdin: a GC configuration listing 32,768 invalid attachments (64 KB)': {
    before: 'every violation is in msg: about 1.7 MB of error object on stdout for 64 KB in (28 MB for the 1 MiB podnet reads)',
    input: () => `{"cniVersion":"1.1.0","name":"kindnet","type":"podnet","cni.dev/valid-attachments":[${items('1', 32_768)}]}`,
    run: (text: string) => pluginOutput('GC', text),
  },
  'socket: an attachment record whose pod has 20,000 keys (210 KB)': {
    before: 'every violation is in the message: about 1.1 MB answered for 210 KB (4.9 MB for the 1 MiB the server reads)',
    input: () => JSON.stringify({ ...record, pod: Object.fromEntries(Array.from({ length: 20_000 }, (_, i) => [`k${i}`, 1])) }),
    run: (text: string) => parseDocument('AttachmentRecord', parseBoundedJson(text, 'request body', { maxBytes: 1024 * 1024 }), 'attachment record'),
  },
  'documents: a 1 MiB file of nested flow sequences behind a quote in a comment': {
    before: 'the pre-check counts brackets as JSON would, so a " in a comment hides the rest from it; the yaml parser then takes about 10 s',
    input: () => `#"\n${'['.repeat(1024 * 1024 - 3)}`,
    run: (text: string) => parseDocuments(text, 'deep.yaml'),
  },
  'documents: 40,000 unclosed flow mappings (80 KB)': {
    before: 'the yaml parser is quadratic on unclosed flow collections, and every error joins the reason: 16 MB of reason; a 1 MiB file takes about 9 minutes and 2.7 GB',
    input: () => '{]'.repeat(40_000),
    run: (text: string) => parseDocuments(text, 'flow.yaml'),
  },
  'documents: 400 nested explicit keys (800 bytes)': {
    before: 'yaml\'s toJS stringifies a mapping used as a key, re-indented at each level: 300 levels take 2 s, 400 take 17 s, 800 five minutes; the key is a string by then, so the nesting bound never sees it',
    input: () => '? '.repeat(400),
    run: (text: string) => parseDocuments(text, 'keys.yaml'),
  },
  'documents: 16,384 syntax errors (32 KB)': {
    before: 'every error, with its excerpt, joins the reason: about 1.5 MB for 32 KB (45 MB and 8 s for a 1 MiB file)',
    input: () => ']\n'.repeat(16_384),
    run: (text: string) => parseDocuments(text, 'errors.yaml'),
  },
} as const;
type FoundName = keyof typeof foundBefore;

// ---- the worker: runs one job and reports ------------------------------------------------------

type Job = { kind: 'fuzz'; target: TargetName; dir: string; only?: number } | { kind: 'found'; name: FoundName };

async function runJob(job: Job, shared: Shared): Promise<Report> {
  const probe = new Probe(shared);
  // yaml warns of a collection as a mapping key on the process's stderr (it stringifies the key): counted, not printed.
  process.emitWarning = (() => probe.tally('process', 'warning')) as typeof process.emitWarning;
  if (job.kind === 'found') {
    const { input, run } = foundBefore[job.name];
    const text = input();
    probe.begin(0, text);
    const out = await probe.runAsync(job.name, async () => run(text));
    if (!out.ok) ownError(probe, job.name, out.error);
    else probe.bounded(typeof out.value === 'string' ? out.value : JSON.stringify(out.value), job.name, 'what came out');
    return probe.report();
  }
  const target: Target = targets[job.target];
  const seeds = job.only !== undefined ? [job.only] : Array.from({ length: Math.round(target.cases * scale) }, (_, i) => caseSeed(job.target, i));
  const t0 = performance.now();
  for (const seed of seeds) await target.run(probe, new Rng(seed), seed, job.dir);
  return { ...probe.report(), ms: performance.now() - t0 };
}

if (!isMainThread && (workerData as { fuzzJob?: Job } | undefined)?.fuzzJob) {
  const { fuzzJob, shared } = workerData as { fuzzJob: Job; shared: SharedArrayBuffer };
  parentPort!.postMessage(await runJob(fuzzJob, new Shared(shared)));
}

/** Runs `job` in a worker with a heap limit; a call past callLimitMs, or the worker's death, is a finding with the input under way. */
function inWorker(job: Job): Promise<Report> {
  const shared = Shared.create();
  const worker = new Worker(new URL(import.meta.url), {
    workerData: { fuzzJob: job, shared: shared.buffer },
    // Without the test runner's hooks (tap's --import of its loaders): the worker only runs parsers, and
    // each hook costs every worker its module loading time.
    execArgv: process.execArgv.filter((arg) => !arg.includes('@tapjs')),
    resourceLimits: { maxOldGenerationSizeMb: heapLimitMb },
  });
  return new Promise((resolve) => {
    let done = false;
    const finish = (report: Report) => {
      if (done) return;
      done = true;
      clearInterval(watchdog);
      void worker.terminate();
      resolve(report);
    };
    const stopped = (problem: string) => {
      const { seed, description } = shared.read();
      const arrow = description.indexOf(' <- ');
      const finding = arrow < 0 ? { seed, call: '(before the first call)', input: '', problem } : { seed, call: description.slice(0, arrow), input: description.slice(arrow + 4), problem };
      finish({ cases: 0, calls: 0, outcomes: {}, findings: [finding], findingCount: 1, slowest: { ms: 0, seed, call: finding.call } });
    };
    const watchdog = setInterval(() => {
      const started = shared.started[0]!;
      if (started !== 0 && Date.now() - started > callLimitMs) stopped(`did not finish within ${callLimitMs} ms: stopped`);
    }, 25);
    worker.once('message', (report: Report) => finish(report));
    // Past the heap limit: ERR_WORKER_OUT_OF_MEMORY.
    worker.once('error', (err) => stopped(`the worker died (its heap limit is ${heapLimitMb} MB): ${describeError(err)}`));
    worker.once('exit', (code) => stopped(`the worker exited with ${code} before it reported`));
  });
}

// ---- the tests ---------------------------------------------------------------------------------

/** Runs at most `n` of the given jobs at once (the suite runs on two cores). */
function limited(n: number): <T>(job: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: (() => void)[] = [];
  return async (job) => {
    while (running >= n) await new Promise<void>((resolve) => waiting.push(resolve));
    running++;
    try {
      return await job();
    } finally {
      running--;
      waiting.shift()?.();
    }
  };
}

if (isMainThread) {
  const { default: t } = await import('tap');
  const only = process.env['PODNET_FUZZ_CASE']?.match(/^(.+):(\d+)$/);
  // Two jobs at a time: the suite runs on two cores.
  const pool = limited(2);
  const found = (only ? [] : (Object.keys(foundBefore) as FoundName[])).map((name) => ({ name, report: pool(() => inWorker({ kind: 'found', name })) }));
  const fuzzed = (Object.keys(targets) as TargetName[])
    .filter((target) => !only || only[1] === target)
    .map((target) => ({
      target,
      report: pool(async () => {
        // A scratch dir of the job's (the IPAM logs), removed here also when the worker was stopped.
        const dir = mkdtempSync(join(tmpdir(), 'podnet-fuzz-'));
        try {
          return await inWorker({ kind: 'fuzz', target, dir, ...(only ? { only: Number(only[2]) >>> 0 } : {}) });
        } finally {
          rmSync(dir, { recursive: true, force: true });
        }
      }),
    }));

  for (const { target, report: pending } of fuzzed) {
    t.test(`fuzz: ${target}`, async (t) => {
      const report = await pending;
      for (const f of report.findings) t.fail(oneLine(`${target}: PODNET_FUZZ_CASE='${target}:${f.seed}' (seed ${f.seed}) ${f.call}: ${f.problem}; input: ${f.input}`));
      const { ms, seed, call } = report.slowest;
      t.comment(oneLine(`${target}: ${Object.entries(report.outcomes).sort(([a], [b]) => a.localeCompare(b)).map(([k, n]) => `${k} ${n}`).join(', ')}`));
      t.equal(
        report.findingCount,
        0,
        `${target}: ${report.cases} cases, ${report.calls} calls from base seed ${baseSeed} in ${(report.ms ?? 0).toFixed(0)} ms; slowest ${ms.toFixed(0)} ms (${call}, seed ${seed})`,
      );
    });
  }

  for (const { name, report: pending } of found) {
    t.test(`found before: ${name}`, async (t) => {
      const report = await pending;
      t.comment(`input: ${preview(foundBefore[name].input())}`);
      t.comment(oneLine(`before: ${foundBefore[name].before}`));
      const problems = report.findings.map((f) => f.problem);
      t.strictSame(problems, [], `podnet's own refusal, within ${callLimitMs} ms, and at most ${maxOutputChars} chars of it`);
    });
  }
}
