// Writes each prepared claim's status.devices (claim-status.ts) after a pass, when it changed:
// server-side apply of the claim's status as this node's field manager, so the entries of other
// drivers stay theirs. The API server lets a node's daemon write only the entries of its own
// driver, on claims allocated on its node (RBAC's associated-node verbs on resourceclaims/driver,
// docs/adr/0033). A write that fails is tried again at the next pass.
import { coalesce } from '../coalesce.ts';
import { PodnetError, toPodnetError } from '../errors.ts';
import type { Logger } from '../log.ts';
import type { KubeApi, Json } from '../kube/api.ts';
import { nodeFieldManager, resourceClaimPath } from '../kube/resources.ts';
import type { SandboxFacts } from '../status/status.ts';
import { claimDeviceStatuses, type AllocatedDeviceStatus } from './claim-status.ts';
import type { PreparedClaims } from './prepared.ts';

export interface ClaimStatusPublisherOptions {
  api: Pick<KubeApi, 'apply'>;
  nodeName: string;
  claims: PreparedClaims;
  facts: () => readonly SandboxFacts[];
  log: Logger;
  now?: () => string;
}

export class ClaimStatusPublisher {
  private readonly opts: ClaimStatusPublisherOptions;
  /** By claim UID: what was last written, and its text without the conditions' times. */
  private readonly written = new Map<string, { devices: AllocatedDeviceStatus[]; text: string }>();

  constructor(opts: ClaimStatusPublisherOptions) {
    this.opts = opts;
  }

  readonly publish = coalesce(async () => {
    const { claims } = this.opts;
    const now = (this.opts.now ?? (() => new Date().toISOString()))();
    const byPod = new Map(this.opts.facts().map((f) => [f.record.pod.uid, f]));
    const live = new Set<string>();
    for (const claim of claims.all()) {
      const uid = claim.claim.uid;
      live.add(uid);
      const facts = claim.pods.map((pod) => byPod.get(pod)).find((f) => f !== undefined);
      const before = this.written.get(uid);
      const devices = claimDeviceStatuses(claim, facts, before?.devices ?? [], now);
      const text = JSON.stringify(devices, (key, value: unknown) => (key === 'lastTransitionTime' ? undefined : value));
      if (text === before?.text) continue;
      if (await this.write(claim.claim, devices, "could not write a claim's status; trying again after the next pass")) this.written.set(uid, { devices, text });
    }
    for (const uid of this.written.keys()) if (!live.has(uid)) this.written.delete(uid);
  });

  /** An unprepared claim: podnet's entries of its status.devices removed (server-side apply of none). */
  async forget(claim: { namespace: string; name: string; uid: string }): Promise<void> {
    this.written.delete(claim.uid);
    await this.write(claim, [], "could not take podnet's entries out of an unprepared claim's status");
  }

  /**
   * The claim's status.devices as this node's field manager applies them; whether it took. A claim
   * the API server no longer has (deleted or deallocated, its status dropped with it) is no failure
   * to tell: its unprepare follows, and nothing is left to say.
   */
  private async write(claim: { namespace: string; name: string }, devices: AllocatedDeviceStatus[], failure: string): Promise<boolean> {
    const body = { apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaim', metadata: { name: claim.name, namespace: claim.namespace }, status: { devices } };
    try {
      await this.opts.api.apply(`${resourceClaimPath(claim.namespace, claim.name)}/status`, body as unknown as Json, nodeFieldManager(this.opts.nodeName));
      return true;
    } catch (err) {
      if (!(err instanceof PodnetError && err.code === 'NOT_FOUND')) this.opts.log.warn(failure, { claim: `${claim.namespace}/${claim.name}`, error: toPodnetError(err).message });
      return false;
    }
  }
}
