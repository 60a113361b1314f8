import t, { type Test } from 'tap';
import { basename } from 'node:path';
import type { LaunchOptions } from '../launcher/launcher.ts';
import type { Tool, Where } from '../model/step.ts';
import { findExecutable, type ProcessExit, type StartedProcess } from '../process.ts';
import { guardFingerprint, guardFingerprintOf } from '../model/wireguard-guard.ts';
import { batchArgv, netnsRunner, nftTableOf, startToolsWith, sysctlArgv, wgArgv, wgFailure, type ReadAfter } from './runner.ts';

const pod: Where = { netns: '/run/netns/p' };
/** A netns path holding what a shell would act on: it must reach nsenter as one argument, untouched. */
const shellish = '/run/netns/a b;$(touch /tmp/x)|`id`&>y\'z"';
const pathOf = (name: string) => `/sbin/${name}`;
const linksRead: ReadAfter = { options: ['-d'], commands: ['addr show'] };
const shells = ['sh', 'bash', 'dash', 'zsh', 'ash', 'busybox', 'env'];

t.test('the argv of each tool\'s batch, on the host and in a netns (through nsenter, the tool by its path)', async (t) => {
  const cases: [Where, Exclude<Tool, 'sysctl' | 'wg'>, ReadAfter | undefined, [string, string[]]][] = [
    ['host', 'ip', undefined, ['ip', ['-batch', '-']]],
    ['host', 'ip6', undefined, ['ip', ['-6', '-batch', '-']]],
    ['host', 'tc', undefined, ['tc', ['-batch', '-']]],
    ['host', 'nft', undefined, ['nft', ['-f', '-']]],
    [pod, 'ip', undefined, ['nsenter', ['--net=/run/netns/p', '--', '/sbin/ip', '-batch', '-']]],
    [pod, 'ip6', undefined, ['nsenter', ['--net=/run/netns/p', '--', '/sbin/ip', '-6', '-batch', '-']]],
    [pod, 'tc', undefined, ['nsenter', ['--net=/run/netns/p', '--', '/sbin/tc', '-batch', '-']]],
    [pod, 'nft', undefined, ['nsenter', ['--net=/run/netns/p', '--', '/sbin/nft', '-f', '-']]],
    [pod, 'ip', linksRead, ['nsenter', ['--net=/run/netns/p', '--', '/sbin/ip', '-json', '-d', '-batch', '-']]],
  ];
  for (const [where, tool, read, expected] of cases) {
    t.same(batchArgv(where, tool, read, pathOf), expected, `${tool} ${where === 'host' ? 'on the host' : 'in a netns'}${read ? ', ending with a read' : ''}`);
  }
  t.same(sysctlArgv('host', 'net/ipv4/ip_forward=1', pathOf), ['sysctl', ['-q', '-w', 'net/ipv4/ip_forward=1']], 'sysctl on the host: the line is its argument');
  t.same(sysctlArgv(pod, 'net/ipv4/conf/net1/rp_filter=2', pathOf), ['nsenter', ['--net=/run/netns/p', '--', '/sbin/sysctl', '-q', '-w', 'net/ipv4/conf/net1/rp_filter=2']], 'sysctl in a netns');
  t.same(wgArgv(pod, 'set wg0 listen-port 51820', pathOf), ['nsenter', ['--net=/run/netns/p', '--', '/sbin/wg', 'set', 'wg0', 'listen-port', '51820']], 'wg in a netns: the line\'s words are its arguments');
});

t.test('a name is one argument, never a shell\'s to read', async (t) => {
  const where: Where = { netns: shellish };
  for (const tool of ['ip', 'ip6', 'tc', 'nft'] as const) {
    const [file, args] = batchArgv(where, tool, undefined, pathOf);
    t.equal(file, 'nsenter');
    t.equal(args[0], `--net=${shellish}`, `${tool}: the netns path whole, as nsenter's --net`);
    t.equal(args[1], '--', `${tool}: nsenter reads no option after it`);
  }
  const line = 'net/ipv4/conf/x$(id)/rp_filter=1';
  t.same(sysctlArgv(where, line, pathOf)[1].slice(-1), [line], 'a sysctl line is its last argument, whole');
});

