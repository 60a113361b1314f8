// The netns runner on the real kernel: the host's ip process kept ready for the next batch.
import t from 'tap';
import { execa } from 'execa';
import { setTimeout as sleep } from 'node:timers/promises';
import { netnsRunner } from '../src/netns/runner.ts';
import { portSecurityRuleset, portSecurityTable, releasePortLine, securedPortsOf, securePortLine } from '../src/model/port-security.ts';
import { missingPrerequisite } from './lib/env.ts';
import { makeNetns, removeLinkAtTeardown, uniqueName } from './lib/netns.ts';

t.test('a host batch run by the process kept ready acts on a link made again under the same name', { skip: missingPrerequisite() }, async (t) => {
  const name = uniqueName('pnrd');
  removeLinkAtTeardown(t, name);
  t.same(await netnsRunner.batch('host', 'ip', [`link add ${name} type veth peer name ${name}p`]), { done: 1 }, 'a first host batch');
  // Its process has exited and the next one is waiting: a link made again gets a new index.
  await sleep(200);
  const indexOf = async () => (JSON.parse((await execa('ip', ['-json', 'link', 'show', 'dev', name])).stdout) as { ifindex: number }[])[0]!.ifindex;
  const before = await indexOf();
  await execa('ip', ['link', 'del', name]);
  await execa('ip', ['link', 'add', name, 'type', 'veth', 'peer', 'name', `${name}p`]);
  t.not(await indexOf(), before, 'the link made again has another index');
  t.same(await netnsRunner.batch('host', 'ip', [`link set ${name} up`, `addr add 198.18.83.1/32 dev ${name}`]), { done: 2 }, 'the next host batch succeeds');
  const { stdout } = await execa('ip', ['-json', 'addr', 'show', 'dev', name]);
  const [link] = JSON.parse(stdout) as { flags: string[]; addr_info: unknown[] }[];
  t.ok(link!.flags.includes('UP'), 'the new link is up');
  t.match(link!.addr_info, [{ local: '198.18.83.1', prefixlen: 32 }], 'and has the address');
});

t.test("host batches asked for while one runs share a process; each is told its own lines' fate", { skip: missingPrerequisite() }, async (t) => {
  const [a, b, c] = ['pnja', 'pnjb', 'pnjc'].map(uniqueName);
  for (const name of [a, b, c]) removeLinkAtTeardown(t, name!);
  const results = await Promise.all([
    netnsRunner.batch('host', 'ip', [`link add ${a} type veth peer name ${a}p`]),
    // Its second line fails (no such link): its first ran, and is left for its caller to undo.
    netnsRunner.batch('host', 'ip', [`link add ${b} type veth peer name ${b}p`, `link set ${b}n up`]),
    netnsRunner.batch('host', 'ip', [`link add ${c} type veth peer name ${c}p`, `link set ${c} up`]),
  ]);
  t.same(results[0], { done: 1 }, 'the first is done');
  t.equal(results[1]!.done, 1, 'the second did its first line');
  t.match(results[1]!.error?.message, new RegExp(`ip link set ${b}n up in host: .*(Cannot find device|No such device)`), 'and is told which of its lines failed, and why');
  t.same(results[2], { done: 2 }, 'the third, after the failure, ran all the same');
  const links = JSON.parse((await execa('ip', ['-json', 'link', 'show'])).stdout) as { ifname: string; flags: string[] }[];
  t.same([a, b, c].map((n) => links.some((l) => l.ifname === n)), [true, true, true], 'the kernel has the three links');
  t.ok(links.find((l) => l.ifname === c)?.flags.includes('UP'), 'and the third is up');
});

t.test("a batch in a pod's netns ends with a read of what it made, in its own process", { skip: missingPrerequisite() }, async (t) => {
  const ns = await makeNetns(t, 'pnrb-');
  const where = { netns: ns.path };
  const read = { options: ['-d'], commands: ['addr show'] };
  const ok = await netnsRunner.start(where, 'ip', read).run(['link set lo mtu 1400 up', 'addr add 198.18.84.1/32 dev lo']);
  t.equal(ok.done, 2);
  const [links] = ok.read as [{ ifname: string; mtu: number; addr_info: { local: string }[] }[]];
  t.match(links, [{ ifname: 'lo', mtu: 1400 }], 'the read shows the MTU the lines set');
  t.ok(links[0]!.addr_info.some((a) => a.local === '198.18.84.1'), 'and the address');
  const failing = await netnsRunner.start(where, 'ip', read).run(['link set lo mtu 1300', 'link set none0 up']);
  t.equal(failing.done, 1, 'a failing line: the lines before it counted');
  t.match(failing.error?.message, /ip link set none0 up in netns .*: .*(Cannot find device|No such device)/, 'the failing line named');
  t.notOk(failing.read, 'and no read');
});

