// `sudo npm run demo`: podnet standalone, end to end, on this machine's kernel.
// It starts the daemon on a temporary state dir, starts two pods through the reference CNI plugins
// (bridge + host-local, then podnet, chained in one conflist), applies demo/network.yaml and
// demo/pod-config.yaml (net1 with addresses, eth0 MTU, a route in table 100 with its rule, a
// bandwidth cap), checks that all of it converges, shows the result, pings pod-a → pod-b over net1,
// deletes the config, checks that everything is gone, and cleans up on success, failure, SIGINT and
// SIGTERM. A run killed outright leaves /run/podnet-demo.json behind; the next run removes what it
// names before starting.
import { execa, type ResultPromise } from 'execa';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parse } from 'yaml';
import { CniError, CniRuntime, type Attachment, type Conflist } from '../e2e/lib/cni-runtime.ts';
import { podnetBinary, referencePluginDir, repoRoot } from '../e2e/lib/env.ts';
import { explainText } from '../src/cli/explain.ts';
import { hostInterfaceName } from '../src/model/host-links.ts';
import { bridgeNameOf } from '../src/model/kinds/bridge.ts';
import { PodnetError } from '../src/errors.ts';
import type { AppliedState, ObservedLink, ObservedRoute, ObservedRule } from '../src/model/state.ts';
import { observeLinks, observeQdiscs, observeRouting } from '../src/netns/observe.ts';
import { netnsRunner } from '../src/netns/runner.ts';
import { callDaemon } from '../src/protocol/client.ts';
import { routes } from '../src/protocol/paths.ts';
import { parseDocument, type Route, type Rule, type SandboxList } from '../src/protocol/validate.ts';

// --- What the demo uses ---

const runRecordPath = '/run/podnet-demo.json';
const files = { network: 'demo/network.yaml', config: 'demo/pod-config.yaml' } as const;

/** The "primary" network every pod gets at creation, as a cluster's CNI would give it. */
const primary = { bridge: 'cni-demo0', subnet: '198.18.200.0/24' } as const;

interface Pod {
  name: string;
  netns: string;
  att: Attachment;
  /** The conflist's ADD result, kept for DEL as a runtime caches it. */
  added?: Record<string, unknown>;
  eth0Mtu?: number;
  /** net1's IPv4 address, as the daemon applied it. */
  net1?: string;
}

const pods: Pod[] = ['pod-a', 'pod-b'].map((name) => {
  const args = `IgnoreUnknown=1;K8S_POD_NAMESPACE=default;K8S_POD_NAME=${name}`;
  return { name, netns: `demo-${name}`, att: { containerId: randomBytes(32).toString('hex'), netns: `/run/netns/demo-${name}`, ifname: 'eth0', args } };
});

let want: ReturnType<typeof readWant>;

/** What the demo's documents ask for, read from them so that the checks follow an edit. */
function readWant() {
  const read = <N extends 'Network' | 'PodNetworkConfig'>(name: N, file: string) =>
    parseDocument(name, parse(readFileSync(join(repoRoot, file), 'utf8')), file);
  const network = read('Network', files.network);
  const { spec } = read('PodNetworkConfig', files.config);
  const attachment = spec.attachments?.find((a) => a.network === network.metadata.name);
  const [eth0Mtu, route, rule, bandwidth] = [spec.interfaces?.find((i) => i.name === 'eth0')?.mtu, spec.routes?.[0], spec.rules?.[0], attachment?.bandwidth];
  if (network.spec.type !== 'bridge' || !attachment?.interface || !eth0Mtu || !route || !rule || !bandwidth) {
    throw new DemoFailure(`the demo shows a bridge Network (${files.network}) attached at a named interface with a bandwidth cap, eth0's MTU, a route and a rule (${files.config})`);
  }
  const bridge = bridgeNameOf(network);
  return { bridge, iface: attachment.interface, eth0Mtu, route, rule, bandwidth };
}

