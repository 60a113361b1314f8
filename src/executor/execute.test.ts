import t, { type Test } from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { dir } from 'tmp-promise';
import { PodnetError } from '../errors.ts';
import type { NetnsRunner, ReadAfter } from '../netns/runner.ts';
import { markingLine } from '../model/marking.ts';
import type { Step, Tool, Where } from '../model/step.ts';
import { ensurePrivateDir, writeFileAtomic } from '../registry/atomic-file.ts';
import { stateLayout } from '../protocol/paths.ts';
import { execute, runJournalUndo, type Together } from './execute.ts';

const journalFolder = stateLayout.journal;

/**
 * A runner that records each batch and fails the line that matches `failOn`; `events` says when
 * each batch's process started, ran and was let go.
 */
function recordingIp(failOn?: string) {
  const batches: { where: string; tool?: Tool; lines: string[] }[] = [];
  const events: string[] = [];
  const name = (where: Where) => (where === 'host' ? 'host' : where.netns);
  const ip: NetnsRunner = {
    query: async () => [],
    readSysctls: async () => new Map(),
    readNftTable: async () => undefined,
    readWireguard: async () => undefined,
    batch: async (where: Where, tool: Tool, lines: readonly string[]) => {
      batches.push({ where: name(where), ...(tool === 'ip' ? {} : { tool }), lines: [...lines] });
      const failed = failOn === undefined ? -1 : lines.indexOf(failOn);
      return failed < 0 ? { done: lines.length } : { done: failed, error: new PodnetError('IO_FAILURE', `ip ${failOn}: boom`) };
    },
    start(where: Where, tool: Tool, readAfter?: ReadAfter) {
      events.push(`start ${name(where)}${readAfter ? ` then ${readAfter.commands.join(', ')}` : ''}`);
      return {
        run: async (lines: readonly string[]) => {
          events.push(`run ${name(where)}`);
          const result = await this.batch(where, tool, lines);
          return readAfter && !result.error ? { ...result, read: [`answer of ${name(where)}`] } : result;
        },
        cancel: () => void events.push(`cancel ${name(where)}`),
      };
    },
  };
  return { ip, batches, events };
}

const pod: Where = { netns: '/run/netns/p' };
const steps: Step[] = [
  { where: 'host', tool: 'ip', line: 'link add name pnb type bridge', undo: { where: 'host', action: 'link-del', dev: 'pnb' } },
  { where: 'host', tool: 'ip', line: 'link set dev pnb up' },
  { where: pod, tool: 'ip', line: 'link add name net1 type veth peer name pnv1 netns 1', undo: { where: pod, action: 'link-del', dev: 'net1' } },
  { where: pod, tool: 'ip', line: 'addr add 198.18.1.2/24 dev net1', undo: { where: pod, action: 'addr-del', dev: 'net1', address: '198.18.1.2/24' } },
];

/** What execute journals for `steps`: their undo actions, in step order. */
const journalOf = (pass: string, of: readonly Step[] = steps) => ({ version: 1, pass, undo: of.flatMap((s) => (s.undo ? [s.undo] : [])) });

async function stateDir(t: Test): Promise<string> {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  return tmp.path;
}

t.test('one batch per run of a namespace, in order; the journal is gone after', async (t) => {
  const path = await stateDir(t);
  const { ip, batches } = recordingIp();
  let committed = 0;
  t.same(await execute(ip, path, 'c1', steps, () => committed++), { undoErrors: [] });
  t.equal(committed, 1, 'the pass is committed');
  t.same(batches, [
    { where: 'host', lines: ['link add name pnb type bridge', 'link set dev pnb up'] },
    { where: '/run/netns/p', lines: ['link add name net1 type veth peer name pnv1 netns 1', 'addr add 198.18.1.2/24 dev net1'] },
  ]);
  t.same(readdirSync(`${path}/${journalFolder}`), []);
});

t.test("each batch's process starts once the one before has its lines; a failure lets the next go unused", async (t) => {
  const path = await stateDir(t);
  const ok = recordingIp();
  await execute(ok.ip, path, 'c1', steps, () => undefined);
  t.same(ok.events, ['start host', 'run host', 'start /run/netns/p', 'run /run/netns/p'], 'a start blocks: the batch before gets its lines first');
  const failing = recordingIp('link set dev pnb up');
  await execute(failing.ip, path, 'c1', steps, () => undefined);
  t.same(failing.events.slice(0, 4), ['start host', 'run host', 'start /run/netns/p', 'cancel /run/netns/p']);
});

