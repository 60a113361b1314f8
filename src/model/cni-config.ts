// A delegated Network's CNI config, made into the list a runtime runs: checked (every plugin has
// a type that names a binary, the cniVersion is one podnet speaks), defaults filled in, and each
// plugin's stdin for ADD, DEL and CHECK as the CNI spec's chaining rules say. Pure.
import { supportedVersions } from '../protocol/cni-version.ts';
import { isDocument, violationsOf, type CniResult, type DelegatedConfig, type Network } from '../protocol/validate.ts';

/** A network configuration list as podnet runs it (DelegatedConfig in schemas/state.schema.json). */
export type { CniResult, DelegatedConfig } from '../protocol/validate.ts';

/** The versions podnet runs plugins at: those whose result format it reads, as its own plugin does (0.3.0 on, in order). */
export const delegatedCniVersions = supportedVersions;

/** The CNI spec's network name: plugins put it in file paths (host-local's dataDir/<name>). */
const networkNamePattern = /^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,252}$/;

/** A plugin binary's name: what a runtime looks up in its bin dirs, never a path. */
const pluginTypePattern = /^[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}$/;


/** What is wrong with a config: the field under spec.cni.config and why. */
export interface ConfigProblem {
  field: string;
  reason: string;
}

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The list a cni Network runs: spec.cni.config as a list, or one plugin made a list of one. A
 * config that is not valid CNI is a problem naming its field (spec.cni.config.plugins[1].type).
 */
export function delegatedConfigOf(network: Network): DelegatedConfig | ConfigProblem {
  const base = 'spec.cni.config';
  const config = network.spec.cni?.config;
  const reference = network.spec.cni?.networkAttachmentDefinition;
  if (reference && !isObject(config)) {
    // The Kubernetes source puts the definition's config in spec.cni.config; it found none.
    return { field: 'spec.cni.networkAttachmentDefinition', reason: `NetworkAttachmentDefinition ${reference.namespace}/${reference.name} gives no config here (it is read from the Kubernetes API)` };
  }
  if (!isObject(config)) return { field: base, reason: 'a cni Network needs a CNI config (spec.cni.config) or a NetworkAttachmentDefinition (spec.cni.networkAttachmentDefinition)' };
  if (network.spec.ipam) return { field: 'spec.ipam', reason: "a cni Network's plugins do their own IPAM (an ipam key in the plugin config); podnet's ranges do not apply" };
  const cniVersion = versionOf(config);
  if (typeof cniVersion !== 'string') return cniVersion;
  const name = 'name' in config ? config['name'] : network.metadata.name;
  if (typeof name !== 'string' || !networkNamePattern.test(name)) {
    return { field: `${base}.name`, reason: `name ${JSON.stringify(name)} is not a CNI network name (letters, digits, _ . -, starting with a letter or digit): plugins make paths of it` };
  }
  for (const flag of ['disableCheck', 'disableGC'] as const) {
    if (flag in config && typeof config[flag] !== 'boolean') return { field: `${base}.${flag}`, reason: `${flag} must be true or false` };
  }
  const list = 'plugins' in config;
  if (list && (!Array.isArray(config['plugins']) || config['plugins'].length === 0)) return { field: `${base}.plugins`, reason: 'plugins must be a list of at least one plugin config' };
  const given: unknown[] = list ? (config['plugins'] as unknown[]) : [config];
  const plugins: DelegatedConfig['plugins'] = [];
  for (const [i, plugin] of given.entries()) {
    const at = list ? `${base}.plugins[${i}]` : base;
    if (!isObject(plugin)) return { field: at, reason: 'a plugin config must be an object' };
    const type = plugin['type'];
    if (typeof type !== 'string' || !pluginTypePattern.test(type)) {
      return { field: `${at}.type`, reason: type === undefined ? 'every plugin config needs a type: the plugin binary to run' : `type ${JSON.stringify(type)} is not a plugin binary's name (letters, digits, _ . + -; no path)` };
    }
    // The plugin runs its IPAM plugin by type from the same bin dirs: the same rule.
    const ipam = plugin['ipam'];
    if (isObject(ipam) && ipam['type'] !== undefined && (typeof ipam['type'] !== 'string' || !pluginTypePattern.test(ipam['type']))) {
      return { field: `${at}.ipam.type`, reason: `type ${JSON.stringify(ipam['type'])} is not a plugin binary's name (letters, digits, _ . + -; no path)` };
    }
    const { name: _n, cniVersion: _v, cniVersions: _vs, prevResult: _p, disableCheck: _c, disableGC: _g, ...own } = plugin;
    plugins.push({ ...own, type });
  }
  return { name, cniVersion, plugins, ...(config['disableCheck'] === true ? { disableCheck: true } : {}), ...(config['disableGC'] === true ? { disableGC: true } : {}) };
}

