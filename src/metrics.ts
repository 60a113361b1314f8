// What an operator alerts on (`podnet daemon --metrics-address`): the rooms report events through
// the small interfaces here, injected, so each is tested with a fake and costs nothing when
// metrics are off. They sit below every room, so that any may report; daemon/prometheus.ts turns
// them into Prometheus metrics. Every label takes its values from a bounded set: Network names
// (the admin's), plugin types found in the bin dirs, error codes, resource kinds. Never a pod's
// name: that is the network-status annotation's and `podnet explain`'s to say.
import type { ErrorCode } from './errors.ts';

/** What a pass reports when it ends. */
export interface PassMetrics {
  passEnded(pass: { seconds: number; steps: number; resync: boolean }): void;
  /** A sandbox whose reconcile failed in a pass (its steps taken back; or, failed for want of a plugin or of port security, the rest applied), by the error's code. */
  sandboxFailed(code: ErrorCode): void;
  /** Attachments that a pass made or removed, by Network. */
  attachmentsChanged(network: string, change: 'attached' | 'detached'): void;
}

/** What a delegated plugin call reports. */
export interface PluginMetrics {
  pluginCalled(call: { plugin: string; command: string; seconds: number; ok: boolean }): void;
}

/** What the daemon writes to the API server: pods' network-status, status entries, Events. */
export const writtenResources = ['pods', 'podnetworkconfigs', 'networks', 'events'] as const;
export type WrittenResource = (typeof writtenResources)[number];

/** The resources the daemon's informers watch. */
export type WatchedResource = 'pods' | 'namespaces' | 'nodes' | 'networks' | 'podnetworkconfigs' | 'podnetworkpermissions' | 'network-attachment-definitions';

/**
 * What the daemon's traffic with the API server costs the cluster: each node's writes, and the
 * watch events it receives (at hundreds of nodes, every write of one is an event for the others).
 */
export interface ApiMetrics {
  apiWritten(resource: WrittenResource): void;
  apiWriteFailed(resource: WrittenResource): void;
  watchEventReceived(resource: WatchedResource): void;
}

export type Metrics = PassMetrics & PluginMetrics & ApiMetrics;

/** Metrics off: every report goes nowhere. */
export const noMetrics: Metrics = {
  passEnded: () => undefined,
  sandboxFailed: () => undefined,
  attachmentsChanged: () => undefined,
  pluginCalled: () => undefined,
  apiWritten: () => undefined,
  apiWriteFailed: () => undefined,
  watchEventReceived: () => undefined,
};

/** The states an attachment is counted in: applied and nothing failing, its sandbox failing, or wanted and not there yet. */
export type AttachmentState = 'ready' | 'failing' | 'pending';
