// Typed parsing of every protocol document with the ajv validators generated from schemas/.
import { PodnetError, type ErrorCode } from '../errors.ts';
import * as validators from '../generated/validators.js';
import type * as Doc from '../generated/schema-types.ts';

export type * from '../generated/schema-types.ts';

interface AjvError {
  instancePath: string;
  message?: string;
  params?: Record<string, unknown>;
}

interface Validator {
  (data: unknown): boolean;
  errors?: AjvError[] | null;
}

const documents = {
  PluginConfig: validators.PluginConfig as Validator,
  AttachmentRecord: validators.AttachmentRecord as Validator,
  AttachmentKey: validators.AttachmentKey as Validator,
  PodIdentity: validators.PodIdentity as Validator,
  AttachmentList: validators.AttachmentList as Validator,
  GcRequest: validators.GcRequest as Validator,
  GcResponse: validators.GcResponse as Validator,
  DeleteResponse: validators.DeleteResponse as Validator,
  SpoolEntry: validators.SpoolEntry as Validator,
  DaemonStatus: validators.DaemonStatus as Validator,
  ErrorBody: validators.ErrorBody as Validator,
  SandboxList: validators.SandboxList as Validator,
  DiffRequest: validators.DiffRequest as Validator,
  DiffResponse: validators.DiffResponse as Validator,
  Network: validators.Network as Validator,
  PodNetworkConfig: validators.PodNetworkConfig as Validator,
  NetworkSelectionList: validators.NetworkSelectionList as Validator,
  NetworkStatusList: validators.NetworkStatusList as Validator,
  PodNetworkConfigStatus: validators.PodNetworkConfigStatus as Validator,
  NetworkStatus: validators.NetworkStatus as Validator,
  Name: validators.Name as Validator,
  AppliedState: validators.AppliedState as Validator,
  HostObjects: validators.HostObjects as Validator,
  DelegatedRecord: validators.DelegatedRecord as Validator,
  Journal: validators.Journal as Validator,
  CniResult: validators.CniResult as Validator,
  IpamState: validators.IpamState as Validator,
  IpamOwner: validators.IpamOwner as Validator,
  IpamLogEntry: validators.IpamLogEntry as Validator,
};

export interface DocumentTypes {
  PluginConfig: Doc.PluginConfig;
  AttachmentRecord: Doc.AttachmentRecord;
  AttachmentKey: Doc.AttachmentKey;
  PodIdentity: Doc.PodIdentity;
  AttachmentList: Doc.AttachmentList;
  GcRequest: Doc.GcRequest;
  GcResponse: Doc.GcResponse;
  DeleteResponse: Doc.DeleteResponse;
  SpoolEntry: Doc.SpoolEntry;
  DaemonStatus: Doc.DaemonStatus;
  ErrorBody: Doc.ErrorBody;
  SandboxList: Doc.SandboxList;
  DiffRequest: Doc.DiffRequest;
  DiffResponse: Doc.DiffResponse;
  Network: Doc.Network;
  PodNetworkConfig: Doc.PodNetworkConfig;
  NetworkSelectionList: Doc.NetworkSelectionList;
  NetworkStatusList: Doc.NetworkStatusList;
  PodNetworkConfigStatus: Doc.PodNetworkConfigStatus;
  NetworkStatus: Doc.NetworkStatus;
  /** A Kubernetes object name (a DNS-1123 subdomain): a Network's, a node's. */
  Name: Doc.Name;
  /** The state dir's documents (schemas/state.schema.json): applied/, host-objects.json, delegated/, journal/, ipam/. */
  AppliedState: Doc.AppliedState;
  HostObjects: Doc.HostObjects;
  DelegatedRecord: Doc.DelegatedRecord;
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

/** "at /ifname: must match pattern ..." for each violation, so a user sees where and what. */
export function describeViolations(errors: readonly AjvError[]): string {
  return errors
    .map((e) => {
      const where = e.instancePath === '' ? '(top level)' : e.instancePath;
      const extra = e.params?.['additionalProperty'] ? ` "${String(e.params['additionalProperty'])}"` : '';
      return `at ${where}: ${e.message ?? 'is invalid'}${extra}`;
    })
    .join('; ');
}

/** Whether `value` is a valid `name` document, for a caller that words its own refusal. */
export function isDocument<N extends DocumentName>(name: N, value: unknown): value is DocumentTypes[N] {
  return documents[name](value);
}

/** Every violation of the named document's schema by `value` (describeViolations), or undefined when it is one. */
export function violationsOf(name: DocumentName, value: unknown): string | undefined {
  const validate = documents[name];
  return validate(value) ? undefined : describeViolations(validate.errors ?? []);
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
