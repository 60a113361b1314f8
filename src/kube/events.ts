// An Event as podnet posts it (core/v1, what `kubectl describe` and `get events` show): the
// daemons' of pods and configs (publisher.ts) and the controller's of a gone node (src/controller/).
import { createHash } from 'node:crypto';
import type { Json } from './api.ts';

export interface EventSpec {
  object: { kind: string; apiVersion: string; name: string; namespace: string; uid?: string };
  type: 'Normal' | 'Warning';
  reason: string;
  message: string;
}

/** Who posts an Event: its source's host, and the instance it reports as (a node's name, or `controller`). */
export interface EventReporter {
  instance: string;
  host?: string;
}

/**
 * The POST to make, in the object's namespace (a cluster-scoped object's, namespace '', in
 * default, as a Node's are); its name unique to the reporter, the moment and what it says.
 */
export function eventRequest(e: EventSpec, reporter: EventReporter, now: string): { path: string; body: Json } {
  const name = `${e.object.name}.${createHash('sha256').update(`${reporter.instance} ${now} ${e.reason} ${e.message}`).digest('hex').slice(0, 16)}`;
  const namespace = e.object.namespace || 'default';
  return {
    path: `/api/v1/namespaces/${namespace}/events`,
    body: {
      apiVersion: 'v1',
      kind: 'Event',
      metadata: { name, namespace },
      involvedObject: e.object,
      reason: e.reason,
      message: e.message.slice(0, 1024),
      type: e.type,
      source: { component: 'podnet', ...(reporter.host ? { host: reporter.host } : {}) },
      reportingComponent: 'podnetwork.opdev.io/podnet',
      reportingInstance: reporter.instance,
      firstTimestamp: now,
      lastTimestamp: now,
      count: 1,
    },
  };
}