const tableNumber = (table: Route['table']) => (table === 'main' ? 254 : table);
/** The host end of a pod's veth on podnet's bridge, and the ifb that shapes its egress: as the daemon names them. */
const hostIf = (pod: Pod) => hostInterfaceName(pod.att.containerId, want.iface, 'pnv');
const ifb = (pod: Pod) => hostInterfaceName(pod.att.containerId, want.iface, 'pnb');
/** The host links podnet makes for the demo, and every one the demo may cause: known before anything starts, for the run record. */
const podnetLinks = () => [want.bridge, ...pods.flatMap((p) => [hostIf(p), ifb(p)])];
const demoLinks = () => [primary.bridge, ...podnetLinks()];

// --- Output ---

const tty = process.stdout.isTTY === true;
const paint = (code: string) => (s: string) => (tty ? `\x1b[${code}m${s}\x1b[0m` : s);
const [bold, dim, green, yellow, red] = ['1', '2', '32', '33', '31'].map(paint) as [Paint, Paint, Paint, Paint, Paint];
type Paint = (s: string) => string;

let stepNumber = 0;
const heading = (title: string) => console.log(`\n${bold(`${++stepNumber}. ${title}`)}`);
const say = (line: string) => console.log(`  ${line}`);
const comment = (line: string) => console.log(dim(`# ${line}`));
const ok = (line: string) => say(`${green('✓')} ${line}`);
const indent = (text: string) => text.replace(/\n+$/, '').split('\n').map((l) => `  ${l}`).join('\n');

class DemoFailure extends Error {}

// --- Commands ---

/** The temporary folder of this run; shown as $DEMO. */
let root = '';
let socketPath = '';

/** How a command looks when the user types it: podnet for dist/podnet, $DEMO for the temp dir. */
function shown(file: string, args: readonly string[]): string {
  const words = [file === podnetBinary ? 'podnet' : file, ...args].map((w) => (root ? w.split(root).join('$DEMO') : w));
  return words.map((w) => (/^[\w@%+=:,./$-]+$/.test(w) ? w : `'${w}'`)).join(' ');
}

const abort = new AbortController();
let signalled: NodeJS.Signals | undefined;

/** Runs a command; cancellable: false for cleanup, which must run even after an interrupt. */
async function run(file: string, args: readonly string[], cancellable = true): Promise<{ exitCode: number; stdout: string; stderr: string }> {
  // After a signal the demo's steps stop here: the abort's error ends demo(), then cleanup runs.
  if (cancellable) abort.signal.throwIfAborted();
  // Cleanup commands get a process group of their own: a second Ctrl-C does not cut them short.
  const own = cancellable ? { cancelSignal: abort.signal } : { detached: true };
  const result = await execa(file, args, { reject: false, cwd: repoRoot, timeout: 30_000, stdin: 'ignore', ...own });
  if (cancellable) abort.signal.throwIfAborted();
  return { exitCode: result.exitCode ?? -1, stdout: result.stdout, stderr: result.stderr };
}

/** Runs a command the way the user would, printing it and what it printed. */
async function show(file: string, args: readonly string[], options: { mustSucceed?: boolean; whenEmpty?: string } = {}) {
  console.log(`${bold('$')} ${shown(file, args)}`);
  const ran = await run(file, args);
  const output = [ran.stdout, ran.stderr].filter((s) => s.trim() !== '').join('\n');
  if (output) console.log(indent(root ? output.split(root).join('$DEMO') : output));
  else if (options.whenEmpty) console.log(dim(`  (${options.whenEmpty})`));
  if (options.mustSucceed && ran.exitCode !== 0) throw new DemoFailure(`${shown(file, args)} failed (exit ${ran.exitCode})`);
  return ran;
}

const podnet = (...args: string[]) => show(podnetBinary, args, { mustSucceed: true });

