// Typed parsing of every protocol document with the ajv validators generated from schemas/.
import { PodnetError, type ErrorCode } from '../errors.ts';
import * as firstViolation from '../generated/validators.js';
import * as allViolations from '../generated/violations.js';
import type * as Doc from '../generated/schema-types.ts';

export type * from '../generated/schema-types.ts';

interface AjvError {
  instancePath: string;
  keyword: string;
  message?: string;
  params?: Record<string, unknown>;
  /** The schema object the value broke (the validators are generated verbose). */
  parentSchema?: { 'x-pattern-rule'?: unknown };
}

interface Validator {
  (data: unknown): boolean;
  errors?: AjvError[] | null;
}

/** The validators of one generated module (both have every document), by document name. */
function byName(m: typeof firstViolation): Record<DocumentName, Validator> {
  return {
    PluginConfig: m.PluginConfig as Validator,
    AttachmentRecord: m.AttachmentRecord as Validator,
    AttachmentKey: m.AttachmentKey as Validator,
    PodIdentity: m.PodIdentity as Validator,
    AttachmentList: m.AttachmentList as Validator,
    GcRequest: m.GcRequest as Validator,
    GcResponse: m.GcResponse as Validator,
    DeleteResponse: m.DeleteResponse as Validator,
    FirstPassRequest: m.FirstPassRequest as Validator,
    FirstPassResponse: m.FirstPassResponse as Validator,
    SpoolEntry: m.SpoolEntry as Validator,
    DaemonStatus: m.DaemonStatus as Validator,
    ErrorBody: m.ErrorBody as Validator,
    SandboxList: m.SandboxList as Validator,
    DiffRequest: m.DiffRequest as Validator,
    DiffResponse: m.DiffResponse as Validator,
    Network: m.Network as Validator,
    PodNetworkConfig: m.PodNetworkConfig as Validator,
    PodNetworkPermission: m.PodNetworkPermission as Validator,
    NetworkSelectionList: m.NetworkSelectionList as Validator,
    NetworkStatusList: m.NetworkStatusList as Validator,
    PodNetworkViewList: m.PodNetworkViewList as Validator,
    PodNetworkConfigStatus: m.PodNetworkConfigStatus as Validator,
    NetworkStatus: m.NetworkStatus as Validator,
    Name: m.Name as Validator,
    AppliedState: m.AppliedState as Validator,
    HostObjects: m.HostObjects as Validator,
    DelegatedRecord: m.DelegatedRecord as Validator,
    PreparedClaim: m.PreparedClaim as Validator,
    ClaimParameters: m.ClaimParameters as Validator,
    Journal: m.Journal as Validator,
    CniResult: m.CniResult as Validator,
    IpamState: m.IpamState as Validator,
    IpamOwner: m.IpamOwner as Validator,
    IpamLogEntry: m.IpamLogEntry as Validator,
  };
}

/** The checks: each stops at its document's first violation, in time linear in the document. */
const documents = byName(firstViolation);
/** The same with ajv's allErrors, for naming every violation of a small document found invalid. */
const everyViolation = byName(allViolations);

/**
 * A document of at most this many values (objects, arrays and scalars) found invalid has every
 * violation named; a larger one its first. allErrors copies the errors found so far at each
 * failing item of a list: 1,024 values cost milliseconds, 40,000 a minute.
 */
const maxValuesDescribedWhole = 1024;
/** The most violations one message names: what a schema error says stays bounded whatever the input. */
const maxViolationsNamed = 64;

export interface DocumentTypes {
  PluginConfig: Doc.PluginConfig;
  AttachmentRecord: Doc.AttachmentRecord;
  AttachmentKey: Doc.AttachmentKey;
  PodIdentity: Doc.PodIdentity;
  AttachmentList: Doc.AttachmentList;
  GcRequest: Doc.GcRequest;
  GcResponse: Doc.GcResponse;
  DeleteResponse: Doc.DeleteResponse;
  FirstPassRequest: Doc.FirstPassRequest;
  FirstPassResponse: Doc.FirstPassResponse;
  SpoolEntry: Doc.SpoolEntry;
  DaemonStatus: Doc.DaemonStatus;
  ErrorBody: Doc.ErrorBody;
  SandboxList: Doc.SandboxList;
  DiffRequest: Doc.DiffRequest;
  DiffResponse: Doc.DiffResponse;
  Network: Doc.Network;
  PodNetworkConfig: Doc.PodNetworkConfig;
  PodNetworkPermission: Doc.PodNetworkPermission;
  NetworkSelectionList: Doc.NetworkSelectionList;
  NetworkStatusList: Doc.NetworkStatusList;
  /** What `kubectl podnet explain` and `get` print (src/kube/pod-view.ts). */
  PodNetworkViewList: Doc.PodNetworkViewList;
  PodNetworkConfigStatus: Doc.PodNetworkConfigStatus;
  NetworkStatus: Doc.NetworkStatus;
  /** A Kubernetes object name (a DNS-1123 subdomain): a Network's, a node's. */
  Name: Doc.Name;
  /** The state dir's documents (schemas/state.schema.json): applied/, host-objects.json, delegated/, journal/, ipam/. */
  AppliedState: Doc.AppliedState;
  HostObjects: Doc.HostObjects;
  DelegatedRecord: Doc.DelegatedRecord;
  /** claims/: a ResourceClaim prepared on this node (src/dra/prepared.ts). */
  PreparedClaim: Doc.PreparedClaim;
  /** A ResourceClaim's opaque parameters for podnet's driver. */
  ClaimParameters: Doc.ClaimParameters;
  Journal: Doc.Journal;
  /** A plugin's result, read back (a delegated Network's, the primary's for status). */
  CniResult: Doc.CniResult;
  IpamState: Doc.IpamState;
  IpamOwner: Doc.IpamOwner;
  IpamLogEntry: Doc.IpamLogEntry;
}