t.test("a read back goes at the end of the last batch when that is ip's in its netns, and only then", async (t) => {
  const path = await stateDir(t);
  const read = { options: ['-d'], commands: ['addr show'] };
  const ok = recordingIp();
  t.same(await execute(ok.ip, path, 'c1', steps, () => undefined, { where: pod, read }), { undoErrors: [], read: ['answer of /run/netns/p'] });
  t.same(ok.events, ['start host', 'run host', 'start /run/netns/p then addr show', 'run /run/netns/p']);
  const elsewhere = recordingIp();
  t.same(await execute(elsewhere.ip, path, 'c1', steps, () => undefined, { where: { netns: '/run/netns/q' }, read }), { undoErrors: [] }, 'another netns: no read');
  const hostLast = recordingIp();
  t.same(await execute(hostLast.ip, path, 'c1', steps.slice(0, 2), () => undefined, { where: pod, read }), { undoErrors: [] }, 'the last batch on the host: no read');
  const failing = recordingIp('addr add 198.18.1.2/24 dev net1');
  t.notOk((await execute(failing.ip, path, 'c1', steps, () => undefined, { where: pod, read })).read, 'a failed batch: no read');
});

t.test("a large pass's leading host steps run through `together`, journaled first, and the pod's after, counted with them", async (t) => {
  const path = await stateDir(t);
  const { ip, events, batches } = recordingIp('addr add 198.18.1.2/24 dev net1');
  const read = { options: ['-d'], commands: ['addr show'] };
  let journaled: string[] = [];
  const together: Together = {
    async lead(run) {
      journaled = readdirSync(`${path}/${journalFolder}`);
      events.push('together');
      const led = await run();
      events.push('led');
      return led;
    },
    planned: () => t.fail('it leads with host steps'),
  };
  const result = await execute(ip, path, 'c1', steps, () => t.fail('a failed pass is not committed'), { where: pod, read }, together);
  t.same(journaled, ['c1.json'], 'the journal is written before the host steps run');
  t.same(events.slice(0, 6), ['together', 'start host', 'run host', 'led', 'start /run/netns/p then addr show', 'run /run/netns/p'], "the pod's process starts after the host batch, not beside it");
  t.match(result.error?.message, /boom/);
  t.same(
    batches.slice(2).map((b) => b.lines[0]),
    ['link del dev net1', 'link del dev pnb'],
    'the failure is counted past the host steps: the veth, then the bridge are undone',
  );
  const asked: string[] = [];
  const counting: Together = { lead: (run) => (asked.push('lead'), run()), planned: () => void asked.push('planned') };
  const hostOnly = recordingIp();
  t.same(await execute(hostOnly.ip, path, 'c1', steps.slice(0, 2), () => undefined, undefined, counting), { undoErrors: [] });
  t.same(asked.splice(0), ['lead'], 'steps all on the host lead whole');
  const podFirst = recordingIp();
  t.same(await execute(podFirst.ip, path, 'c1', steps.slice(2), () => undefined, undefined, counting), { undoErrors: [] });
  t.same(asked.splice(0), ['planned'], 'a plan that starts in the pod only says it has planned');
  const tcFirst = recordingIp();
  const shaped: Step[] = [{ where: 'host', tool: 'tc', line: 'qdisc add dev pnv1 root tbf rate 1mbit burst 16kb latency 50ms' }, ...steps];
  t.same(await execute(tcFirst.ip, path, 'c1', shaped, () => undefined, undefined, counting), { undoErrors: [] });
  t.same(asked.splice(0), ['planned'], 'tc on the host joins nothing: it does not lead');
});

