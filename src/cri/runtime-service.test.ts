// The CRI client against a gRPC server on a unix socket that answers as containerd does: the
// transport is real (@grpc/grpc-js on both ends), the runtime is made up. The real runtime is in
// e2e/node.test.ts.
import t, { type Test } from 'tap';
import { Server, ServerCredentials, type ServerUnaryCall, type sendUnaryData, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { basename, dirname, join } from 'node:path';
import { dir } from 'tmp-promise';
import { connectRuntimeService, netnsFromInfo } from './runtime-service.ts';
import { decodeMessage, encodeMessage, messageField, stringField, varintField, type Field } from './wire.ts';

const raw = (b: Buffer) => b;
const method = (name: string) => ({ path: `/runtime.v1.RuntimeService/${name}`, requestStream: false, responseStream: false, requestSerialize: raw, requestDeserialize: raw, responseSerialize: raw, responseDeserialize: raw });

/** containerd's verbose info: the OCI spec the sandbox runs with. */
const info = (netns?: string) => JSON.stringify({ pid: 4242, runtimeSpec: { linux: { namespaces: [{ type: 'pid' }, { type: 'network', ...(netns ? { path: netns } : {}) }, { type: 'mount' }] } } });

const sandbox = (id: string, name: string, state: number): Field[] => [
  [1, id],
  [2, [[1, name], [2, `uid-${name}`], [3, 'shop'], [4, 0]]],
  [3, state],
  [4, 1_700_000_000],
];

async function runtimeServer(t: Test, handlers: Record<string, (request: Buffer) => Buffer>): Promise<{ socketPath: string; requests: Map<string, Buffer[]> }> {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(tmp.cleanup);
  const socketPath = join(tmp.path, 'runtime.sock');
  const requests = new Map<string, Buffer[]>();
  const server = new Server();
  const implementation: UntypedServiceImplementation = {};
  for (const [name, handle] of Object.entries(handlers)) {
    implementation[name] = (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => {
      requests.set(name, [...(requests.get(name) ?? []), call.request]);
      callback(null, handle(call.request));
    };
  }
  server.addService(Object.fromEntries(Object.keys(handlers).map((name) => [name, method(name)])), implementation);
  await new Promise<void>((resolve, reject) => server.bindAsync(`unix://${socketPath}`, ServerCredentials.createInsecure(), (error) => (error ? reject(error) : resolve())));
  t.teardown(() => server.forceShutdown());
  return { socketPath, requests };
}

t.test('ListPodSandbox asks for ready sandboxes and tells each one with its pod', async (t) => {
  const server = await runtimeServer(t, { ListPodSandbox: () => encodeMessage([[1, sandbox('aaa', 'web-0', 0)], [1, sandbox('bbb', 'web-1', 1)]]) });
  const runtime = connectRuntimeService({ socketPath: server.socketPath, timeoutMs: 5000 });
  t.teardown(() => runtime.close());
  t.strictSame(await runtime.readySandboxes(), [{ id: 'aaa', name: 'web-0', namespace: 'shop', uid: 'uid-web-0' }], 'a NOTREADY sandbox a runtime lists anyway is left out');
  const filter = messageField(decodeMessage(server.requests.get('ListPodSandbox')![0]!, 'request'), 1, 'filter');
  t.ok(filter.has(2), 'the request filters by state');
  t.equal(varintField(messageField(filter, 2, 'state'), 1), 0, 'SANDBOX_READY');
});

t.test('PodSandboxStatus, verbose, tells the netns from the runtime spec; a pod on the node network has none', async (t) => {
  const replies: Record<string, Field[]> = {
    pod: [[1, [[1, 'pod']]], [2, [[1, 'info'], [2, info('/var/run/netns/cni-1234')]]]],
    host: [[1, [[1, 'host'], [6, [[1, [[2, [[1, 2]]]]]]]]], [2, [[1, 'info'], [2, info()]]]],
    terse: [[1, [[1, 'terse']]]],
  };
  const server = await runtimeServer(t, { PodSandboxStatus: (request) => encodeMessage(replies[stringField(decodeMessage(request, 'request'), 1)]!) });
  const runtime = connectRuntimeService({ socketPath: server.socketPath, timeoutMs: 5000 });
  t.teardown(() => runtime.close());
  t.equal(await runtime.sandboxNetns('pod'), '/var/run/netns/cni-1234');
  t.equal(await runtime.sandboxNetns('host'), undefined, 'NamespaceMode NODE');
  t.equal(await runtime.sandboxNetns('terse'), undefined, 'a runtime that gives no info');
  t.equal(varintField(decodeMessage(server.requests.get('PodSandboxStatus')![0]!, 'request'), 2), 1, 'asked verbose');
});

t.test('the netns is read only from a network namespace entry with an absolute path', async (t) => {
  t.equal(netnsFromInfo(info('/run/netns/x')), '/run/netns/x');
  t.equal(netnsFromInfo(info('relative')), undefined);
  t.equal(netnsFromInfo('{"runtimeSpec": {"linux": {"namespaces": "no"}}}'), undefined);
  t.equal(netnsFromInfo('not json'), undefined);
  t.equal(netnsFromInfo('null'), undefined);
  t.equal(netnsFromInfo(undefined), undefined);
});

t.test('a relative socket path is the socket under the working folder', async (t) => {
  const server = await runtimeServer(t, { ListPodSandbox: () => encodeMessage([]) });
  const cwd = process.cwd();
  process.chdir(dirname(server.socketPath));
  t.teardown(() => process.chdir(cwd));
  const runtime = connectRuntimeService({ socketPath: basename(server.socketPath), timeoutMs: 5000 });
  t.teardown(() => runtime.close());
  t.strictSame(await runtime.readySandboxes(), []);
});

t.test('no runtime at the socket is NOT_AVAILABLE, naming the socket and the call', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(tmp.cleanup);
  const runtime = connectRuntimeService({ socketPath: join(tmp.path, 'none.sock'), timeoutMs: 2000 });
  t.teardown(() => runtime.close());
  await t.rejects(runtime.readySandboxes(), { code: 'NOT_AVAILABLE', message: new RegExp(`the container runtime at ${tmp.path}/none.sock did not answer ListPodSandbox`) });
});
