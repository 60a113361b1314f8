// What podnet applied to each sandbox, kept as passes change it: the store's records, the
// addresses they hold in the node's IPAM, and the attachments made and removed told to the
// metrics. Every change to a sandbox's applied state goes through here.
import type { Logger } from '../log.ts';
import type { PassMetrics } from '../metrics.ts';
import type { DesiredSandbox } from '../model/desired.ts';
import { addressOwner } from '../model/resolve.ts';
import { emptyApplied, isEmptyApplied, type AppliedState } from '../model/state.ts';
import type { NodeIpam } from '../ipam/ipam.ts';
import type { AppliedConfig, AttachmentRecord } from '../protocol/validate.ts';
import type { AppliedStore } from '../registry/applied.ts';
import type { WireguardKeys } from './wireguard-keys.ts';

export interface AppliedRecordsOptions {
  applied: Pick<AppliedStore, 'get' | 'all' | 'put' | 'remove'>;
  ipam: Pick<NodeIpam, 'release' | 'holders'>;
  /** The WireGuard keys of attachments: deleted with them. */
  keys?: Pick<WireguardKeys, 'release' | 'sweep'>;
  metrics: Pick<PassMetrics, 'attachmentsChanged'>;
  log: Logger;
}

export class AppliedRecords {
  private readonly opts: AppliedRecordsOptions;

  constructor(opts: AppliedRecordsOptions) {
    this.opts = opts;
  }

  get(containerId: string): AppliedState | undefined {
    return this.opts.applied.get(containerId);
  }

  all(): AppliedState[] {
    return this.opts.applied.all();
  }

  /** Records which generation of each config a sandbox podnet plans nothing for has whole, when it changed; its applied state now. */
  keepConfigs(record: AttachmentRecord, current: AppliedState | undefined, whole: readonly AppliedConfig[]): AppliedState | undefined {
    const next = withConfigs(current ?? emptyApplied(record.containerId, record.netns), whole);
    if (sameApplied(current, next)) return current;
    this.opts.applied.put(next);
    return this.opts.applied.get(record.containerId);
  }

  /** Records the new applied state and releases addresses, and WireGuard keys, no longer held. */
  commit(before: AppliedState | undefined, after: AppliedState): void {
    this.opts.applied.put(after);
    for (const was of before?.attachments ?? []) {
      const now = after.attachments.find((a) => a.interface === was.interface && a.network === was.network);
      if (!now) this.opts.ipam.release(was.network, addressOwner(after.containerId, was.interface));
      // Its Network no longer a wireguard one: the key goes too, and a new one is made should it be again.
      if (was.wireguard && !now?.wireguard) this.opts.keys?.release(was.network, addressOwner(after.containerId, was.interface));
    }
  }

  /** A gone sandbox's record goes, and every address it held. */
  forget(state: AppliedState): void {
    for (const a of state.attachments) {
      this.opts.ipam.release(a.network, addressOwner(state.containerId, a.interface));
      if (a.wireguard) this.opts.keys?.release(a.network, addressOwner(state.containerId, a.interface));
    }
    this.opts.applied.remove(state.containerId);
  }

  /** Tells the metrics which of podnet's own attachments a change made and removed, by Network. */
  countChanges(before: AppliedState | undefined, after: AppliedState | undefined): void {
    const keys = (s: AppliedState | undefined) => new Map((s?.attachments ?? []).map((a) => [`${a.network}/${a.interface}`, a.network]));
    const [was, is] = [keys(before), keys(after)];
    for (const [key, network] of is) if (!was.has(key)) this.opts.metrics.attachmentsChanged(network, 'attached');
    for (const [key, network] of was) if (!is.has(key)) this.opts.metrics.attachmentsChanged(network, 'detached');
  }

  /**
   * Releases addresses, and deletes WireGuard keys, neither desired nor applied: those a pass took
   * for an attachment and then could not record (a crash between the two, or a desired state that
   * changed before it applied).
   */
  sweepUnheld(desired: Iterable<{ containerId: string; attachments: readonly { network: string; interface: string }[] }>): void {
    const keep = new Set<string>();
    for (const { containerId, attachments } of desired) for (const a of attachments) keep.add(`${a.network} ${addressOwner(containerId, a.interface)}`);
    for (const state of this.opts.applied.all()) for (const a of state.attachments) keep.add(`${a.network} ${addressOwner(state.containerId, a.interface)}`);
    for (const { network, owner } of this.opts.ipam.holders()) {
      if (keep.has(`${network} ${owner}`)) continue;
      this.opts.ipam.release(network, owner);
      this.opts.log.info('released an address nothing asks for', { network, owner });
    }
    this.opts.keys?.sweep(keep);
  }
}

/** `state` with the generation of each config the sandbox has whole (none: the key left out). */
export function withConfigs(state: AppliedState, whole: readonly AppliedConfig[]): AppliedState {
  const { configs: _was, ...rest } = state;
  return whole.length > 0 ? { ...rest, configs: [...whole] } : rest;
}

/** Whether `b` records what `a` does; which pass wrote a record does not count. */
export function sameApplied(a: AppliedState | undefined, b: AppliedState): boolean {
  if (a === undefined) return isEmptyApplied(b);
  const { pass: _a, ...left } = a;
  const { pass: _b, ...right } = b;
  return JSON.stringify(left) === JSON.stringify(right);
}

/** Who asked each desired thing, for the plan to stamp on its steps. */
export function originsOf(wanted: DesiredSandbox): { origins?: ReadonlyMap<string, string> } {
  return wanted.origins ? { origins: wanted.origins } : {};
}