t.test('a batch that ends without saying which of its lines ran (its process killed, the launcher gone) has every step undone, last first', async (t) => {
  const path = await stateDir(t);
  const { ip, batches } = recordingIp();
  const answered = ip.batch.bind(ip);
  ip.batch = async (where, tool, lines) => {
    const result = await answered(where, tool, lines);
    if (where !== 'host' && lines.length > 1) throw new PodnetError('IO_FAILURE', "podnet's launcher ended (SIGKILL) before the process it started ended");
    return result;
  };
  let committed = 0;
  const result = await execute(ip, path, 'c1', steps, () => committed++);
  t.match(result.error?.message, /launcher ended/);
  t.equal(committed, 0, 'nothing committed');
  t.same(batches.slice(2).map((b) => `${b.where} ${b.lines.join('; ')}`), ['/run/netns/p addr del 198.18.1.2/24 dev net1', '/run/netns/p link del dev net1', 'host link del dev pnb'], 'each step undone, last first');
  t.same(readdirSync(`${path}/${journalFolder}`), [], 'and the journal is gone');
});

t.test('a failed step: the steps taken before it are undone, last first', async (t) => {
  const path = await stateDir(t);
  const { ip, batches } = recordingIp('addr add 198.18.1.2/24 dev net1');
  const result = await execute(ip, path, 'c1', steps, () => t.fail('a failed pass is not committed'));
  t.match(result.error, { code: 'IO_FAILURE', message: /boom/ });
  t.same(batches.slice(2).map((b) => b.lines[0]), ['link del dev net1', 'link del dev pnb'], 'the veth, then the bridge');
});

t.test('a failed step after a link made on the host moved into its pod: the pod deletes it; the host, whose link is gone, is not asked to', async (t) => {
  const path = await stateDir(t);
  const { ip, batches } = recordingIp('addr add 198.18.1.2/24 dev net1');
  const mark = 'podnet:c1/net1';
  const moved: Step[] = [
    { where: 'host', tool: 'ip', line: 'link add name pnt1 type gre remote 198.18.100.2', undo: { where: 'host', action: 'link-del', dev: 'pnt1', mark } },
    { where: 'host', tool: 'ip', line: `link set dev pnt1 alias ${mark}` },
    { where: 'host', tool: 'ip', line: 'link set dev pnt1 netns /run/netns/p name net1', undo: { where: pod, action: 'link-del', dev: 'net1' } },
    { where: pod, tool: 'ip', line: 'addr add 198.18.1.2/24 dev net1', undo: { where: pod, action: 'addr-del', dev: 'net1', address: '198.18.1.2/24' } },
  ];
  // The host's links after the move: pnt1 is not among them.
  const run: NetnsRunner = { ...ip, query: async (where, tool, options, commands) => (where === 'host' && commands[0] === 'link show' ? [[{ ifname: 'eth0' }]] : ip.query(where, tool, options, commands)) };
  const result = await execute(run, path, 'c1', moved, () => t.fail('a failed pass is not committed'));
  t.match(result.error, { message: /boom/ });
  t.same(result.undoErrors, [], 'nothing of the undo fails');
  t.same(batches.slice(2).map((b) => b.lines), [['link del dev net1']], "the pod's link goes; no delete of pnt1 on the host");
});

t.test('an undo that deletes a link already gone (made beside, then renamed) is no failure; any other failure of an undo is', async (t) => {
  const path = await stateDir(t);
  const { ip, batches } = recordingIp('addr add 198.18.1.2/24 dev net1');
  const beside: Step[] = [
    { where: 'host', tool: 'ip', line: 'link add link eth0 name pnt1 netns /run/netns/p type macvlan mode bridge', undo: { where: pod, action: 'link-del', dev: 'pnt1' } },
    { where: pod, tool: 'ip', line: 'link del dev net1' },
    { where: pod, tool: 'ip', line: 'link set dev pnt1 name net1', undo: { where: pod, action: 'link-del', dev: 'net1' } },
    { where: pod, tool: 'ip', line: 'addr add 198.18.1.2/24 dev net1', undo: { where: pod, action: 'addr-del', dev: 'net1', address: '198.18.1.2/24' } },
  ];
  // As ip answers a delete of a name the netns no longer has.
  const gone = (name: string) => new PodnetError('IO_FAILURE', `ip link del dev ${name} in netns /run/netns/p: Cannot find device "${name}"`);
  const run: NetnsRunner = { ...ip, batch: async (where, tool, lines) => (lines[0] === 'link del dev pnt1' || lines[0] === 'link del dev other' ? (await ip.batch(where, tool, lines), { done: 0, error: gone(lines[0].slice(13)) }) : ip.batch(where, tool, lines)) };
  const result = await execute(run, path, 'c1', beside, () => t.fail('a failed pass is not committed'));
  t.same(batches.slice(-2).map((b) => b.lines[0]), ['link del dev net1', 'link del dev pnt1'], 'the renamed link deleted under its new name, then its old name asked');
  t.same(result.undoErrors, [], 'the old name gone is no failure');
  const other: Step[] = [{ where: 'host', tool: 'ip', line: 'link add name x type dummy', undo: { where: pod, action: 'link-del', dev: 'net1' } }, beside[3]!];
  const mismatch = await execute({ ...run, batch: async (where, tool, lines) => (lines[0] === 'link del dev net1' ? { done: 0, error: gone('other') } : ip.batch(where, tool, lines)) }, path, 'c1', other, () => t.fail('not committed'));
  t.equal(mismatch.undoErrors.length, 1, 'a device other than the one deleted, missing: told');
});