/** Polls `probe` every 100 ms until it returns a value, or undefined after `timeoutMs`. */
async function until<T>(timeoutMs: number, probe: () => Promise<T | undefined>): Promise<T | undefined> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined || Date.now() >= end) return value;
    await sleep(100, undefined, { signal: abort.signal });
  }
}

/** Host link names; not cancellable, as cleanup needs it after an interrupt too. */
async function hostLinkNames(): Promise<Set<string>> {
  const ran = await run('ip', ['-json', 'link', 'show'], false);
  return new Set((JSON.parse(ran.stdout) as { ifname: string }[]).map((l) => l.ifname));
}

/**
 * Deletes those of `links` that exist, then the pods' netns; returns the commands it ran. Links
 * first: deleting a veth's host end is immediate, while a deleted netns frees its links later.
 */
async function removeLinksAndNetns(links: Iterable<string>): Promise<string[]> {
  const present = await hostLinkNames();
  const commands = [
    ...[...new Set(links)].filter((l) => present.has(l)).map((l) => ['link', 'del', l]),
    ...pods.filter((p) => existsSync(p.att.netns)).map((p) => ['netns', 'del', p.netns]),
  ];
  for (const args of commands) {
    const ran = await run('ip', args, false);
    if (ran.exitCode !== 0) throw new Error(`ip ${args.join(' ')}: ${ran.stderr.trim()}`);
  }
  return commands.map((args) => `ip ${args.join(' ')}`);
}

// --- The run record: what to remove if this run is killed before it can clean up ---

type RunRecord = { pid: number; root: string; daemonPid?: number; links: string[] };

function saveRecord(): void {
  const record: RunRecord = { pid: process.pid, root, ...(daemon?.pid ? { daemonPid: daemon.pid } : {}), links: demoLinks() };
  writeFileSync(runRecordPath, `${JSON.stringify(record)}\n`);
}

