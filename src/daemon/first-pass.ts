// A sandbox's first pass inside its ADD (docs/adr/0028): the plugin, once its record is spooled,
// asks the daemon to make what the pod asks now, and waits a bounded time. The daemon answers
// before that time is up, done or not, and goes on after. Pods that ask podnet for nothing are
// answered at once. What the answer says is worked out here from the ledger; the waiting is the
// reconciler's.
import { selectingConfigs, type SandboxIdentity } from '../model/identity.ts';
import type { AttachmentRecord, FirstPassResponse, PodNetworkConfig } from '../protocol/validate.ts';
import type { SandboxLedger } from './ledger.ts';

/** How long before the plugin gives up the daemon answers: what a pass has not done by then is 'pending'. */
export function answerWithinMs(waitMs: number): number {
  return waitMs - Math.min(250, Math.floor(waitMs / 5));
}

/**
 * Whether a pod asks podnet for anything: its annotation, or a config that selects it. Asked of
 * the request, not of what the node would grant (a MAC on the primary interface, a Network that
 * refuses it): a pod that asks is given its pass, which tells what it gets; one judged quiet here
 * never waits for one.
 */
export function asksAnything(pod: SandboxIdentity, configs: readonly PodNetworkConfig[]): boolean {
  return pod.annotation !== undefined || selectingConfigs(pod, configs).length > 0;
}

/**
 * What a sandbox's passes have come to so far: applied once a pass took it and made all it asks
 * (nothing left for the pass after), failed when its pass failed, else pending.
 */
export function firstPassOutcome(ledger: Pick<SandboxLedger, 'outcome' | 'track'>, record: AttachmentRecord): FirstPassResponse {
  const outcome = ledger.outcome(record.containerId);
  const track = ledger.track(record.containerId);
  // The outcome of this ADD's sandbox, not of an earlier one of the same container (podman keeps a container's id across a restart).
  if (!outcome || !track || outcome.record.netns !== record.netns || outcome.record.createdAt !== record.createdAt) return { outcome: 'pending' };
  if (outcome.lastError !== undefined) return { outcome: 'failed', error: outcome.lastError.slice(0, 4096) };
  return track.committed && !track.deferred ? { outcome: 'applied' } : { outcome: 'pending' };
}
