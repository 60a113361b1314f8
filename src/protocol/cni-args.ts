// CNI_ARGS: "K=V;K=V". The pod's identity rides in it (the kubelet's K8S_POD_* keys; podman
// passes only K8S_POD_NAME).
import { parseDocument, type PodIdentity } from './validate.ts';

export function parseCniArgs(raw: string | undefined): Map<string, string> {
  const args = new Map<string, string>();
  if (!raw) return args;
  for (const pair of raw.split(';')) {
    if (pair === '') continue;
    const eq = pair.indexOf('=');
    // A pair without '=' carries no value; the spec's own parser rejects it, but a pass-through
    // plugin has no business failing a pod over a key it does not read.
    if (eq <= 0) continue;
    args.set(pair.slice(0, eq), pair.slice(eq + 1));
  }
  return args;
}

/**
 * A value that is not a valid Kubernetes name or uid is left out, not an error: the identity
 * only describes the sandbox, and podnet never fails a pod over it.
 */
function isValid(partial: PodIdentity): boolean {
  try {
    parseDocument('PodIdentity', partial, 'CNI_ARGS');
    return true;
  } catch {
    return false;
  }
}

export function podIdentityFromArgs(args: Map<string, string>): PodIdentity {
  const identity: PodIdentity = {};
  const fields = [
    ['namespace', 'K8S_POD_NAMESPACE'],
    ['name', 'K8S_POD_NAME'],
    ['uid', 'K8S_POD_UID'],
    ['infraContainerId', 'K8S_POD_INFRA_CONTAINER_ID'],
  ] as const;
  for (const [field, key] of fields) {
    const value = args.get(key);
    if (value && isValid({ [field]: value })) identity[field] = value;
  }
  return identity;
}