t.test('a journal left by a crash is undone whole at start, last first, unless its pass was committed', async (t) => {
  const path = await stateDir(t);
  const crashing = recordingIp();
  // A journal is written before anything runs; simulate the crash by writing it and not running.
  ensurePrivateDir(`${path}/${journalFolder}`);
  writeFileAtomic(`${path}/${journalFolder}/c9.json`, JSON.stringify(journalOf('p1')));
  writeFileAtomic(`${path}/${journalFolder}/c8.json`, JSON.stringify(journalOf('p2')));
  const committed = (key: string, pass: string) => key === 'c8' && pass === 'p2';
  const told: string[] = [];
  t.same(await runJournalUndo(crashing.ip, path, { committed, netnsOf: () => '/run/netns/p', onQuarantined: (file) => told.push(file) }), ['c9']);
  t.same(crashing.batches, [
    { where: '/run/netns/p', lines: ['addr del 198.18.1.2/24 dev net1'] },
    { where: '/run/netns/p', lines: ['link del dev net1'] },
    { where: 'host', lines: ['link del dev pnb'] },
  ]);
  t.same(told, []);
  t.same(readdirSync(`${path}/${journalFolder}`), [], 'every journal is gone, the committed one without an undo');
});

t.test("a crash's undo deletes a host link only while it bears the mark podnet gave it", async (t) => {
  const path = await stateDir(t);
  const { ip, batches } = recordingIp();
  const linksNow = [{ ifname: 'pnvmine' }, { ifname: 'pnvmarked', ifalias: 'podnet:c9/net1' }, { ifname: 'pnvtaken', ifalias: 'podnet:c7/net1' }, { ifname: 'pnvhand', ifalias: 'uplink' }];
  const run: NetnsRunner = { ...ip, query: async (where, tool, options, commands) => (where === 'host' && commands[0] === 'link show' ? [linksNow] : ip.query(where, tool, options, commands)) };
  const del = (dev: string) => ({ where: 'host', action: 'link-del', dev, mark: 'podnet:c9/net1' });
  ensurePrivateDir(`${path}/${journalFolder}`);
  writeFileAtomic(`${path}/${journalFolder}/c9.json`, JSON.stringify({ version: 1, pass: 'p1', undo: ['pnvmine', 'pnvmarked', 'pnvtaken', 'pnvhand', 'pnvgone'].map(del) }));
  await runJournalUndo(run, path, { committed: () => false, netnsOf: () => '/run/netns/p' });
  t.same(batches.flatMap((b) => b.lines), ['link del dev pnvmarked', 'link del dev pnvmine'], 'the unmarked one (made, not yet marked) and its own; never one marked by another pod or by hand, nor one not there');
});