t.test('a batch line holding a character ip reads specially is refused before anything runs', async (t) => {
  for (const line of ['route add 0.0.0.0/1 dev eth0# table 100', 'link add "a b" type dummy', "link set x alias 'y'", 'link set a\\ b up', 'link set a up\nlink del eth0']) {
    const result = await netnsRunner.batch({ netns: '/run/netns/none' }, 'ip', [line]);
    t.equal(result.done, 0);
    t.match(result.error, { code: 'INVALID_REQUEST', message: /would read specially/ }, JSON.stringify(line));
  }
  // nft reads an interface name safely only quoted: a quoted word of a name's characters, and nothing else quoted.
  for (const line of ['add rule inet t c oifname "net1" ip dscp set 46 comment "x y"', 'add rule inet t c oifname "a;b" accept', 'add rule inet t c oifname "net1', "add rule inet t c oifname 'net1' accept", 'add rule inet t c oifname "net1" # x']) {
    const result = await netnsRunner.batch({ netns: '/run/netns/none' }, 'nft', [line]);
    t.match(result.error, { code: 'INVALID_REQUEST', message: /would read specially/ }, `nft: ${JSON.stringify(line)}`);
  }
  const quoted = await netnsRunner.batch({ netns: '/run/netns/none' }, 'ip', ['link set dev "net1" up']);
  t.match(quoted.error, { code: 'INVALID_REQUEST' }, 'ip takes no quoted name');
});

t.test('a table as nft -j lists it: each chain\'s rules counted, each set\'s single names, a set of several keys without them', async (t) => {
  // The shape nft 1.0 prints (trimmed): a set of names, a set of concatenations, two chains, three rules.
  const listed = JSON.stringify({
    nftables: [
      { metainfo: { version: '1.0.6', json_schema_version: 1 } },
      { table: { family: 'bridge', name: 'podnet', handle: 3 } },
      { set: { family: 'bridge', name: 'ports', table: 'podnet', type: 'ifname', handle: 1, elem: ['pnva', 'pnvb'] } },
      { set: { family: 'bridge', name: 'macs', table: 'podnet', type: ['ifname', 'ether_addr'], handle: 2, elem: [{ concat: ['pnva', '02:00:00:00:00:01'] }] } },
      { set: { family: 'bridge', name: 'addr4', table: 'podnet', type: ['ifname', 'ether_addr', 'ipv4_addr'], handle: 3 } },
      { chain: { family: 'bridge', table: 'podnet', name: 'prerouting', handle: 7, type: 'filter', hook: 'prerouting', prio: -300, policy: 'accept' } },
      { chain: { family: 'bridge', table: 'podnet', name: 'port', handle: 8 } },
      { chain: { family: 'bridge', table: 'podnet', name: 'a4', handle: 9 } },
      { rule: { family: 'bridge', table: 'podnet', chain: 'prerouting', handle: 14, expr: [] } },
      { rule: { family: 'bridge', table: 'podnet', chain: 'port', handle: 15, expr: [] } },
      { rule: { family: 'bridge', table: 'podnet', chain: 'port', handle: 16, expr: [] } },
    ],
  });
  const table = nftTableOf(listed);
  t.same([...table.rules], [['prerouting', 1], ['port', 2], ['a4', 0]]);
  t.same(table.names.get('ports'), new Set(['pnva', 'pnvb']));
  t.same(table.names.get('macs'), new Set(), 'a concatenation is no name');
  t.same(table.names.get('addr4'), new Set(), 'an empty set has no elem');
  t.same(table.hooks, new Map([['prerouting', 'filter prerouting -300 accept']]), 'the base chain\'s hook; a chain rules jump to has none');
  t.equal(table.flagged, false);
  t.same(nftTableOf('{"nftables": [{"metainfo": {}}, {"table": {"family": "bridge", "name": "podnet"}}]}'), { rules: new Map(), names: new Map(), hooks: new Map(), flagged: false, comments: [] }, 'a table with nothing in it');
  t.same(nftTableOf('{"nftables": [{"table": {"family": "inet", "name": "podnet_marking"}}, {"chain": {"name": "postrouting"}}, {"rule": {"chain": "postrouting", "comment": "podnet.0123456789abcdef"}}, {"rule": {"chain": "postrouting"}}]}').comments, ['podnet.0123456789abcdef'], "its rules' comments, in order");
  // As a later nft prints dormant, and as nft 1.0.6 may (from freed memory: seen "bridge", "ifname", its release name).
  for (const flags of ['dormant', ['dormant'], 'bridge', 'Lester Gooch #5']) {
    t.equal(nftTableOf(JSON.stringify({ nftables: [{ table: { family: 'bridge', name: 'podnet', flags } }] })).flagged, true, `flags ${JSON.stringify(flags)}: flagged`);
  }
});

