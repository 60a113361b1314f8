// A sandbox's first pass inside its ADD (docs/adr/0028): the plugin, once its record is spooled,
// asks the daemon to make what the pod asks now, and waits a bounded time. The daemon answers
// before that time is up, done or not, and goes on after. Pods that ask podnet for nothing are
// answered at once. What the answer says is worked out here from the ledger; the waiting is the
// reconciler's.
import type { DesiredSandbox } from '../model/desired.ts';
import type { FirstPassResponse } from '../protocol/validate.ts';
import type { SandboxLedger } from './ledger.ts';

/** How long before the plugin gives up the daemon answers: what a pass has not done by then is 'pending'. */
export function answerWithinMs(waitMs: number): number {
  return waitMs - Math.min(250, Math.floor(waitMs / 5));
}

/** Whether what the documents want for a pod has anything for podnet to make: else nothing is waited for. */
export function asksAnything(wanted: DesiredSandbox): boolean {
  return wanted.attachments.length + wanted.tuning.length + wanted.routes.length + wanted.rules.length + wanted.sysctls.length > 0;
}

/**
 * What a sandbox's passes have come to so far: applied once a pass took it and made all it asks
 * (nothing left for the pass after), failed when its pass failed, else pending.
 */
export function firstPassOutcome(ledger: Pick<SandboxLedger, 'outcome' | 'track'>, containerId: string): FirstPassResponse {
  const outcome = ledger.outcome(containerId);
  const track = ledger.track(containerId);
  if (!outcome || !track) return { outcome: 'pending' };
  if (outcome.lastError !== undefined) return { outcome: 'failed', error: outcome.lastError.slice(0, 4096) };
  return track.committed && !track.deferred ? { outcome: 'applied' } : { outcome: 'pending' };
}