export type DocumentName = keyof DocumentTypes;

/** Whether a parsed JSON value is an object (not null, not an array): what a document must be before its keys are read. */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Extra properties an entry names; a document with many says how many more. */
const maxExtraPropertiesNamed = 8;

/**
 * "at /ifname: must be 1 to 15 printable ASCII characters ..." for each violation (the first maxViolationsNamed), so a
 * user sees where and what. The properties one object should not have are one entry, so that a
 * hundred of them do not push out what is missing.
 */
function describeViolations(errors: readonly AjvError[]): string {
  const entries: { where: string; message: string; extra: string[] }[] = [];
  const extraAt = new Map<string, string[]>();
  for (const e of errors) {
    const where = e.instancePath === '' ? '(top level)' : e.instancePath;
    const extra = e.params?.['additionalProperty'];
    const rule = e.keyword === 'pattern' && typeof e.parentSchema?.['x-pattern-rule'] === 'string' ? `must be ${e.parentSchema['x-pattern-rule']}` : undefined;
    if (extra !== undefined) {
      const names = extraAt.get(where);
      if (names) {
        names.push(String(extra));
        continue;
      }
      extraAt.set(where, [String(extra)]);
      entries.push({ where, message: e.message ?? 'is invalid', extra: extraAt.get(where)! });
    } else {
      entries.push({ where, message: rule ?? e.message ?? 'is invalid', extra: [] });
    }
  }
  const named = entries.slice(0, maxViolationsNamed).map(({ where, message, extra }) => {
    const extraMore = extra.length - maxExtraPropertiesNamed;
    const names = extra.slice(0, maxExtraPropertiesNamed).map((n) => ` "${n}"`).join(',') + (extraMore > 0 ? ` and ${extraMore} more` : '');
    return `at ${where}: ${message}${names}`;
  });
  const more = entries.length - named.length;
  return named.join('; ') + (more > 0 ? `; and ${more} more` : '');
}

/** Whether `value` holds at most `max` values, counted without recursion and no further than max + 1. */
function valuesAtMost(value: unknown, max: number): boolean {
  const stack: unknown[] = [value];
  let count = 0;
  while (stack.length > 0) {
    if (++count > max) return false;
    const item = stack.pop();
    if (typeof item === 'object' && item !== null) {
      for (const child of Array.isArray(item) ? item : Object.values(item)) stack.push(child);
      if (stack.length > max) return false;
    }
  }
  return true;
}

/** Whether `value` is a valid `name` document, for a caller that words its own refusal. */
export function isDocument<N extends DocumentName>(name: N, value: unknown): value is DocumentTypes[N] {
  return documents[name](value);
}

/**
 * The violations of the named document's schema by `value`, or undefined when it is one: every
 * one of a small document, the first of a large one (said so).
 */
export function violationsOf(name: DocumentName, value: unknown): string | undefined {
  const check = documents[name];
  if (check(value)) return undefined;
  if (!valuesAtMost(value, maxValuesDescribedWhole)) {
    return `${describeViolations(check.errors ?? [])} (the first violation; a document of more than ${maxValuesDescribedWhole} values is not searched for more)`;
  }
  const describe = everyViolation[name];
  describe(value);
  return describeViolations(describe.errors ?? []);
}

/**
 * Returns `value` typed as the named document, or throws a PodnetError with `code` naming
 * every violation. `what` says in the message which input it was ("plugin config", "request body").
 */

export function parseDocument<N extends DocumentName>(
  name: N,
  value: unknown,
  what: string,
  code: ErrorCode = 'INVALID_REQUEST',
): DocumentTypes[N] {
  const violations = violationsOf(name, value);
  if (violations === undefined) return value as DocumentTypes[N];
  throw new PodnetError(code, `invalid ${what}: ${violations}`);
}
