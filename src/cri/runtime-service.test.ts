// The CRI client against a gRPC server on a unix socket that answers as containerd does: the
// transport is real (@grpc/grpc-js on both ends), the messages are the CRI API's (proto/cri.proto),
// the runtime is made up. The real runtime is in e2e/node.test.ts.
import t, { type Test } from 'tap';
import { Server, ServerCredentials, type MethodDefinition, type ServerUnaryCall, type sendUnaryData, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { basename, dirname, join } from 'node:path';
import { dir } from 'tmp-promise';
import protobuf from 'protobufjs';
import { connectRuntimeService, netnsFromInfo } from './runtime-service.ts';
import { runtimeService, type ListPodSandboxResponse, type PodSandboxStatusResponse } from '../grpc/apis.ts';

/** containerd's verbose info: the OCI spec the sandbox runs with. */
const info = (netns?: string) => JSON.stringify({ pid: 4242, runtimeSpec: { linux: { namespaces: [{ type: 'pid' }, { type: 'network', ...(netns ? { path: netns } : {}) }, { type: 'mount' }] } } });

const sandbox = (id: string, name: string, state: 'SANDBOX_READY' | 'SANDBOX_NOTREADY') => ({ id, metadata: { name, uid: `uid-${name}`, namespace: 'shop', attempt: 0 }, state });

type Handlers = Partial<Record<keyof typeof runtimeService, (request: any) => object | Buffer>>;

/** A runtime answering with `handlers`; a handler's Buffer goes on the wire as it is (a broken reply). */
async function runtimeServer(t: Test, handlers: Handlers): Promise<{ socketPath: string; requests: Map<string, any[]> }> {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(tmp.cleanup);
  const socketPath = join(tmp.path, 'runtime.sock');
  const requests = new Map<string, any[]>();
  const server = new Server();
  const implementation: UntypedServiceImplementation = {};
  const definition: Record<string, MethodDefinition<object, object | Buffer>> = {};
  for (const [name, handle] of Object.entries(handlers)) {
    const method = runtimeService[name as keyof typeof runtimeService];
    definition[name] = { ...method, responseSerialize: (reply) => (Buffer.isBuffer(reply) ? reply : method.responseSerialize(reply)) };
    implementation[name] = (call: ServerUnaryCall<object, object>, callback: sendUnaryData<object>) => {
      requests.set(name, [...(requests.get(name) ?? []), call.request]);
      callback(null, handle!(call.request));
    };
  }
  server.addService(definition, implementation);
  await new Promise<void>((resolve, reject) => server.bindAsync(`unix://${socketPath}`, ServerCredentials.createInsecure(), (error) => (error ? reject(error) : resolve())));
  t.teardown(() => server.forceShutdown());
  return { socketPath, requests };
}

t.test('ListPodSandbox asks for ready sandboxes and tells each one with its pod', async (t) => {
  const reply: ListPodSandboxResponse = { items: [sandbox('aaa', 'web-0', 'SANDBOX_READY'), sandbox('bbb', 'web-1', 'SANDBOX_NOTREADY')] };
  const server = await runtimeServer(t, { ListPodSandbox: () => reply });
  const runtime = connectRuntimeService({ socketPath: server.socketPath, timeoutMs: 5000 });
  t.teardown(() => runtime.close());
  t.strictSame(await runtime.readySandboxes(), [{ id: 'aaa', name: 'web-0', namespace: 'shop', uid: 'uid-web-0' }], 'a NOTREADY sandbox a runtime lists anyway is left out');
  t.strictSame(server.requests.get('ListPodSandbox')![0].filter.state, { state: 'SANDBOX_READY' }, 'the request filters by state, SANDBOX_READY');
});

t.test("the request's bytes are the CRI's: a state filter is present, holding SANDBOX_READY (0)", async (t) => {
  const bytes = runtimeService.ListPodSandbox.requestSerialize({ filter: { state: { state: 'SANDBOX_READY' } } });
  // filter (1) { state (2) { state (1) = 0 } }
  t.equal(bytes.toString('hex'), '0a0412020800');
});

t.test("a runtime's fields podnet does not declare (a pod's labels, a hundred thousand of them) are skipped", async (t) => {
  // Written by field number, as a full runtime sends it: PodSandbox's labels are its field 5, a
  // map whose entries are messages of key 1 and value 2 (the CRI API's numbering).
  const writer = protobuf.Writer.create();
  writer.uint32((1 << 3) | 2).fork(); // ListPodSandboxResponse.items
  writer.uint32((1 << 3) | 2).string('aaa');
  writer.uint32((2 << 3) | 2).fork().uint32((1 << 3) | 2).string('web-0').uint32((2 << 3) | 2).string('uid-web-0').uint32((3 << 3) | 2).string('shop').ldelim();
  for (let i = 0; i < 100_000; i++) writer.uint32((5 << 3) | 2).fork().uint32((1 << 3) | 2).string(`k${i}`).uint32((2 << 3) | 2).string('v').ldelim();
  writer.ldelim();
  const reply = Buffer.from(writer.finish());
  const server = await runtimeServer(t, { ListPodSandbox: () => reply });
  const runtime = connectRuntimeService({ socketPath: server.socketPath, timeoutMs: 20_000 });
  t.teardown(() => runtime.close());
  t.strictSame(await runtime.readySandboxes(), [{ id: 'aaa', name: 'web-0', namespace: 'shop', uid: 'uid-web-0' }]);
});

t.test('a reply cut short is an error of the call naming the runtime and the call, never a read past the end', async (t) => {
  const whole = runtimeService.ListPodSandbox.responseSerialize({ items: [sandbox('aaa', 'web-0', 'SANDBOX_READY')] });
  const server = await runtimeServer(t, { ListPodSandbox: () => whole.subarray(0, whole.length - 3) });
  const runtime = connectRuntimeService({ socketPath: server.socketPath, timeoutMs: 5000 });
  t.teardown(() => runtime.close());
  await t.rejects(runtime.readySandboxes(), { code: 'IO_FAILURE', message: new RegExp(`the container runtime at ${server.socketPath} did not answer ListPodSandbox`) });
});

t.test('PodSandboxStatus, verbose, tells the netns from the runtime spec; a pod on the node network has none', async (t) => {
  const replies: Record<string, PodSandboxStatusResponse> = {
    pod: { status: { id: 'pod', linux: null }, info: { info: info('/var/run/netns/cni-1234') } },
    host: { status: { id: 'host', linux: { namespaces: { options: { network: 'NODE' } } } }, info: { info: info() } },
    terse: { status: { id: 'terse', linux: null }, info: {} },
  };
  const server = await runtimeServer(t, { PodSandboxStatus: (request: { podSandboxId: string }) => replies[request.podSandboxId]! });
  const runtime = connectRuntimeService({ socketPath: server.socketPath, timeoutMs: 5000 });
  t.teardown(() => runtime.close());
  t.equal(await runtime.sandboxNetns('pod'), '/var/run/netns/cni-1234');
  t.equal(await runtime.sandboxNetns('host'), undefined, 'NamespaceMode NODE');
  t.equal(await runtime.sandboxNetns('terse'), undefined, 'a runtime that gives no info');
  t.equal(server.requests.get('PodSandboxStatus')![0].verbose, true, 'asked verbose');
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
  const server = await runtimeServer(t, { ListPodSandbox: () => ({ items: [] }) });
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
