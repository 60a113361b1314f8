// The two calls of the CRI's RuntimeService podnet makes, over the container runtime's socket:
// ListPodSandbox (the node's running pods) and PodSandboxStatus (where one's netns is). A pod
// that ran before podnet was chained was never recorded by the plugin, and a runtime whose libcni
// is older than 1.2 (containerd 1.6) caches no netns for it; the runtime itself still knows it,
// which is how multus-dynamic-networks-controller finds pods' netns too. gRPC comes from
// @grpc/grpc-js; the messages from the CRI API's own proto (proto/cri.proto, src/grpc/apis.ts).
import { credentials, Client, Metadata, status as grpcStatus, type MethodDefinition, type ServiceError } from '@grpc/grpc-js';
import { resolve } from 'node:path';
import { PodnetError } from '../errors.ts';
import { runtimeService, type ListPodSandboxRequest, type ListPodSandboxResponse, type PodSandboxStatusRequest, type PodSandboxStatusResponse } from '../grpc/apis.ts';

/** A running pod's sandbox, as the runtime lists it. */
export interface PodSandbox {
  id: string;
  name: string;
  namespace: string;
  uid: string;
}

export interface RuntimeService {
  /** The node's sandboxes in the READY state. */
  readySandboxes(): Promise<PodSandbox[]>;
  /**
   * The path of the network namespace the runtime made for the sandbox, or undefined when it
   * shares the node's (hostNetwork) or the runtime does not tell it.
   */
  sandboxNetns(id: string): Promise<string | undefined>;
  close(): void;
}

/** A runtime's reply larger than this is refused (a node's every sandbox fits in far less). */
const maxReplyBytes = 16 * 1024 * 1024;

export interface RuntimeServiceOptions {
  /** The runtime's socket: /run/containerd/containerd.sock, /run/crio/crio.sock. */
  socketPath: string;
  /** Per call. */
  timeoutMs: number;
}

export function connectRuntimeService(opts: RuntimeServiceOptions): RuntimeService {
  // unix:ABSOLUTE: a relative path after unix:// would be read as an authority and a path.
  const client = new Client(`unix:${resolve(opts.socketPath)}`, credentials.createInsecure(), {
    'grpc.max_receive_message_length': maxReplyBytes,
    // One call now and then: no keepalive, no retries behind podnet's back.
    'grpc.enable_retries': 0,
  });
  const call = <Request, Reply>(name: keyof typeof runtimeService, request: Request): Promise<Reply> =>
    new Promise((resolve, reject) => {
      const method = runtimeService[name] as unknown as MethodDefinition<Request, Reply>;
      client.makeUnaryRequest(method.path, method.requestSerialize, method.responseDeserialize, request, new Metadata(), { deadline: Date.now() + opts.timeoutMs }, (error: ServiceError | null, reply?: Reply) => {
        if (error) reject(callError(opts.socketPath, name, error));
        else resolve(reply!);
      });
    });

  return {
    async readySandboxes() {
      const reply = await call<ListPodSandboxRequest, ListPodSandboxResponse>('ListPodSandbox', { filter: { state: { state: 'SANDBOX_READY' } } });
      return reply.items
        .filter((item) => item.state === 'SANDBOX_READY')
        .map((item) => ({ id: item.id, name: item.metadata?.name ?? '', namespace: item.metadata?.namespace ?? '', uid: item.metadata?.uid ?? '' }));
    },
    async sandboxNetns(id) {
      const reply = await call<PodSandboxStatusRequest, PodSandboxStatusResponse>('PodSandboxStatus', { podSandboxId: id, verbose: true });
      if (reply.status?.linux?.namespaces?.options?.network === 'NODE') return undefined;
      return netnsFromInfo(reply.info['info']);
    },
    close: () => client.close(),
  };
}

/**
 * The verbose status's "info" is the runtime's own JSON; containerd and CRI-O both put the OCI
 * runtime spec the sandbox runs with in it, whose network namespace entry has the netns path.
 */
export function netnsFromInfo(info: string | undefined): string | undefined {
  if (!info) return undefined;
  let parsed: unknown;
  try {
    parsed = JSON.parse(info);
  } catch {
    return undefined;
  }
  const namespaces = (parsed as { runtimeSpec?: { linux?: { namespaces?: unknown } } } | null)?.runtimeSpec?.linux?.namespaces;
  if (!Array.isArray(namespaces)) return undefined;
  const network = namespaces.find((n: unknown) => (n as { type?: unknown } | null)?.type === 'network') as { path?: unknown } | undefined;
  return typeof network?.path === 'string' && network.path.startsWith('/') ? network.path : undefined;
}

function callError(socketPath: string, method: string, error: ServiceError): PodnetError {
  const unreachable = error.code === grpcStatus.UNAVAILABLE || error.code === grpcStatus.DEADLINE_EXCEEDED;
  return new PodnetError(unreachable ? 'NOT_AVAILABLE' : 'IO_FAILURE', `the container runtime at ${socketPath} did not answer ${method}: ${error.details || error.message}`);
}
