// A sandbox's first pass inside its ADD (docs/adr/0028): the plugin, once its record is spooled,
// asks the daemon to make what the pod asks now, and waits a bounded time. The daemon answers
// before that time is up, done or not, and goes on after. Pods that ask podnet for nothing are
// answered at once; a pod whose required attachments cannot be made is refused, and its ADD
// fails. What the answer says is worked out here from the ledger; the waiting is the reconciler's.
import { selectingConfigs, type RequiredAttachment, type SandboxIdentity } from '../model/identity.ts';
import type { ErrorCode } from '../errors.ts';
import { unmetRequired, type UnmetAttachment } from '../status/status.ts';
import type { AttachmentRecord, FirstPassResponse, PodNetworkConfig } from '../protocol/validate.ts';
import { sameSandbox } from '../registry/fold.ts';
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
  return pod.annotation !== undefined || pod.hasClaims === true || (pod.claims?.length ?? 0) > 0 || selectingConfigs(pod, configs).length > 0;
}

/**
 * What a sandbox's passes have come to so far: applied once a pass took it and made all it asks
 * (nothing left for the pass after), failed when its pass failed, else pending; refused instead of
 * applied or failed when an attachment the pod marks required is not there.
 */
export function firstPassOutcome(ledger: Pick<SandboxLedger, 'outcome' | 'track'>, record: AttachmentRecord, required: readonly RequiredAttachment[] = []): FirstPassResponse {
  const outcome = ledger.outcome(record.containerId);
  const track = ledger.track(record.containerId);
  // The outcome of this ADD's sandbox, not of an earlier one of the same container (podman keeps a container's id across a restart).
  if (!outcome || !track || !sameSandbox(outcome.record, record)) return { outcome: 'pending' };
  const done = outcome.lastError !== undefined || (track.committed && !track.deferred);
  if (!done) return { outcome: 'pending' };
  const unmet = unmetRequired(outcome, required);
  // Refused for what the required attachments themselves cannot have; not for the node being
  // short of something for a while, nor for another part of the pod's network that failed and
  // took them back with it (a pod's other requests never fail its creation): those start the pod,
  // and the retries make what it asks.
  const transient = track.failedWith !== undefined && transientFailures.has(track.failedWith);
  if (unmet.some((u) => u.own) && !transient) return refusal(unmet);
  return outcome.lastError !== undefined ? { outcome: 'failed', error: outcome.lastError.slice(0, 4096) } : unmet.length > 0 ? { outcome: 'pending' } : { outcome: 'applied' };
}

/** Failures of the node's for a while (a plugin timed out, a tool or the port security table not there yet), not of what a pod asks. */
const transientFailures: ReadonlySet<ErrorCode> = new Set(['TRY_AGAIN_LATER', 'NOT_AVAILABLE', 'BUSY']);

/** The answer that fails the pod's ADD: each unmet required attachment, named as its document asks it, and why. */
function refusal(unmet: readonly UnmetAttachment[]): FirstPassResponse {
  const listed = unmet.slice(0, 64).map(({ own: _own, ...u }) => ({ ...u, reason: u.reason.slice(0, 2048) }));
  const told = listed.map((u) => `${u.interface ?? 'an interface'} on Network ${u.network} (${u.document} ${u.field}): ${u.reason}`);
  return { outcome: 'refused', unmet: listed, error: `the pod's required attachments cannot be made: ${told.join('; ')}`.slice(0, 4096) };
}
