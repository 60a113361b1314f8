import t from 'tap';
import { netnsRunner, nftTableOf } from './runner.ts';

t.test('a batch line holding a character ip reads specially is refused before anything runs', async (t) => {
  for (const line of ['route add 0.0.0.0/1 dev eth0# table 100', 'link add "a b" type dummy', "link set x alias 'y'", 'link set a\\ b up', 'link set a up\nlink del eth0']) {
    const result = await netnsRunner.batch({ netns: '/run/netns/none' }, 'ip', [line]);
    t.equal(result.done, 0);
    t.match(result.error, { code: 'INVALID_REQUEST', message: /would read specially/ }, JSON.stringify(line));
  }
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
  t.same(nftTableOf('{"nftables": [{"metainfo": {}}, {"table": {"family": "bridge", "name": "podnet"}}]}'), { rules: new Map(), names: new Map(), hooks: new Map(), flagged: false }, 'a table with nothing in it');
  // As a later nft prints dormant, and as nft 1.0.6 may (from freed memory: seen "bridge", "ifname", its release name).
  for (const flags of ['dormant', ['dormant'], 'bridge', 'Lester Gooch #5']) {
    t.equal(nftTableOf(JSON.stringify({ nftables: [{ table: { family: 'bridge', name: 'podnet', flags } }] })).flagged, true, `flags ${JSON.stringify(flags)}: flagged`);
  }
});
