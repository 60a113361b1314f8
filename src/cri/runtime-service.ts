// The two calls of the CRI's RuntimeService podnet makes, over the container runtime's socket:
// ListPodSandbox (the node's running pods) and PodSandboxStatus (where one's netns is). A pod
// that ran before podnet was chained was never recorded by the plugin, and a runtime whose libcni
// is older than 1.2 (containerd 1.6) caches no netns for it; the runtime itself still knows it,
// which is how multus-dynamic-networks-controller finds pods' netns too. gRPC comes from
// @grpc/grpc-js; the messages are encoded by field number (wire.ts) rather than from the CRI API's
// proto, since podnet reads six fields of it.
import { credentials, Client, Metadata, status as grpcStatus, type ServiceError } from '@grpc/grpc-js';
import { resolve } from 'node:path';
import { PodnetError } from '../errors.ts';
import { decodeMessage, encodeMessage, messageField, repeatedMessages, stringField, stringMap, varintField } from './wire.ts';

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

/** The gRPC service the calls go to (package runtime.v1 of the CRI API). */
const service = '/runtime.v1.RuntimeService';

// Field numbers of the CRI API (k8s.io/cri-api, runtime/v1).
const listPodSandboxRequest = { filter: 1 } as const;
const podSandboxFilter = { state: 2 } as const;
const podSandboxStateValue = { state: 1 } as const;
const sandboxReady = 0;
const listPodSandboxResponse = { items: 1 } as const;
const podSandbox = { id: 1, metadata: 2, state: 3 } as const;
const podSandboxMetadata = { name: 1, uid: 2, namespace: 3 } as const;
const podSandboxStatusRequest = { podSandboxId: 1, verbose: 2 } as const;
const podSandboxStatusResponse = { status: 1, info: 2 } as const;
const podSandboxStatus = { linux: 6 } as const;
const linuxPodSandboxStatus = { namespaces: 1 } as const;
const namespace = { options: 2 } as const;
const namespaceOption = { network: 1 } as const;
/** NamespaceMode NODE: the pod is in the node's netns (hostNetwork). */
const namespaceModeNode = 2;

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
  const call = (method: string, request: Buffer): Promise<Buffer> =>
    new Promise((resolve, reject) => {
      client.makeUnaryRequest(
        `${service}/${method}`,
        (message: Buffer) => message,
        (reply: Buffer) => reply,
        request,
        new Metadata(),
        { deadline: Date.now() + opts.timeoutMs },
        (error: ServiceError | null, reply?: Buffer) => {
          if (error) reject(callError(opts.socketPath, method, error));
          else resolve(reply ?? Buffer.alloc(0));
        },
      );
    });

  return {
    async readySandboxes() {
      const request = encodeMessage([[listPodSandboxRequest.filter, [[podSandboxFilter.state, [[podSandboxStateValue.state, sandboxReady]]]]]]);
      const reply = decodeMessage(await call('ListPodSandbox', request), 'ListPodSandbox reply');
      return repeatedMessages(reply, listPodSandboxResponse.items, 'PodSandbox')
        .filter((item) => varintField(item, podSandbox.state) === sandboxReady)
        .map((item) => {
          const metadata = messageField(item, podSandbox.metadata, 'PodSandboxMetadata');
          return {
            id: stringField(item, podSandbox.id),
            name: stringField(metadata, podSandboxMetadata.name),
            namespace: stringField(metadata, podSandboxMetadata.namespace),
            uid: stringField(metadata, podSandboxMetadata.uid),
          };
        });
    },
    async sandboxNetns(id) {
      const request = encodeMessage([
        [podSandboxStatusRequest.podSandboxId, id],
        [podSandboxStatusRequest.verbose, true],
      ]);
      const reply = decodeMessage(await call('PodSandboxStatus', request), 'PodSandboxStatus reply');
      const status = messageField(reply, podSandboxStatusResponse.status, 'PodSandboxStatus');
      const options = messageField(messageField(messageField(status, podSandboxStatus.linux, 'LinuxPodSandboxStatus'), linuxPodSandboxStatus.namespaces, 'Namespace'), namespace.options, 'NamespaceOption');
      if (varintField(options, namespaceOption.network) === namespaceModeNode) return undefined;
      return netnsFromInfo(stringMap(reply, podSandboxStatusResponse.info, 'info entry').get('info'));
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
