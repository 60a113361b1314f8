// Pods that ran before podnet was chained: the runtime never called podnet for them, so nothing
// recorded them. The runtime's libcni did: after each ADD it caches what it did in
// <cacheDir>/results/<network>-<container>-<ifname> (kind cniCacheV1): the container id, interface,
// network name, CNI_ARGS (the pod's identity), the chain's result and, from libcni 1.2 on, the
// netns path. That is everything the plugin would have recorded, so at start the daemon records
// each such attachment it has no record of, marked with the file it came from. Where the cache
// names no netns (the runtime's libcni is older than 1.2, as containerd 1.6's is), the runtime is
// asked through the CRI for the sandbox's netns.
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { podIdentityFromArgs } from '../protocol/cni-args.ts';
import { isJsonObject, parseDocument, type AttachmentRecord } from '../protocol/validate.ts';
import type { RuntimeService } from '../cri/runtime-service.ts';
import type { PodnetError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { Registry } from './registry.ts';

/** libcni's cache format since 0.8; an older cache held the bare result, which names no netns or pod. */
const cacheKind = 'cniCacheV1';

/**
 * What a cache file says of one attachment, or why it is of no use to podnet, or that it names no
 * netns (then the container id to ask the runtime for it).
 */
export type CachedAttachment = { record: AttachmentRecord } | { skip: string } | { lacksNetns: { containerId: string; ifname: string; network: string } };

const lacksNetnsReason = 'names no netns (libcni before 1.2 does not cache it)';

/**
 * The record the plugin would have written for the attachment cached in `text` (the file at
 * `path`), given the moment of adoption and, for a cache that names none, the netns the runtime
 * told: a pure function of its arguments.
 */
export function recordFromCacheEntry(text: string, path: string, now: Date, runtimeNetns?: string): CachedAttachment {
  let cached: Record<string, unknown>;
  try {
    const parsed = JSON.parse(text) as unknown;
    if (!isJsonObject(parsed)) return { skip: 'not a JSON object' };
    cached = parsed;
  } catch (err) {
    return { skip: `not JSON: ${(err as Error).message}` };
  }
  if (cached['kind'] !== cacheKind) return { skip: `kind is ${JSON.stringify(cached['kind'])}, not ${cacheKind} (a cache from before libcni 0.8)` };
  const cachedNetns = typeof cached['netns'] === 'string' && cached['netns'] !== '' ? cached['netns'] : undefined;
  const netns = cachedNetns ?? runtimeNetns;
  if (netns === undefined) {
    const [containerId, ifname, network] = [cached['containerId'], cached['ifName'], cached['networkName']];
    if (typeof containerId === 'string' && containerId !== '' && typeof ifname === 'string' && typeof network === 'string') return { lacksNetns: { containerId, ifname, network } };
    return { skip: `${lacksNetnsReason}, nor a container id, interface and network` };
  }
  const result = cached['result'];
  const cniVersion = versionOf(cached['config']) ?? (isJsonObject(result) ? result['cniVersion'] : undefined);
  try {
    const record = parseDocument(
      'AttachmentRecord',
      {
        containerId: cached['containerId'],
        ifname: cached['ifName'],
        network: cached['networkName'],
        netns,
        cniVersion,
        pod: podIdentityFromArgs(argsOf(cached['cniArgs'])),
        ...(isJsonObject(result) ? { prevResult: result } : {}),
        createdAt: now.toISOString(),
        adoptedFrom: path,
      },
      `cache entry ${path}`,
    );
    return { record };
  } catch (err) {
    return { skip: (err as Error).message };
  }
}

/**
 * The netns the runtime tells for a sandbox, asked only of sandboxes it lists as ready (one list
 * for the whole cache), or why there is none: each answer says what an operator needs to know.
 */
function sandboxNetnsOf(runtime: RuntimeService | undefined): (id: string) => Promise<{ netns: string } | { why: string }> {
  if (!runtime) return async () => ({ why: 'no container runtime socket was given (--cri-socket) to ask' });
  let ready: Promise<Set<string> | Error> | undefined;
  /** Set once the runtime did not answer in time: the daemon's start waits on no more of it. */
  let unreachable: string | undefined;
  return async (id) => {
    ready ??= runtime.readySandboxes().then((sandboxes) => new Set(sandboxes.map((s) => s.id)), (err: unknown) => err as Error);
    const listed = await ready;
    if (listed instanceof Error) return { why: listed.message };
    if (!listed.has(id)) return { why: 'the container runtime lists no ready sandbox of that id (the pod is gone)' };
    if (unreachable) return { why: unreachable };
    try {
      const netns = await runtime.sandboxNetns(id);
      return netns ? { netns } : { why: 'the container runtime tells no netns for it (a pod on the node\'s network)' };
    } catch (err) {
      if ((err as PodnetError).code === 'NOT_AVAILABLE') unreachable = `${(err as Error).message} (not asked again until the daemon restarts)`;
      return { why: (err as Error).message };
    }
  };
}

/** The cniVersion of the cached network config (Go marshals its bytes as base64). */
function versionOf(config: unknown): unknown {
  if (typeof config !== 'string') return undefined;
  try {
    const parsed = JSON.parse(Buffer.from(config, 'base64').toString('utf8')) as unknown;
    return isJsonObject(parsed) ? parsed['cniVersion'] : undefined;
  } catch {
    return undefined;
  }
}

/** libcni caches CNI_ARGS as [key, value] pairs; anything else is no identity. */
function argsOf(pairs: unknown): Map<string, string> {
  if (!Array.isArray(pairs)) return new Map();
  return new Map(pairs.filter((p): p is [string, string] => Array.isArray(p) && p.length === 2 && typeof p[0] === 'string' && typeof p[1] === 'string'));
}

export interface AdoptionOptions {
  /** libcni's cache dir (the runtime's; /var/lib/cni by default): its results/ folder is read. */
  cacheDir: string;
  /** Which networks' attachments to adopt: those whose config now chains podnet. Every one when absent. */
  adoptsNetwork?: (name: string) => boolean;
  isNetworkNamespace: (path: string) => boolean;
  /** The container runtime's CRI, asked for the netns of a sandbox whose cache entry names none. */
  runtime?: RuntimeService;
  now?: () => Date;
  log: Logger;
}

export interface AdoptionReport {
  adopted: AttachmentRecord[];
  /** Cache files that could not be adopted and why (a network podnet is not chained into is not listed). */
  skipped: { file: string; reason: string }[];
}

/**
 * Records every attachment in the runtime's result cache that podnet has no record of and whose
 * netns is still there. Never fails the daemon's start: a cache that cannot be read adopts nothing.
 */
export async function adoptCachedAttachments(registry: Registry, opts: AdoptionOptions): Promise<AdoptionReport> {
  const dir = join(opts.cacheDir, 'results');
  const report: AdoptionReport = { adopted: [], skipped: [] };
  let names: string[];
  try {
    names = readdirSync(dir).sort();
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code !== 'ENOENT') opts.log.warn('cannot read the CNI result cache; no pod is adopted', { dir, error: (err as Error).message });
    return report;
  }
  const now = opts.now ?? (() => new Date());
  const runtimeNetns = sandboxNetnsOf(opts.runtime);
  for (const name of names) {
    const file = join(dir, name);
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (err) {
      // Gone since the listing: the runtime deleted that attachment meanwhile.
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') report.skipped.push({ file, reason: (err as Error).message });
      continue;
    }
    let cached = recordFromCacheEntry(text, file, now());
    if ('lacksNetns' in cached) {
      // What needs no runtime first: each question to it can take its timeout.
      const { containerId, ifname, network } = cached.lacksNetns;
      if (opts.adoptsNetwork && !opts.adoptsNetwork(network)) continue;
      if (registry.get({ containerId, ifname }) !== undefined) continue;
      const told = await runtimeNetns(containerId);
      cached = 'netns' in told ? recordFromCacheEntry(text, file, now(), told.netns) : { skip: `${lacksNetnsReason}, and ${told.why}` };
    }
    if (!('record' in cached)) {
      report.skipped.push({ file, reason: 'skip' in cached ? cached.skip : lacksNetnsReason });
      continue;
    }
    const { record } = cached;
    if (opts.adoptsNetwork && !opts.adoptsNetwork(record.network)) continue;
    if (registry.get(record) !== undefined) continue;
    // A pod deleted before its cache file was: nothing to change there, nothing to record.
    if (!opts.isNetworkNamespace(record.netns)) continue;
    if (await registry.adopt(record)) report.adopted.push(record);
  }
  for (const { file, reason } of report.skipped) opts.log.warn('a CNI result cache entry was not adopted', { file, reason });
  if (report.adopted.length > 0) {
    opts.log.info('adopted pods that ran before podnet was chained', {
      cacheDir: dir,
      attachments: report.adopted.map((r) => `${r.pod.namespace ?? '-'}/${r.pod.name ?? '-'} ${r.containerId.slice(0, 12)} ${r.ifname}`),
    });
  }
  return report;
}
