import t from 'tap';
import { PodnetError } from '../errors.ts';
import { silentLogger } from '../log.ts';
import type { Json } from '../kube/api.ts';
import { driverName, networkDevices, type ResourceSliceObject, type SliceDevice } from './devices.ts';
import { SlicePublisher } from './slice-publisher.ts';
import type { Network } from '../protocol/validate.ts';

const network = (name: string): Network => ({ apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'Network', metadata: { name }, spec: { type: 'bridge' } });

/** The API server's ResourceSlices, as the publisher sees them: list by field selector, apply, delete. */
function fakeApi(initial: ResourceSliceObject[] = []) {
  const slices = new Map(initial.map((s) => [s.metadata.name, { ...s, metadata: { ...s.metadata, uid: `uid-${s.metadata.name}` } }]));
  const calls: string[] = [];
  let failNext: PodnetError | undefined;
  const api = {
    async get<T>(path: string): Promise<T> {
      calls.push(`GET ${path}`);
      if (failNext) {
        const err = failNext;
        failNext = undefined;
        throw err;
      }
      return { items: [...slices.values()] } as T;
    },
    async apply(path: string, body: Json, manager: string): Promise<Json> {
      calls.push(`APPLY ${path} as ${manager}`);
      const slice = body as unknown as ResourceSliceObject;
      slices.set(slice.metadata.name, { ...slice, metadata: { ...slice.metadata, uid: `uid-${slice.metadata.name}` } });
      return body;
    },
    async delete(path: string, uid?: string): Promise<Json> {
      calls.push(`DELETE ${path} ${uid}`);
      slices.delete(path.split('/').at(-1)!);
      return {};
    },
  };
  return { api, slices, calls, failWith: (err: PodnetError) => (failNext = err) };
}

t.test('writes the pool when the devices change, with a generation above any the pool had; nothing when they do not', async (t) => {
  const { api, slices, calls } = fakeApi([{ apiVersion: 'resource.k8s.io/v1', kind: 'ResourceSlice', metadata: { name: 'node-a-podnet-0', ownerReferences: [] }, spec: { driver: driverName, nodeName: 'node-a', pool: { name: 'node-a', generation: 41, resourceSliceCount: 1 }, devices: [] } }]);
  let devices: SliceDevice[] | undefined = networkDevices([network('blue')], new Map());
  const publisher = new SlicePublisher({ api, nodeName: 'node-a', log: silentLogger, nodeUid: () => 'node-uid', devices: () => devices });
  await publisher.publish();
  t.match(calls[0], /^GET \/apis\/resource.k8s.io\/v1\/resourceslices\?fieldSelector=spec.nodeName%3Dnode-a%2Cspec.driver%3Ddra.podnetwork.opdev.io$/, "its own node's slices of its driver, listed by field selector");
  t.equal(calls[1], 'APPLY /apis/resource.k8s.io/v1/resourceslices/node-a-podnet-0 as podnet/node-a');
  t.equal(slices.get('node-a-podnet-0')!.spec.pool.generation, 42, 'the next generation after the one a daemon before it wrote');
  t.strictSame(slices.get('node-a-podnet-0')!.spec.devices.map((d) => d.name), ['blue']);
  calls.length = 0;
  await publisher.publish();
  t.strictSame(calls, [], 'unchanged devices: no request');
  devices = networkDevices([network('blue'), network('red')], new Map());
  await publisher.publish();
  t.equal(slices.get('node-a-podnet-0')!.spec.pool.generation, 43);
  t.strictSame(slices.get('node-a-podnet-0')!.spec.devices.map((d) => d.name), ['blue', 'red']);
});

