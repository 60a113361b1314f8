import t from 'tap';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { podnetEntry } from './conflist.ts';
import { chainIfMissing, multusPrimary, sameContent } from './install.ts';

t.test('two files are the same content only when every byte is, also past the first chunk', async (t) => {
  const dir = t.testdir();
  const big = Buffer.alloc((5 << 20) / 2, 7);
  const at = (name: string, body: Buffer) => {
    writeFileSync(join(dir, name), body);
    return join(dir, name);
  };
  const a = at('a', big);
  t.ok(sameContent(a, at('same', Buffer.from(big))));
  const lastByte = Buffer.from(big);
  lastByte[lastByte.length - 1] = 8;
  t.notOk(sameContent(a, at('last', lastByte)), 'a byte in the last chunk');
  t.notOk(sameContent(a, at('shorter', big.subarray(1))), 'another size');
  t.notOk(sameContent(a, join(dir, 'missing')), 'a file that is not there');
  t.ok(sameContent(at('empty', Buffer.alloc(0)), at('empty2', Buffer.alloc(0))), 'two empty files');
});

t.test("the daemon's re-chaining keeps the waits the install wrote: a primary that rewrote its file gets podnet back with them", async (t) => {
  const dir = t.testdir();
  const file = join(dir, '10-primary.conflist');
  const primary = { cniVersion: '1.0.0', name: 'primary', plugins: [{ type: 'bridge' }] };
  writeFileSync(file, JSON.stringify({ ...primary, plugins: [...primary.plugins, { type: 'podnet', stateDir: '/srv/podnet', timeoutMs: 250, firstPassTimeoutMs: 2000 }] }));
  const seen: object[] = [];
  t.equal(chainIfMissing(dir, podnetEntry({ stateDir: '/srv/podnet' }), (waits) => seen.push(waits)), undefined, 'chained already: nothing written');
  t.strictSame(seen, [{ timeoutMs: 250, firstPassTimeoutMs: 2000 }], 'its waits are told');

  writeFileSync(file, JSON.stringify({ ...primary, plugins: [...primary.plugins, { type: 'podnet', timeoutMs: 0, firstPassTimeoutMs: 'soon' }] }));
  chainIfMissing(dir, podnetEntry({}), (waits) => seen.push(waits));
  t.strictSame(seen[1], {}, "a wait the plugin's config schema refuses is not taken");

  writeFileSync(file, JSON.stringify(primary));
  t.equal(chainIfMissing(dir, podnetEntry({ stateDir: '/srv/podnet', timeoutMs: 250, firstPassTimeoutMs: 2000 })), file);
  t.strictSame(JSON.parse(readFileSync(file, 'utf8')).plugins, [{ type: 'bridge' }, { type: 'podnet', stateDir: '/srv/podnet', timeoutMs: 250, firstPassTimeoutMs: 2000 }]);
});

t.test("Multus's config as the node's primary is told (what --standard-network-status refuses), another's is not", async (t) => {
  const dir = t.testdir();
  writeFileSync(join(dir, '10-primary.conflist'), JSON.stringify({ cniVersion: '1.0.0', name: 'primary', plugins: [{ type: 'bridge' }, { type: 'podnet' }] }));
  t.equal(multusPrimary(dir), undefined);
  writeFileSync(join(dir, '00-multus.conf'), JSON.stringify({ cniVersion: '0.3.1', name: 'multus-cni-network', type: 'multus-shim', logLevel: 'verbose' }));
  t.equal(multusPrimary(dir), join(dir, '00-multus.conf'), 'thick Multus, first in the dir');
  writeFileSync(join(dir, '00-multus.conf'), JSON.stringify({ cniVersion: '0.3.1', name: 'multus-cni-network', type: 'multus', kubeconfig: '/etc/cni/net.d/multus.d/multus.kubeconfig' }));
  t.equal(multusPrimary(dir), join(dir, '00-multus.conf'), 'thin Multus');
  t.equal(multusPrimary(t.testdir({})), undefined, 'no config at all');
});