t.test('podnet\'s port security table, as nft lists it, reads whole with its ports; flushed, set dormant, under a chain of someone else\'s or given back its sets alone, it does not; put again, it is whole', { skip: missingPrerequisite(['/usr/sbin/nft']) }, async (t) => {
  // In a netns of the test's own: the host's table may be another podnet's.
  const ns = await makeNetns(t);
  const where = { netns: ns.path };
  t.equal(await netnsRunner.readNftTable(where, portSecurityTable), undefined, 'no table: undefined');
  const port = 'pnvrt000000000';
  const secured = { mac: '02:00:5e:00:00:07', addresses: ['198.18.83.7', '2001:db8::7'] };
  t.same(await netnsRunner.batch(where, 'nft', [...portSecurityRuleset(), securePortLine(port, secured)]), { done: portSecurityRuleset().length + 1 });
  t.same(securedPortsOf(await netnsRunner.readNftTable(where, portSecurityTable)), new Set([port]), 'the ruleset and a secured port: whole, with the port');
  await execa('ip', ['netns', 'exec', ns.name, 'nft', 'flush', 'chain', ...portSecurityTable.split(' '), 'v4']);
  t.equal(securedPortsOf(await netnsRunner.readNftTable(where, portSecurityTable)), undefined, 'a chain flushed: not whole');
  const nft = (...args: string[]) => execa('ip', ['netns', 'exec', ns.name, 'nft', ...args]);
  const putAgain = async (what: string) => {
    t.same(await netnsRunner.batch(where, 'nft', portSecurityRuleset()), { done: portSecurityRuleset().length }, `${what}: the ruleset put again`);
    t.same(securedPortsOf(await netnsRunner.readNftTable(where, portSecurityTable)), new Set([port]), 'whole again, the port\'s entries kept');
  };
  await putAgain('flushed');
  await nft('add', 'table', ...portSecurityTable.split(' '), '{ flags dormant; }');
  // nft 1.0.6 prints a dormant table's flags from freed memory: valid JSON or not, by the heap. Either
  // way it does not read whole (flags of any value, or a read that fails: not there).
  const dormant = await netnsRunner.readNftTable(where, portSecurityTable).then(securedPortsOf, (err: Error) => (t.match(err.message, /nft -j list table bridge podnet in netns .* printed what is not JSON/), undefined));
  t.equal(dormant, undefined, 'set dormant: not whole');
  await putAgain('dormant');
  t.notMatch((await nft('list', 'table', ...portSecurityTable.split(' '))).stdout, /dormant/, 'and awake');
  // A prerouting chain of someone else's, made first and hooked nowhere, holding podnet's one rule there.
  await nft('delete', 'table', ...portSecurityTable.split(' '));
  const unhooked = portSecurityRuleset().map((l) => (l.includes(' hook ') ? `add chain ${portSecurityTable} prerouting` : l));
  await execa('ip', ['netns', 'exec', ns.name, 'nft', '-f', '-'], { input: `${unhooked.join('\n')}\n` });
  t.equal(securedPortsOf(await netnsRunner.readNftTable(where, portSecurityTable)), undefined, 'a prerouting chain hooked nowhere, with the ruleset\'s rules: not whole');
  const blocked = await netnsRunner.batch(where, 'nft', portSecurityRuleset());
  t.ok(blocked.error, 'the ruleset cannot be put over it');
  t.equal(securedPortsOf(await netnsRunner.readNftTable(where, portSecurityTable)), undefined, 'and it still does not read whole');
  await execa('ip', ['netns', 'exec', ns.name, 'nft', 'flush', 'ruleset']);
  t.same(await netnsRunner.batch(where, 'nft', [releasePortLine(port, secured)]), { done: 1 }, 'a release puts the table and its sets back');
  const left = await netnsRunner.readNftTable(where, portSecurityTable);
  t.ok(left, 'the table is there');
  t.equal(securedPortsOf(left), undefined, 'without its chains: not whole');
});
