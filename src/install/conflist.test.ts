import t from 'tap';
import { chain, conflistNameFor, isChained, parsePrimary, podnetEntry, primaryConfigName, unchain } from './conflist.ts';

t.test('the primary is the first config file in byte order; other files and temp files do not count', async (t) => {
  t.equal(primaryConfigName(['20-b.conflist', '10-a.conf', '99-z.json', 'README']), '10-a.conf');
  t.equal(primaryConfigName(['10-a.conflist.podnet-original', '.tmp-05-x.conflist.1.2', '50-c.conflist']), '50-c.conflist');
  t.equal(primaryConfigName(['Z.conf', 'a.conf']), 'Z.conf', 'upper case sorts first, as Go sorts strings');
  t.equal(primaryConfigName(['notes.txt']), undefined);
  t.equal(conflistNameFor('05-cilium.conf'), '05-cilium.conflist');
  t.equal(conflistNameFor('10-x.json'), '10-x.conflist');
});

const list = { cniVersion: '1.0.0', name: 'net', plugins: [{ type: 'bridge', bridge: 'cni0' }, { type: 'portmap', capabilities: { portMappings: true } }] };

t.test('chain appends podnet last and leaves the other plugins as they are; again changes nothing', async (t) => {
  const entry = podnetEntry({});
  const chained = chain(list, entry);
  t.same(chained.plugins, [...list.plugins, { type: 'podnet' }]);
  t.ok(isChained(chained, entry));
  t.same(chain(chained, entry), chained, 'idempotent');
  t.same(unchain(chained), list, 'unchain gives the list back');
});

t.test('new settings replace podnet entry in its place; a second podnet entry is dropped', async (t) => {
  const withOld = { ...list, plugins: [{ type: 'podnet' }, ...list.plugins, { type: 'podnet', timeoutMs: 5 }] };
  const entry = podnetEntry({ socketPath: '/run/x.sock', timeoutMs: 200 });
  t.notOk(isChained(withOld, entry));
  t.same(chain(withOld, entry).plugins, [{ type: 'podnet', socketPath: '/run/x.sock', timeoutMs: 200 }, ...list.plugins]);
});

t.test('a single-plugin config becomes a list the way libcni reads it', async (t) => {
  const parsed = parsePrimary('/c/05-cilium.conf', JSON.stringify({ cniVersion: '0.3.1', name: 'cilium', type: 'cilium-cni', 'enable-debug': false }));
  t.same(parsed, { cniVersion: '0.3.1', name: 'cilium', plugins: [{ type: 'cilium-cni', 'enable-debug': false }] });
});

t.test('what the runtime could not load either, or a version podnet does not speak, is refused naming the file', async (t) => {
  const refused = (name: string, text: string, reason: RegExp) =>
    t.throws(() => parsePrimary(`/c/${name}`, text), { code: 'INVALID_CONFIG', message: new RegExp(`^/c/${name.replace('.', '\\.')}: ${reason.source}; podnet changed nothing$`) }, reason.source);
  refused('10-a.conflist', '{"name": ', /not JSON \(.*\)/);
  refused('10-a.conflist', '[1]', /not a JSON object/);
  refused('10-a.conflist', '{"cniVersion":"1.0.0","name":"n","plugins":[]}', /a plugin list has no "plugins"/);
  refused('10-a.conflist', '{"cniVersion":"1.0.0","name":"n","plugins":[{"type":"bridge"},{}]}', /plugins\[1\] has no "type"/);
  refused('10-a.conf', '{"cniVersion":"1.0.0","name":"n"}', /a single plugin config has no "type"/);
  refused('10-a.conflist', '{"cniVersion":"1.0.0","plugins":[{"type":"bridge"}]}', /no network "name"/);
  refused('10-a.conflist', '{"name":"n","plugins":[{"type":"bridge"}]}', /no "cniVersion"/);
  refused('10-a.conflist', '{"cniVersion":"0.2.0","name":"n","plugins":[{"type":"bridge"}]}', /cniVersion 0\.2\.0 is not one podnet speaks \(0\.3\.0, .*\)/);
});

t.test('only settings given are written into the entry', async (t) => {
  t.same(podnetEntry({}), { type: 'podnet' });
  t.same(podnetEntry({ stateDir: '/var/lib/x' }), { type: 'podnet', stateDir: '/var/lib/x' });
});