t.test("a crash's undo reads the marks from ip -json link show as ip prints it", async (t) => {
  const path = await stateDir(t);
  const { ip, batches } = recordingIp();
  // Captured from iproute2 6.1 by src/netns/fixtures/capture.sh: pn-blue marked podnet:bridge, pnv0123456789 and pnb0123456789 podnet:c1/eth0.
  const printed = readFileSync(new URL('../netns/fixtures/host.ip-link.out', import.meta.url), 'utf8');
  const run: NetnsRunner = {
    ...ip,
    query: async (where, tool, options, commands) => (where === 'host' && tool === 'ip' && options.length === 0 && commands.join() === 'link show' ? [JSON.parse(printed)] : ip.query(where, tool, options, commands)),
  };
  const del = (dev: string) => ({ where: 'host', action: 'link-del', dev, mark: 'podnet:c1/eth0' });
  ensurePrivateDir(`${path}/${journalFolder}`);
  writeFileAtomic(`${path}/${journalFolder}/c1.json`, JSON.stringify({ version: 1, pass: 'p1', undo: ['pnv0123456789', 'pnb0123456789', 'pn-blue'].map(del) }));
  await runJournalUndo(run, path, { committed: () => false, netnsOf: () => '/run/netns/p' });
  t.same(batches.flatMap((b) => b.lines), ['link del dev pnb0123456789', 'link del dev pnv0123456789'], "its own two; never the bridge, marked as the Network's");
});

t.test('the journal holds the undo actions only, never a command line', async (t) => {
  const path = await stateDir(t);
  const seen: unknown[] = [];
  const spy = recordingIp();
  const run = { ...spy.ip, batch: async (...args: Parameters<typeof spy.ip.batch>) => {
    seen.push(JSON.parse(readFileSync(`${path}/${journalFolder}/c1.json`, 'utf8')));
    return spy.ip.batch(...args);
  } };
  let pass = '';
  await execute(run, path, 'c1', steps, (p) => (pass = p));
  t.same(seen[0], journalOf(pass));
  t.notMatch(JSON.stringify(seen[0]), /link add|"line"/);
});

/** Plants each journal, runs the undo at start, and gives back what ran and what was told. */
async function plantedJournals(t: Test, journals: Record<string, unknown>) {
  const path = await stateDir(t);
  const { ip, batches } = recordingIp();
  ensurePrivateDir(`${path}/${journalFolder}`);
  for (const [key, body] of Object.entries(journals)) writeFileAtomic(`${path}/${journalFolder}/${key}.json`, typeof body === 'string' ? body : JSON.stringify(body));
  const told: { file: string; quarantinedAs: string; reason: string }[] = [];
  const undone = await runJournalUndo(ip, path, { committed: () => false, netnsOf: (key) => (key === 'elsewhere' ? '/run/netns/q' : key === 'unknown' ? undefined : '/run/netns/p'), onQuarantined: (file, quarantinedAs, reason) => told.push({ file, quarantinedAs, reason }) });
  return { path, batches, told, undone };
}

