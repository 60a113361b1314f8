// podnet as the kubelet's DRA plugin (docs/adr/0033): two gRPC servers on Unix sockets, from the
// APIs' protos (src/grpc/apis.ts). The registration socket in the kubelet's plugins_registry folder
// answers GetInfo (a DRAPlugin of podnet's driver, at the service socket, speaking v1.DRAPlugin);
// the kubelet finds it there, at its own start too, and calls the service socket, under its
// plugins folder, to prepare a pod's claims before it creates the sandbox and to unprepare them
// after the pod is gone. Both sockets are the daemon's alone (root, 0600 in 0700 folders) and go
// with it; a socket left by a daemon that died is replaced.
import { Server, ServerCredentials, status as grpcStatus, type sendUnaryData, type ServerUnaryCall, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { chmodSync, mkdirSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { Logger } from '../log.ts';
import { draPluginService, draPluginServiceVersion, registrationService, type DraClaim, type DraDevice, type NodePrepareResourcesResponse, type NodeUnprepareResourcesResponse, type PluginInfo, type RegistrationStatus } from '../grpc/apis.ts';

/** What the service does with one claim: its devices, or an error the kubelet tells and retries. */
export interface ClaimHandlers {
  prepare(claim: DraClaim): Promise<{ devices: DraDevice[] } | { error: string }>;
  unprepare(claim: DraClaim): Promise<{ error?: string }>;
}

export interface KubeletPluginOptions {
  driverName: string;
  /** The kubelet's plugin registration folder: /var/lib/kubelet/plugins_registry. */
  registryDir: string;
  /** The driver's own folder, where its service socket goes: /var/lib/kubelet/plugins/<driver>. */
  pluginDir: string;
  handlers: ClaimHandlers;
  /** The kubelet took the plugin (at its start too, when it wipes the node's slices). */
  onRegistered?: () => void;
  log: Logger;
}

export interface KubeletPlugin {
  /** Whether the kubelet told the plugin it took it (NotifyRegistrationStatus). */
  readonly registered: boolean;
  /** Stops both servers and removes their sockets: the kubelet sees the plugin go. */
  stop(): Promise<void>;
}

/** The most claims one call may name: the kubelet sends a pod's claims (a pod has at most 128). */
const maxClaimsPerCall = 256;
/** A request larger than this is refused by gRPC before it is decoded. */
const maxRequestBytes = 4 * 1024 * 1024;

export async function startKubeletPlugin(opts: KubeletPluginOptions): Promise<KubeletPlugin> {
  const serviceSocket = join(opts.pluginDir, 'dra.sock');
  const registrationSocket = join(opts.registryDir, `${opts.driverName}-reg.sock`);
  mkdirSync(opts.pluginDir, { recursive: true, mode: 0o700 });
  chmodSync(opts.pluginDir, 0o700);
  let registered = false;

  const service = new Server({ 'grpc.max_receive_message_length': maxRequestBytes });
  service.addService(draPluginService, {
    NodePrepareResources: unary(async (request: { claims: DraClaim[] }): Promise<NodePrepareResourcesResponse> => {
      const claims: NodePrepareResourcesResponse['claims'] = {};
      for (const claim of bounded(request.claims)) {
        const outcome = await opts.handlers.prepare(claim);
        claims[claim.uid] = 'error' in outcome ? { devices: [], error: outcome.error } : { devices: outcome.devices, error: '' };
      }
      return { claims };
    }),
    NodeUnprepareResources: unary(async (request: { claims: DraClaim[] }): Promise<NodeUnprepareResourcesResponse> => {
      const claims: NodeUnprepareResourcesResponse['claims'] = {};
      for (const claim of bounded(request.claims)) claims[claim.uid] = { error: (await opts.handlers.unprepare(claim)).error ?? '' };
      return { claims };
    }),
  } satisfies UntypedServiceImplementation);
  await listen(service, serviceSocket);

  const registration = new Server({ 'grpc.max_receive_message_length': 64 * 1024 });
  registration.addService(registrationService, {
    GetInfo: unary(async (): Promise<PluginInfo> => ({ type: 'DRAPlugin', name: opts.driverName, endpoint: serviceSocket, supportedVersions: [draPluginServiceVersion] })),
    NotifyRegistrationStatus: unary(async (status: RegistrationStatus) => {
      registered = status.pluginRegistered;
      if (status.pluginRegistered) {
        opts.log.info('the kubelet registered podnet as its DRA plugin', { driver: opts.driverName });
        opts.onRegistered?.();
      }
      else opts.log.error('the kubelet refused podnet as its DRA plugin', { driver: opts.driverName, error: status.error });
      return {};
    }),
  } satisfies UntypedServiceImplementation);
  try {
    await listen(registration, registrationSocket);
  } catch (err) {
    service.forceShutdown();
    rmSync(serviceSocket, { force: true });
    throw err;
  }
  opts.log.info('serving the kubelet as its DRA plugin', { registration: registrationSocket, service: serviceSocket });

  return {
    get registered() {
      return registered;
    },
    async stop() {
      // The registration socket first: the kubelet stops calling a plugin whose socket went.
      registration.forceShutdown();
      rmSync(registrationSocket, { force: true });
      await new Promise<void>((resolve) => service.tryShutdown(() => resolve()));
      rmSync(serviceSocket, { force: true });
    },
  };
}

function bounded(claims: DraClaim[]): DraClaim[] {
  if (claims.length > maxClaimsPerCall) throw Object.assign(new Error(`a call names ${claims.length} claims; at most ${maxClaimsPerCall}`), { code: grpcStatus.INVALID_ARGUMENT });
  return claims;
}

/** A unary handler from an async function: a throw is the call's error, never the process's. */
function unary<Request, Reply>(handle: (request: Request) => Promise<Reply>) {
  return (call: ServerUnaryCall<Request, Reply>, callback: sendUnaryData<Reply>) => {
    handle(call.request).then(
      (reply) => callback(null, reply),
      (err: Error & { code?: number }) => callback({ code: err.code ?? grpcStatus.INTERNAL, details: err.message }),
    );
  };
}

/** Serves on a Unix socket of the daemon's alone, replacing one a dead daemon left. */
async function listen(server: Server, socket: string): Promise<void> {
  rmSync(socket, { force: true });
  await new Promise<void>((resolve, reject) => server.bindAsync(`unix:${socket}`, ServerCredentials.createInsecure(), (err) => (err ? reject(err) : resolve())));
  chmodSync(socket, 0o600);
}
