// The only code that runs commands in a network namespace: iproute2 (ip, tc) and sysctl, on the
// host or, through nsenter --net=PATH, inside a pod's netns. Every command is an argv array.
// Batches go to `ip -batch -` / `tc -batch -` on stdin, one process per namespace and run of
// steps; batch lines are split by ip on whitespace, and every name in them has passed a schema
// that admits no whitespace.
import { PodnetError } from '../errors.ts';
import { describeWhere, type Tool, type Where } from '../model/step.ts';
import type { ObservedTable } from '../model/port-security.ts';
import { wireguardDumpOf, type ObservedWireguard } from '../model/wireguard-config.ts';
import { joinsOthers, type BatchResult, type StartedBatch } from './batch.ts';
import { joinBatches } from './join.ts';
import type { LaunchOptions } from '../launcher/launcher.ts';
import { findExecutable, startProcess, type ProcessExit, type StartedProcess } from '../process.ts';

// The interface below speaks of them: who is given a runner finds them here too.
export type { BatchResult, StartedBatch } from './batch.ts';

/**
 * A read an ip batch ends with, in its own process: the commands (`addr show`) run with `-json`
 * and the global `options` (`-d`) once the lines have, so that what they made is read back without
 * a process of its own. ip prints nothing for the lines that change things.
 */
export interface ReadAfter {
  options: readonly string[];
  commands: readonly string[];
}

export interface NetnsRunner {
  /**
   * Runs each command of `commands` (`addr show`, `route show table all`) in one ip or tc
   * process with `-json` and the global `options` (`-6`, `-d`); resolves with each one's parsed output.
   */
  query(where: Where, tool: 'ip' | 'tc', options: readonly string[], commands: readonly string[]): Promise<unknown[]>;
  /**
   * Runs the lines in order, stopping at the first that fails. Resolves with the number of
   * lines that succeeded and the failure, if any.
   */
  batch(where: Where, tool: Tool, lines: readonly string[]): Promise<BatchResult>;
  /**
   * Starts the process of a batch now, for lines given later: its start (ip loading its libraries
   * and entering the netns, most of a short batch's time) then overlaps the batch before it. The
   * host's ip and nft batches join others instead (join.ts): their process starts when they run.
   * An ip batch in a pod's netns may end with `readAfter`.
   */
  start(where: Where, tool: Tool, readAfter?: ReadAfter): StartedBatch;
  /** The values of sysctls by path (net/ipv4/ip_forward), whitespace collapsed; a path that does not exist is left out. */
  readSysctls(where: Where, paths: readonly string[]): Promise<Map<string, string>>;
  /** An nftables table (`bridge podnet`): its chains' rule counts and its sets' single names; undefined when it is not there. */
  readNftTable(where: Where, table: string): Promise<ObservedTable | undefined>;
  /** A WireGuard interface's public key, port and peers (`wg show IF dump`, its private key dropped); undefined when there is no such interface. */
  readWireguard(where: Where, dev: string): Promise<ObservedWireguard | undefined>;
}

/**
 * What a tool may print. ip -json of a host's every route and address is the most: tens of
 * thousands of routes come to a few MiB. Errors are a line or two (ip stops at a failed line).
 */
const toolOutput: Pick<LaunchOptions, 'maxStdoutBytes' | 'maxStderrBytes'> = { maxStdoutBytes: 64 << 20, maxStderrBytes: 64 << 10 };

/**
 * The tools' whole environment: the daemon's PATH (each tool is given by its path; what a tool
 * may start of its own finds it by this), and the C locale, so that the messages read here
 * ("Command failed -:3", "No such file or directory") are the ones matched whatever the node's
 * locale. Built once: spawn would otherwise copy the daemon's whole environment at every start
 * (0.7 s of a 500-sandbox pass in bench/resync).
 */
let toolOptions: LaunchOptions | undefined;

/** PATH for a daemon started without one, or with an empty one: where Debian puts ip, tc, nft and nsenter. */
const defaultPath = '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin';

/** How the tools are started: by this process, or by the daemon's launcher (ADR 22). */
type ToolStarter = (file: string, args: readonly string[], options: LaunchOptions) => StartedProcess;
let starter: ToolStarter = startProcess;

/**
 * Has the daemon's launcher start the tools from now on (undefined: this process again). One
 * for the process, as the runner is: its ready host process and its joined batches are the
 * process's too.
 */
export function startToolsWith(start: ToolStarter | undefined): void {
  starter = start ?? startProcess;
}