/**
 * The version a list is run at. With cniVersions (1.1), the highest of them podnet runs, as
 * libcni picks, else cniVersion; without, cniVersion, 1.0.0 when absent.
 */
function versionOf(config: Record<string, unknown>): string | ConfigProblem {
  const base = 'spec.cni.config';
  const runs = (v: unknown): v is string => typeof v === 'string' && (delegatedCniVersions as readonly string[]).includes(v);
  if ('cniVersions' in config) {
    const listed = config['cniVersions'];
    if (!Array.isArray(listed) || !listed.every((v) => typeof v === 'string')) return { field: `${base}.cniVersions`, reason: 'cniVersions must be a list of versions' };
    // delegatedCniVersions is in order: the last one listed is the highest.
    const highest = [...delegatedCniVersions].reverse().find((v) => listed.includes(v));
    if (highest) return highest;
  }
  // Absent is the default; null is a value, and not a version.
  const cniVersion = 'cniVersion' in config ? config['cniVersion'] : '1.0.0';
  if (runs(cniVersion)) return cniVersion;
  const listed = 'cniVersions' in config ? ` nor is any of cniVersions ${JSON.stringify(config['cniVersions'])}` : '';
  return { field: `${base}.cniVersion`, reason: `cniVersion ${JSON.stringify(cniVersion)} is not one podnet runs plugins at (${delegatedCniVersions.join(', ')})${listed}` };
}

/** Whether a list gets STATUS before its ADD: its version knows it (1.1.0 brought it). */
export function runsStatus(config: DelegatedConfig): boolean {
  return config.cniVersion === '1.1.0';
}

/** Whether a list gets GC: its version knows it (1.1.0 brought it) and it did not opt out. */
export function runsGc(config: DelegatedConfig): boolean {
  return config.cniVersion === '1.1.0' && !config.disableGC;
}

/** Whether a list gets CHECK: its version knows it (0.4.0 brought it) and it did not opt out. */
export function runsCheck(config: DelegatedConfig): boolean {
  return !['0.3.0', '0.3.1'].includes(config.cniVersion) && !config.disableCheck;
}

export function isConfigProblem(value: DelegatedConfig | ConfigProblem): value is ConfigProblem {
  return 'reason' in value;
}

/** A plugin's stdin: its own keys, the list's name and version, and the result so far. */
export function pluginStdin(config: DelegatedConfig, index: number, prevResult?: unknown): Record<string, unknown> {
  return { ...config.plugins[index], name: config.name, cniVersion: config.cniVersion, ...(prevResult !== undefined ? { prevResult } : {}) };
}

/**
 * What keeps a plugin's answer from being a result podnet can read (CniResult in
 * schemas/protocol.schema.json: interfaces, ips and dns of the spec's shapes, bounded), or
 * undefined. Status is built from it.
 */
export function resultShapeProblem(value: unknown): string | undefined {
  return violationsOf('CniResult', value);
}

/** A result podnet can read, or undefined (a primary plugin's result is passed on whatever it is, but read only when it is one). */
export function readableResult(value: unknown): CniResult | undefined {
  return isDocument('CniResult', value) ? value : undefined;
}

/** The addresses, MAC and gateways a result gives the pod's interface `ifname`. */
export function resultFor(result: CniResult | undefined, ifname: string): { ips: string[]; mac?: string; gateways: string[] } {
  const interfaces = result?.interfaces ?? [];
  const index = interfaces.findIndex((i) => i.name === ifname && i.sandbox);
  const ips = (result?.ips ?? []).filter((ip) => index < 0 || ip.interface === undefined || ip.interface === index);
  const mac = index >= 0 ? interfaces[index]!.mac : undefined;
  return {
    ips: ips.flatMap((ip) => (ip.address ? [ip.address] : [])),
    ...(mac ? { mac } : {}),
    gateways: ips.flatMap((ip) => (ip.gateway ? [ip.gateway] : [])),
  };
}
