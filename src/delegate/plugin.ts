// Runs CNI plugins the way a runtime does: the binary found in the node's CNI bin dirs by its
// type, the CNI_* environment (and nothing else of the daemon's), the config on stdin, a time
// limit; the answer read as a result (ADD), nothing (DEL, CHECK, GC, STATUS) or a CNI error
// object. A list is run by the chaining rules of the CNI spec: ADD in order, each plugin given the
// result so far; DEL in reverse and CHECK in order, each given the list's cached result; GC and
// STATUS (1.1) for every plugin, for the network as a whole. Each plugin runs in a PID namespace
// of its own, so that nothing it started outlives its run (ADR 14).
import { noMetrics, type PluginMetrics } from '../metrics.ts';
import { parseBoundedJson } from '../protocol/bounded-json.ts';
import { PodnetError } from '../errors.ts';
import { pluginStdin, resultShapeProblem, type CniResult, type DelegatedConfig } from '../model/cni-config.ts';
import { findExecutable, probePidNamespaces, startProcess, type PidNamespaces } from '../process.ts';

export type CniCommand = 'ADD' | 'DEL' | 'CHECK' | 'GC' | 'STATUS';

/** An attachment a GC must leave alone (the spec's cni.dev/valid-attachments). */
export interface ValidAttachment {
  containerID: string;
  ifname: string;
}

/** Who the plugin is run for: the CNI_CONTAINERID, CNI_NETNS, CNI_IFNAME and CNI_ARGS of the call. */
export interface PluginTarget {
  containerId: string;
  /** Empty for a DEL whose netns is gone: the spec lets a runtime leave it out then. */
  netns: string;
  ifname: string;
  /** K8S_POD_NAMESPACE=...;K8S_POD_NAME=...: what the pod's runtime passed, so that plugins that read it see the same. */
  args: string;
}

export interface PluginRunnerOptions {
  binDirs: readonly string[];
  timeoutMs: number;
}

/** The PATH a plugin gets: the system's folders, never the daemon's. */
const systemPath = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** A plugin may print its result and its logs no longer than this. */
const maxOutputBytes = 1 << 20;

/** Of its logs, only an excerpt reaches a message. */
const maxLogBytes = 4096;

/** The CNI spec's well-known error codes, for messages. */
const cniCodeNames: Record<number, string> = {
  1: 'incompatible CNI version',
  2: 'unsupported field',
  3: 'container unknown or does not exist',
  4: 'invalid environment variables',
  5: 'I/O failure',
  6: 'failed to decode content',
  7: 'invalid network config',
  11: 'try again later',
  50: 'plugin not available',
  51: 'plugin not available, limited connectivity',
};

export class PluginRunner {
  private readonly opts: PluginRunnerOptions;
  /** util-linux's unshare, which gives each plugin its PID namespace: from the system's folders too. */
  private readonly unshare: string | undefined;
  private readonly metrics: PluginMetrics;

  constructor(opts: PluginRunnerOptions, metrics: PluginMetrics = noMetrics) {
    this.opts = opts;
    this.metrics = metrics;
    this.unshare = findExecutable('unshare', systemPath.split(':'));
  }

  /**
   * Throws NOT_AVAILABLE naming the first plugin of the list that is not in the bin dirs. Before
   * an ADD: a list with one missing is not started, so there is nothing for DEL to undo.
   */
  requirePlugins(config: DelegatedConfig): void {
    for (const plugin of config.plugins) this.binaryOf(String(plugin['type']), config.name);
  }

  /** ADD every plugin of the list in order; the last one's result is the list's. */
  async add(config: DelegatedConfig, target: PluginTarget): Promise<CniResult> {
    let result: CniResult | undefined;
    for (const [i, plugin] of config.plugins.entries()) {
      result = (await this.run(String(plugin['type']), 'ADD', pluginStdin(config, i, result), target, config.name)) as CniResult;
    }
    return result!;
  }