function startTool(file: string, args: readonly string[]): StartedProcess {
  toolOptions ??= { ...toolOutput, env: { PATH: process.env['PATH'] || defaultPath, LC_ALL: 'C' } };
  return starter(toolPath(file), args, toolOptions);
}

function exec(file: string, args: readonly string[], input = ''): Promise<ProcessExit> {
  const started = startTool(file, args);
  started.feed(input);
  return started.exited;
}

const toolPaths = new Map<string, string>();

/** The daemon's PATH as folders; an empty entry is the working folder, as for a shell. */
const pathDirs = () => (process.env['PATH'] || defaultPath).split(':').map((dir) => dir || '.');

/**
 * Where `name` is on PATH, looked up once: spawn would otherwise try each PATH folder before it on
 * every command (an exec that fails costs as much as a fork).
 */
function toolPath(name: string): string {
  let path = toolPaths.get(name);
  if (path === undefined) {
    path = findExecutable(name, pathDirs()) ?? name;
    toolPaths.set(name, path);
  }
  return path;
}

/** Where a tool is, for nsenter to exec it: toolPath, or a test's own. */
type PathOf = (name: string) => string;

/** The argv that runs `file` with `args` at `where`; its first element is a name, found on PATH at start (startTool). */
function argv(where: Where, file: string, args: readonly string[], pathOf: PathOf = toolPath): [string, string[]] {
  if (where === 'host') return [file, [...args]];
  // Not ip -n or tc -n, though each is one exec fewer: they unshare a mount namespace to mount the
  // netns's /sys, which copies the node's whole mount table, every pod's mounts included, on every
  // command (ADR 23). The tool by its path: nsenter would try each folder of PATH before it.
  return ['nsenter', [`--net=${where.netns}`, '--', pathOf(file), ...args]];
}

/**
 * The argv of the process of a batch of `tool` at `where`, which reads its lines on stdin; ip's
 * ends with `readAfter` when given (a read is ip's only: startBatch refuses others).
 */
export function batchArgv(where: Where, tool: Exclude<Tool, 'sysctl' | 'wg'>, readAfter?: ReadAfter, pathOf: PathOf = toolPath): [string, string[]] {
  switch (tool) {
    case 'ip':
      return argv(where, 'ip', readAfter ? ['-json', ...readAfter.options, '-batch', '-'] : ['-batch', '-'], pathOf);
    case 'ip6':
      return argv(where, 'ip', ['-6', '-batch', '-'], pathOf);
    case 'tc':
      return argv(where, 'tc', ['-batch', '-'], pathOf);
    case 'nft':
      return argv(where, 'nft', ['-f', '-'], pathOf);
  }
}

/** The argv of one line of a sysctl batch: sysctl -w takes it as an argument, a process a line. */
export function sysctlArgv(where: Where, line: string, pathOf: PathOf = toolPath): [string, string[]] {
  return argv(where, 'sysctl', ['-q', '-w', line], pathOf);
}

/** The argv of one line of a wg batch (`set IF ...`): wg has no batch mode; a process a line, its words the arguments. */
export function wgArgv(where: Where, line: string, pathOf: PathOf = toolPath): [string, string[]] {
  return argv(where, 'wg', line.split(' '), pathOf);
}

/**
 * The host's `ip -batch -`, started before a batch needs it: nearly every attach runs one host
 * batch (the veth), and Node's spawn blocks until the child has exec'd, 2 to 3 ms here, most of
 * a short batch's time. It has run nothing, so it holds no interface index that a link made again
 * under the same name would make wrong (the reason no ip process lives across batches). One at a
 * time; the next starts once the one taken has exited, after the batch that took it.
 */
let readyHostBatch: StartedProcess | undefined;

function hostBatchProcess(file: string, args: readonly string[]): StartedProcess {
  // One that died while it waited (killed by someone) is not taken: its batch would fail unsaid.
  const ready = readyHostBatch && readyHostBatch.running() ? readyHostBatch : undefined;
  readyHostBatch = undefined;
  const taken = ready ?? startTool(file, args);
  taken.hold(true);
  const replace = () =>
    setImmediate(() => {
      if (readyHostBatch) return;
      try {
        const next = (readyHostBatch = startTool(file, args));
        next.hold(false);
        const gone = () => {
          if (readyHostBatch === next) readyHostBatch = undefined;
        };
        next.exited.then(gone, gone);
      } catch {
        // No process to keep ready; the next batch starts its own and reports why it could not.
        readyHostBatch = undefined;
      }
    });
  taken.exited.then(replace, replace);
  return taken;
}

