// The CNI plugin as a function: environment and stdin in, stdout and exit code out, side effects
// behind a Recorder. It records the attachment, waits (bounded) for the daemon to make what the
// pod asks at its creation, and passes the chain's result through; it never changes the pod's
// network itself (that is the daemon's job).
import { checkPrevResult } from './prev-result.ts';
import { PodnetError, toPodnetError } from '../errors.ts';
import { parseBoundedJson } from '../protocol/bounded-json.ts';
import { defaultFirstPassTimeoutMs, defaultSocketPath, defaultStateDir, defaultTimeoutMs } from '../protocol/paths.ts';
import { parseDocument, type AttachmentKey, type CniVersion, type PluginConfig } from '../protocol/validate.ts';
import { parseCniArgs, podIdentityFromArgs } from '../protocol/cni-args.ts';
import type { Recorder, RecorderSettings } from './recorder.ts';
import { compareVersions, convertResult, isSupportedVersion, latestVersion, supportedVersions } from '../protocol/cni-version.ts';

export interface PluginContext {
  env: Readonly<Record<string, string | undefined>>;
  stdin: string;
  openRecorder(settings: RecorderSettings): Recorder;
  isNetworkNamespace(path: string): boolean;
  /** Whether a path is the node's own network namespace, which is never a pod's (netns/probe.ts). */
  isNodeNetworkNamespace(path: string): boolean;
  /** The identity of the namespace at a path (netns/probe.ts namespaceIdentity), recorded so the daemon never acts in another one by the same path. */
  netnsIdentity(path: string): string | undefined;
  now(): Date;
}

export interface PluginOutput {
  stdout: string;
  exitCode: 0 | 1;
}

interface Invocation {
  ctx: PluginContext;
  config: PluginConfig;
  cniVersion: CniVersion;
  recorder: Recorder;
}

export async function runPlugin(ctx: PluginContext): Promise<PluginOutput> {
  let answerVersion: string = latestVersion;
  try {
    const command = ctx.env['CNI_COMMAND'];
    if (command === 'VERSION') return versionInfo(ctx.stdin);
    const json = parseJson(ctx.stdin);
    // An error answers in the configuration's own version, also when the rest of it is invalid.
    answerVersion = declaredVersion(json) ?? answerVersion;
    const config = parseDocument('PluginConfig', json, 'network configuration', 'INVALID_CONFIG');
    if (!isSupportedVersion(config.cniVersion)) {
      throw new PodnetError(
        'INCOMPATIBLE_CNI_VERSION',
        `cniVersion ${config.cniVersion} is not supported; podnet speaks ${supportedVersions.join(', ')}`,
      );
    }
    const inv: Invocation = {
      ctx,
      config,
      cniVersion: config.cniVersion,
      recorder: ctx.openRecorder({
        socketPath: config.socketPath ?? defaultSocketPath,
        stateDir: config.stateDir ?? defaultStateDir,
        timeoutMs: config.timeoutMs ?? defaultTimeoutMs,
        firstPassTimeoutMs: config.firstPassTimeoutMs ?? defaultFirstPassTimeoutMs,
      }),
    };
    switch (command) {
      case 'ADD':
        return await add(inv);
      case 'DEL':
        return await del(inv);
      case 'CHECK':
        return await check(inv);
      case 'STATUS':
        return await status(inv);
      case 'GC':
        return await gc(inv);
      default:
        throw new PodnetError(
          'INVALID_ENVIRONMENT',
          command ? `unknown CNI_COMMAND "${command}"` : 'CNI_COMMAND is not set',
          'podnet answers ADD, DEL, CHECK, STATUS, GC and VERSION',
        );
    }
  } catch (err) {
    return errorOutput(answerVersion, toPodnetError(err));
  }
}

function success(result?: unknown): PluginOutput {
  return { stdout: result === undefined ? '' : `${JSON.stringify(result)}\n`, exitCode: 0 };
}

/** The spec's error object, in the configuration's version. */
export function errorOutput(cniVersion: string, err: PodnetError): PluginOutput {
  const body: Record<string, unknown> = { cniVersion, code: err.cniCode, msg: err.message };
  if (err.details !== undefined) body['details'] = err.details;
  return { stdout: `${JSON.stringify(body)}\n`, exitCode: 1 };
}

/** A network configuration on stdin, prevResult included, is a few KiB; a plugin list's, tens. */
export const maxStdinBytes = 1024 * 1024;

function parseJson(stdin: string): unknown {
  return parseBoundedJson(stdin, 'network configuration on stdin', { maxBytes: maxStdinBytes }, 'DECODE_FAILURE');
}

function declaredVersion(json: unknown): string | undefined {
  const v = json && typeof json === 'object' ? (json as { cniVersion?: unknown }).cniVersion : undefined;
  return typeof v === 'string' && /^\d+\.\d+\.\d+$/.test(v) ? v : undefined;
}

function versionInfo(stdin: string): PluginOutput {
  // The spec: cniVersion is "the value of cniVersion specified on input", supported or not, so
  // that a runtime can tell from supportedVersions whether podnet speaks it.
  let requested: string | undefined;
  try {
    requested = declaredVersion(JSON.parse(stdin));
  } catch {
    requested = undefined;
  }
  return success({ cniVersion: requested ?? latestVersion, supportedVersions });
}

function requireEnv(ctx: PluginContext, name: string): string {
  const value = ctx.env[name];
  if (!value) throw new PodnetError('INVALID_ENVIRONMENT', `${name} is not set`);
  return value;
}