  /** DEL every plugin in reverse, each given the cached result (when the ADD got as far as one). */
  async del(config: DelegatedConfig, target: PluginTarget, cached: CniResult | undefined): Promise<void> {
    for (let i = config.plugins.length - 1; i >= 0; i--) {
      await this.run(String(config.plugins[i]!['type']), 'DEL', pluginStdin(config, i, cached), target, config.name);
    }
  }

  /** CHECK every plugin in order against the cached result; the first failure is thrown. */
  async check(config: DelegatedConfig, target: PluginTarget, cached: CniResult): Promise<void> {
    for (const [i, plugin] of config.plugins.entries()) await this.run(String(plugin['type']), 'CHECK', pluginStdin(config, i, cached), target, config.name);
  }

  /**
   * GC every plugin of the list (CNI 1.1): each removes what it holds for attachments of this
   * network other than `valid`. Every plugin is run; the first failure is thrown after.
   */
  async gc(config: DelegatedConfig, valid: readonly ValidAttachment[]): Promise<void> {
    let failed: unknown;
    for (const [i, plugin] of config.plugins.entries()) {
      const stdin = { ...pluginStdin(config, i), 'cni.dev/valid-attachments': valid };
      await this.run(String(plugin['type']), 'GC', stdin, undefined, config.name).catch((err: unknown) => (failed ??= err));
    }
    if (failed) throw failed;
  }

  /**
   * STATUS every plugin of the list (CNI 1.1): whether each is ready for ADD. The first that is
   * not is thrown (its CNI error, typically 50 or 51), and the list is not started.
   */
  async status(config: DelegatedConfig): Promise<void> {
    for (const [i, plugin] of config.plugins.entries()) await this.run(String(plugin['type']), 'STATUS', pluginStdin(config, i), undefined, config.name);
  }

  /** The binary a type names: the first bin dir that has it, executable. */
  binaryOf(type: string, network: string): string {
    const path = findExecutable(type, this.opts.binDirs);
    if (path !== undefined) return path;
    throw new PodnetError('NOT_AVAILABLE', `Network ${network}: plugin ${type} is not in the CNI bin dirs (${this.opts.binDirs.join(', ')})`);
  }

  /**
   * The PID namespace a plugin runs in, when this node can make one (CAP_SYS_ADMIN, unshare).
   * Not for a netns named through /proc (/proc/<pid>/ns/net, as some runtimes pass it): the
   * plugin's /proc is its namespace's, where that pid is not. Those plugins, and all where no
   * namespace can be had, run in a process group of their own, which a setsid leaves.
   */
  private async pidNamespaceFor(target: PluginTarget | undefined): Promise<PidNamespaces | undefined> {
    if (this.unshare === undefined || target?.netns.startsWith('/proc/')) return undefined;
    // A probe that could not start (EMFILE) is asked again by the next plugin.
    const probe = await probePidNamespaces(this.unshare).catch(() => undefined);
    return typeof probe === 'object' ? probe : undefined;
  }