/** What the runner hands its tool starter: each process's file, argv, options and stdin. */
interface Started {
  file: string;
  args: string[];
  options: LaunchOptions;
  input?: string;
}

/**
 * Starts no process: records what the runner would start (startToolsWith, as the daemon's
 * launcher does) and answers each as `answer` says once its input is fed.
 */
function recordingStarter(t: Test) {
  const started: Started[] = [];
  let answer = (_record: Started) => '';
  startToolsWith((file, args, options): StartedProcess => {
    const record: Started = { file, args: [...args], options };
    started.push(record);
    let exit!: (e: ProcessExit) => void;
    const exited = new Promise<ProcessExit>((resolve) => (exit = resolve));
    return {
      feed(input) {
        record.input = input;
        exit({ code: 0, signal: null, stdout: answer(record), stderr: '', stdoutCut: false, stderrCut: false });
      },
      exited,
      hold: () => undefined,
      running: () => record.input === undefined,
      kill: () => undefined,
    };
  });
  t.teardown(() => startToolsWith(undefined));
  return {
    /** The processes given input (a host ip process started ahead of its batch and not yet taken is left out), and forgets them. */
    fed(): Started[] {
      const fed = started.filter((s) => s.input !== undefined);
      started.splice(0, started.length);
      return fed;
    },
    answerWith(to: (record: Started) => string) {
      answer = to;
    },
  };
}

/** The argv as started, its file by name (startTool found it on PATH), once checked that no shell is in it. */
function asRun(t: Test, s: Started): [string, string[]] {
  t.notOk(shells.includes(basename(s.file)), `${s.file} is no shell`);
  t.notOk(s.args.includes('-c'), 'no -c');
  t.same(Object.keys(s.options).sort(), ['env', 'maxStderrBytes', 'maxStdoutBytes'], 'no option but its environment and bounds (no shell)');
  t.same(Object.keys(s.options.env).sort(), ['LC_ALL', 'PATH']);
  return [basename(s.file), s.args];
}

const nftHere = findExecutable('nft', (process.env['PATH'] || '/usr/sbin:/usr/bin:/sbin:/bin').split(':')) !== undefined;

t.test("the runner starts each tool's batch with batchArgv's argv, its lines on stdin, a sysctl line as an argument", async (t) => {
  const tools = recordingStarter(t);
  const lines: Record<Tool, string[]> = {
    ip: ['link set dev net1 up', 'addr add 198.18.0.2/24 dev net1'],
    ip6: ['rule add priority 100 table 100'],
    tc: ['qdisc del dev pnv0123456789 root'],
    nft: ['add element bridge podnet ports { pnv0123456789 }'],
    sysctl: ['net/ipv4/ip_forward=1', 'net/ipv4/conf/net1/rp_filter=2'],
    wg: ['set wg0 listen-port 51820 private-key /var/lib/podnet/wireguard/c1.wg0.key', 'set wg0 peer xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg= remove'],
  };
  for (const where of ['host', { netns: shellish }] as Where[]) {
    for (const tool of ['ip', 'ip6', 'tc', 'nft', 'sysctl', 'wg'] as const) {
      const what = `${tool} ${where === 'host' ? 'on the host' : 'in a netns'}`;
      const result = await netnsRunner.batch(where, tool, lines[tool]);
      const fed = tools.fed();
      if (tool === 'nft' && !nftHere) {
        t.match(result, { done: 0, error: { code: 'NOT_AVAILABLE' } }, `${what}: nft is not on this machine, and nothing starts`);
        t.same(fed, []);
        continue;
      }
      t.same(result, { done: lines[tool].length }, what);
      const run = fed.map((s) => [...asRun(t, s), s.input]);
      if (tool === 'sysctl') {
        t.same(run, lines.sysctl.map((l) => [...sysctlArgv(where, l), '']), `${what}: a process a line, nothing on stdin`);
      } else if (tool === 'wg') {
        t.same(run, lines.wg.map((l) => [...wgArgv(where, l), '']), `${what}: a process a line, its words the arguments`);
        t.same(wgArgv('host', lines.wg[1]!), ['wg', ['set', 'wg0', 'peer', 'xTIBA5rboUvnH4htodjb6e697QjLERt1NAB4mZqp8Dg=', 'remove']]);
      } else {
        t.same(run, [[...batchArgv(where, tool), `${lines[tool].join('\n')}\n`]], `${what}: one process, the lines on stdin`);
      }
    }
  }
});

