import t from 'tap';
import { linkLocalOf, podMacOf, portSecurityRuleset, releasePortLine, sameSecuredPort, securedPortsOf, securePortLine } from './port-security.ts';

t.test('the link-local address of a MAC is the one the kernel derives (EUI-64)', async (t) => {
  // As `ip -6 addr` shows them for these MACs under addrgenmode eui64.
  t.equal(linkLocalOf('02:3f:8e:07:a5:15'), 'fe80::3f:8eff:fe07:a515');
  t.equal(linkLocalOf('52:54:00:12:34:56'), 'fe80::5054:ff:fe12:3456');
  t.equal(linkLocalOf('00:00:00:00:00:01'), 'fe80::200:ff:fe00:1');
});

t.test('the MAC podnet gives a pod end: unicast, locally administered, the same for the same interface, another for another', async (t) => {
  const mac = podMacOf('c1', 'net1');
  t.match(mac, /^02(:[0-9a-f]{2}){5}$/);
  t.equal(podMacOf('c1', 'net1'), mac);
  t.not(podMacOf('c1', 'net2'), mac);
  t.not(podMacOf('c2', 'net1'), mac);
});

t.test('a release adds the entries first and then deletes them, in one line: nft fails a whole batch on one missing element', async (t) => {
  const secured = { mac: '02:00:00:00:00:01', addresses: ['198.18.0.2'] };
  const elements = (line: string) => line.split('; ').filter((c) => c.includes(' element '));
  const release = releasePortLine('pnv0123456789', secured);
  const adds = elements(securePortLine('pnv0123456789', secured));
  t.same(elements(release), [...adds, ...adds.map((c) => c.replace(/^add /, 'delete '))]);
  for (const line of [release, securePortLine('pnv0123456789', secured)]) {
    t.match(line, /^add table bridge podnet; add set bridge podnet ports \{ type ifname; \}; /, 'each first puts the table and its sets, which changes nothing where they are: no batch fails on a table flushed away');
  }
  t.ok(sameSecuredPort(secured, { mac: '02:00:00:00:00:01', addresses: ['198.18.0.2'] }));
  t.notOk(sameSecuredPort(secured, { mac: '02:00:00:00:00:01', addresses: [] }));
  t.notOk(sameSecuredPort(secured, undefined));
});

t.test('a table secures its ports only when whole: every chain of the ruleset there with the ruleset\'s rules', async (t) => {
  // The ruleset's chains and rule counts, read from its lines as nft would list them once put.
  const rules = new Map<string, number>();
  for (const line of portSecurityRuleset()) {
    const words = line.split(' ');
    if (words[1] === 'chain' && words[0] === 'add') rules.set(words[4]!, rules.get(words[4]!) ?? 0);
    if (words[1] === 'rule') rules.set(words[4]!, (rules.get(words[4]!) ?? 0) + 1);
  }
  t.ok(rules.size >= 7 && rules.get('prerouting') === 1 && [...rules.values()].every((n) => n > 0), 'the ruleset has its seven chains, each with rules');
  // Its one base chain, as nft lists its hook.
  const hooks = new Map([['prerouting', 'filter prerouting -300 accept']]);
  const names = new Map([['ports', new Set(['pnva'])]]);
  const whole = { rules, names, hooks, flagged: false, comments: [] };
  t.same(securedPortsOf(whole), new Set(['pnva']), 'whole: its ports');
  t.same(securedPortsOf({ ...whole, names: new Map() }), new Set(), 'whole, no port yet');
  t.equal(securedPortsOf(undefined), undefined, 'no table');
  t.equal(securedPortsOf({ ...whole, rules: new Map(), hooks: new Map() }), undefined, 'sets alone, no chain: what a release leaves on a table flushed away');
  const without = new Map(rules);
  without.delete('na');
  t.equal(securedPortsOf({ ...whole, rules: without }), undefined, 'a chain missing');
  t.equal(securedPortsOf({ ...whole, rules: new Map([...rules, ['v4', 0]]) }), undefined, 'a chain flushed');
  t.equal(securedPortsOf({ ...whole, rules: new Map([...rules, ['port', rules.get('port')! + 1]]) }), undefined, 'a rule someone added');
  t.equal(securedPortsOf({ ...whole, flagged: true }), undefined, 'the table given flags (dormant: no chain of it sees a frame)');
  t.equal(securedPortsOf({ ...whole, hooks: new Map() }), undefined, 'a prerouting chain of someone else\'s, hooked nowhere');
  t.equal(securedPortsOf({ ...whole, hooks: new Map([['prerouting', 'filter prerouting 300 accept']]) }), undefined, 'hooked at another priority');
  t.equal(securedPortsOf({ ...whole, hooks: new Map([...hooks, ['port', 'filter prerouting -300 accept']]) }), undefined, 'a chain rules jump to, hooked as well');
});
