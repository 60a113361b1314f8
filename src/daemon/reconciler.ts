// Level-triggered reconcile: every pass makes each recorded sandbox match what the documents ask,
// takes back what podnet did to sandboxes that are gone, and removes bridges podnet made that
// nothing uses. Passes are serialized and coalesced (a request during a pass runs one more pass
// after it); a periodic pass repairs drift. One sandbox's failure does not stop the others.
import { createHash } from 'node:crypto';
import { join } from 'node:path';
import type { PodnetError } from '../errors.ts';
import { toPodnetError } from '../errors.ts';
import { desiredFor, identityOf, type DesiredAttachment, type DesiredSandbox, type Problem, type SandboxIdentity } from '../model/desired.ts';
import { isEmptyApplied, type AppliedState, type Family, type LinkSpec, type Observed, type ObservedLink, type ObservedRoute, type ObservedRule, type Resolved, type ResolvedAttachment, type Step } from '../model/state.ts';
import type { NetnsRunner } from '../netns/runner.ts';
import { observeLinks, observeQdiscs, observeRouting } from '../netns/observe.ts';
import { isNetworkNamespace } from '../netns/probe.ts';
import { plan } from '../planner/plan.ts';
import { planBridges } from '../planner/bridges.ts';
import { execute, runJournalUndo } from '../executor/execute.ts';
import type { NodeIpam } from '../ipam/ipam.ts';
import type { AttachmentRecord, DiffResponse, Network, PodNetworkConfig, SandboxList } from '../protocol/validate.ts';
import { stateLayout } from '../protocol/paths.ts';
import { AppliedStore } from '../registry/applied.ts';
import { removeTempFiles } from '../registry/atomic-file.ts';
import type { Registry } from '../registry/registry.ts';
import { withDocuments, type DesiredDocuments } from '../sources/config-dir.ts';
import type { Logger } from '../log.ts';
import { coalesce } from './coalesce.ts';
import { mapLimited } from './map-limited.ts';

export interface SandboxReport {
  containerId: string;
  namespace: string;
  name: string;
  netns: string;
  desired: Resolved;
  applied: AppliedState | undefined;
  problems: Problem[];
  lastSteps: Step[];
  lastError?: string;
}

export interface ReconcilerOptions {
  stateDir: string;
  registry: Registry;
  documents: () => DesiredDocuments;
  run: NetnsRunner;
  ipam: NodeIpam;
  log: Logger;
}

/** A host link of one pod's attachment: a prefix (pnv: veth end, pnb: ifb) and a hash of (container, interface), 13 characters. */
export function hostInterfaceName(containerId: string, podInterface: string, prefix: 'pnv' | 'pnb' = 'pnv'): string {
  return `${prefix}${createHash('sha256').update(`${containerId}/${podInterface}`).digest('hex').slice(0, 10)}`;
}

export function bridgeNameOf(attachment: DesiredAttachment): string {
  return attachment.network.spec.bridge?.name ?? `pn-${attachment.network.metadata.name}`.slice(0, 15);
}

/** Sandboxes reconciled at once: each runs a few short ip processes, mostly waiting on the kernel. */
const sandboxConcurrency = 8;

/** The journal of a pass's host steps (bridges); '@' is in no container id. */
const hostJournalKey = '@host';

/** A live sandbox and what it should have, decided at the start of a pass. */
interface SandboxWork {
  record: AttachmentRecord;
  identity: SandboxIdentity;
  desired: Resolved;
  problems: Problem[];
}

/** The host as one pass sees it, sorted once for every sandbox: its links, podnet's among them, their names, the qdiscs on podnet's links. */
interface HostView {
  links: ReadonlyMap<string, ObservedLink>;
  /** The links podnet names (prefix pn): the only host links a plan may change or remove. */
  podnetLinks: ReadonlyMap<string, ObservedLink>;
  names: ReadonlySet<string>;
  qdiscs: ReadonlyMap<string, { root?: string; ingress: boolean }>;
}

