// The host as podnet's passes see it and change it: the view the last pass left, reads of the
// host, the bridges a pass needs and podnet's port security table, made once for every sandbox
// before any of them, and the bridges nothing uses any more. Only podnet changes its own host
// links, so a pass that is not a resync starts from the view the last one left instead of reading
// the host again (docs/adr/0007); a resync reads it anew and repairs drift.
import type { Logger } from '../log.ts';
import { hostBridgeOf } from '../model/kinds/index.ts';
import { portSecurityTable } from '../model/port-security.ts';
import { host as onHost, type Step } from '../model/step.ts';
import type { ObservedLink, ResolvedAttachment } from '../model/state.ts';
import type { NetnsObserver } from '../netns/observe.ts';
import { planBridges } from '../planner/bridges.ts';
import { planUnusedBridges } from '../planner/leftovers.ts';
import type { AppliedStore } from '../registry/applied.ts';
import type { PassSteps } from './pass-steps.ts';
import { readHost, readsEnough, type HostReads, type HostView, type TableSeen } from './views.ts';

/** The journal of a pass's host steps (bridges); '@' is in no container id. */
export const hostJournalKey = '@host';

export interface HostRoomOptions {
  observe: NetnsObserver;
  /** The sandboxes' applied attachments (what the host must keep reading for), and the bridges podnet made. */
  applied: Pick<AppliedStore, 'all' | 'bridges' | 'setBridges'>;
  steps: PassSteps;
  log: Logger;
}

export class HostRoom {
  private readonly opts: HostRoomOptions;
  /** The host as the last pass left it: read after that pass's host changes, or the view it used when it made none. */
  private cache: HostView | undefined;
  /** The latest read of the host, whoever made it: what node admission judges MACs and addresses against. */
  private latest: HostView | undefined;
  /** The port security table as a read of the host last found it (read); undefined until one has. */
  private tableSeen: TableSeen | undefined;
  /** Whether the pass under way changed a host link (its view is then stale for the next one). */
  private changed = false;

  constructor(opts: HostRoomOptions) {
    this.opts = opts;
  }

  /** The port security table as a read last found it, for `podnet status`; undefined until one has. */
  portSecuritySeen(): TableSeen | undefined {
    return this.tableSeen;
  }

  /**
   * The node's links as the latest read found them: no pod may take their MACs or addresses. Read
   * now when nothing has been read yet (a daemon's first pass), so that no pod is given one of them
   * to have it taken back at the next pass.
   */
  async links(): Promise<ObservedLink[]> {
    // A read that fails leaves it to the pass's own read, which tells why.
    this.latest ??= await readHost(this.opts.observe, { shaped: false, secured: false }).catch(() => undefined);
    return [...(this.latest?.links.values() ?? [])];
  }

  /** Tells the room that the pass under way changed a host link: the next pass reads the host. */
  changedByPass(steps: readonly Step[]): void {
    if (steps.some((step) => step.where === 'host')) this.changed = true;
  }

  /** Tells the room the pass under way may have changed host links it cannot name (a plan made again after a failure). */
  stale(): void {
    this.changed = true;
  }

  /**
   * The host as the sandboxes of a pass that want `attachments` see it: the last pass's view
   * when there is one that holds what they need (never for a resync), else read; read again
   * after making the bridges and the port security table they need. Until the pass ends well
   * (endPass), no view is kept: a pass cut short by an error leaves none behind.
   */
  forPass(attachments: readonly ResolvedAttachment[], resync: boolean): Promise<HostView> {
    const cached = resync ? undefined : this.cache;
    this.cache = undefined;
    return this.withBridges(attachments, cached);
  }

  /** Keeps the host as the pass leaves it for the next: `view`, or read again when the pass changed a host link. */
  async endPass(view: HostView, attachments: readonly ResolvedAttachment[]): Promise<void> {
    this.cache = this.changed ? await this.read(attachments).catch(() => undefined) : view;
    this.changed = false;
  }

