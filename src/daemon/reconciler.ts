// Level-triggered reconcile: every pass makes each recorded sandbox match what the documents ask,
// takes back what podnet did to sandboxes that are gone, and removes bridges podnet made that
// nothing uses. Passes are serialized and coalesced (a request during a pass runs one more pass
// after it); a periodic pass repairs drift. One sandbox's failure does not stop the others.
import { createHash } from 'node:crypto';
import type { PodnetError } from '../errors.ts';
import { toPodnetError } from '../errors.ts';
import { desiredFor, identityOf, type DesiredAttachment, type Problem } from '../model/desired.ts';
import type { AppliedState, ResolvedAttachment, ResolvedTuning, Step } from '../model/state.ts';
import type { IpRunner } from '../netns/ip.ts';
import { observeLinks } from '../netns/observe.ts';
import { isNetworkNamespace } from '../netns/probe.ts';
import { plan } from '../planner/plan.ts';
import { execute, runJournalUndo } from '../executor/execute.ts';
import type { NodeIpam } from '../ipam/ipam.ts';
import type { AttachmentRecord, SandboxList } from '../protocol/validate.ts';
import { AppliedStore } from '../registry/applied.ts';
import type { Registry } from '../registry/registry.ts';
import type { DesiredDocuments } from '../sources/config-dir.ts';
import type { Logger } from '../log.ts';
import { coalesce } from './coalesce.ts';

export interface SandboxReport {
  containerId: string;
  namespace: string;
  name: string;
  netns: string;
  desired: { attachments: ResolvedAttachment[]; tuning: ResolvedTuning[] };
  applied: AppliedState | undefined;
  problems: Problem[];
  lastSteps: Step[];
  lastError?: string;
}

export interface ReconcilerOptions {
  stateDir: string;
  registry: Registry;
  documents: () => DesiredDocuments;
  ip: IpRunner;
  ipam: NodeIpam;
  log: Logger;
  /** ip's `netns PID` for the host, seen from inside a pod's netns: the daemon's own pid. */
  hostNetnsRef: string;
}

/** The host end of a pod's attachment: pnv and a hash of (container, interface), 13 characters. */
export function hostInterfaceName(containerId: string, podInterface: string): string {
  return `pnv${createHash('sha256').update(`${containerId}/${podInterface}`).digest('hex').slice(0, 10)}`;
}

export function bridgeNameOf(attachment: DesiredAttachment): string {
  return attachment.network.spec.bridge?.name ?? `pn-${attachment.network.metadata.name}`.slice(0, 15);
}

export class Reconciler {
  readonly reports = new Map<string, SandboxReport>();
  private readonly opts: ReconcilerOptions;
  private readonly applied: AppliedStore;
  /** Passes, one at a time; requests during a pass merge into one more pass. */
  private readonly passes = coalesce(() => this.pass().catch((err: Error) => this.opts.log.error('reconcile pass failed', { error: err.message })));
  documentProblems: Problem[] = [];

  constructor(opts: ReconcilerOptions) {
    this.opts = opts;
    this.applied = new AppliedStore(opts.stateDir);
  }

  /** Every sandbox's report, for `podnet explain`. */
  list(): SandboxList {
    return { documentProblems: this.documentProblems, items: [...this.reports.values()] as SandboxList['items'] };
  }

  /** Takes back the passes a crash cut short; before the daemon reports ready. */
  async recover(): Promise<void> {
    const undone = await runJournalUndo(this.opts.ip, this.opts.stateDir);
    if (undone.length > 0) this.opts.log.warn('undid passes a crash cut short', { sandboxes: undone });
  }

  /** Runs a pass now, or one more after the pass under way; resolves when that pass is done. */
  schedule(): Promise<void> {
    return this.passes();
  }

  private async pass(): Promise<void> {
    const docs = this.opts.documents();
    this.documentProblems = docs.problems;
    const live = new Map<string, AttachmentRecord>();
    for (const record of this.opts.registry.list()) {
      if (!live.has(record.containerId) && isNetworkNamespace(record.netns)) live.set(record.containerId, record);
    }
    for (const record of live.values()) await this.reconcileSandbox(record, docs);
    for (const state of this.applied.all()) if (!live.has(state.containerId)) await this.forget(state);
    for (const cid of [...this.reports.keys()]) if (!live.has(cid)) this.reports.delete(cid);
    await this.collectBridges();
  }

