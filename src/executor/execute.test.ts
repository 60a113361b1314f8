import t, { type Test } from 'tap';
import { readdirSync, readFileSync } from 'node:fs';
import { dir } from 'tmp-promise';
import { PodnetError } from '../errors.ts';
import type { NetnsRunner } from '../netns/runner.ts';
import type { Step, Tool, Where } from '../model/step.ts';
import { ensurePrivateDir, writeFileAtomic } from '../registry/atomic-file.ts';
import { stateLayout } from '../protocol/paths.ts';
import { execute, runJournalUndo } from './execute.ts';

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
    batch: async (where: Where, tool: Tool, lines: readonly string[]) => {
      batches.push({ where: name(where), ...(tool === 'ip' ? {} : { tool }), lines: [...lines] });
      const failed = failOn === undefined ? -1 : lines.indexOf(failOn);
      return failed < 0 ? { done: lines.length } : { done: failed, error: new PodnetError('IO_FAILURE', `ip ${failOn}: boom`) };
    },
    start(where: Where, tool: Tool) {
      events.push(`start ${name(where)}`);
      return {
        run: (lines: readonly string[]) => (events.push(`run ${name(where)}`), this.batch(where, tool, lines)),
        cancel: () => void events.push(`cancel ${name(where)}`),
      };
    },
  };
  return { ip, batches, events };
}

const pod: Where = { netns: '/run/netns/p' };
const steps: Step[] = [
  { where: 'host', tool: 'ip', line: 'link add name pnb type bridge', undo: { where: 'host', tool: 'ip', line: 'link del pnb' } },
  { where: 'host', tool: 'ip', line: 'link set pnb up' },
  { where: pod, tool: 'ip', line: 'link add net1 type veth peer name pnv1 netns 1', undo: { where: pod, tool: 'ip', line: 'link del net1' } },
  { where: pod, tool: 'ip', line: 'addr add 198.18.1.2/24 dev net1', undo: { where: pod, tool: 'ip', line: 'addr del 198.18.1.2/24 dev net1' } },
];

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
    { where: 'host', lines: ['link add name pnb type bridge', 'link set pnb up'] },
    { where: '/run/netns/p', lines: ['link add net1 type veth peer name pnv1 netns 1', 'addr add 198.18.1.2/24 dev net1'] },
  ]);
  t.same(readdirSync(`${path}/${journalFolder}`), []);
});

t.test("each batch's process starts once the one before has its lines; a failure lets the next go unused", async (t) => {
  const path = await stateDir(t);
  const ok = recordingIp();
  await execute(ok.ip, path, 'c1', steps, () => undefined);
  t.same(ok.events, ['start host', 'run host', 'start /run/netns/p', 'run /run/netns/p'], 'a start blocks: the batch before gets its lines first');
  const failing = recordingIp('link set pnb up');
  await execute(failing.ip, path, 'c1', steps, () => undefined);
  t.same(failing.events.slice(0, 4), ['start host', 'run host', 'start /run/netns/p', 'cancel /run/netns/p']);
});

t.test('a failed step: the steps taken before it are undone, last first', async (t) => {
  const path = await stateDir(t);
  const { ip, batches } = recordingIp('addr add 198.18.1.2/24 dev net1');
  const result = await execute(ip, path, 'c1', steps, () => t.fail('a failed pass is not committed'));
  t.match(result.error, { code: 'IO_FAILURE', message: /boom/ });
  t.same(batches.slice(2).map((b) => b.lines[0]), ['link del net1', 'link del pnb'], 'the veth, then the bridge');
});

t.test('a journal left by a crash is undone whole at start, unless its pass was committed', async (t) => {
  const path = await stateDir(t);
  const crashing = recordingIp();
  // A journal is written before anything runs; simulate the crash by writing it and not running.
  ensurePrivateDir(`${path}/${journalFolder}`);
  writeFileAtomic(`${path}/${journalFolder}/c9.json`, JSON.stringify({ pass: 'p1', steps }));
  writeFileAtomic(`${path}/${journalFolder}/c8.json`, JSON.stringify({ pass: 'p2', steps }));
  writeFileAtomic(`${path}/${journalFolder}/c7.json`, JSON.stringify(steps)); // an older podnet's journal
  const committed = (key: string, pass: string) => key === 'c8' && pass === 'p2';
  t.same((await runJournalUndo(crashing.ip, path, committed)).sort(), ['c7', 'c9']);
  t.same(crashing.batches.map((b) => b.lines[0]), ['addr del 198.18.1.2/24 dev net1', 'link del net1', 'link del pnb', 'addr del 198.18.1.2/24 dev net1', 'link del net1', 'link del pnb']);
  t.same(readdirSync(`${path}/${journalFolder}`), [], 'every journal is gone, the committed one without an undo');
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
    { where: 'host', tool: 'ip', line: 'link add pnb1 type ifb' },
    { where: 'host', tool: 'tc', line: 'qdisc replace dev pnb1 root tbf rate 8000bit burst 100 latency 25ms' },
    { where: pod, tool: 'sysctl', line: 'net/ipv4/ip_forward=1' },
    { where: pod, tool: 'sysctl', line: 'net/ipv4/conf/all/rp_filter=0' },
  ];
  await execute(ip, path, 'c2', mixed, () => undefined);
  t.same(batches, [
    { where: 'host', lines: ['link add pnb1 type ifb'] },
    { where: 'host', tool: 'tc', lines: ['qdisc replace dev pnb1 root tbf rate 8000bit burst 100 latency 25ms'] },
    { where: '/run/netns/p', tool: 'sysctl', lines: ['net/ipv4/ip_forward=1', 'net/ipv4/conf/all/rp_filter=0'] },
  ]);
});