/**
 * A table as `nft -j list table` prints it: {"nftables": [{"metainfo": ...}, {"table": ...},
 * {"set": {"name", "elem": ["pnv...", ...]}}, {"chain": {"name"}}, {"rule": {"chain"}}, ...]}; a set
 * has no elem when empty, and the elements of a set of several keys are objects, left out here.
 */
export function nftTableOf(json: string): ObservedTable {
  type Entry = {
    table?: { flags?: unknown };
    set?: { name?: unknown; elem?: unknown[] };
    chain?: { name?: unknown; type?: unknown; hook?: unknown; prio?: unknown; policy?: unknown };
    rule?: { chain?: unknown; comment?: unknown };
  };
  const rules = new Map<string, number>();
  const names = new Map<string, Set<string>>();
  const hooks = new Map<string, string>();
  let flagged = false;
  const comments: string[] = [];
  for (const e of (JSON.parse(json) as { nftables?: Entry[] }).nftables ?? []) {
    // Whatever they say (ObservedTable.flagged).
    if (e.table && 'flags' in e.table) flagged = true;
    const chain = e.chain;
    if (typeof chain?.name === 'string' && !rules.has(chain.name)) {
      rules.set(chain.name, 0);
      if (chain.hook !== undefined) hooks.set(chain.name, [chain.type, chain.hook, chain.prio, chain.policy].join(' '));
    }
    if (typeof e.rule?.chain === 'string') rules.set(e.rule.chain, (rules.get(e.rule.chain) ?? 0) + 1);
    if (typeof e.rule?.comment === 'string') comments.push(e.rule.comment);
    if (typeof e.set?.name === 'string') names.set(e.set.name, new Set((e.set.elem ?? []).filter((n): n is string => typeof n === 'string')));
  }
  return { rules, names, hooks, flagged, comments };
}

/** What podnet says when nft is not on the node: what it is for, and the two ways out. */
function nftMissing(): PodnetError {
  return new PodnetError('NOT_AVAILABLE', 'nft (Debian package nftables) is not installed on this node: port security, DSCP marking and the guard of WireGuard ports need it; install it, or set spec.bridge.portSecurity: false on the Network, ask no dscp and no wireguard Network');
}

/**
 * Whether a tool podnet needs only for some documents (nft, wg) is on the node: looked for once
 * found, since every secured port's change asks (bench/resync: 0.3 s of a pass at 500 pods); until
 * then, at each ask, so installing it heals a node.
 */
const toolsFound = new Set<string>();
function installed(tool: 'nft' | 'wg'): boolean {
  if (!toolsFound.has(tool) && findExecutable(tool, pathDirs()) !== undefined) toolsFound.add(tool);
  return toolsFound.has(tool);
}

/** A batch in a process of its own, ending with `readAfter` when given. */
function startProcessBatch(where: Where, tool: 'ip' | 'ip6' | 'tc' | 'nft', readAfter?: ReadAfter): StartedBatch {
  const [file, list] = batchArgv(where, tool, readAfter);
  const started = where === 'host' && tool === 'ip' ? hostBatchProcess(file, list) : startTool(file, list);
  // A process let go reads an empty batch and exits; nothing waits on it.
  started.exited.catch(() => undefined);
  return {
    async run(lines) {
      const refused = refusal(tool, lines);
      const input = readAfter ? [...lines, ...readAfter.commands] : lines;
      started.feed(refused || lines.length === 0 ? '' : `${input.join('\n')}\n`);
      if (refused || lines.length === 0) return refused ?? { done: 0 };
      const exit = await started.exited;
      const result = batchResult(where, tool, input, exit);
      // A read that failed (the netns went) leaves no answers; what the lines did stands.
      if (readAfter && result.done >= lines.length) return { done: lines.length, ...answersOf(where, tool, readAfter.commands, exit) };
      return result;
    },
    cancel: () => started.feed(''),
  };
}

/** The answers of a read: one JSON document a command, each on a line of its own; none when it failed or said something else. */
function answersOf(where: Where, tool: Tool, commands: readonly string[], exit: ProcessExit): { read?: unknown[] } {
  try {
    return { read: parseAnswers(where, tool, commands, exit) };
  } catch {
    return {};
  }
}