  private async reconcileSandbox(record: AttachmentRecord, docs: DesiredDocuments): Promise<void> {
    const { ip, log } = this.opts;
    const identity = identityOf(record);
    const desired = desiredFor(identity, docs.networks, docs.configs);
    const problems = [...desired.problems];
    const attachments: ResolvedAttachment[] = [];
    for (const want of desired.attachments) {
      try {
        attachments.push(this.resolve(record.containerId, want));
      } catch (err) {
        problems.push({ document: want.from, field: `attachment ${want.interface}`, reason: toPodnetError(err).message });
      }
    }
    const tuning: ResolvedTuning[] = desired.tuning.map((t) => ({ interface: t.interface, settings: t.settings }));
    const report: SandboxReport = {
      containerId: record.containerId,
      namespace: identity.namespace,
      name: identity.name,
      netns: record.netns,
      desired: { attachments, tuning },
      applied: this.applied.get(record.containerId),
      problems,
      lastSteps: [],
    };
    this.reports.set(record.containerId, report);
    try {
      const observed = { pod: await observeLinks(ip, { netns: record.netns }), host: await observeLinks(ip, 'host') };
      const planned = plan({
        containerId: record.containerId,
        netns: record.netns,
        attachments,
        tuning,
        observed,
        applied: report.applied,
        hostNetnsRef: this.opts.hostNetnsRef,
      });
      report.problems.push(...planned.problems);
      report.lastSteps = planned.steps;
      if (planned.steps.length === 0 && sameApplied(report.applied, planned.next)) return;
      const result = await execute(ip, this.opts.stateDir, record.containerId, planned.steps);
      if (result.error) throw result.error;
      this.commit(report.applied, planned.next);
      report.applied = planned.next;
      // Level-triggered: what had to wait for this pass's changes gets the next pass at once.
      if (planned.deferred) void this.passes();
      if (planned.steps.length > 0) log.info('applied', { pod: `${identity.namespace}/${identity.name}`, steps: planned.steps.length });
    } catch (err) {
      const e: PodnetError = toPodnetError(err);
      report.lastError = e.message;
      log.warn('reconcile failed; what this pass took was undone', { pod: `${identity.namespace}/${identity.name}`, error: e.message });
    }
  }

  /** Names, bridge and addresses of a desired attachment; addresses come from the node's IPAM. */
  private resolve(containerId: string, want: DesiredAttachment): ResolvedAttachment {
    const network = want.network;
    const owner = `${containerId}/${want.interface}`;
    const allocations = network.spec.ipam
      ? this.opts.ipam.allocate(network.metadata.name, network.spec.ipam.ranges, owner, want.ips)
      : (want.ips ?? []).map((address) => ({ address }));
    const prefixOf = (cidr: string) => cidr.slice(cidr.indexOf('/'));
    return {
      interface: want.interface,
      network: network.metadata.name,
      bridge: bridgeNameOf(want),
      bridgeAddresses: network.spec.bridge?.gateway
        ? allocations.flatMap((a) => ('gateway' in a && a.gateway ? [`${a.gateway}${prefixOf(a.address)}`] : []))
        : [],
      hostIf: hostInterfaceName(containerId, want.interface),
      ...(network.spec.mtu ? { mtu: network.spec.mtu } : {}),
      addresses: allocations.map((a) => a.address),
    };
  }

  /** Records the new applied state, the bridges in use, and releases addresses no longer held. */
  private commit(before: AppliedState | undefined, after: AppliedState): void {
    this.applied.setBridges([...this.applied.bridges(), ...after.attachments.map((a) => a.bridge)]);
    this.applied.put(after);
    for (const was of before?.attachments ?? []) {
      if (!after.attachments.some((a) => a.interface === was.interface && a.network === was.network)) {
        this.opts.ipam.release(was.network, `${after.containerId}/${was.interface}`);
      }
    }
  }

  /** A sandbox that is gone: its pod ends went with its netns; the host ends and addresses go now. */
  private async forget(state: AppliedState): Promise<void> {
    const host = await observeLinks(this.opts.ip, 'host');
    const lines = state.attachments.filter((a) => host.has(a.hostIf)).map((a) => `link del ${a.hostIf}`);
    const result = await this.opts.ip.batch('host', lines);
    if (result.error) {
      this.opts.log.warn('could not remove the host ends of a gone sandbox; retrying next pass', { containerId: state.containerId, error: result.error.message });
      return;
    }
    for (const a of state.attachments) this.opts.ipam.release(a.network, `${state.containerId}/${a.interface}`);
    this.applied.remove(state.containerId);
    this.opts.log.info('took back a gone sandbox', { containerId: state.containerId, attachments: state.attachments.length });
  }

  /** Removes bridges podnet made that no attachment uses any more. */
  private async collectBridges(): Promise<void> {
    const inUse = new Set(this.applied.all().flatMap((s) => s.attachments.map((a) => a.bridge)));
    const known = this.applied.bridges();
    const unused = known.filter((b) => !inUse.has(b));
    if (unused.length === 0) return;
    const host = await observeLinks(this.opts.ip, 'host');
    const lines = unused.filter((b) => host.has(b)).map((b) => `link del ${b}`);
    const result = await this.opts.ip.batch('host', lines);
    if (result.error) {
      this.opts.log.warn('could not remove an unused bridge; retrying next pass', { error: result.error.message });
      return;
    }
    this.applied.setBridges(known.filter((b) => inUse.has(b)));
  }
}

function sameApplied(a: AppliedState | undefined, b: AppliedState): boolean {
  const empty = b.attachments.length === 0 && b.tuning.length === 0;
  return a === undefined ? empty : JSON.stringify(a) === JSON.stringify(b);
}