t.test('a slice no longer needed is deleted, by its uid; one already gone is no error', async (t) => {
  const many = networkDevices(Array.from({ length: 130 }, (_, i) => network(`n${String(i).padStart(3, '0')}`)), new Map());
  let devices = many;
  const { api, slices, calls } = fakeApi();
  const publisher = new SlicePublisher({ api, nodeName: 'node-a', log: silentLogger, nodeUid: () => 'node-uid', devices: () => devices });
  await publisher.publish();
  t.strictSame([...slices.keys()].sort(), ['node-a-podnet-0', 'node-a-podnet-1']);
  devices = many.slice(0, 3);
  calls.length = 0;
  await publisher.publish();
  t.strictSame([...slices.keys()], ['node-a-podnet-0']);
  t.ok(calls.includes('DELETE /apis/resource.k8s.io/v1/resourceslices/node-a-podnet-1 uid-node-a-podnet-1'));
  t.equal(slices.get('node-a-podnet-0')!.spec.pool.resourceSliceCount, 1);
});

t.test('nothing is written before the Node and a whole view are known', async (t) => {
  const { api, calls } = fakeApi();
  let uid: string | undefined;
  let devices: SliceDevice[] | undefined = [];
  const publisher = new SlicePublisher({ api, nodeName: 'node-a', log: silentLogger, nodeUid: () => uid, devices: () => devices });
  await publisher.publish();
  uid = 'node-uid';
  devices = undefined;
  await publisher.publish();
  t.strictSame(calls, []);
});

t.test('a write that fails is tried again after a backoff', async (t) => {
  const { api, slices, failWith } = fakeApi();
  const timers: { ms: number; run: () => void }[] = [];
  const publisher = new SlicePublisher({ api, nodeName: 'node-a', log: silentLogger, nodeUid: () => 'node-uid', devices: () => [], timer: (ms, run) => (timers.push({ ms, run }), () => undefined) });
  failWith(new PodnetError('NOT_AVAILABLE', 'the API server is unreachable'));
  await publisher.publish();
  t.equal(slices.size, 0);
  t.equal(timers.length, 1);
  t.equal(timers[0]!.ms, 500);
  timers[0]!.run();
  await publisher.publish.idle();
  t.equal(slices.size, 1, 'written at the retry');
});

t.test("slices the kubelet wiped (at its start, or when the plugin was away) are written again: looked at every verifyEveryMs, and when asked", async (t) => {
  const { api, slices, calls } = fakeApi();
  let now = 1000;
  const publisher = new SlicePublisher({ api, nodeName: 'node-a', log: silentLogger, nodeUid: () => 'node-uid', devices: () => [], clock: () => now, verifyEveryMs: 30_000 });
  await publisher.publish();
  t.equal(slices.size, 1);
  slices.clear(); // the kubelet's wipe
  calls.length = 0;
  await publisher.publish();
  t.strictSame(calls, [], 'within verifyEveryMs of the write, nothing is asked');
  now += 30_000;
  await publisher.publish();
  t.equal(slices.size, 1, 'written again once looked at');
  calls.length = 0;
  now += 30_000;
  await publisher.publish();
  t.strictSame(calls.map((c) => c.split(' ')[0]), ['GET'], 'found as written: one look, no write');
  slices.clear();
  await publisher.verifyNow();
  t.equal(slices.size, 1, 'the kubelet registered the plugin: looked at, written again');
});

t.test('a pool of two slices with one gone is written again: the scheduler ignores a pool short of its slices', async (t) => {
  const { api, slices } = fakeApi();
  let now = 0;
  const devices = networkDevices(Array.from({ length: 130 }, (_, i) => network(`n${String(i).padStart(3, '0')}`)), new Map());
  const publisher = new SlicePublisher({ api, nodeName: 'node-a', log: silentLogger, nodeUid: () => 'node-uid', devices: () => devices, clock: () => now });
  await publisher.publish();
  slices.delete('node-a-podnet-1');
  now += 60_000;
  await publisher.publish();
  t.strictSame([...slices.keys()].sort(), ['node-a-podnet-0', 'node-a-podnet-1']);
});