/** `commands`' answers from an ip or tc -json process that ran them, each one JSON document on a line (nothing when it found nothing). */
function parseAnswers(where: Where, tool: Tool, commands: readonly string[], result: ProcessExit): unknown[] {
  if (result.stdoutCut) {
    throw new PodnetError('IO_FAILURE', `${tool} ${commands.join('; ')} in ${describeWhere(where)}: printed more than ${toolOutput.maxStdoutBytes} bytes`);
  }
  const outputs = result.stdout.split('\n').filter((l) => l.trim() !== '').map((l) => JSON.parse(l) as unknown);
  if (outputs.length !== commands.length) {
    throw new PodnetError('IO_FAILURE', `${tool} ${commands.join('; ')} in ${describeWhere(where)}: expected ${commands.length} answers, got ${outputs.length}`);
  }
  return outputs;
}

/** The host's ip and nft batches of sandboxes reconciled at once share a process (join.ts, ADR 21). */
const hostBatches = {
  ip: joinBatches(() => startProcessBatch('host', 'ip'), false),
  nft: joinBatches(() => startProcessBatch('host', 'nft'), true),
};

function startBatch(where: Where, tool: 'ip' | 'ip6' | 'tc' | 'nft', readAfter?: ReadAfter): StartedBatch {
  if (tool === 'nft' && !installed('nft')) return { run: async () => ({ done: 0, error: nftMissing() }), cancel: () => undefined };
  if (readAfter && (where === 'host' || tool !== 'ip')) throw new PodnetError('INTERNAL', `a read after a batch is for ip in a pod's netns, not ${tool} in ${describeWhere(where)}`);
  if (!joinsOthers(where, tool)) return startProcessBatch(where, tool, readAfter);
  const joined = hostBatches[tool as 'ip' | 'nft'];
  // Checked before it joins the others: a refused line refuses its own batch only.
  return { run: async (lines) => refusal(tool, lines) ?? joined.run(lines), cancel: () => undefined };
}

function batchResult(where: Where, tool: Tool, lines: readonly string[], result: ProcessExit): BatchResult {
  if (result.code === 0) return { done: lines.length };
  // nft runs its batch as one transaction: nothing of it took.
  if (tool === 'nft') return { done: 0, error: new PodnetError('IO_FAILURE', `nft in ${describeWhere(where)}: ${result.stderr.split('\n').slice(0, 3).join(' ').trim()}`) };
  // ip and tc name the failing line: "Command failed -:3".
  const named = /Command failed -:(\d+)/.exec(result.stderr)?.[1];
  const message = result.stderr.split('\n').filter((l) => !l.startsWith('Command failed')).join(' ').trim();
  if (named === undefined) {
    // Killed, or its message cut short: which of its lines ran is not known.
    const how = result.signal ? `killed by ${result.signal}` : `exit status ${result.code}`;
    return { done: 0, unplaced: true, error: new PodnetError('IO_FAILURE', `${tool} in ${describeWhere(where)} failed (${how}) before saying at which line: ${message}`) };
  }
  const failed = Number(named);
  return { done: failed - 1, error: new PodnetError('IO_FAILURE', `${tool} ${lines[failed - 1] ?? ''} in ${describeWhere(where)}: ${message}`) };
}

/**
 * What a failed wg line says: its interface and wg's first line, what wg quotes left out (it
 * quotes a key file's content it cannot read as a key), not the line (16 peers of 16 addresses
 * each would not fit where a failure is told).
 */