t.test('a batch ending with a read: the read after the lines on stdin, its answer handed back', async (t) => {
  const tools = recordingStarter(t);
  tools.answerWith(() => '[{"ifname":"net1","mtu":1280}]\n');
  const result = await netnsRunner.start(pod, 'ip', linksRead).run(['link set dev net1 mtu 1280']);
  t.same(result, { done: 1, read: [[{ ifname: 'net1', mtu: 1280 }]] });
  const [started] = tools.fed();
  t.same(asRun(t, started!), batchArgv(pod, 'ip', linksRead));
  t.equal(started!.input, 'link set dev net1 mtu 1280\naddr show\n');
});

t.test('the reads: ip and tc -json with the commands on stdin, grep of /proc/sys, nft -j list; a netns path as one argument', async (t) => {
  const tools = recordingStarter(t);
  const where: Where = { netns: shellish };
  tools.answerWith((s) => (s.args.includes('-json') ? '[]\n'.repeat(s.input!.split('\n').length - 1) : s.args.includes('-j') ? '{"nftables": []}' : ''));
  t.same(await netnsRunner.query(where, 'ip', ['-4'], ['route show table all', 'rule show']), [[], []], 'one answer a command');
  t.same(await netnsRunner.query('host', 'tc', [], ['qdisc show']), [[]]);
  t.same(await netnsRunner.readSysctls(where, ['net/ipv4/ip_forward']), new Map());
  if (nftHere) t.same(await netnsRunner.readNftTable('host', 'bridge podnet'), { rules: new Map(), names: new Map(), hooks: new Map(), flagged: false, comments: [] });
  // Inside a netns the tool goes by its path (nsenter would search PATH for it): its basename here.
  const run = tools.fed().map((s) => {
    const [file, args] = asRun(t, s);
    return [file, file === 'nsenter' ? args.map((a, i) => (i === 2 ? basename(a) : a)) : args, s.input];
  });
  t.same(run, [
    ['nsenter', [`--net=${shellish}`, '--', 'ip', '-json', '-4', '-batch', '-'], 'route show table all\nrule show\n'],
    ['tc', ['-json', '-batch', '-'], 'qdisc show\n'],
    ['nsenter', [`--net=${shellish}`, '--', 'grep', '-H', '', '/proc/sys/net/ipv4/ip_forward'], ''],
    ...(nftHere ? [['nft', ['-j', 'list', 'table', 'bridge', 'podnet'], '']] : []),
  ]);
});

t.test("a failed wg line is told by its interface and wg's words, never a key wg quotes nor the whole line", async (t) => {
  const key = 'yAnz5TF+lXXJte14tji3zlMNq+hd2rYUIgJBgB3fBmk=';
  const told = wgFailure(`set wg0 listen-port 51820 private-key /var/lib/podnet/wireguard/wg+c1+wg0.key peer ${key} allowed-ips 10.9.0.2/32`, `Key is not the correct length or format: \`${key}'\nConfiguration parsing error\n`);
  t.equal(told, 'wg set wg0: Key is not the correct length or format: (left out)');
  t.equal(wgFailure('set wg0 listen-port 51820', `Unable to modify interface: peer ${key} unknown\n`), 'wg set wg0: Unable to modify interface: peer (a key) unknown');
});

