// The runtime's part, played by the tests: run a conflist per the CNI spec's chaining rules.
// ADD runs the plugins in order, each given the previous result as prevResult; DEL runs them in
// reverse with the cached ADD result; CHECK in order with it. A plugin that does not speak the
// conflist's version is run at its newest older one and its result carried up to the conflist's
// version, as a converting runtime does (the reference plugins stop at 1.0.0; podnet speaks 1.1.0).
import { execa } from 'execa';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { parseCniArgs } from '../../src/protocol/cni-args.ts';

export interface PluginConf {
  type: string;
  [key: string]: unknown;
}

export interface Conflist {
  cniVersion: string;
  name: string;
  plugins: PluginConf[];
}

export interface Attachment {
  containerId: string;
  netns: string;
  ifname: string;
  args?: string;
}

export class CniError extends Error {
  readonly code: number;
  readonly plugin: string;
  constructor(plugin: string, code: number, msg: string) {
    super(`${plugin}: CNI error ${code}: ${msg}`);
    this.plugin = plugin;
    this.code = code;
  }
}

export interface PluginRun {
  stdout: string;
  exitCode: number;
}

export class CniRuntime {
  readonly binDirs: readonly string[];
  /** Where add() leaves libcni's result cache (results/<network>-<container>-<ifname>), as a runtime does; none if unset. */
  readonly cacheDir: string | undefined;
  private readonly versions = new Map<string, string[]>();

  constructor(binDirs: readonly string[], options: { cacheDir?: string } = {}) {
    this.binDirs = binDirs;
    this.cacheDir = options.cacheDir;
  }

  /** The cache file libcni keeps for one attachment of `list`. */
  cacheFile(list: Conflist, att: Attachment): string {
    if (!this.cacheDir) throw new Error('this runtime keeps no result cache');
    return join(this.cacheDir, 'results', `${list.name}-${att.containerId}-${att.ifname}`);
  }

  /** What libcni 1.2 caches after an ADD: the config's bytes (base64, as Go marshals them), the attachment, CNI_ARGS as pairs, the result. */
  private writeCache(list: Conflist, att: Attachment, result: Record<string, unknown>): void {
    const file = this.cacheFile(list, att);
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 });
    const cniArgs = [...parseCniArgs(att.args)];
    const cached = {
      kind: 'cniCacheV1',
      containerId: att.containerId,
      config: Buffer.from(JSON.stringify(list)).toString('base64'),
      ifName: att.ifname,
      networkName: list.name,
      netns: att.netns,
      ...(cniArgs.length > 0 ? { cniArgs } : {}),
      result,
    };
    writeFileSync(file, JSON.stringify(cached), { mode: 0o600 });
  }

  /** The result add() cached for this attachment, as a runtime hands it to DEL and CHECK. */
  cachedResult(list: Conflist, att: Attachment): Record<string, unknown> {
    return (JSON.parse(readFileSync(this.cacheFile(list, att), 'utf8')) as { result: Record<string, unknown> }).result;
  }

  /** Runs one plugin binary with the CNI environment and `config` on stdin. */
  async exec(type: string, command: string, config: unknown, att?: Attachment): Promise<PluginRun> {
    const env: Record<string, string> = { CNI_COMMAND: command, CNI_PATH: this.binDirs.join(':') };
    if (att) {
      Object.assign(env, { CNI_CONTAINERID: att.containerId, CNI_NETNS: att.netns, CNI_IFNAME: att.ifname });
      if (att.args) env['CNI_ARGS'] = att.args;
    }
    const result = await execa(this.binaryOf(type), [], { env, extendEnv: false, input: JSON.stringify(config), reject: false });
    return { stdout: result.stdout, exitCode: result.exitCode ?? -1 };
  }

  async add(list: Conflist, att: Attachment): Promise<Record<string, unknown>> {
    let prev: Record<string, unknown> | undefined;
    for (const plugin of list.plugins) prev = await this.invoke(list, plugin, 'ADD', att, prev);
    if (this.cacheDir) this.writeCache(list, att, prev ?? {});
    return prev ?? {};
  }

  async check(list: Conflist, att: Attachment, cached: Record<string, unknown>): Promise<void> {
    for (const plugin of list.plugins) await this.invoke(list, plugin, 'CHECK', att, cached);
  }

  async del(list: Conflist, att: Attachment, cached?: Record<string, unknown>): Promise<void> {
    for (const plugin of [...list.plugins].reverse()) await this.invoke(list, plugin, 'DEL', att, cached);
    if (this.cacheDir) rmSync(this.cacheFile(list, att), { force: true });
  }

  /** What a plugin answers: a result (ADD) or nothing; a CniError carries its error object. */
  async invoke(
    list: Conflist,
    plugin: PluginConf,
    command: string,
    att: Attachment | undefined,
    prevResult?: Record<string, unknown>,
  ): Promise<Record<string, unknown> | undefined> {
    const version = await this.versionFor(plugin.type, list.cniVersion);
    const config: Record<string, unknown> = { ...plugin, cniVersion: version, name: list.name };
    const converted = version !== list.cniVersion;
    if (prevResult) config['prevResult'] = converted ? { ...prevResult, cniVersion: version } : prevResult;
    const run = await this.exec(plugin.type, command, config, att);
    const parsed = run.stdout.trim() === '' ? undefined : (JSON.parse(run.stdout) as Record<string, unknown>);
    if (run.exitCode !== 0) {
      throw new CniError(plugin.type, Number(parsed?.['code'] ?? -1), String(parsed?.['msg'] ?? run.stdout));
    }
    // A plugin run at an older version has its result carried up to the conflist's (the families
    // match for every version used here); one run at the conflist's version is returned untouched.
    return parsed && converted ? { ...parsed, cniVersion: list.cniVersion } : parsed;
  }

  /** The first bin dir holding the plugin, as a runtime searches CNI_PATH. */
  private binaryOf(type: string): string {
    const found = this.binDirs.map((dir) => join(dir, type)).find((path) => existsSync(path));
    if (!found) throw new Error(`plugin ${type} is in none of ${this.binDirs.join(', ')}`);
    return found;
  }

  private async versionFor(type: string, wanted: string): Promise<string> {
    let supported = this.versions.get(type);
    if (!supported) {
      const run = await this.exec(type, 'VERSION', { cniVersion: wanted });
      supported = (JSON.parse(run.stdout) as { supportedVersions: string[] }).supportedVersions;
      this.versions.set(type, supported);
    }
    if (supported.includes(wanted)) return wanted;
    const older = supported.filter((v) => v.split('.')[0] === wanted.split('.')[0] && v < wanted).sort();
    const fallback = older[older.length - 1];
    if (!fallback) throw new Error(`${type} speaks none of ${wanted}'s family: ${supported.join(', ')}`);
    return fallback;
  }
}
