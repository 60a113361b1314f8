// podnet install and uninstall on a node's CNI dirs: the executable into the bin dir, podnet
// chained into the primary's config in the conf dir. Everything is checked before anything is
// written, and every write is atomic (temp file in the same folder, fsync, rename): the runtime
// reads these files while pods start, and must see the old file or the new one, never a torn one.
import { accessSync, chmodSync, closeSync, constants, copyFileSync, existsSync, fsyncSync, openSync, readFileSync, readSync, readdirSync, renameSync, statSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { PodnetError } from '../errors.ts';
import { parseDocument } from '../protocol/validate.ts';
import { syncDir, tempPrefix, writeFileAtomic } from '../registry/atomic-file.ts';
import {
  callsPodnet,
  chainedWaits,
  chain,
  configText,
  conflistNameFor,
  isChained,
  isSinglePlugin,
  originalSuffix,
  parsePrimary,
  primaryConfigName,
  unchain,
  type PluginList,
  type PodnetEntry,
} from './conflist.ts';

/** The executable's name in the bin dir: the conflist's "type". */
export const pluginFileName = 'podnet';

export interface InstallOptions {
  binDir: string;
  confDir: string;
  /** The executable to copy: the running one, unless a test gives another. */
  binary: string;
  entry: PodnetEntry;
  /** How long to wait for the primary's config to appear (the primary may install after podnet). */
  waitMs: number;
}

export interface InstallOutcome {
  binary: 'copied' | 'unchanged';
  /** The config file that now calls podnet. */
  config: string;
  chained: 'chained' | 'unchanged' | 'converted';
}

function writable(dir: string, what: string): void {
  try {
    accessSync(dir, constants.W_OK);
  } catch (err) {
    throw new PodnetError('IO_FAILURE', `${what} ${dir} is not writable (${(err as NodeJS.ErrnoException).code ?? (err as Error).message}); podnet changed nothing`);
  }
}

function configNames(confDir: string): string[] {
  try {
    return readdirSync(confDir);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw err;
  }
}

/** The primary's config file name, once there is one; polls until `waitMs` has passed. */
async function waitForPrimary(confDir: string, waitMs: number): Promise<string> {
  const end = Date.now() + waitMs;
  for (;;) {
    const name = primaryConfigName(configNames(confDir));
    if (name !== undefined) return name;
    if (Date.now() >= end) {
      throw new PodnetError(
        'NOT_AVAILABLE',
        `no CNI network config in ${confDir} after ${Math.round(waitMs / 1000)} s: podnet chains itself after the cluster's primary plugin, whose config (.conf, .conflist or .json) is not there yet`,
      );
    }
    await new Promise((r) => setTimeout(r, Math.min(250, Math.max(1, end - Date.now()))));
  }
}

/**
 * Whether two files hold the same bytes, read a chunk at a time: the executable is about 150 MB,
 * and the init container that compares it runs under a 128Mi limit (reading both whole took 372 MB).
 */
export function sameContent(a: string, b: string): boolean {
  let fa: number | undefined;
  let fb: number | undefined;
  try {
    if (statSync(a).size !== statSync(b).size) return false;
    fa = openSync(a, 'r');
    fb = openSync(b, 'r');
    const [ca, cb] = [Buffer.alloc(compareChunkBytes), Buffer.alloc(compareChunkBytes)];
    for (;;) {
      const na = readSync(fa, ca, 0, ca.length, null);
      const nb = readSync(fb, cb, 0, cb.length, null);
      if (na !== nb || !ca.subarray(0, na).equals(cb.subarray(0, nb))) return false;
      if (na === 0) return true;
    }
  } catch {
    return false;
  } finally {
    if (fa !== undefined) closeSync(fa);
    if (fb !== undefined) closeSync(fb);
  }
}

const compareChunkBytes = 1 << 20;

/**
 * Copies `binary` to `dir/podnet` atomically: a copy over a running executable fails with "text
 * file busy", and a runtime that runs the plugin mid-copy would run half a file. The rename gives
 * each run the old file or the new one.
 */
export function installBinary(binary: string, dir: string): 'copied' | 'unchanged' {
  const target = join(dir, pluginFileName);
  if (sameContent(binary, target)) return 'unchanged';
  const temp = join(dir, `${tempPrefix}${pluginFileName}.${process.pid}.${process.hrtime.bigint()}`);
  try {
    copyFileSync(binary, temp);
    const fd = openSync(temp, 'r');
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    chmodSync(temp, 0o755);
    renameSync(temp, target);
  } catch (err) {
    try {
      unlinkSync(temp);
    } catch {
      // not made
    }
    throw new PodnetError('IO_FAILURE', `could not copy ${binary} to ${target}: ${(err as Error).message}`);
  }
  syncDir(dir);
  return 'copied';
}

/** A config file's mode, to keep it on the file written in its place (runtimes read them as root; others may too). */
function modeOf(path: string): number {
  try {
    return statSync(path).mode & 0o777;
  } catch {
    return 0o644;
  }
}

/**
 * Chains podnet into the primary config of `confDir`; returns what it did. The primary's own
 * text is kept beside it (NAME.podnet-original) the first time. A single-plugin .conf or .json is
 * turned into NAME.conflist, which the runtime then takes in its place (the .conf is moved to the
 * kept original): a list is the only way to chain.
 */
export function chainPrimary(confDir: string, entry: PodnetEntry, primary: string): Pick<InstallOutcome, 'config' | 'chained'> {
  const path = join(confDir, primary);
  const text = readFileSync(path, 'utf8');
  const list = parsePrimary(path, text);
  if (!isSinglePlugin(primary) && isChained(list, entry)) return { config: path, chained: 'unchanged' };
  const mode = modeOf(path);
  const original = join(confDir, `${primary}${originalSuffix}`);
  if (!isSinglePlugin(primary)) {
    // The primary's own text, while it has no podnet in it: the first install, or the primary
    // rewrote its file since (its newer version is then the one to give back).
    if (!callsPodnet(list)) writeFileAtomic(original, text, { mode });
    writeFileAtomic(path, configText(chain(list, entry)), { mode });
    return { config: path, chained: 'chained' };
  }
  const listName = conflistNameFor(primary);
  const names = configNames(confDir);
  // A list beside it is podnet's own when podnet kept a .conf aside before: the primary wrote its
  // .conf again (an upgrade), and the list is made anew from it.
  if (names.includes(listName) && !names.includes(`${primary}${originalSuffix}`)) {
    throw new PodnetError('INVALID_CONFIG', `${path} is a single plugin and ${listName} exists beside it: podnet would have to overwrite that file to chain itself; podnet changed nothing`);
  }
  const after = primaryConfigName([...names.filter((n) => n !== primary), listName]);
  if (after !== listName) {
    throw new PodnetError('INVALID_CONFIG', `${path} is a single plugin: chained, it becomes ${listName}, but the runtime would then load ${after} first; podnet changed nothing`);
  }
  writeFileAtomic(join(confDir, listName), configText(chain(list, entry)), { mode });
  renameSync(path, original);
  syncDir(confDir);
  return { config: join(confDir, listName), chained: 'converted' };
}

/**
 * What the daemon does when the conf dir changes: chains podnet into the primary config when the
 * primary's file does not call it (a primary that rewrote its file on upgrade, or a new primary).
 * An entry already there is left as `podnet install` wrote it, and its waits are what `entry` is
 * given when it must be chained again (`remember`). Returns the file it chained into.
 */
export function chainIfMissing(confDir: string, entry: PodnetEntry, remember: (waits: Pick<PodnetEntry, 'timeoutMs' | 'firstPassTimeoutMs'>) => void = () => undefined): string | undefined {
  const primary = primaryConfigName(configNames(confDir));
  if (primary === undefined) return undefined;
  const path = join(confDir, primary);
  if (!isSinglePlugin(primary)) {
    const list = parsePrimary(path, readFileSync(path, 'utf8'));
    if (callsPodnet(list)) return void remember(chainedWaits(list));
  }
  return chainPrimary(confDir, entry, primary).config;
}

/** The primary's config file and what it says, read and checked; undefined without a primary. */
function readPrimary(confDir: string): { path: string; list: PluginList } | undefined {
  const primary = primaryConfigName(configNames(confDir));
  if (primary === undefined) return undefined;
  const path = join(confDir, primary);
  return { path, list: parsePrimary(path, readFileSync(path, 'utf8')) };
}

/** The primary's config file when it is Multus's (a plugin of type multus or multus-shim), else undefined. */
export function multusPrimary(confDir: string): string | undefined {
  const primary = readPrimary(confDir);
  return primary?.list.plugins.some((p) => typeof p['type'] === 'string' && /^multus(-shim)?$/.test(p['type'])) ? primary.path : undefined;
}

/**
 * The network the primary's config defines, whose pods the runtime hands podnet once it is
 * chained (the daemon adopts that network's pods from before). Undefined without a primary.
 */
export function primaryNetworkName(confDir: string): string | undefined {
  return readPrimary(confDir)?.list.name;
}

/**
 * `podnet install`: waits for the primary's config, checks it and both dirs, copies the
 * executable, then chains podnet (the binary first: a chained entry with no binary would fail
 * every pod's ADD). A failure to chain removes a binary this install put where none was.
 */
export async function install(opts: InstallOptions): Promise<InstallOutcome> {
  // The settings as the plugin will read them: refused here rather than on every pod's ADD.
  parseDocument('PluginConfig', { cniVersion: '1.0.0', name: 'podnet-install', ...opts.entry }, 'podnet install settings', 'INVALID_CONFIG');
  const primary = await waitForPrimary(opts.confDir, opts.waitMs);
  parsePrimary(join(opts.confDir, primary), readFileSync(join(opts.confDir, primary), 'utf8'));
  writable(opts.binDir, 'the CNI bin dir');
  writable(opts.confDir, 'the CNI conf dir');
  const target = join(opts.binDir, pluginFileName);
  const hadBinary = existsSync(target);
  const binary = installBinary(opts.binary, opts.binDir);
  try {
    return { binary, ...chainPrimary(opts.confDir, opts.entry, primary) };
  } catch (err) {
    if (!hadBinary) unlinkSync(target);
    throw err;
  }
}

export interface UninstallOutcome {
  /** Config files podnet was taken out of, and those given back their original text. */
  unchained: string[];
  restored: string[];
  binary: 'removed' | 'absent';
}

/**
 * `podnet uninstall`'s part in the CNI dirs: podnet taken out of every config that calls it,
 * keeping whatever the primary changed since; where nothing else changed, the primary's original
 * file comes back byte for byte (a .conf podnet turned into a .conflist too). Then the binary goes.
 */
export function uninstallFromDirs(binDir: string, confDir: string): UninstallOutcome {
  const outcome: UninstallOutcome = { unchained: [], restored: [], binary: 'absent' };
  const names = configNames(confDir);
  for (const name of names.filter((n) => !n.startsWith('.') && n.endsWith('.conflist'))) {
    const path = join(confDir, name);
    const list = listOrUndefined(path);
    if (!list || !callsPodnet(list)) continue;
    const without = unchain(list);
    const mode = modeOf(path);
    const kept = [`${name}${originalSuffix}`, ...['.conf', '.json'].map((ext) => `${name.slice(0, -'.conflist'.length)}${ext}${originalSuffix}`)].find((n) => names.includes(n));
    const original = kept === undefined ? undefined : { file: join(confDir, kept), name: kept.slice(0, -originalSuffix.length), text: readFileSync(join(confDir, kept), 'utf8') };
    if (original && sameList(listOrUndefined(join(confDir, original.name), original.text), without)) {
      if (original.name === name) writeFileAtomic(path, original.text, { mode });
      else {
        writeFileAtomic(join(confDir, original.name), original.text, { mode });
        unlinkSync(path);
      }
      unlinkSync(original.file);
      outcome.restored.push(join(confDir, original.name));
    } else {
      writeFileAtomic(path, configText(without), { mode });
      if (original) unlinkSync(original.file);
    }
    syncDir(confDir);
    outcome.unchained.push(path);
  }
  const binary = join(binDir, pluginFileName);
  if (existsSync(binary)) {
    unlinkSync(binary);
    syncDir(binDir);
    outcome.binary = 'removed';
  }
  return outcome;
}

/** The file (or `text` under its name) as a plugin list; none when it cannot be read or is not one. */
function listOrUndefined(path: string, text?: string): PluginList | undefined {
  try {
    return parsePrimary(path, text ?? readFileSync(path, 'utf8'));
  } catch {
    return undefined;
  }
}

function sameList(a: PluginList | undefined, b: PluginList): boolean {
  return a !== undefined && JSON.stringify(a) === JSON.stringify(b);
}