const cmdlineOf = (pid: number) => (existsSync(`/proc/${pid}/cmdline`) ? readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0') : []);

async function removeLeftovers(): Promise<void> {
  const record = existsSync(runRecordPath) ? (JSON.parse(readFileSync(runRecordPath, 'utf8')) as RunRecord) : undefined;
  const removed: string[] = [];
  if (record) {
    if (record.pid !== process.pid && cmdlineOf(record.pid).some((a) => a.endsWith('demo/demo.ts'))) {
      throw new DemoFailure(`another demo run is in progress (pid ${record.pid}); wait for it to end or stop it first`);
    }
    // A daemon the killed run started: ours to stop, if it is still that daemon (pids are reused).
    if (record.daemonPid && cmdlineOf(record.daemonPid).some((a) => a.includes(record.root))) {
      process.kill(record.daemonPid, 'SIGKILL');
      removed.push(`daemon pid ${record.daemonPid}`);
      await sleep(200);
    }
  }
  removed.push(...(await removeLinksAndNetns([primary.bridge, want.bridge, ...(record?.links ?? [])])));
  if (record?.root.startsWith(join(tmpdir(), 'podnet-demo-')) && existsSync(record.root)) {
    rmSync(record.root, { recursive: true, force: true });
    removed.push(`rm -rf ${record.root}`);
  }
  rmSync(runRecordPath, { force: true });
  if (removed.length > 0) console.log(yellow(`removed what an interrupted run left: ${removed.join(', ')}`));
}

// --- Before anything: root, the plugins, the tools, the executable ---

function preflight(): void {
  if (process.getuid?.() !== 0) throw new DemoFailure('the demo needs root (network namespaces, CNI plugins, tc): run `sudo npm run demo`');
  const onPath = (tool: string) => (process.env['PATH'] ?? '').split(delimiter).some((dir) => dir && existsSync(join(dir, tool)));
  const missing = [
    ...['bridge', 'host-local'].map((plugin) => join(referencePluginDir, plugin)).filter((path) => !existsSync(path)),
    ...['ip', 'tc', 'nsenter', 'busybox'].filter((tool) => !onPath(tool)),
  ];
  if (missing.length > 0) {
    throw new DemoFailure(`the demo needs ${missing.join(', ')} (apt-get install containernetworking-plugins iproute2 util-linux busybox-static)`);
  }
}

/** Builds dist/podnet when missing, and says when the sources are newer: the demo runs what ships. */
async function ensureBuilt(): Promise<void> {
  if (!existsSync(podnetBinary)) {
    console.log(yellow('dist/podnet is missing: building it first (npm run build)'));
    const built = await execa(process.execPath, [join(repoRoot, 'scripts/build.ts')], { cwd: repoRoot, stdio: 'inherit', reject: false, cancelSignal: abort.signal });
    if (built.exitCode !== 0 || !existsSync(podnetBinary)) throw new DemoFailure('npm run build failed; the demo needs dist/podnet');
    return;
  }
  const builtAt = statSync(podnetBinary).mtimeMs;
  const newer = ['src', 'schemas', 'bin']
    .flatMap((dir) => readdirSync(join(repoRoot, dir), { recursive: true, withFileTypes: true }))
    .filter((e) => e.isFile() && !e.name.endsWith('.test.ts'))
    .map((e) => join(e.parentPath, e.name))
    .find((file) => statSync(file).mtimeMs > builtAt);
  if (newer) console.log(yellow(`note: dist/podnet is older than ${newer.slice(repoRoot.length)}; run \`npm run build\` to demo the current code`));
}

// --- The daemon ---

let daemon: ResultPromise | undefined;

async function startDaemon(stateDir: string, configDir: string, log: string): Promise<void> {
  const args = ['daemon', '--socket', socketPath, '--state-dir', stateDir, '--config-dir', configDir, '--resync-seconds', '2'];
  console.log(`${bold('$')} ${shown(podnetBinary, args)} &`);
  const toLog = { file: log, append: true } as const;
  // Its own process group: a Ctrl-C reaches the demo alone, which then takes everything down in order.
  const started = execa(podnetBinary, args, { detached: true, reject: false, stdin: 'ignore', stdout: toLog, stderr: toLog, cwd: repoRoot });
  daemon = started;
  saveRecord();
  let exited = false;
  void started.then(() => (exited = true));
  const t0 = Date.now();
  const ready = await until(15_000, async () => {
    if (exited) throw new DemoFailure(`the daemon exited at start:\n${logTail(log)}`);
    return callDaemon({ socketPath, method: 'GET', path: routes.readyz, timeoutMs: 500 }).then(() => true, () => undefined);
  });
  if (!ready) throw new DemoFailure(`the daemon did not answer ${routes.readyz} within 15 s:\n${logTail(log)}`);
  say(`ready after ${((Date.now() - t0) / 1000).toFixed(1)} s (pid ${started.pid}; log in $DEMO/daemon.log)`);
}

/** What the daemon reports for each recorded pod (what `podnet explain` prints), checked against its schema. */
async function sandboxReports(): Promise<SandboxList['items']> {
  const body = await callDaemon({ socketPath, method: 'GET', path: routes.sandboxes, timeoutMs: 3000 });
  return parseDocument('SandboxList', body, 'daemon answer').items;
}

function logTail(log: string, lines = 15): string {
  return existsSync(log) ? indent(readFileSync(log, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')) : '  (no daemon log)';
}

// --- Converging: the kernel, read with podnet's own observers, against what the documents ask ---

/** What one look shows of a pod, and of the host (the same for every pod). */
interface Seen {
  links: Map<string, ObservedLink>;
  routes: ObservedRoute[];
  rules: ObservedRule[];
  /** What the daemon reports it has done to the pod. */
  applied: AppliedState | undefined;
  qdiscs: Map<string, { root?: string; ingress: boolean }>;
  hostLinks: Set<string>;
}

async function look(): Promise<Map<Pod, Seen>> {
  const reports = await sandboxReports();
  const [qdiscs, hostLinks] = await Promise.all([observeQdiscs(netnsRunner), hostLinkNames()]);
  const seen = new Map<Pod, Seen>();
  for (const pod of pods) {
    const where = { netns: pod.att.netns };
    const [links, v4, v6] = await Promise.all([observeLinks(netnsRunner, where), observeRouting(netnsRunner, where, 4), observeRouting(netnsRunner, where, 6)]);
    const applied = reports.find((r) => r.containerId === pod.att.containerId)?.applied as AppliedState | undefined;
    seen.set(pod, { links, routes: [...v4.routes, ...v6.routes], rules: [...v4.rules, ...v6.rules], applied, qdiscs, hostLinks });
  }
  return seen;
}

/** A thing to wait for in each pod: why it does not hold there yet (nothing once it does), and what to say then. */
interface Check {
  why: (pod: Pod, seen: Seen) => string | false | undefined;
  done: (after: string) => string[];
}

const hasRoute = (s: Seen, r: Route) => s.routes.some((o) => o.to === r.to && o.table === tableNumber(r.table) && (!r.via || o.via === r.via));
const hasRule = (s: Seen, r: Rule) => s.rules.some((o) => o.priority === r.priority && o.table === tableNumber(r.table) && o.from === r.from);

function convergedChecks(): Check[] {
  const { iface, eth0Mtu, route, rule, bandwidth } = want;
  return [
    {
      // Also notes the pod's net1 address, for the ping.
      why: (pod, s) => {
        // The address the daemon says it gave, which the kernel must show.
        const address = s.applied?.attachments.find((a) => a.interface === iface)?.addresses.find((a) => a.includes('.'));
        const link = s.links.get(iface);
        if (!address) return `the daemon has not applied ${iface} yet`;
        if (!link?.up) return link ? `${iface} is down` : `no ${iface}`;
        if (!link.addresses.includes(address)) return `${iface} lacks ${address}`;
        if (s.links.get('eth0')?.mtu !== eth0Mtu) return `eth0 has MTU ${s.links.get('eth0')?.mtu}, not ${eth0Mtu}`;
        pod.net1 = address;
        return undefined;
      },
      done: (after) => pods.map((p) => `${p.name}: ${iface} up with ${p.net1}, eth0 MTU ${eth0Mtu} (${after})`),
    },
    {
      why: (_, s) => !hasRoute(s, route) && `no route to ${route.to} in table ${route.table}`,
      done: (after) => [`route to ${route.to} in table ${route.table} in both pods (${after})`],
    },
    {
      why: (_, s) => !hasRule(s, rule) && `no rule ${rule.priority}`,
      done: (after) => [`rule ${rule.priority} from ${rule.from ?? 'all'} lookup ${rule.table} in both pods (${after})`],
    },
    {
      // Ingress (into the pod) is a tbf on the veth's host end; egress is redirected from an
      // ingress qdisc there to the ifb, which has the tbf.
      why: (pod, s) => {
        const veth = s.qdiscs.get(hostIf(pod));
        if (bandwidth.ingressRate && veth?.root !== 'tbf') return `no tbf on ${hostIf(pod)}`;
        if (bandwidth.egressRate && !(veth?.ingress && s.qdiscs.get(ifb(pod))?.root === 'tbf')) return `no egress shaping through ${ifb(pod)}`;
        return undefined;
      },
      done: (after) => [`bandwidth cap (tbf on the host veth end and its ifb) in both pods (${after})`],
    },
  ];
}

function goneChecks(): Check[] {
  const { iface, route, rule } = want;
  return [
    {
      why: (pod, s) => (s.links.has(iface) ? `${iface} still there` : s.links.get('eth0')?.mtu !== pod.eth0Mtu && `eth0 MTU ${s.links.get('eth0')?.mtu} (was ${pod.eth0Mtu})`),
      done: (after) => [`${iface} gone from both pods, eth0 MTU back to ${[...new Set(pods.map((p) => p.eth0Mtu))].join(' and ')} (${after})`],
    },
    {
      why: (_, s) => (hasRoute(s, route) ? 'the route is still there' : hasRule(s, rule) && 'the rule is still there'),
      done: () => [`route in table ${route.table} and rule ${rule.priority} gone in both pods`],
    },
    {
      why: (pod, s) => [want.bridge, hostIf(pod), ifb(pod)].filter((l) => s.hostLinks.has(l)).join(', ') || undefined,
      done: () => [`host: ${podnetLinks().sort().join(', ')} gone`],
    },
  ];
}

/**
 * Polls until every check holds in every pod, saying each in order as it does; fails after
 * `timeoutMs` naming what is missing.
 */
async function settle(what: string, checks: Check[], timeoutMs: number, log: string): Promise<void> {
  const started = Date.now();
  const pending = new Set(checks);
  let missing: string[] = [];
  const settled = await until(timeoutMs, async () => {
    const seen = await look();
    missing = [];
    for (const check of pending) {
      const left = pods.flatMap((pod) => {
        const why = check.why(pod, seen.get(pod)!);
        return why ? [`${pod.name}: ${why}`] : [];
      });
      missing.push(...left);
      // Said in order: a check that holds while an earlier one does not yet (the route can show
      // before the daemon reports net1 applied) waits to be said with it.
      if (missing.length > 0) continue;
      pending.delete(check);
      for (const line of check.done(`after ${((Date.now() - started) / 1000).toFixed(1)} s`)) ok(line);
    }
    return pending.size === 0 ? true : undefined;
  });
  if (settled) return;
  const reports = await sandboxReports().catch(() => []);
  throw new DemoFailure(
    `${what} after ${timeoutMs / 1000} s: ${missing.join('; ')}\n` +
      `what the daemon reports:\n${indent(reports.map(explainText).join('\n'))}\ndaemon log:\n${logTail(log)}`,
  );
}

// --- The demo ---

/** The runtime's part: a conflist run per the CNI spec's chaining rules, by the e2e tests' runtime. */
let cni: { runtime: CniRuntime; conflist: Conflist } | undefined;

async function demo(): Promise<void> {
  const stateDir = join(root, 'state');
  const configDir = join(root, 'config.d');
  const binDir = join(root, 'bin');
  const log = join(root, 'daemon.log');
  mkdirSync(configDir, { mode: 0o700 });
  mkdirSync(binDir);
  symlinkSync(podnetBinary, join(binDir, 'podnet'));

  heading('start the daemon (standalone, on a temporary state dir)');
  comment(`podnet is ${podnetBinary}; $DEMO is ${root}`);
  await startDaemon(stateDir, configDir, log);

  heading('start two pods through the reference CNI plugins');
  const ipam = { type: 'host-local', ranges: [[{ subnet: primary.subnet }]], dataDir: join(root, 'ipam') };
  const conflist: Conflist = {
    cniVersion: '1.0.0',
    name: 'demo-primary',
    plugins: [
      { type: 'bridge', bridge: primary.bridge, isGateway: true, ipMasq: false, ipam },
      { type: 'podnet', socketPath, stateDir, timeoutMs: 2000 },
    ],
  };
  cni = { runtime: new CniRuntime([binDir, referencePluginDir]), conflist };
  writeFileSync(join(root, 'demo.conflist'), `${JSON.stringify(conflist, null, 2)}\n`);
  comment(`the runtime's part: $DEMO/demo.conflist chains bridge (${primary.bridge}, host-local ${primary.subnet}) and podnet`);
  for (const pod of pods) {
    await show('ip', ['netns', 'add', pod.netns], { mustSucceed: true });
    comment(`CNI ADD through $DEMO/demo.conflist: CNI_CONTAINERID=${pod.att.containerId.slice(0, 12)}… CNI_NETNS=${pod.att.netns} CNI_IFNAME=eth0`);
    comment(`  CNI_ARGS=${pod.att.args}`);
    pod.added = await cni.runtime.add(conflist, pod.att);
    say(`${pod.name}: eth0 ${(pod.added['ips'] as { address: string }[] | undefined)?.[0]?.address ?? 'without an address'}`);
  }
  await podnet('pods', '--socket', socketPath);
  for (const pod of pods) await show('ip', ['-n', pod.netns, '-br', 'addr'], { mustSucceed: true });
  await show('ip', ['-n', pods[0]!.netns, 'link', 'show', 'dev', 'eth0'], { mustSucceed: true });
  for (const pod of pods) pod.eth0Mtu = (await observeLinks(netnsRunner, { netns: pod.att.netns })).get('eth0')?.mtu;

  heading('apply a bridge Network (the admin) and a PodNetworkConfig (the tenant)');
  for (const file of [files.network, files.config]) {
    console.log(`${bold('$')} cat ${file}`);
    console.log(indent(readFileSync(join(repoRoot, file), 'utf8').split('\n').filter((l) => !l.startsWith('#')).join('\n')));
    await podnet('apply', '-f', file, '--config-dir', configDir);
  }

  heading('wait for the daemon to converge (polling every 100 ms)');
  await settle('not converged', convergedChecks(), 20_000, log);

  heading('the result');
  const [a, b] = pods as [Pod, Pod];
  const { iface, route, rule, bandwidth } = want;
  for (const pod of pods) await show('ip', ['-n', pod.netns, '-br', 'addr']);
  await show('ip', ['-n', a.netns, 'link', 'show', 'dev', 'eth0']);
  await show('ip', ['-n', a.netns, 'route', 'show', 'table', String(route.table)]);
  await show('ip', ['-n', a.netns, 'rule', 'show']);
  comment(`which way a packet from ${iface} to the route's destination goes: the rule sends it to table ${rule.table}`);
  await show('ip', ['-n', a.netns, 'route', 'get', route.to.split('/')[0]!.replace(/\.0$/, '.7'), 'from', a.net1!.split('/')[0]!]);
  comment("on the host: podnet's bridge, the pods' veth ends on it, and their qdiscs");
  await show('ip', ['-br', 'addr', 'show', 'dev', want.bridge]);
  await show('ip', ['-br', 'link', 'show', 'master', want.bridge]);
  for (const pod of pods) await show('tc', ['qdisc', 'show', 'dev', hostIf(pod)]);
  if (bandwidth.egressRate) for (const pod of pods) await show('tc', ['qdisc', 'show', 'dev', ifb(pod)]);
  await podnet('explain', 'default/pod-a', '--socket', socketPath);

  heading(`ping pod-a → pod-b over ${iface}`);
  const target = b.net1!.split('/')[0]!;
  const ping = await show('ip', ['netns', 'exec', a.netns, 'busybox', 'ping', '-c', '3', '-W', '2', target]);
  if (ping.exitCode !== 0) throw new DemoFailure(`pod-a cannot reach pod-b at ${target} over ${iface}`);
  ok('pod-a reaches pod-b over the new network');

  heading('delete the config: everything it caused goes');
  await podnet('delete', '-f', files.config, '--config-dir', configDir);
  await settle('still there', goneChecks(), 20_000, log);
  await show('ip', ['-n', a.netns, '-br', 'addr']);
  await show('ip', ['-n', a.netns, 'link', 'show', 'dev', 'eth0']);
  await show('ip', ['-n', a.netns, 'route', 'show', 'table', String(route.table)], { whenEmpty: 'no route' });
  await show('ip', ['-n', a.netns, 'rule', 'show']);
  await show('ip', ['link', 'show', 'dev', want.bridge]);
  await podnet('delete', '-f', files.network, '--config-dir', configDir);
  await podnet('explain', 'default/pod-a', '--socket', socketPath);
}

// --- Clean up: on success, failure and signals alike; each part runs even when another fails ---
// Everything podnet does on the host is a link named in demoLinks() (its qdiscs go with it), and
// everything in a pod goes with its netns: so after an interrupt, deleting those by name is as
// complete as having the daemon take its documents back.

async function cleanup(): Promise<string[]> {
  const errors: string[] = [];
  const attempt = (what: string, action: () => Promise<unknown>) => action().catch((err: Error) => errors.push(`${what}: ${err.message}`));
  // A pod whose ADD did not finish needs no DEL: its veth goes with its netns, its address with $DEMO.
  for (const pod of pods) {
    if (!cni || !pod.added) continue;
    const { runtime, conflist } = cni;
    await attempt(`CNI DEL ${pod.name}`, () =>
      runtime.del(conflist, pod.att, pod.added).then(() => say(`CNI DEL ${pod.name} (podnet, then bridge) < $DEMO/demo.conflist`)));
  }
  await attempt('stop the daemon', async () => {
    if (!daemon) return;
    // SIGTERM, then SIGKILL if it has not exited within 5 s (execa's forceKillAfterDelay).
    daemon.kill('SIGTERM');
    await daemon;
    daemon = undefined;
    say('daemon stopped');
  });
  await attempt('remove links and netns', async () => {
    for (const command of await removeLinksAndNetns(demoLinks())) say(`$ ${command}`);
  });
  if (root) {
    rmSync(root, { recursive: true, force: true });
    say('$ rm -rf $DEMO');
  }
  // Check: nothing of the demo's is left.
  const present = await hostLinkNames();
  const left = [
    ...pods.filter((p) => existsSync(p.att.netns)).map((p) => `netns ${p.netns}`),
    ...demoLinks().filter((l) => present.has(l)).map((l) => `link ${l}`),
  ];
  if (left.length > 0) errors.push(`left behind: ${left.join(', ')}`);
  else {
    rmSync(runRecordPath, { force: true });
    ok(`nothing left: no demo netns, no ${primary.bridge}, no pn link of the demo`);
  }
  return errors;
}

// --- Run ---

async function main(): Promise<number> {
  // Output cut short (`npm run demo | head`): keep going, so the cleanup still runs.
  process.stdout.on('error', () => undefined);
  process.stderr.on('error', () => undefined);
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      if (signalled) return console.error(yellow(`\n${signal}: still cleaning up, a moment`));
      signalled = signal;
      console.error(yellow(`\n${signal}: stopping; cleaning up`));
      abort.abort();
    });
  }
  // If the demo dies some other way, the daemon (in its own process group) must not outlive it.
  process.on('exit', () => daemon?.kill('SIGKILL'));
  const interrupted = () => (signalled === 'SIGTERM' ? 143 : 130);

  try {
    preflight();
    want = readWant();
    await ensureBuilt();
    await removeLeftovers();
  } catch (err) {
    if (signalled) return interrupted();
    console.error(red(`demo: ${(err as Error).message}`));
    return 1;
  }

  root = mkdtempSync(join(tmpdir(), 'podnet-demo-'));
  socketPath = join(root, 'podnet.sock');
  saveRecord();

  let outcome = 0;
  try {
    await demo();
  } catch (err) {
    if (signalled) outcome = interrupted();
    else {
      outcome = 1;
      // The project's own errors (daemon, CNI plugins) say what went wrong; anything else is a bug here.
      const known = err instanceof DemoFailure || err instanceof PodnetError || err instanceof CniError;
      console.error(`\n${red(`demo failed: ${known ? err.message : String((err as Error).stack ?? err)}`)}`);
    }
  }

  heading('clean up');
  const errors = await cleanup();
  for (const error of errors) console.error(red(`cleanup: ${error}`));
  if (errors.length > 0 && outcome === 0) outcome = 1;

  if (outcome === 0) console.log(`\n${green(bold('demo done'))}`);
  else if (outcome !== 1) console.error(yellow(`interrupted by ${signalled}; cleaned up`));
  return outcome;
}

process.exitCode = await main();