t.test('a planted journal is set aside in quarantine/ and told, and nothing of it runs', async (t) => {
  const hostile = {
    // An older podnet's journals held command lines: not trusted, whatever they say.
    lines: [{ where: 'host', tool: 'ip', line: 'link add name pnb type bridge', undo: { where: 'host', tool: 'ip', line: 'link del dev pnb' } }],
    'pass-and-lines': { pass: 'p1', steps: [{ where: 'host', tool: 'ip', line: 'x', undo: { where: 'host', tool: 'ip', line: 'netns exec evil sh -c id' } }] },
    'line-in-version-1': { version: 1, pass: 'p1', undo: [{ where: 'host', tool: 'ip', line: 'netns exec evil sh -c id' }] },
    'netns-exec-as-dev': { version: 1, pass: 'p1', undo: [{ where: pod, action: 'link-del', dev: 'x netns exec' }] },
    'name-with-spaces': { version: 1, pass: 'p1', undo: [{ where: pod, action: 'addr-del', dev: 'net1', address: '198.18.1.2/24 dev eth0' }] },
    'unknown-action': { version: 1, pass: 'p1', undo: [{ where: pod, action: 'exec', argv: ['sh'] }] },
    'host-eth0': { version: 1, pass: 'p1', undo: [{ where: 'host', action: 'link-del', dev: 'eth0' }] },
    'host-sysctl': { version: 1, pass: 'p1', undo: [{ where: 'host', action: 'sysctl', path: 'net/ipv4/ip_forward', value: '0' }] },
    'sysctl-path-out': { version: 1, pass: 'p1', undo: [{ where: pod, action: 'sysctl', path: 'net/../../kernel/core_pattern', value: '1' }] },
    'netns-relative': { version: 1, pass: 'p1', undo: [{ where: { netns: '../proc/1/ns/net' }, action: 'link-del', dev: 'net1' }] },
    'unknown-version': { version: 2, pass: 'p1', undo: [] },
    // A valid action beside a bad one: the file is one document, refused whole.
    'one-bad-of-two': { version: 1, pass: 'p1', undo: [{ where: pod, action: 'link-del', dev: 'net1' }, { where: pod, action: 'link-del', dev: 'net 1' }] },
    'not-json': '{ "version": 1,',
    // Valid actions, in a netns that is not the one podnet recorded for the sandbox, or for a sandbox it has no record of.
    elsewhere: { version: 1, pass: 'p1', undo: [{ where: pod, action: 'link-del', dev: 'net1' }] },
    unknown: { version: 1, pass: 'p1', undo: [{ where: pod, action: 'link-del', dev: 'net1' }] },
  };
  const { path, batches, told, undone } = await plantedJournals(t, hostile);
  t.same(batches, [], 'the runner ran nothing');
  t.same(undone, []);
  t.same(told.map((q) => q.file.split('/').pop()).sort(), Object.keys(hostile).map((k) => `${k}.json`).sort(), 'each is told');
  t.same(readdirSync(`${path}/${journalFolder}`), [], 'none is left in journal/');
  t.same(readdirSync(`${path}/${stateLayout.quarantine}`).sort(), told.map((q) => q.quarantinedAs).sort(), 'each is kept in quarantine/ for a human');
  t.match(told.find((q) => q.file.endsWith('/unknown-version.json'))?.reason, /version: must be equal to constant/);
  t.match(told.find((q) => q.file.endsWith('/elsewhere.json'))?.reason, /acts in netns \/run\/netns\/p, not in \/run\/netns\/q, the one podnet recorded for it/);
  t.match(told.find((q) => q.file.endsWith('/unknown.json'))?.reason, /acts in netns \/run\/netns\/p, and podnet has recorded no netns for it/);
});

t.test('a valid journal beside a planted one: the valid one is undone, the other set aside', async (t) => {
  const { batches, told, undone } = await plantedJournals(t, {
    c1: journalOf('p1'),
    planted: { version: 1, pass: 'p1', undo: [{ where: 'host', action: 'link-del', dev: 'eth0' }] },
  });
  t.same(undone, ['c1']);
  t.same(batches.map((b) => b.lines[0]), ['addr del 198.18.1.2/24 dev net1', 'link del dev net1', 'link del dev pnb']);
  t.same(told.map((q) => q.file.split('/').pop()), ['planted.json']);
});

t.test('every kind of undo action is rendered and run, last first, each by its tool', async (t) => {
  const route = { family: 4, to: '198.18.9.0/24', table: 100, via: '198.18.1.1' } as const;
  const rule = { family: 6, priority: 100, table: 100, from: '2001:db8::/64' } as const;
  const { batches, told } = await plantedJournals(t, {
    c1: {
      version: 1,
      pass: 'lq0-1a2b',
      undo: [
        { where: pod, action: 'link-set', dev: 'eth0', setting: 'mtu', value: 1500 },
        { where: pod, action: 'link-set', dev: 'eth0', setting: 'mac', value: '02:11:22:33:44:55' },
        { where: pod, action: 'link-set', dev: 'eth0', setting: 'promisc', value: false },
        { where: pod, action: 'route', verb: 'del', route },
        { where: pod, action: 'rule', verb: 'del', rule },
        { where: pod, action: 'sysctl', path: 'net/ipv4/conf/net1/rp_filter', value: '1' },
        { where: 'host', action: 'tbf', dev: 'pnv0123456789', rate: 1000000, burst: 100000 },
        { where: 'host', action: 'qdisc-del', dev: 'pnv0123456789', parent: 'ingress' },
        { where: pod, action: 'marking', entries: [{ interface: 'net1', dscp: 46 }] },
      ],
    },
  });
  t.same(told, []);
  t.same(batches, [
    { where: '/run/netns/p', tool: 'nft', lines: [markingLine([{ interface: 'net1', dscp: 46 }])] },
    { where: 'host', tool: 'tc', lines: ['qdisc del dev pnv0123456789 ingress'] },
    { where: 'host', tool: 'tc', lines: ['qdisc replace dev pnv0123456789 root tbf rate 1000000bit burst 12500 latency 25ms'] },
    { where: '/run/netns/p', tool: 'sysctl', lines: ['net/ipv4/conf/net1/rp_filter=1'] },
    { where: '/run/netns/p', tool: 'ip6', lines: ['rule del priority 100 from 2001:db8::/64 table 100'] },
    { where: '/run/netns/p', lines: ['route del 198.18.9.0/24 table 100'] },
    { where: '/run/netns/p', lines: ['link set dev eth0 promisc off'] },
    { where: '/run/netns/p', lines: ['link set dev eth0 address 02:11:22:33:44:55'] },
    { where: '/run/netns/p', lines: ['link set dev eth0 mtu 1500'] },
  ]);
});