  /** One plugin, for one attachment (`target`), or for its whole network (GC, STATUS: none). */
  private async run(type: string, command: CniCommand, stdin: Record<string, unknown>, target: PluginTarget | undefined, network: string): Promise<unknown> {
    const file = this.binaryOf(type, network);
    const pidNamespace = await this.pidNamespaceFor(target);
    const env: Record<string, string> = {
      CNI_COMMAND: command,
      ...(target ? { CNI_CONTAINERID: target.containerId, CNI_NETNS: target.netns, CNI_IFNAME: target.ifname, CNI_ARGS: target.args } : {}),
      CNI_PATH: this.opts.binDirs.join(':'),
      // Plugins run iptables, ip and the like (bridge's ipMasq, portmap): from the system's folders only.
      PATH: systemPath,
    };
    const what = `Network ${network}: plugin ${type} ${command}`;
    // Timed from here: a plugin found in the bin dirs, so its type is one of a bounded set (a metric's label).
    const started = performance.now();
    const told = (ok: boolean) => this.metrics.pluginCalled({ plugin: type, command, seconds: (performance.now() - started) / 1000, ok });
    return new Promise<unknown>((resolve, reject) => {
      // No shell and no argv beyond the binary: the spec passes everything in env and on stdin.
      // Its PID namespace ends whatever it started when it exits or is killed at the time limit;
      // a process group of its own does, as far as it reaches, where there is no namespace.
      const plugin = startProcess(file, [], { env, ownGroup: true, pidNamespace, maxStdoutBytes: maxOutputBytes, maxStderrBytes: maxLogBytes });
      // The call ends at the time limit, not when the plugin's exit is seen; that exit then settles nothing.
      const timer = setTimeout(() => {
        plugin.kill();
        reject(new PodnetError('TRY_AGAIN_LATER', `${what}: no answer in ${this.opts.timeoutMs / 1000} s; killed`));
      }, this.opts.timeoutMs);
      plugin.exited.then(
        ({ code, signal, stdout, stderr }) => {
          clearTimeout(timer);
          if (code !== 0) return reject(pluginError(what, stdout, stderr, signal ? `killed by ${signal}` : `exit status ${code}`));
          try {
            resolve(answerOf(command, stdout, what));
          } catch (err) {
            reject(err);
          }
        },
        (e: Error) => {
          clearTimeout(timer);
          reject(new PodnetError('NOT_AVAILABLE', `${what}: could not run ${file}: ${e.message}`));
        },
      );
      plugin.feed(JSON.stringify(stdin));
    }).then(
      (answer) => {
        told(true);
        return answer;
      },
      (err: unknown) => {
        told(false);
        throw err;
      },
    );
  }
}

/** ADD answers a result object; DEL and CHECK answer nothing, which a plugin may still print. */
function answerOf(command: CniCommand, stdout: string, what: string): unknown {
  if (command !== 'ADD') return undefined;
  let value: unknown;
  try {
    value = parseBoundedJson(stdout, 'its result', { maxBytes: maxOutputBytes }, 'DECODE_FAILURE');
  } catch (err) {
    // Not JSON, or past a bound (too big, too deep): the latter is said.
    const message = (err as Error).message;
    const bound = message.startsWith('its result is not JSON') ? '' : ` (${message})`;
    throw new PodnetError('DECODE_FAILURE', `${what}: succeeded but printed no JSON result${bound}: ${excerpt(stdout)}`);
  }
  const wrong = resultShapeProblem(value);
  if (wrong) throw new PodnetError('DECODE_FAILURE', `${what}: its result is not a CNI result (${wrong}): ${excerpt(stdout)}`);
  return value;
}

/** A failed plugin's CNI error object ({code, msg, details}), or what it printed instead. */
function pluginError(what: string, stdout: string, stderr: string, how: string): PodnetError {
  let error: { code?: unknown; msg?: unknown; details?: unknown } | undefined;
  try {
    error = parseBoundedJson(stdout, 'its error', { maxBytes: maxOutputBytes }) as typeof error;
  } catch {
    error = undefined;
  }
  if (error && typeof error.code === 'number' && typeof error.msg === 'string') {
    const name = cniCodeNames[error.code];
    const details = typeof error.details === 'string' && error.details.trim() !== '' ? ` (${oneLine(error.details)})` : '';
    // The code rides along in details: a caller tells a transient failure (11) from the others.
    return new PodnetError('PLUGIN_FAILED', `${what}: CNI error ${error.code}${name ? ` (${name})` : ''}: ${oneLine(error.msg)}${details}`, String(error.code));
  }
  const printed = stdout.trim() !== '' ? stdout : stderr;
  return new PodnetError('PLUGIN_FAILED', `${what}: failed (${how}) without a CNI error object: ${excerpt(printed)}`);
}

/** A plugin's own words in a message: one line, bounded, as they are. */
function oneLine(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  return line.length > 300 ? `${line.slice(0, 300)}...` : line;
}

/** Untrusted output in a message: one line, bounded, quoted. */
function excerpt(text: string): string {
  const line = text.replace(/\s+/g, ' ').trim();
  if (line === '') return '(nothing)';
  return JSON.stringify(line.length > 200 ? `${line.slice(0, 200)}...` : line);
}
