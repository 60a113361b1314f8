// What a namespace may ask of podnet, as the PodNetworkPermissions its admin put in it say: which
// parts (attachments, bandwidth, interfaces, routes, rules, sysctls) and within which MTU bounds. A
// namespace without one may ask everything; with several, each must allow what it asks. The
// API server checks a PodNetworkConfig at admission (daemonset/permissions.yaml); the daemon
// checks here everything it applies, so a config that predates its namespace's permission, a
// pod's annotation and the standalone config dir are held to the same. Pure.
import type { PermittedPart, PodNetworkPermission, Problem } from '../protocol/validate.ts';
import { documentName, namespaceOf } from './identity.ts';

export type { PermittedPart } from '../protocol/validate.ts';

/** Why the permissions refuse `part` asked at `field` of `document`; undefined when every one allows it. */
export function partRefusal(permissions: readonly PodNetworkPermission[], part: PermittedPart, document: string, field: string): Problem | undefined {
  const refusing = permissions.find((p) => !p.spec.allow.includes(part));
  if (!refusing) return undefined;
  const namespace = namespaceOf(refusing.metadata.namespace);
  return { document, field, reason: `${documentName(refusing)} does not let namespace ${namespace} ask ${part}` };
}

/** Why the permissions refuse an MTU of `mtu` asked at `field` of `document`; undefined when it is within every one's bounds. */
export function mtuRefusal(permissions: readonly PodNetworkPermission[], mtu: number, document: string, field: string): Problem | undefined {
  for (const permission of permissions) {
    const { min, max } = permission.spec.mtu ?? {};
    const namespace = namespaceOf(permission.metadata.namespace);
    if (min !== undefined && mtu < min) return { document, field, reason: `${documentName(permission)} lets namespace ${namespace} set no MTU below ${min}; this asks ${mtu}` };
    if (max !== undefined && mtu > max) return { document, field, reason: `${documentName(permission)} lets namespace ${namespace} set no MTU above ${max}; this asks ${mtu}` };
  }
  return undefined;
}

/** What is wrong with a permission on its own: bounds no MTU can meet. */
export function permissionProblems(permission: PodNetworkPermission): Problem[] {
  const { min, max } = permission.spec.mtu ?? {};
  if (min === undefined || max === undefined || min <= max) return [];
  return [{ document: documentName(permission), field: 'spec.mtu', reason: `min ${min} is above max ${max}: no MTU can be set in namespace ${namespaceOf(permission.metadata.namespace)}` }];
}

/**
 * A permission in the place of one that cannot be read (it breaks the schema): it allows nothing
 * until it is mended, so that an admin's typo never opens a namespace. One whose name cannot be
 * read stands under `unreadable`; undefined when its namespace cannot be read: then there is no
 * namespace to hold to it.
 */
export function allowingNothing(document: unknown): PodNetworkPermission | undefined {
  const metadata = (document as { metadata?: { name?: unknown; namespace?: unknown } } | null)?.metadata;
  const namespace = metadata?.namespace ?? 'default';
  if (typeof namespace !== 'string' || !objectName.test(namespace)) return undefined;
  const name = typeof metadata?.name === 'string' && objectName.test(metadata.name) ? metadata.name : unreadableName;
  return { apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'PodNetworkPermission', metadata: { name, namespace }, spec: { allow: [] } };
}

/** The name a permission whose own cannot be read stands under. */
export const unreadableName = 'unreadable';

/** A name as Kubernetes allows (the schema's Name, which a namespace's pattern narrows): checked before it names anything. */
const objectName = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** The permissions of each namespace, for looking them up by a pod's. */
export function permissionsByNamespace(permissions: readonly PodNetworkPermission[]): ReadonlyMap<string, PodNetworkPermission[]> {
  const out = new Map<string, PodNetworkPermission[]>();
  for (const p of permissions) {
    const namespace = namespaceOf(p.metadata.namespace);
    const mine = out.get(namespace);
    if (mine) mine.push(p);
    else out.set(namespace, [p]);
  }
  return out;
}