t.test('a pass whose undo its journal schema refuses does not run', async (t) => {
  const path = await stateDir(t);
  const { ip, batches } = recordingIp();
  const bad: Step[] = [{ where: 'host', tool: 'ip', line: 'link add name eth9 type dummy', undo: { where: 'host', action: 'link-del', dev: 'eth9' } }];
  const result = await execute(ip, path, 'c1', bad, () => t.fail('not committed'));
  t.match(result.error, { code: 'INTERNAL', message: /journal of c1: at \/undo\/0\/dev/ });
  t.same(batches, []);
});

t.test('the pass id given to commit is the one in the journal', async (t) => {
  const path = await stateDir(t);
  const seen: string[] = [];
  const spy = recordingIp();
  const run = { ...spy.ip, batch: async (...args: Parameters<typeof spy.ip.batch>) => {
    seen.push((JSON.parse(readFileSync(`${path}/${journalFolder}/c1.json`, 'utf8')) as { pass: string }).pass);
    return spy.ip.batch(...args);
  } };
  let committedPass = '';
  await execute(run, path, 'c1', steps, (pass) => (committedPass = pass));
  t.ok(committedPass);
  t.same([...new Set(seen)], [committedPass]);
});

t.test('a change of tool starts a new batch: ip, then tc on the same host, then sysctl in the pod', async (t) => {
  const path = await stateDir(t);
  const { ip, batches } = recordingIp();
  const mixed: Step[] = [
    { where: 'host', tool: 'ip', line: 'link add name pnb1 type ifb' },
    { where: 'host', tool: 'tc', line: 'qdisc replace dev pnb1 root tbf rate 8000bit burst 100 latency 25ms' },
    { where: pod, tool: 'sysctl', line: 'net/ipv4/ip_forward=1' },
    { where: pod, tool: 'sysctl', line: 'net/ipv4/conf/all/rp_filter=0' },
  ];
  await execute(ip, path, 'c2', mixed, () => undefined);
  t.same(batches, [
    { where: 'host', lines: ['link add name pnb1 type ifb'] },
    { where: 'host', tool: 'tc', lines: ['qdisc replace dev pnb1 root tbf rate 8000bit burst 100 latency 25ms'] },
    { where: '/run/netns/p', tool: 'sysctl', lines: ['net/ipv4/ip_forward=1', 'net/ipv4/conf/all/rp_filter=0'] },
  ]);
});

t.test("a step's failure names the document and field that asked for the step", async (t) => {
  const path = await stateDir(t);
  const { ip } = recordingIp('addr add 198.18.1.2/24 dev net1');
  const caused = steps.map((s, i) => (i === 3 ? { ...s, cause: 'PodNetworkConfig default/x spec.attachments[0]' } : s));
  const result = await execute(ip, path, 'c1', caused, () => t.fail('not committed'));
  t.match(result.error, { code: 'IO_FAILURE', message: /^PodNetworkConfig default\/x spec\.attachments\[0\]: ip addr add 198\.18\.1\.2\/24 dev net1: boom$/ });
  const plain = await execute(recordingIp('link set dev pnb up').ip, path, 'c1', caused, () => undefined);
  t.match(plain.error?.message, /^ip link set dev pnb up: boom$/, 'a step nobody asked for by name (a bridge) says only what failed');
});