t.test("a WireGuard guard as nft 1.0.6 lists it: whole, its fingerprint is read; a rule gone, a chain flushed, or flags: none, to be written again", async (t) => {
  const listed = "{\"nftables\": [{\"metainfo\": {\"version\": \"1.0.6\", \"release_name\": \"Lester Gooch #5\", \"json_schema_version\": 1}}, {\"table\": {\"family\": \"inet\", \"name\": \"pnwtest\", \"handle\": 2}}, {\"chain\": {\"family\": \"inet\", \"table\": \"pnwtest\", \"name\": \"input\", \"handle\": 1, \"type\": \"filter\", \"hook\": \"input\", \"prio\": 0, \"policy\": \"accept\"}}, {\"chain\": {\"family\": \"inet\", \"table\": \"pnwtest\", \"name\": \"output\", \"handle\": 2, \"type\": \"filter\", \"hook\": \"output\", \"prio\": 0, \"policy\": \"accept\"}}, {\"rule\": {\"family\": \"inet\", \"table\": \"pnwtest\", \"chain\": \"input\", \"handle\": 3, \"comment\": \"podnet.9bfe97fe486d4009\", \"expr\": [{\"counter\": {\"packets\": 0, \"bytes\": 0}}]}}, {\"rule\": {\"family\": \"inet\", \"table\": \"pnwtest\", \"chain\": \"input\", \"handle\": 4, \"expr\": [{\"match\": {\"op\": \"==\", \"left\": {\"payload\": {\"protocol\": \"udp\", \"field\": \"dport\"}}, \"right\": 51820}}, {\"match\": {\"op\": \"!=\", \"left\": {\"payload\": {\"protocol\": \"ip\", \"field\": \"saddr\"}}, \"right\": {\"prefix\": {\"addr\": \"198.18.102.0\", \"len\": 24}}}}, {\"drop\": null}]}}, {\"rule\": {\"family\": \"inet\", \"table\": \"pnwtest\", \"chain\": \"input\", \"handle\": 5, \"expr\": [{\"match\": {\"op\": \"==\", \"left\": {\"meta\": {\"key\": \"nfproto\"}}, \"right\": \"ipv6\"}}, {\"match\": {\"op\": \"==\", \"left\": {\"payload\": {\"protocol\": \"udp\", \"field\": \"dport\"}}, \"right\": 51820}}, {\"drop\": null}]}}, {\"rule\": {\"family\": \"inet\", \"table\": \"pnwtest\", \"chain\": \"output\", \"handle\": 6, \"expr\": [{\"match\": {\"op\": \"==\", \"left\": {\"payload\": {\"protocol\": \"udp\", \"field\": \"sport\"}}, \"right\": 51820}}, {\"match\": {\"op\": \"!=\", \"left\": {\"payload\": {\"protocol\": \"ip\", \"field\": \"daddr\"}}, \"right\": {\"prefix\": {\"addr\": \"198.18.102.0\", \"len\": 24}}}}, {\"drop\": null}]}}, {\"rule\": {\"family\": \"inet\", \"table\": \"pnwtest\", \"chain\": \"output\", \"handle\": 7, \"expr\": [{\"match\": {\"op\": \"==\", \"left\": {\"meta\": {\"key\": \"nfproto\"}}, \"right\": \"ipv6\"}}, {\"match\": {\"op\": \"==\", \"left\": {\"payload\": {\"protocol\": \"udp\", \"field\": \"sport\"}}, \"right\": 51820}}, {\"drop\": null}]}}]}";
  const fingerprint = guardFingerprint(51820, ['198.18.102.0/24']);
  t.equal(guardFingerprintOf(nftTableOf(listed)), fingerprint, 'as written: the fingerprint of its port and ranges');
  const parsed = JSON.parse(listed) as { nftables: Record<string, { chain?: string; expr?: unknown[] }>[] };
  const without = (drop: (entry: Record<string, { chain?: string; expr?: unknown[] }>, i: number) => boolean) => JSON.stringify({ nftables: parsed.nftables.filter((e, i) => !drop(e, i)) });
  const lastInput = parsed.nftables.map((e, i) => (e['rule']?.chain === 'input' ? i : -1)).filter((i) => i >= 0).at(-1)!;
  t.equal(guardFingerprintOf(nftTableOf(without((_, i) => i === lastInput))), undefined, 'one of its drop rules deleted by hand: not whole');
  t.equal(guardFingerprintOf(nftTableOf(without((e) => e['rule']?.chain === 'output'))), undefined, 'its output chain flushed: not whole');
  const flagged = JSON.stringify({ nftables: parsed.nftables.map((e) => (e['table'] ? { table: { ...e['table'], flags: 'dormant' } } : e)) });
  t.equal(guardFingerprintOf(nftTableOf(flagged)), undefined, 'dormant: not whole');
});