function attachmentKey(ctx: PluginContext): AttachmentKey {
  const key = { containerId: requireEnv(ctx, 'CNI_CONTAINERID'), ifname: requireEnv(ctx, 'CNI_IFNAME') };
  return parseDocument('AttachmentKey', key, 'CNI_CONTAINERID or CNI_IFNAME', 'INVALID_ENVIRONMENT');
}

function requireVersion(inv: Invocation, command: string, since: string): void {
  if (compareVersions(inv.cniVersion, since) < 0) {
    throw new PodnetError('INCOMPATIBLE_CNI_VERSION', `${command} needs cniVersion ${since} or later; the configuration has ${inv.cniVersion}`);
  }
}

function requireNetworkNamespace(ctx: PluginContext, netns: string): void {
  if (!ctx.isNetworkNamespace(netns)) {
    throw new PodnetError('INVALID_ENVIRONMENT', `CNI_NETNS ${netns} is not a network namespace`);
  }
  if (ctx.isNodeNetworkNamespace(netns)) {
    throw new PodnetError('INVALID_ENVIRONMENT', `CNI_NETNS ${netns} is the node's own network namespace, not a pod's: podnet changes pods' networks, never the node's`);
  }
}

async function add(inv: Invocation): Promise<PluginOutput> {
  const { ctx, config } = inv;
  if (!config.prevResult) {
    throw new PodnetError(
      'INVALID_CONFIG',
      'ADD without a prevResult: podnet is a chained plugin and must follow the primary plugin in a conflist',
    );
  }
  checkPrevResult(config.prevResult as Record<string, unknown>);
  const result = convertResult(config.prevResult as Record<string, unknown>, inv.cniVersion);
  const key = attachmentKey(ctx);
  // The record (CNI_NETNS's path among it) passes the schema before the path is looked at.
  const record = parseDocument(
    'AttachmentRecord',
    {
      ...key,
      network: config.name,
      netns: requireEnv(ctx, 'CNI_NETNS'),
      cniVersion: inv.cniVersion,
      pod: podIdentityFromArgs(parseCniArgs(ctx.env['CNI_ARGS'])),
      prevResult: config.prevResult,
      createdAt: ctx.now().toISOString(),
    },
    'attachment from CNI_NETNS and CNI_ARGS',
    'INVALID_ENVIRONMENT',
  );
  requireNetworkNamespace(ctx, record.netns);
  const netnsId = ctx.netnsIdentity(record.netns);
  const recorded = netnsId === undefined ? record : { ...record, netnsId };
  await inv.recorder.add(recorded);
  // The containers start once ADD returns: what the pod asks now is made first, when the daemon
  // can within the bound (docs/adr/0028); else later, as the spool has it. Only a daemon that
  // answered that a required attachment cannot be made fails the pod (it took back what it made).
  const firstPass = await inv.recorder.firstPass(recorded);
  if (firstPass?.outcome === 'refused') throw new PodnetError('REQUIRED_UNMET', firstPass.error ?? "the pod's required attachments cannot be made");
  return success(result);
}

async function del(inv: Invocation): Promise<PluginOutput> {
  // Idempotent: a missing record, netns or daemon is fine; the removal itself is never lost.
  const key = attachmentKey(inv.ctx);
  await inv.recorder.del(key);
  // Delegated plugins undo best while the netns is still there (host-device gives its device back
  // to the host then; after, it would go with the netns), and the runtime removes the netns once
  // DEL returns: wait for the daemon's DELs, at most the plugin's timeout (none when there are none).
  await inv.recorder.delegatedGone(key.containerId);
  return success();
}

async function check(inv: Invocation): Promise<PluginOutput> {
  requireVersion(inv, 'CHECK', '0.4.0');
  const key = attachmentKey(inv.ctx);
  const netns = requireEnv(inv.ctx, 'CNI_NETNS');
  const record = await inv.recorder.find(key);
  if (!record) {
    throw new PodnetError('CHECK_FAILED', `podnet has no record of container ${key.containerId} interface ${key.ifname}`);
  }
  if (record.netns !== netns) {
    throw new PodnetError('CHECK_FAILED', `podnet recorded netns ${record.netns} for container ${key.containerId}, the runtime says ${netns}`);
  }
  if (!inv.ctx.isNetworkNamespace(netns)) {
    throw new PodnetError('CHECK_FAILED', `netns ${netns} of container ${key.containerId} is gone`);
  }
  return success();
}

async function status(inv: Invocation): Promise<PluginOutput> {
  requireVersion(inv, 'STATUS', '1.1.0');
  await inv.recorder.ready();
  return success();
}

async function gc(inv: Invocation): Promise<PluginOutput> {
  requireVersion(inv, 'GC', '1.1.0');
  const listed = inv.config['cni.dev/valid-attachments'];
  if (!listed) {
    // Read as an empty list it would drop every record of the network: refuse instead.
    throw new PodnetError('INVALID_CONFIG', 'GC without cni.dev/valid-attachments: the runtime must list the attachments that stay');
  }
  // A runtime may list attachments podnet never saw or whose names it would refuse; those cannot
  // match a record, so they are left out rather than failing the whole collection.
  const validAttachments = listed
    .map((a) => ({ containerId: a.containerID, ifname: a.ifname }))
    .filter((k) => {
      try {
        parseDocument('AttachmentKey', k, 'attachment');
        return true;
      } catch {
        return false;
      }
    });
  await inv.recorder.gc({ network: inv.config.name, validAttachments });
  return success();
}
