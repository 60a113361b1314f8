import t, { type Test } from 'tap';
import { mkdirSync, writeFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { dir } from 'tmp-promise';
import { silentLogger } from '../log.ts';
import type { AttachmentRecord } from '../protocol/validate.ts';
import type { RuntimeService } from '../cri/runtime-service.ts';
import { PodnetError } from '../errors.ts';
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
  if (!('record' in parsed)) throw new Error(JSON.stringify(parsed));
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
    ['no netns and no container id', JSON.stringify(cacheEntry({ netns: undefined, containerId: '' })), /names no netns .*, nor a container id, interface and network/],
    ['a relative netns', JSON.stringify(cacheEntry({ netns: 'cni-1' })), /cache entry .*pods-c0ffee01-eth0: at \/netns: must be /],
    ['an interface name the spec refuses', JSON.stringify(cacheEntry({ ifName: 'a/b' })), /at \/ifname: must be /],
    ['a version podnet does not speak', JSON.stringify(cacheEntry({ config: undefined, result: { cniVersion: '0.2.0' } })), /at \/cniVersion: must be equal to one of the allowed values/],
  ];
  for (const [what, text, reason] of cases) {
    const parsed = recordFromCacheEntry(text, file, now);
    t.match('skip' in parsed && parsed.skip, reason, what);
  }
});

t.test('an entry that names no netns (libcni before 1.2) asks for its container, and takes the netns the runtime told', async (t) => {
  const entry = JSON.stringify(cacheEntry({ netns: undefined }));
  t.strictSame(recordFromCacheEntry(entry, file, now), { lacksNetns: { containerId: 'c0ffee01', ifname: 'eth0', network: 'pods' } });
  const told = recordFromCacheEntry(entry, file, now, '/var/run/netns/cni-told');
  t.equal('record' in told && told.record.netns, '/var/run/netns/cni-told');
  const both = recordFromCacheEntry(JSON.stringify(cacheEntry()), file, now, '/var/run/netns/cni-told');
  t.equal('record' in both && both.record.netns, '/var/run/netns/cni-1', "the cache's own netns wins over the runtime's");
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

/** A container runtime that lists `ready` sandboxes and tells each one's netns from `netns`. */
function fakeRuntime(ready: string[], netns: Record<string, string | undefined>, fails?: string, statusFails?: PodnetError): RuntimeService & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    readySandboxes: async () => {
      if (fails) throw new Error(fails);
      return ready.map((id) => ({ id, name: id, namespace: 'shop', uid: `uid-${id}` }));
    },
    sandboxNetns: async (id) => {
      asked.push(id);
      if (statusFails) throw statusFails;
      return netns[id];
    },
    close: () => undefined,
  };
}

t.test('a cache without netns (containerd 1.6) is adopted through the runtime: only ready sandboxes are asked, and what is not adopted says why', async (t) => {
  const { state, cache: cacheDir, results } = await dirs(t);
  const registry = await Registry.open(state, silentLogger);
  for (const id of ['running', 'host-network', 'gone']) cache(results, cacheEntry({ containerId: id, netns: undefined }));
  const runtime = fakeRuntime(['running', 'host-network', 'unrelated'], { running: '/var/run/netns/cni-running' });
  const report = await adoptCachedAttachments(registry, { cacheDir, isNetworkNamespace: () => true, runtime, now: () => now, log: silentLogger });
  t.strictSame(report.adopted.map((r) => [r.containerId, r.netns]), [['running', '/var/run/netns/cni-running']]);
  t.strictSame(runtime.asked.sort(), ['host-network', 'running'], 'a sandbox the runtime does not list as ready is not asked about');
  t.strictSame(
    report.skipped.map((s) => [basename(s.file), s.reason.replace(/^.*\), and /, '')]),
    [
      ['pods-gone-eth0', 'the container runtime lists no ready sandbox of that id (the pod is gone)'],
      ['pods-host-network-eth0', "the container runtime tells no netns for it (a pod on the node's network)"],
    ],
  );
});

t.test('a runtime that cannot be asked, or none given, leaves such entries unadopted, saying so', async (t) => {
  const { state, cache: cacheDir, results } = await dirs(t);
  const registry = await Registry.open(state, silentLogger);
  cache(results, cacheEntry({ netns: undefined }));
  const down = await adoptCachedAttachments(registry, { cacheDir, isNetworkNamespace: () => true, runtime: fakeRuntime([], {}, 'the container runtime at /run/containerd/containerd.sock did not answer ListPodSandbox: connect ENOENT'), log: silentLogger });
  t.match(down.skipped[0]?.reason, /names no netns .*, and the container runtime at \/run\/containerd\/containerd.sock did not answer ListPodSandbox/);
  const none = await adoptCachedAttachments(registry, { cacheDir, isNetworkNamespace: () => true, log: silentLogger });
  t.match(none.skipped[0]?.reason, /no container runtime socket was given \(--cri-socket\)/);
  t.equal(none.adopted.length + down.adopted.length, 0);
});

t.test('the runtime is asked only of entries that would be adopted, and not again once it did not answer in time', async (t) => {
  const { state, cache: cacheDir, results } = await dirs(t);
  const registry = await Registry.open(state, silentLogger);
  await registry.adopt(recordOf(cacheEntry({ containerId: 'recorded' })));
  for (const id of ['recorded', 'other-net', 'a', 'b', 'c']) cache(results, cacheEntry({ containerId: id, netns: undefined, ...(id === 'other-net' ? { networkName: 'storage' } : {}) }));
  const stuck = fakeRuntime(['recorded', 'other-net', 'a', 'b', 'c'], {}, undefined, new PodnetError('NOT_AVAILABLE', 'the container runtime at /run/x.sock did not answer PodSandboxStatus: Deadline exceeded'));
  const report = await adoptCachedAttachments(registry, { cacheDir, adoptsNetwork: (n) => n === 'pods', isNetworkNamespace: () => true, runtime: stuck, log: silentLogger });
  t.strictSame(stuck.asked, ['a'], 'not of a recorded attachment or another network, and after a timeout of no one more');
  t.strictSame(report.skipped.map((s) => basename(s.file)), ['pods-a-eth0', 'pods-b-eth0', 'pods-c-eth0']);
  t.match(report.skipped[2]?.reason, /did not answer PodSandboxStatus: Deadline exceeded \(not asked again until the daemon restarts\)/);
});
