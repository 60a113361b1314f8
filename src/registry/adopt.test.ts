import t, { type Test } from 'tap';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { dir } from 'tmp-promise';
import { silentLogger } from '../log.ts';
import type { AttachmentRecord } from '../protocol/validate.ts';
import { adoptCachedAttachments, recordFromCacheEntry } from './adopt.ts';
import { Registry } from './registry.ts';
import { writeSpoolEntry } from './spool.ts';

const now = new Date('2026-11-22T10:00:00.000Z');
const result = { cniVersion: '1.0.0', interfaces: [{ name: 'eth0', sandbox: '/var/run/netns/cni-1' }], ips: [{ address: '10.88.0.7/16', interface: 0 }] };

/** A cache entry as libcni 1.2 writes it (Go marshals the config's bytes as base64). */
function cacheEntry(over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    kind: 'cniCacheV1',
    containerId: 'c0ffee01',
    config: Buffer.from(JSON.stringify({ cniVersion: '1.0.0', name: 'pods', plugins: [{ type: 'bridge' }] })).toString('base64'),
    ifName: 'eth0',
    networkName: 'pods',
    netns: '/var/run/netns/cni-1',
    cniArgs: [
      ['IgnoreUnknown', '1'],
      ['K8S_POD_NAMESPACE', 'shop'],
      ['K8S_POD_NAME', 'web-0'],
      ['K8S_POD_INFRA_CONTAINER_ID', 'c0ffee01'],
      ['K8S_POD_UID', '1f2e3d'],
    ],
    result,
    ...over,
  };
}

const file = '/var/lib/cni/results/pods-c0ffee01-eth0';
const parse = (entry: unknown) => recordFromCacheEntry(JSON.stringify(entry), file, now);

function recordOf(entry: unknown): AttachmentRecord {
  const parsed = parse(entry);
  if ('skip' in parsed) throw new Error(parsed.skip);
  return parsed.record;
}

t.test('a libcni cache entry becomes the record the plugin would have written, marked adopted', async (t) => {
  t.strictSame(parse(cacheEntry()), {
    record: {
      containerId: 'c0ffee01',
      ifname: 'eth0',
      network: 'pods',
      netns: '/var/run/netns/cni-1',
      cniVersion: '1.0.0',
      pod: { namespace: 'shop', name: 'web-0', uid: '1f2e3d', infraContainerId: 'c0ffee01' },
      prevResult: result,
      createdAt: '2026-11-22T10:00:00.000Z',
      adoptedFrom: file,
    },
  });
});

t.test('the version comes from the cached config, else from the result', async (t) => {
  t.equal(recordOf(cacheEntry({ config: undefined, result: { ...result, cniVersion: '0.4.0' } })).cniVersion, '0.4.0');
  t.equal(recordOf(cacheEntry({ config: 'not base64 of json' })).cniVersion, '1.0.0', 'a config that does not decode falls back to the result');
});

t.test('an entry without CNI_ARGS is adopted with no identity (a runtime other than the kubelet)', async (t) => {
  t.strictSame(recordOf(cacheEntry({ cniArgs: undefined })).pod, {});
});

t.test('what cannot be adopted says why', async (t) => {
  const cases: [string, string, RegExp][] = [
    ['not JSON', '{"kind": "cniCacheV1",', /^not JSON/],
    ['an array', '[]', /not a JSON object/],
    ['a cache from before libcni 0.8', JSON.stringify(result), /kind is undefined, not cniCacheV1/],
    ['no netns (libcni before 1.2)', JSON.stringify(cacheEntry({ netns: undefined })), /names no netns/],
    ['a relative netns', JSON.stringify(cacheEntry({ netns: 'cni-1' })), /cache entry .*pods-c0ffee01-eth0: at \/netns: must be /],
    ['an interface name the spec refuses', JSON.stringify(cacheEntry({ ifName: 'a/b' })), /at \/ifname: must be /],
    ['a version podnet does not speak', JSON.stringify(cacheEntry({ config: undefined, result: { cniVersion: '0.2.0' } })), /at \/cniVersion: must be equal to one of the allowed values/],
  ];
  for (const [what, text, reason] of cases) {
    const parsed = recordFromCacheEntry(text, file, now);
    t.match('skip' in parsed && parsed.skip, reason, what);
  }
});

/** A state dir and a libcni cache dir, removed when the test ends. */
async function dirs(t: Test): Promise<{ state: string; cache: string; results: string }> {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(tmp.cleanup);
  const results = join(tmp.path, 'cni', 'results');
  mkdirSync(results, { recursive: true });
  return { state: join(tmp.path, 'state'), cache: join(tmp.path, 'cni'), results };
}

function cache(results: string, entry: Record<string, unknown>): string {
  const name = `${String(entry['networkName'])}-${String(entry['containerId'])}-${String(entry['ifName'])}`;
  writeFileSync(join(results, name), JSON.stringify(entry));
  return join(results, name);
}

t.test('adoptCachedAttachments records what has no record, where the netns is there, of the networks asked for', async (t) => {
  const { state, cache: cacheDir, results } = await dirs(t);
  const registry = await Registry.open(state, silentLogger);
  const kept = cache(results, cacheEntry());
  cache(results, cacheEntry({ containerId: 'other-net', networkName: 'storage' }));
  cache(results, cacheEntry({ containerId: 'gone', netns: '/var/run/netns/cni-gone' }));
  const broken = join(results, 'pods-broken-eth0');
  writeFileSync(broken, '{');
  // An ADD the plugin spooled while the daemon was down: its record wins over the cache's.
  const { adoptedFrom: _, ...spooled } = recordOf(cacheEntry({ containerId: 'spooled' }));
  writeSpoolEntry(state, { op: 'add', record: spooled });
  cache(results, cacheEntry({ containerId: 'spooled' }));

  const report = await adoptCachedAttachments(registry, {
    cacheDir,
    adoptsNetwork: (name) => name === 'pods',
    isNetworkNamespace: (path) => path === '/var/run/netns/cni-1',
    now: () => now,
    log: silentLogger,
  });
  t.strictSame(report.adopted.map((r) => r.containerId), ['c0ffee01'], 'only the pod of the primary network whose netns is there');
  t.strictSame(report.skipped.map((s) => s.file), [broken], 'a broken file is reported, the others are not problems');
  t.equal(registry.get({ containerId: 'c0ffee01', ifname: 'eth0' })?.adoptedFrom, kept);
  t.equal(registry.get({ containerId: 'spooled', ifname: 'eth0' })?.adoptedFrom, undefined, "the ADD's record is kept");

  const reopened = await Registry.open(state, silentLogger);
  t.equal(reopened.get({ containerId: 'c0ffee01', ifname: 'eth0' })?.adoptedFrom, kept, 'an adopted record is on disk');
  const again = await adoptCachedAttachments(reopened, { cacheDir, isNetworkNamespace: () => true, log: silentLogger });
  t.strictSame(again.adopted.map((r) => r.containerId).sort(), ['gone', 'other-net'], 'adopting again adds only what is still unrecorded');
});

t.test('no cache dir adopts nothing and is no error', async (t) => {
  const { state, cache: cacheDir } = await dirs(t);
  const registry = await Registry.open(state, silentLogger);
  const report = await adoptCachedAttachments(registry, { cacheDir: join(cacheDir, 'none'), isNetworkNamespace: () => true, log: silentLogger });
  t.strictSame(report, { adopted: [], skipped: [] });
});