  /** The host as it is now; a read that covers the port security table is kept for `podnet status` (tableSeen), a failed one too. */
  async read(attachments: readonly ResolvedAttachment[]): Promise<HostView> {
    const reads = this.readsFor(attachments);
    if (!reads.secured) return this.seen(await readHost(this.opts.observe, reads));
    // The secured ports made before the read starts: those it can tell filtered or not.
    const judged = new Set(this.opts.applied.all().flatMap((s) => s.attachments.flatMap((a) => (a.portSecurity && a.hostIf ? [a.hostIf] : []))));
    try {
      const view = await readHost(this.opts.observe, reads);
      this.tableSeen = { ...(view.securedPorts ? { filtered: view.securedPorts } : {}), judged };
      return this.seen(view);
    } catch (err) {
      this.tableSeen = { judged };
      throw err;
    }
  }

  /** Removes bridges podnet made that no attachment uses any more, through a journaled pass. */
  async collectBridges(view: HostView): Promise<void> {
    const { applied } = this.opts;
    const made = applied.bridges();
    const { steps, keep } = planUnusedBridges(made, applied.all(), view.links);
    if (keep.length === made.length) return;
    this.changedByPass(steps);
    const result = await this.opts.steps.journaled(hostJournalKey, steps, (pass) => applied.setBridges(keep, pass));
    if (result.error) this.opts.log.warn('could not remove an unused bridge; retrying next pass', { error: result.error.message });
  }

  private seen(view: HostView): HostView {
    this.latest = view;
    return view;
  }

  /** What of the host a pass reads beyond its links: the qdiscs when any sandbox has or wants a rate limit, the port security table when any has or wants a secured port. */
  private readsFor(wanted: readonly ResolvedAttachment[]): HostReads {
    const applied = this.opts.applied.all().flatMap((s) => s.attachments);
    return {
      shaped: wanted.some((a) => a.bandwidth) || applied.some((a) => a.bandwidth),
      secured: wanted.some((a) => hostBridgeOf(a.link)?.portSecurity === true) || applied.some((a) => a.portSecurity),
    };
  }

  private async withBridges(attachments: readonly ResolvedAttachment[], cached: HostView | undefined): Promise<HostView> {
    const view = cached && readsEnough(cached, this.readsFor(attachments)) ? cached : await this.read(attachments);
    const { steps, created, table } = planBridges(attachments, view.links, view.securedPorts);
    if (steps.length === 0 && table.length === 0) return view;
    this.changed = true;
    // The table is put whole when missing, with no journal: it has nothing to take back (ADR 16).
    // A failure leaves the secured ports' passes to fail, saying why (planLinks); the bridges and
    // every other pod go on.
    const made = table.length > 0 ? await this.opts.steps.unjournaled(onHost, 'nft', table) : undefined;
    if (made?.error) this.opts.log.warn('could not make the port security table; pods with secured ports wait for it', { error: made.error.message });
    if (steps.length > 0) {
      const { applied } = this.opts;
      const result = await this.opts.steps.journaled(hostJournalKey, steps, (pass) => applied.setBridges([...applied.bridges(), ...created], pass));
      if (result.error) this.opts.log.warn('could not make the bridges this pass needs; what it took was undone', { error: result.error.message });
    }
    const after = await this.read(attachments);
    if (!made || after.securedPorts !== undefined) return after;
    // nft took the ruleset, and yet the table does not read whole (a chain of that name that is not
    // podnet's, an nft that lists the rules otherwise): said, as no port is secured in it, and
    // every pass puts the table again.
    if (!made.error && after.portSecurityUnavailable === undefined) this.opts.log.warn('the port security table was put but does not read whole; no port is secured in it', { table: portSecurityTable });
    const why = made.error ? `nft could not put ${portSecurityTable}: ${made.error.message}` : (after.portSecurityUnavailable ?? `${portSecurityTable} was put but does not read whole`);
    return { ...after, portSecurityUnavailable: why };
  }
}
