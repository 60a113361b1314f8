// The three gRPC APIs podnet speaks, each from its .proto in proto/ (the field names and numbers are
// the APIs' facts): the CRI's RuntimeService (podnet calls the container runtime), the kubelet's
// plugin Registration and DRAPlugin services (the kubelet calls podnet). @grpc/proto-loader makes
// each service's definition from the descriptors scripts/generate.ts derives, and protobufjs
// encodes and decodes the messages: a field podnet does not declare is skipped, a message cut short
// fails to decode, and grpc-js turns that into an error of the call, never a read past the end.
// The TypeScript shapes below are the messages as proto-loader hands them over with `options`:
// camelCase names, enums by name, absent scalars as their protobuf defaults.
import { fromJSON, type Options } from '@grpc/proto-loader';
import type { MethodDefinition, ServiceDefinition } from '@grpc/grpc-js';
import * as descriptors from '../generated/protos.ts';

const options: Options = { keepCase: false, longs: Number, enums: String, defaults: true };

function service<Methods extends string>(descriptor: object, name: string, methods: readonly Methods[]): Record<Methods, MethodDefinition<object, object>> {
  const definition = fromJSON(descriptor, options)[name] as ServiceDefinition | undefined;
  if (!definition) throw new Error(`proto/: no service ${name}`);
  for (const method of methods) if (!definition[method]) throw new Error(`proto/: service ${name} has no method ${method}`);
  return definition as Record<Methods, MethodDefinition<object, object>>;
}

/** The CRI's RuntimeService (package runtime.v1), the calls podnet makes. */
export const runtimeService = service(descriptors.cri, 'runtime.v1.RuntimeService', ['ListPodSandbox', 'PodSandboxStatus']);

/** The kubelet's plugin Registration service, which podnet serves on its registration socket. */
export const registrationService = service(descriptors.pluginRegistration, 'pluginregistration.Registration', ['GetInfo', 'NotifyRegistrationStatus']);

/** The kubelet's DRAPlugin v1 service, which podnet serves on its driver socket. */
export const draPluginService = service(descriptors.dra, 'k8s.io.kubelet.pkg.apis.dra.v1.DRAPlugin', ['NodePrepareResources', 'NodeUnprepareResources']);

/** What the kubelet asks for `supported_versions` to name: the DRAPlugin service's version. */
export const draPluginServiceVersion = 'v1.DRAPlugin';

// ---- runtime.v1 ----
export type PodSandboxState = 'SANDBOX_READY' | 'SANDBOX_NOTREADY';
export interface ListPodSandboxRequest {
  filter?: { id?: string; state?: { state: PodSandboxState } };
}
export interface PodSandboxMetadata {
  name: string;
  uid: string;
  namespace: string;
  attempt: number;
}
export interface ListPodSandboxResponse {
  items: { id: string; metadata: PodSandboxMetadata | null; state: PodSandboxState }[];
}
export interface PodSandboxStatusRequest {
  podSandboxId: string;
  verbose: boolean;
}
export type NamespaceMode = 'POD' | 'CONTAINER' | 'NODE' | 'TARGET';
export interface PodSandboxStatusResponse {
  status: { id: string; linux: { namespaces: { options: { network: NamespaceMode } | null } | null } | null } | null;
  info: Record<string, string>;
}

// ---- pluginregistration ----
export interface PluginInfo {
  type: string;
  name: string;
  endpoint: string;
  supportedVersions: string[];
}
export interface RegistrationStatus {
  pluginRegistered: boolean;
  error: string;
}

// ---- DRAPlugin v1 ----
export interface DraClaim {
  namespace: string;
  uid: string;
  name: string;
}
export interface NodePrepareResourcesRequest {
  claims: DraClaim[];
}
export interface DraDevice {
  requestNames: string[];
  poolName: string;
  deviceName: string;
  cdiDeviceIds: string[];
  shareId?: string;
}
export interface NodePrepareResourcesResponse {
  claims: Record<string, { devices: DraDevice[]; error: string }>;
}
export interface NodeUnprepareResourcesRequest {
  claims: DraClaim[];
}
export interface NodeUnprepareResourcesResponse {
  claims: Record<string, { error: string }>;
}
