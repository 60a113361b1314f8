// The kubelet's side played by a gRPC client over the real sockets, with the APIs' messages
// (src/grpc/apis.ts); the real kubelet is in e2e/dra.test.ts.
import t, { type Test } from 'tap';
import { Client, credentials, Metadata, type MethodDefinition } from '@grpc/grpc-js';
import { existsSync, mkdirSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { dir } from 'tmp-promise';
import { silentLogger } from '../log.ts';
import { draPluginService, registrationService, type NodePrepareResourcesResponse, type PluginInfo } from '../grpc/apis.ts';
import { startKubeletPlugin, type ClaimHandlers } from './kubelet-plugin.ts';

function call<Request, Reply>(socket: string, method: MethodDefinition<object, object>, request: Request): Promise<Reply> {
  const client = new Client(`unix:${socket}`, credentials.createInsecure());
  const m = method as unknown as MethodDefinition<Request, Reply>;
  return new Promise<Reply>((resolve, reject) =>
    client.makeUnaryRequest(m.path, m.requestSerialize, m.responseDeserialize, request, new Metadata(), { deadline: Date.now() + 5000 }, (err, reply) => (err ? reject(err) : resolve(reply!))),
  ).finally(() => client.close());
}

async function fixture(t: Test, handlers: ClaimHandlers) {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(tmp.cleanup);
  const registryDir = join(tmp.path, 'plugins_registry');
  mkdirSync(registryDir);
  const pluginDir = join(tmp.path, 'plugins', 'dra.podnetwork.opdev.io');
  const plugin = await startKubeletPlugin({ driverName: 'dra.podnetwork.opdev.io', registryDir, pluginDir, handlers, log: silentLogger });
  t.teardown(() => plugin.stop());
  return { plugin, registration: join(registryDir, 'dra.podnetwork.opdev.io-reg.sock'), service: join(pluginDir, 'dra.sock'), registryDir, pluginDir };
}

const noClaims: ClaimHandlers = { prepare: async () => ({ devices: [] }), unprepare: async () => ({}) };

t.test('the registration socket tells the kubelet a DRAPlugin of the driver, its service socket and version, and hears back', async (t) => {
  const { plugin, registration, service } = await fixture(t, noClaims);
  const info = await call<object, PluginInfo>(registration, registrationService.GetInfo, {});
  t.strictSame(info, { type: 'DRAPlugin', name: 'dra.podnetwork.opdev.io', endpoint: service, supportedVersions: ['v1.DRAPlugin'] });
  t.equal(plugin.registered, false);
  await call(registration, registrationService.NotifyRegistrationStatus, { pluginRegistered: true, error: '' });
  t.equal(plugin.registered, true);
  t.equal(statSync(service).mode & 0o777, 0o600, 'the sockets are root\'s alone');
  t.equal(statSync(registration).mode & 0o777, 0o600);
});

t.test('prepare and unprepare answer each claim by its uid: devices, or the error the kubelet tells', async (t) => {
  const seen: string[] = [];
  const { service } = await fixture(t, {
    prepare: async (claim) => {
      seen.push(`prepare ${claim.namespace}/${claim.name}`);
      return claim.name === 'bad' ? { error: 'spec.devices.config[0].opaque.parameters.ips[0]: not a CIDR' } : { devices: [{ requestNames: ['net'], poolName: 'node-a', deviceName: 'blue', cdiDeviceIds: [], shareId: 'share-1' }] };
    },
    unprepare: async (claim) => (seen.push(`unprepare ${claim.uid}`), {}),
  });
  const reply = await call<object, NodePrepareResourcesResponse>(service, draPluginService.NodePrepareResources, { claims: [{ namespace: 'shop', uid: 'u1', name: 'good' }, { namespace: 'shop', uid: 'u2', name: 'bad' }] });
  t.strictSame(reply.claims['u1'], { devices: [{ requestNames: ['net'], poolName: 'node-a', deviceName: 'blue', cdiDeviceIds: [], shareId: 'share-1' }], error: '' });
  t.strictSame(reply.claims['u2'], { devices: [], error: 'spec.devices.config[0].opaque.parameters.ips[0]: not a CIDR' });
  const gone = await call<object, { claims: Record<string, { error: string }> }>(service, draPluginService.NodeUnprepareResources, { claims: [{ namespace: 'shop', uid: 'u1', name: 'good' }] });
  t.strictSame(gone.claims, { u1: { error: '' } });
  t.strictSame(seen, ['prepare shop/good', 'prepare shop/bad', 'unprepare u1']);
});

t.test('a handler that throws fails the call, not the daemon; a call of too many claims is refused', async (t) => {
  const { service } = await fixture(t, { prepare: async () => Promise.reject(new Error('the state dir is full')), unprepare: async () => ({}) });
  await t.rejects(call(service, draPluginService.NodePrepareResources, { claims: [{ namespace: 'a', uid: 'u', name: 'n' }] }), { message: /the state dir is full/ });
  const many = Array.from({ length: 257 }, (_, i) => ({ namespace: 'a', uid: `u${i}`, name: `n${i}` }));
  await t.rejects(call(service, draPluginService.NodeUnprepareResources, { claims: many }), { code: 3, details: /257 claims; at most 256/ });
});

t.test('a socket a dead daemon left is replaced; stop removes both sockets', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(tmp.cleanup);
  const registryDir = join(tmp.path, 'reg');
  mkdirSync(registryDir);
  const pluginDir = join(tmp.path, 'plugin');
  mkdirSync(pluginDir);
  writeFileSync(join(pluginDir, 'dra.sock'), 'left over');
  const plugin = await startKubeletPlugin({ driverName: 'dra.podnetwork.opdev.io', registryDir, pluginDir, handlers: noClaims, log: silentLogger });
  t.ok(statSync(join(pluginDir, 'dra.sock')).isSocket());
  t.equal(statSync(pluginDir).mode & 0o777, 0o700);
  await plugin.stop();
  t.notOk(existsSync(join(pluginDir, 'dra.sock')));
  t.notOk(existsSync(join(registryDir, 'dra.podnetwork.opdev.io-reg.sock')));
});