export function wgFailure(line: string, stderr: string): string {
  const said = stderr.trim().split('\n')[0]!.replace(/`[^']*'/g, '(left out)').replace(/[A-Za-z0-9+/]{42}[A-Za-z0-9+/=]{2}/g, '(a key)').slice(0, 200);
  return `wg set ${line.split(' ')[1] ?? ''}: ${said}`;
}

const wgMissing = () => new PodnetError('NOT_AVAILABLE', 'wg (Debian package wireguard-tools) is not installed on this node: WireGuard Networks need it');

/** sysctl and wg: a process a line, the line its arguments. */
async function runEachLine(where: Where, tool: 'sysctl' | 'wg', lines: readonly string[]): Promise<BatchResult> {
  if (tool === 'wg' && !installed('wg')) return { done: 0, error: wgMissing() };
  for (const [i, line] of lines.entries()) {
    const [file, list] = tool === 'sysctl' ? sysctlArgv(where, line) : wgArgv(where, line);
    const result = await exec(file, list);
    if (result.code !== 0) return { done: i, error: new PodnetError('IO_FAILURE', `${tool === 'wg' ? wgFailure(line, result.stderr) : `sysctl ${line}: ${result.stderr.trim()}`} in ${describeWhere(where)}`) };
  }
  return { done: lines.length };
}

/**
 * ip and tc read a batch line as words split on whitespace, with # starting a comment and quotes
 * and backslashes grouping words. The schemas admit none of these in what reaches a line; this is
 * the last check, so that no document can ever change what a line means.
 */
function refusal(tool: Tool, lines: readonly string[]): BatchResult | undefined {
  // nft reads an interface name safely only quoted ("0x1" unquoted is the number 1, "counter" a
  // keyword): a quoted word of an interface name's characters is the one quote nft lines may hold.
  const bare = (line: string) => (tool === 'nft' ? line.replace(/"[A-Za-z0-9_.-]{1,15}"/g, '') : line);
  const bad = lines.find((l) => /["'\\#\n\r\0]/.test(bare(l)));
  if (bad === undefined) return undefined;
  return { done: 0, error: new PodnetError('INVALID_REQUEST', `refused to run ${tool} ${JSON.stringify(bad)}: it holds a character ${tool} would read specially`) };
}

export const netnsRunner: NetnsRunner = {
  async query(where, tool, options, commands) {
    const [file, list] = argv(where, tool, ['-json', ...options, '-batch', '-']);
    const result = await exec(file, list, `${commands.join('\n')}\n`);
    if (result.code !== 0) {
      throw new PodnetError('IO_FAILURE', `${tool} ${options.join(' ')} ${commands.join('; ')} in ${describeWhere(where)} failed: ${result.stderr.trim()}`);
    }
    return parseAnswers(where, tool, commands, result);
  },

  async batch(where, tool, lines) {
    if (lines.length === 0) return { done: 0 };
    return this.start(where, tool).run(lines);
  },

  start(where, tool, readAfter) {
    if (tool !== 'sysctl' && tool !== 'wg') return startBatch(where, tool, readAfter);
    // sysctl -w and wg take their line as arguments: a process cannot start before its line is known.
    return {
      run: async (lines) => refusal(tool, lines) ?? runEachLine(where, tool, lines),
      cancel: () => undefined,
    };
  },

  async readNftTable(where, table) {
    if (!installed('nft')) throw nftMissing();
    const [file, list] = argv(where, 'nft', ['-j', 'list', 'table', ...table.split(' ')]);
    const result = await exec(file, list);
    if (result.code !== 0) {
      if (/No such file or directory/.test(result.stderr)) return undefined;
      throw new PodnetError('IO_FAILURE', `nft list table ${table} in ${describeWhere(where)} failed: ${result.stderr.trim()}`);
    }
    // Said as what it is, not as JSON that does not parse.
    if (result.stdoutCut) throw new PodnetError('IO_FAILURE', `nft list table ${table} in ${describeWhere(where)}: printed more than ${toolOutput.maxStdoutBytes} bytes`);
    try {
      return nftTableOf(result.stdout);
    } catch (err) {
      // nft 1.0.6 may list a dormant table's flags as JSON cut short.
      throw new PodnetError('IO_FAILURE', `nft -j list table ${table} in ${describeWhere(where)} printed what is not JSON (${(err as Error).message})`);
    }
  },

  async readWireguard(where, dev) {
    if (!installed('wg')) throw wgMissing();
    const [file, list] = argv(where, 'wg', ['show', dev, 'dump']);
    const result = await exec(file, list);
    if (result.code !== 0) {
      if (/No such device/.test(result.stderr)) return undefined;
      throw new PodnetError('IO_FAILURE', `wg show ${dev} dump in ${describeWhere(where)} failed: ${result.stderr.trim().split('\n')[0]!.slice(0, 200)}`);
    }
    if (result.stdoutCut) throw new PodnetError('IO_FAILURE', `wg show ${dev} dump in ${describeWhere(where)}: printed more than ${toolOutput.maxStdoutBytes} bytes`);
    try {
      return wireguardDumpOf(result.stdout);
    } catch (err) {
      throw new PodnetError('IO_FAILURE', `wg show ${dev} dump in ${describeWhere(where)}: ${(err as Error).message}`);
    }
  },

  async readSysctls(where, paths) {
    const values = new Map<string, string>();
    if (paths.length === 0) return values;
    // grep -H prints "file:value" per file and goes on past a file that does not exist.
    const [file, list] = argv(where, 'grep', ['-H', '', ...paths.map((p) => `/proc/sys/${p}`)]);
    const result = await exec(file, list);
    for (const line of result.stdout.split('\n')) {
      const colon = line.indexOf(':');
      if (colon < 0 || !line.startsWith('/proc/sys/')) continue;
      values.set(line.slice('/proc/sys/'.length, colon), line.slice(colon + 1).trim().split(/\s+/).join(' '));
    }
    return values;
  },
};