function hostViewOf(links: ReadonlyMap<string, ObservedLink>, qdiscs: ReadonlyMap<string, { root?: string; ingress: boolean }>): HostView {
  return { links, podnetLinks: new Map([...links].filter(([name]) => name.startsWith('pn'))), names: new Set(links.keys()), qdiscs };
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

  /** Takes back the passes a crash cut short and the writes it cut short; before the daemon reports ready. */
  async recover(): Promise<void> {
    const { stateDir } = this.opts;
    for (const dir of [stateDir, join(stateDir, stateLayout.applied), join(stateDir, stateLayout.ipam), join(stateDir, stateLayout.journal)]) {
      const removed = removeTempFiles(dir);
      if (removed.length > 0) this.opts.log.info('removed the temp files of writes a crash cut short', { dir, files: removed.length });
    }
    const committed = (key: string, pass: string) => (key === hostJournalKey ? this.applied.hostPass() : this.applied.get(key)?.pass) === pass;
    const undone = await runJournalUndo(this.opts.run, this.opts.stateDir, committed);
    if (undone.length > 0) this.opts.log.warn('undid passes a crash cut short', { sandboxes: undone });
  }

  /** Runs a pass now, or one more after the pass under way; resolves when that pass is done. */
  schedule(): Promise<void> {
    return this.passes();
  }

  /** The recorded sandboxes whose netns is still there, one record each. */
  private liveSandboxes(): Map<string, AttachmentRecord> {
    const live = new Map<string, AttachmentRecord>();
    for (const record of this.opts.registry.list()) {
      if (!live.has(record.containerId) && isNetworkNamespace(record.netns)) live.set(record.containerId, record);
    }
    return live;
  }

  /** What one sandbox should have: the documents' desired state with names and addresses decided. */
  private desiredOf(record: AttachmentRecord, docs: DesiredDocuments, addresses: 'allocate' | 'preview'): SandboxWork {
    const identity = identityOf(record);
    return { record, identity, ...this.resolve(record.containerId, desiredFor(identity, docs.networks, docs.configs), addresses) };
  }

  /**
   * What a pass would do with `extra` documents on top of the followed ones, without doing it:
   * the same desired state, observation and plan, addresses previewed rather than taken; the
   * sandboxes are planned as if the host steps (bridges) had run.
   */
  async diff(extra: readonly (Network | PodNetworkConfig)[]): Promise<DiffResponse> {
    const docs = withDocuments(this.opts.documents(), extra);
    const work = [...this.liveSandboxes().values()].map((record) => this.desiredOf(record, docs, 'preview'));
    const hostView = await this.observeHost(work);
    const attachments = work.flatMap((w) => w.desired.attachments);
    const { steps: hostSteps } = planBridges(attachments, hostView.links);
    const links = new Map(hostView.links);
    for (const a of attachments) {
      if (a.link.kind === 'bridge' && !links.has(a.link.bridge)) links.set(a.link.bridge, { name: a.link.bridge, mtu: a.mtu ?? 1500, up: true, kind: 'bridge', addresses: a.link.bridgeAddresses });
    }
    const asIfMade = hostViewOf(links, hostView.qdiscs);
    const view = (s: Step) => ({ where: s.where === 'host' ? 'host' : s.where.netns, tool: s.tool, line: s.line });
    const items = await mapLimited(work, sandboxConcurrency, async (w): Promise<DiffResponse['items'][number]> => {
      const applied = this.applied.get(w.record.containerId);
      const observed = await this.observe(w.record, w.desired, applied, asIfMade);
      const planned = plan({ containerId: w.record.containerId, netns: w.record.netns, desired: w.desired, observed, applied });
      return { containerId: w.record.containerId, namespace: w.identity.namespace, name: w.identity.name, steps: planned.steps.map(view), problems: [...w.problems, ...planned.problems] };
    });
    return { documentProblems: docs.problems, hostSteps: hostSteps.map(view), items };
  }

  /**
   * A pass: every sandbox's desired state (addresses taken), then the bridges they need, made once,
   * then the sandboxes side by side, a few at a time (each touches only its own netns and its
   * own host links); then what gone sandboxes and unused bridges leave.
   */
  private async pass(): Promise<void> {
    const docs = this.opts.documents();
    this.documentProblems = docs.problems;
    const live = this.liveSandboxes();
    const work = [...live.values()].map((record) => this.desiredOf(record, docs, 'allocate'));
    let hostView = await this.observeHost(work);
    const { steps: bridgeSteps, created: made } = planBridges(work.flatMap((w) => w.desired.attachments), hostView.links);
    if (bridgeSteps.length > 0) {
      const result = await execute(this.opts.run, this.opts.stateDir, hostJournalKey, bridgeSteps, (pass) => this.applied.setBridges([...this.applied.bridges(), ...made], pass));
      if (result.error) this.opts.log.warn('could not make the bridges this pass needs; what it took was undone', { error: result.error.message });
      hostView = await this.observeHost(work);
    }
    await mapLimited(work, sandboxConcurrency, (w) => this.reconcileSandbox(w, hostView));
    for (const state of this.applied.all()) if (!live.has(state.containerId)) await this.forget(state, hostView);
    for (const cid of [...this.reports.keys()]) if (!live.has(cid)) this.reports.delete(cid);
    this.sweepAddresses();
    // Sandboxes make and remove only their own veth ends and ifbs: the view still holds the bridges.
    await this.collectBridges(hostView);
  }

  /**
   * Releases addresses neither desired nor applied: those a pass took for an attachment and then
   * could not record (a crash between the two, or a desired state that changed before it applied).
   */
  private sweepAddresses(): void {
    const keep = new Set<string>();
    for (const report of this.reports.values()) for (const a of report.desired.attachments) keep.add(`${a.network} ${report.containerId}/${a.interface}`);
    for (const state of this.applied.all()) for (const a of state.attachments) keep.add(`${a.network} ${state.containerId}/${a.interface}`);
    for (const { network, owner } of this.opts.ipam.holders()) {
      if (keep.has(`${network} ${owner}`)) continue;
      this.opts.ipam.release(network, owner);
      this.opts.log.info('released an address nothing asks for', { network, owner });
    }
  }

  /** The host's links and, when any sandbox has or wants rate limits, the qdiscs on podnet's links; both read at once. */
  private async observeHost(work: readonly SandboxWork[]): Promise<HostView> {
    const shaped =
      work.some((w) => w.desired.attachments.some((a) => a.bandwidth)) || this.applied.all().some((s) => s.attachments.some((a) => a.bandwidth));
    const [links, qdiscs] = await Promise.all([observeLinks(this.opts.run, 'host'), shaped ? observeQdiscs(this.opts.run) : new Map()]);
    return hostViewOf(links, qdiscs);
  }

  /** What one pass sees of a sandbox: its links, and routes, rules and sysctls only where asked or applied. */
  private async observe(record: AttachmentRecord, desired: Resolved, applied: AppliedState | undefined, hostView: HostView): Promise<Observed> {
    const { run } = this.opts;
    const where = { netns: record.netns };
    const families = new Set<Family>();
    for (const r of [...desired.routes, ...desired.rules, ...(applied?.routes ?? []), ...(applied?.rules ?? [])]) families.add(r.family);
    const routes: ObservedRoute[] = [];
    const rules: ObservedRule[] = [];
    for (const family of families) {
      const seen = await observeRouting(run, where, family);
      routes.push(...seen.routes);
      rules.push(...seen.rules);
    }
    const paths = [...new Set([...desired.sysctls.map((s) => s.path), ...(applied?.sysctls ?? []).map((s) => s.path)])];
    return {
      pod: await observeLinks(run, where),
      host: hostView.podnetLinks,
      hostLinkNames: hostView.names,
      routes,
      rules,
      sysctls: await run.readSysctls(where, paths),
      qdiscs: hostView.qdiscs,
    };
  }

  /** One sandbox's part of a pass: observe, plan, apply; a failure is reported, the pass goes on. */
  private async reconcileSandbox(work: SandboxWork, hostView: HostView): Promise<void> {
    const { log } = this.opts;
    const { record, identity, desired, problems } = work;
    const report: SandboxReport = {
      containerId: record.containerId,
      namespace: identity.namespace,
      name: identity.name,
      netns: record.netns,
      desired,
      applied: this.applied.get(record.containerId),
      problems: [...problems],
      lastSteps: [],
    };
    this.reports.set(record.containerId, report);
    const pod = `${identity.namespace}/${identity.name}`;
    try {
      const observed = await this.observe(record, desired, report.applied, hostView);
      const planned = plan({ containerId: record.containerId, netns: record.netns, desired, observed, applied: report.applied });
      report.problems.push(...planned.problems);
      report.lastSteps = planned.steps;
      if (planned.steps.length === 0 && sameApplied(report.applied, planned.next)) return;
      const before = report.applied;
      const result = await execute(this.opts.run, this.opts.stateDir, record.containerId, planned.steps, (pass) => this.commit(before, { ...planned.next, pass }));
      if (result.error) throw result.error;
      report.applied = this.applied.get(record.containerId);
      // Level-triggered: what had to wait for this pass's changes gets the next pass at once.
      if (planned.deferred) void this.passes();
      if (planned.steps.length > 0) log.info('applied', { pod, steps: planned.steps.length });
    } catch (err) {
      const e: PodnetError = toPodnetError(err);
      report.lastError = e.message;
      log.warn('reconcile failed; what this pass took was undone', { pod, error: e.message });
    }
  }

  /** Names, link specs and addresses of the desired attachments; addresses from the node's IPAM. */
  private resolve(containerId: string, wanted: DesiredSandbox, addresses: 'allocate' | 'preview'): { desired: Resolved; problems: Problem[] } {
    const problems = [...wanted.problems];
    const attachments: ResolvedAttachment[] = [];
    for (const want of wanted.attachments) {
      try {
        attachments.push(this.resolveAttachment(containerId, want, addresses));
      } catch (err) {
        problems.push({ document: want.from, field: `attachment ${want.interface}`, reason: toPodnetError(err).message });
      }
    }
    const tuning = wanted.tuning.map((t) => ({ interface: t.interface, settings: t.settings }));
    return { desired: { attachments, tuning, routes: wanted.routes, rules: wanted.rules, sysctls: wanted.sysctls }, problems };
  }

  private resolveAttachment(containerId: string, want: DesiredAttachment, addresses: 'allocate' | 'preview'): ResolvedAttachment {
    const network = want.network;
    const spec = network.spec;
    const owner = `${containerId}/${want.interface}`;
    const allocations = spec.ipam
      ? this.opts.ipam[addresses](network.metadata.name, spec.ipam.ranges, owner, want.ips)
      : (want.ips ?? []).map((address) => ({ address }));
    const prefixOf = (cidr: string) => cidr.slice(cidr.indexOf('/'));
    let link: LinkSpec;
    switch (spec.type) {
      case 'bridge':
        link = {
          kind: 'bridge',
          bridge: bridgeNameOf(want),
          bridgeAddresses: spec.bridge?.gateway ? allocations.flatMap((a) => ('gateway' in a && a.gateway ? [`${a.gateway}${prefixOf(a.address)}`] : [])) : [],
        };
        break;
      case 'macvlan':
        link = { kind: 'macvlan', parent: spec.macvlan!.parent, mode: spec.macvlan!.mode ?? 'bridge' };
        break;
      case 'vlan':
        link = { kind: 'vlan', parent: spec.vlan!.parent, id: spec.vlan!.id };
        break;
      case 'vxlan': {
        const v = spec.vxlan!;
        link = { kind: 'vxlan', vni: v.vni, port: v.port ?? 4789, ...(v.remote ? { remote: v.remote } : {}), ...(v.group ? { group: v.group } : {}), ...(v.device ? { device: v.device } : {}) };
        break;
      }
    }
    return {
      interface: want.interface,
      network: network.metadata.name,
      link,
      hostIf: hostInterfaceName(containerId, want.interface),
      ifb: hostInterfaceName(containerId, want.interface, 'pnb'),
      ...(spec.mtu ? { mtu: spec.mtu } : {}),
      addresses: allocations.map((a) => a.address),
      ...(want.bandwidth ? { bandwidth: want.bandwidth } : {}),
    };
  }

  /** Records the new applied state and releases addresses no longer held. */
  private commit(before: AppliedState | undefined, after: AppliedState): void {
    this.applied.put(after);
    for (const was of before?.attachments ?? []) {
      if (!after.attachments.some((a) => a.interface === was.interface && a.network === was.network)) {
        this.opts.ipam.release(was.network, `${after.containerId}/${was.interface}`);
      }
    }
  }

  /** A sandbox that is gone: its pod ends went with its netns; host ends, ifbs and addresses go now. */
  private async forget(state: AppliedState, hostView: HostView): Promise<void> {
    const names = state.attachments.flatMap((a) => [a.hostIf, a.ifb]).filter((n): n is string => n !== undefined && hostView.links.has(n));
    const result = await this.opts.run.batch('host', 'ip', names.map((n) => `link del ${n}`));
    if (result.error) {
      this.opts.log.warn('could not remove the host ends of a gone sandbox; retrying next pass', { containerId: state.containerId, error: result.error.message });
      return;
    }
    for (const a of state.attachments) this.opts.ipam.release(a.network, `${state.containerId}/${a.interface}`);
    this.applied.remove(state.containerId);
    this.opts.log.info('took back a gone sandbox', { containerId: state.containerId, attachments: state.attachments.length });
  }

  /** Removes bridges podnet made that no attachment uses any more. */
  private async collectBridges(hostView: HostView): Promise<void> {
    const inUse = new Set(this.applied.all().flatMap((s) => s.attachments.flatMap((a) => (a.bridge ? [a.bridge] : []))));
    const known = this.applied.bridges();
    const unused = known.filter((b) => !inUse.has(b));
    if (unused.length === 0) return;
    const lines = unused.filter((b) => hostView.links.has(b)).map((b) => `link del ${b}`);
    const result = await this.opts.run.batch('host', 'ip', lines);
    if (result.error) {
      this.opts.log.warn('could not remove an unused bridge; retrying next pass', { error: result.error.message });
      return;
    }
    this.applied.setBridges(known.filter((b) => inUse.has(b)));
  }
}

/** Whether `b` records what `a` does; which pass wrote a record does not count. */
function sameApplied(a: AppliedState | undefined, b: AppliedState): boolean {
  if (a === undefined) return isEmptyApplied(b);
  const { pass: _a, ...left } = a;
  const { pass: _b, ...right } = b;
  return JSON.stringify(left) === JSON.stringify(right);
}
