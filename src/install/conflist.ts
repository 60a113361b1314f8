// Chaining podnet into the runtime's primary CNI config, and out of it again: pure functions of
// file names and file text. The runtime (containerd, CRI-O through libcni) loads the first file of
// the conf dir in lexical order whose name ends in .conf, .conflist or .json; a .conf or .json
// holds one plugin, a .conflist a list. podnet appends itself to that list and touches nothing
// else: other plugins' entries, their order and their keys stay as the primary wrote them.
import { PodnetError } from '../errors.ts';
import { isSupportedVersion, supportedVersions } from '../protocol/cni-version.ts';
import { isDocument, isJsonObject } from '../protocol/validate.ts';

/** The file names libcni reads as network configs. */
const configExtensions = ['.conf', '.conflist', '.json'] as const;

/** What podnet keeps beside the primary's file: the file as it was before podnet chained itself. */
export const originalSuffix = '.podnet-original';

/** podnet's entry in a plugin list: its type and the settings the install was given. */
export interface PodnetEntry {
  type: 'podnet';
  socketPath?: string;
  stateDir?: string;
  timeoutMs?: number;
  firstPassTimeoutMs?: number;
}

/** The file the runtime uses: the first config file in lexical order (byte order, as Go sorts), if any. */
export function primaryConfigName(names: readonly string[]): string | undefined {
  return names
    .filter((n) => !n.startsWith('.') && configExtensions.some((ext) => n.endsWith(ext)))
    .sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b)))[0];
}

/** Whether `name` holds one plugin (.conf, .json) rather than a list. */
export function isSinglePlugin(name: string): boolean {
  return !name.endsWith('.conflist');
}

/** The list's name for a single-plugin file: foo.conf → foo.conflist. */
export function conflistNameFor(name: string): string {
  return `${name.slice(0, name.lastIndexOf('.'))}.conflist`;
}

type Json = Record<string, unknown>;

/** A parsed plugin list, checked as far as podnet relies on it. */
export interface PluginList extends Json {
  cniVersion: string;
  name: string;
  plugins: Json[];
}

function invalid(file: string, reason: string): PodnetError {
  return new PodnetError('INVALID_CONFIG', `${file}: ${reason}; podnet changed nothing`);
}


/**
 * The primary's config as a plugin list: a .conflist as it is, a single plugin wrapped the way
 * libcni wraps it (name and cniVersion move to the list). Refuses what the runtime could not load
 * either, or a version podnet does not speak, naming the file and what is wrong.
 */
export function parsePrimary(file: string, text: string): PluginList {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch (err) {
    throw invalid(file, `not JSON (${(err as Error).message})`);
  }
  if (!isJsonObject(parsed)) throw invalid(file, 'not a JSON object');
  let list: Json;
  if (isSinglePlugin(file)) {
    if (typeof parsed['type'] !== 'string' || parsed['type'] === '') throw invalid(file, 'a single plugin config has no "type"');
    const { name, cniVersion, ...plugin } = parsed;
    list = { cniVersion, name, plugins: [plugin] };
  } else {
    list = parsed;
    if (!Array.isArray(list['plugins']) || list['plugins'].length === 0) throw invalid(file, 'a plugin list has no "plugins"');
    const bad = (list['plugins'] as unknown[]).findIndex((p) => !isJsonObject(p) || typeof p['type'] !== 'string' || p['type'] === '');
    if (bad >= 0) throw invalid(file, `plugins[${bad}] has no "type"`);
  }
  if (typeof list['name'] !== 'string' || list['name'] === '') throw invalid(file, 'no network "name"');
  const version = list['cniVersion'];
  if (typeof version !== 'string') throw invalid(file, 'no "cniVersion"');
  if (!isSupportedVersion(version)) throw invalid(file, `cniVersion ${version} is not one podnet speaks (${supportedVersions.join(', ')})`);
  return list as PluginList;
}

function isPodnet(plugin: Json): boolean {
  return plugin['type'] === 'podnet';
}

/** Whether the list calls podnet at all, with whatever settings. */
export function callsPodnet(list: PluginList): boolean {
  return list.plugins.some(isPodnet);
}

/**
 * The waits of podnet's entry in the list (timeoutMs, firstPassTimeoutMs), as an install set them:
 * what chaining it again keeps. Each only when the plugin's config schema takes it.
 */
export function chainedWaits(list: PluginList): Pick<PodnetEntry, 'timeoutMs' | 'firstPassTimeoutMs'> {
  const ours = list.plugins.find(isPodnet);
  const waits: Pick<PodnetEntry, 'timeoutMs' | 'firstPassTimeoutMs'> = {};
  for (const key of ['timeoutMs', 'firstPassTimeoutMs'] as const) {
    const value = ours?.[key];
    if (value !== undefined && isDocument('PluginConfig', { cniVersion: '1.0.0', name: 'podnet', type: 'podnet', [key]: value })) waits[key] = value as number;
  }
  return waits;
}

/** Whether the list already calls podnet, with exactly these settings. */
export function isChained(list: PluginList, entry: PodnetEntry): boolean {
  const ours = list.plugins.filter(isPodnet);
  return ours.length === 1 && JSON.stringify(ours[0]) === JSON.stringify(entry);
}

/**
 * The list with podnet last, as `entry` says; an entry already there is replaced in its place
 * (settings changed), a second one dropped. The other plugins are untouched.
 */
export function chain(list: PluginList, entry: PodnetEntry): PluginList {
  const at = list.plugins.findIndex(isPodnet);
  const others = list.plugins.filter((p, i) => !isPodnet(p) || i === at);
  const plugins = at < 0 ? [...others, { ...entry }] : others.map((p) => (isPodnet(p) ? { ...entry } : p));
  return { ...list, plugins };
}

/** The list without podnet's entries; everything else as it is. */
export function unchain(list: PluginList): PluginList {
  return { ...list, plugins: list.plugins.filter((p) => !isPodnet(p)) };
}

/** A config file's text as podnet writes it: two-space JSON and a final newline. */
export function configText(config: Json): string {
  return `${JSON.stringify(config, null, 2)}\n`;
}

/** The podnet entry for these settings: only the ones that differ from the defaults are written. */
export function podnetEntry(settings: { socketPath?: string | undefined; stateDir?: string | undefined; timeoutMs?: number | undefined; firstPassTimeoutMs?: number | undefined }): PodnetEntry {
  return {
    type: 'podnet',
    ...(settings.socketPath !== undefined ? { socketPath: settings.socketPath } : {}),
    ...(settings.stateDir !== undefined ? { stateDir: settings.stateDir } : {}),
    ...(settings.timeoutMs !== undefined ? { timeoutMs: settings.timeoutMs } : {}),
    ...(settings.firstPassTimeoutMs !== undefined ? { firstPassTimeoutMs: settings.firstPassTimeoutMs } : {}),
  };
}
