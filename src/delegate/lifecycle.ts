// The lifecycle of delegated attachments (cni Networks, docs/adr/0011): for each live sandbox, DEL
// what is no longer asked for and ADD what is missing, CHECK on a resync; DEL for sandboxes that
// are gone; GC for every list at CNI 1.1. Every attachment has a durable record, written before
// its ADD and again with its result, so a crash at any point leaves something DEL can be given.
// Runs outside the planner: a plugin's ADD is not a step with an undo, and the plan of the same
// sandbox may tune or route through the interface it makes (so the sandbox room, daemon/sandbox.ts, runs this first).
import { PodnetError, toPodnetError } from '../errors.ts';
import { resultFor, runsCheck, runsGc, runsStatus, type CniResult, type DelegatedConfig } from '../model/cni-config.ts';
import type { DesiredSandbox, Problem } from '../model/desired.ts';
import type { ObservedLink, ResolvedDelegated } from '../model/state.ts';
import type { NamespaceSight } from '../netns/probe.ts';
import type { AttachmentRecord } from '../protocol/validate.ts';
import type { Logger } from '../log.ts';
import { retryWaitMs, type Clock } from '../retry.ts';
import type { PluginRunner } from './plugin.ts';
import { targetOf, type DelegatedRecord } from './store.ts';
import { fairShare } from '../fair-share.ts';
import { parseCniArgs } from '../protocol/cni-args.ts';
import { byCodeUnits } from '../order.ts';

/**
 * DELs tried for a delegated ADD that did not answer before podnet gives up on it. Its record is
 * then held: no ADD again for that interface until its config changes or it is no longer asked
 * for, so a plugin whose DEL cannot take back its failed ADD does not leak once per retry.
 */
export const maxFailedDels = 3;

/**
 * Plugin time a sandbox may spend in one pass (ADR 31): once spent, it starts no new ADD, DEL or
 * CHECK, and its next pass (at once) goes on. One slow call a pass, many fast ones: a tenant's
 * 32 attachments whose plugins take their timeout no longer hold a pass for 32 of them.
 */
export const pluginTimePerPassMs = 500;

/**
 * What a sync may spend: `ms` of plugin time, after which it starts no new ADD or CHECK, nor DEL
 * unless `takingBack` (what a refused generation made goes whole, ADR 17).
 */
export interface PluginBudget {
  ms: number;
  takingBack?: boolean;
}

/** Whether a record was made for this Network with this very config. */
const sameConfig = (d: ResolvedDelegated, r: DelegatedRecord) => d.network === r.network && JSON.stringify(d.config) === JSON.stringify(r.config);

/** A record of a failed ADD whose DEL podnet gave up on (see maxFailedDels). */
const isGivenUp = (r: DelegatedRecord) => r.result === undefined && (r.failedDels ?? 0) >= maxFailedDels;

/** The records of delegated attachments, durable (src/delegate/store.ts). */
export interface DelegatedRecords {
  all(): DelegatedRecord[];
  of(containerId: string): DelegatedRecord[];
  put(record: DelegatedRecord): void;
  remove(record: DelegatedRecord): void;
}

/** What the lifecycle runs of a list's plugins. */
export type DelegatedPlugins = Pick<PluginRunner, 'requirePlugins' | 'add' | 'del' | 'check' | 'gc' | 'status'>;

export interface DelegatedLifecycleOptions {
  records: DelegatedRecords;
  plugins: DelegatedPlugins;
  /** A probe of netns paths, made once per use: whether each is a network namespace now. */
  sight: () => (path: string, identity?: string) => NamespaceSight;
  /** A pod's links as they are now; rejects when its netns cannot be read. */
  podLinks: (netns: string) => Promise<ReadonlyMap<string, ObservedLink>>;
  /** Whether the runtime still has the sandbox on record (its DEL may come in during a pass). */
  recorded: (containerId: string) => boolean;
  clock: Clock;
  log: Logger;
}

/** One live sandbox, as a pass sees it. */
export interface DelegatedSandbox {
  /** The record a pass works from: the latest live ADD's. */
  record: AttachmentRecord;
  /** "namespace/name", for logs. */
  pod: string;
  /** The delegated attachments it should have, configs resolved. */
  desired: readonly ResolvedDelegated[];
  /** What the documents ask of it, before configs were resolved: who asked for which interface. */
  wanted: DesiredSandbox;
  /** The interfaces podnet tunes in it: their MAC differs from the result's, so CHECK is not run on them. */
  tuned: ReadonlySet<string>;
  /** The pod interfaces podnet's own links hold (applied): an ADD of one of their names waits for the plan to take that link back. */
  native?: ReadonlySet<string>;
  /** Interfaces whose ADD this pass tried already: not tried again in it. */
  tried?: ReadonlySet<string>;
}

export interface DelegatedSync {
  /** Whether a plugin ran ADD or DEL in the pod's netns (a kept view of it no longer holds). */
  changed: boolean;
  /** The first failure, for the sandbox's retry; the rest of the sandbox still applies. */
  failed?: PodnetError;
  /** Attachments that failed or are held, each naming who asked for it. */
  problems: Problem[];
  /**
   * Of `problems`, those of an attachment this pass could not make and left nothing of (a plugin
   * missing or not ready, an ADD that failed and whose DEL took it back): what refuses a config's
   * new generation whole (ADR 17). Not a held one: that hold is what stops its retries.
   */
  takenBack: Problem[];
  /** Interfaces whose ADD it tried and that failed. */
  tried: string[];
  /** An ADD waits for the plan to take back podnet's own link of its name: the sandbox's next pass makes it. */
  waiting?: boolean;
  /**
   * The pass's plugin time (pluginTimePerPassMs) was spent with ADDs or DELs left: the sandbox's
   * next pass goes on, and its plan waits for it (it may tune or route through what they make).
   */
  cut?: boolean;
  /** Plugin time this sync spent, in ms. */
  spentMs: number;
}

export class DelegatedLifecycle {
  private readonly opts: DelegatedLifecycleOptions;
  /** Gone sandboxes' DELs that failed: when each is tried again (the same backoff as a sandbox's). */
  private readonly delRetries = new Map<string, { failures: number; retryAt: number }>();
  /** Attachments (container@interface) kept after a failed CHECK, with what CHECK said: told once. */
  private readonly checkOverruled = new Map<string, string>();
  /** The interface each sandbox's last CHECK was of: a resync starts after it, so each is checked in turn. */
  private readonly checkedLast = new Map<string, string>();
  /** Attachments (container@interface) a CHECK found wrong, to be made again, also by a pass after it. */
  private readonly remakes = new Set<string>();
  /** Attachments whose last ADD or DEL failed: tried after the sandbox's others, so that one that hangs does not spend every pass's time. */
  private readonly failedLast = new Set<string>();

  constructor(opts: DelegatedLifecycleOptions) {
    this.opts = opts;
  }

  /** Every record of a sandbox, also those whose ADD has not answered: names it gave stay taken. */
  recordsOf(containerId: string): DelegatedRecord[] {
    return this.opts.records.of(containerId);
  }

  /**
   * Whether a sync would run a sandbox's plugins: CHECK on a resync, ADD or DEL when what it asks
   * of them is not what its records say was made (fair-share.ts counts these).
   */
  runsPlugins(containerId: string, desired: readonly ResolvedDelegated[], resync: boolean): boolean {
    const records = this.opts.records.of(containerId);
    if (resync && records.length > 0) return true;
    const made = records.filter((r) => r.result !== undefined);
    return made.length !== desired.length || desired.some((d) => !made.some((r) => r.interface === d.interface && sameConfig(d, r)));
  }

  /** The attachments of a sandbox that are there (their plugins' ADD answered), with their results. */
  attachedTo(containerId: string): DelegatedRecord[] {
    return this.opts.records.of(containerId).filter((r) => r.result !== undefined);
  }

  /** The pod interfaces a sandbox's plugins made (their ADD answered). */
  made(containerId: string): Set<string> {
    return new Set(this.attachedTo(containerId).map((r) => r.interface));
  }

  /**
   * A sandbox's delegated attachments: DEL for those no longer wanted (or wanted with another
   * config, or whose ADD a crash cut short, or, on a resync, that CHECK found wrong), then ADD for
   * those missing. A failed ADD is taken back with DEL at once and becomes a problem of the
   * attachment. A DEL that fails keeps its record, for the next pass. No new call starts once the
   * budget is spent: the ADDs and DELs left wait for the next pass (`cut`), and a resync's CHECKs
   * not run wait for the next resync, which starts where this one stopped.
   */
  async sync(sandbox: DelegatedSandbox, resync: boolean, budget: PluginBudget = { ms: pluginTimePerPassMs }): Promise<DelegatedSync> {
    const { records, plugins, log, clock } = this.opts;
    const began = clock();
    const mayCall = () => clock() - began < budget.ms;
    const { record, desired, pod } = sandbox;
    const cid = record.containerId;
    const out: DelegatedSync = { changed: false, problems: [], takenBack: [], tried: [], spentMs: 0 };
    const fail = (e: PodnetError) => (out.failed ??= e);
    const tell = (want: { interface: string; network: string }, reason: string): Problem => {
      const wantedBy = sandbox.wanted.attachments.find((a) => a.interface === want.interface);
      const problem = { document: wantedBy?.from ?? `Network ${want.network}`, field: wantedBy?.field ?? 'spec.cni', reason };
      out.problems.push(problem);
      return problem;
    };
    const heldReason = (r: DelegatedRecord) => `${r.addError ?? 'its ADD did not answer'}; its DEL failed ${maxFailedDels} times, so the Network's plugins are not run for this pod again until the Network's config changes`;
    const held = (r: DelegatedRecord) => tell(r, heldReason(r));
    const wanted = (r: DelegatedRecord) => desired.some((d) => d.interface === r.interface && sameConfig(d, r));
    /**
     * A hold is the pod's and the Network's, whatever the interface: renaming the attachment must
     * not start the leak again (an ADD that fails, DELs that fail, a hold) at the tenant's pace.
     */
    const holdOn = (d: ResolvedDelegated) => records.of(cid).find((r) => isGivenUp(r) && sameConfig(d, r));
    for (const had of this.inTurn(cid)) {
      if (isGivenUp(had)) {
        // Held while its Network is asked for the pod as it was; once not, it goes without a DEL (three failed already).
        if (wanted(had)) held(had);
        else if (!desired.some((d) => sameConfig(d, had))) {
          records.remove(had);
          out.changed = true;
        }
        continue;
      }
      const key = `${cid}@${had.interface}`;
      if (had.result && wanted(had) && !this.remakes.has(key)) {
        if (!resync || !mayCall() || !(await this.checkFails(had, had.result, sandbox))) continue;
        this.remakes.add(key);
      }
      // Still asked, but its config cannot be had now (a NetworkAttachmentDefinition gone or broken):
      // what is there stays; only a config that changed takes it down.
      const asked = sandbox.wanted.attachments.some((a) => a.interface === had.interface && a.network.metadata.name === had.network);
      if (had.result && asked && !desired.some((d) => d.interface === had.interface)) continue;
      if (!budget.takingBack && !mayCall()) {
        out.cut = true;
        continue;
      }
      try {
        await plugins.del(had.config, targetOf(had, true), had.result);
      } catch (err) {
        const e = toPodnetError(err);
        this.failedLast.add(key);
        const givenUp = this.delDidNotTakeBack(had, e);
        if (!givenUp) fail(e);
        // A failed ADD still asked for stays told while its DEL is tried again, and once held.
        if (had.result === undefined && wanted(had)) {
          if (givenUp) held(had);
          else tell(had, `${had.addError ?? 'its ADD did not answer'}; its DEL failed too (${e.message}) and is tried again`);
        }
        continue;
      }
      records.remove(had);
      this.remakes.delete(key);
      this.failedLast.delete(key);
      out.changed = true;
      log.info("detached through the Network's plugins", { pod, network: had.network, interface: had.interface });
    }
    const args = cniArgsOf(record);
    let podLinks: Promise<ReadonlyMap<string, ObservedLink>> | undefined;
    for (const want of this.lastFailedLast(cid, desired)) {
      if (records.of(cid).some((r) => r.interface === want.interface) || sandbox.tried?.has(want.interface)) continue;
      const hold = holdOn(want);
      if (hold) {
        tell(want, `${heldReason(hold)} (held as ${hold.interface})`);
        continue;
      }
      // A link of podnet's own by that name (an edit moved the interface to a cni Network): the plan takes it back first.
      if (sandbox.native?.has(want.interface)) {
        out.waiting = true;
        continue;
      }
      // The runtime's DEL may have come in during this pass: nothing new for a sandbox that is going
      // (its DEL waits for the delegated records to be gone, and the next pass takes back the rest).
      if (!this.opts.recorded(cid)) break;
      if (!mayCall()) {
        out.cut = true;
        break;
      }
      // An interface the pod has that no record gives this attachment is someone else's (Multus's
      // net1, an admin's): its plugin's ADD would fail on the name, and the DEL after it delete it.
      try {
        podLinks ??= this.opts.podLinks(record.netns);
        if ((await podLinks).has(want.interface)) {
          out.takenBack.push(tell(want, `${want.interface} already exists in the pod and podnet did not make it`));
          continue;
        }
      } catch (err) {
        const e = toPodnetError(err);
        tell(want, `the pod's interfaces cannot be read, so its plugins are not run: ${e.message}`);
        fail(e);
        continue;
      }
      const attempt: DelegatedRecord = { containerId: cid, interface: want.interface, network: want.network, config: want.config, netns: record.netns, ...(record.netnsId ? { netnsId: record.netnsId } : {}), args };
      try {
        // Before the record and the ADD: a list with a missing plugin, or one whose plugins say
        // they are not ready (STATUS, 1.1), is not started at all.
        plugins.requirePlugins(want.config);
        if (runsStatus(want.config)) await plugins.status(want.config);
      } catch (err) {
        const e = toPodnetError(err);
        out.takenBack.push(tell(want, e.message));
        out.tried.push(want.interface);
        fail(e);
        continue;
      }
      records.put(attempt);
      out.changed = true;
      try {
        records.put({ ...attempt, result: await plugins.add(want.config, targetOf(attempt, true)) });
        this.failedLast.delete(`${cid}@${want.interface}`);
        log.info("attached through the Network's plugins", { pod, network: want.network, interface: want.interface });
      } catch (err) {
        const e = toPodnetError(err);
        this.failedLast.add(`${cid}@${want.interface}`);
        const problem = tell(want, e.message);
        out.tried.push(want.interface);
        fail(e);
        // What the failed ADD left: the spec has DEL clean up after it.
        const failedAdd = { ...attempt, addError: e.message };
        await plugins.del(want.config, targetOf(failedAdd, true), undefined).then(
          () => {
            records.remove(failedAdd);
            out.takenBack.push(problem);
          },
          (undo: unknown) => this.delDidNotTakeBack(failedAdd, undo),
        );
      }
    }
    out.spentMs = clock() - began;
    return out;
  }

  /**
   * On a resync, whether CHECK says an attachment is no longer as its plugins made it, so that it
   * is made again. Not for an interface podnet tunes (its MAC would differ from the result's),
   * nor on a failure that says to try again later (11, or no answer in time).
   */
  private async checkFails(had: DelegatedRecord, result: CniResult, sandbox: DelegatedSandbox): Promise<boolean> {
    if (!runsCheck(had.config) || sandbox.tuned.has(had.interface)) return false;
    this.checkedLast.set(had.containerId, had.interface);
    try {
      await this.opts.plugins.check(had.config, targetOf(had, true), result);
      return false;
    } catch (err) {
      const e = toPodnetError(err);
      if (e.code === 'TRY_AGAIN_LATER' || e.details === '11') return false;
      const fields = { pod: sandbox.pod, network: had.network, interface: had.interface, error: e.message };
      // A CHECK can fail on what is not the pod's: the reference bridge compares the bridge's
      // MAC, which follows its ports when the plugin did not set one. The pod's interface as the
      // result made it is what a tenant has; remaking it would change its address for nothing.
      if (await this.podInterfaceAsMade(had)) {
        const key = `${had.containerId}@${had.interface}`;
        if (this.checkOverruled.get(key) !== e.message) this.opts.log.warn("CHECK failed, but the pod's interface is as the plugins made it; kept", fields);
        this.checkOverruled.set(key, e.message);
        return false;
      }
      this.opts.log.warn('CHECK failed; attaching again', fields);
      return true;
    }
  }

  /** A sandbox's records by interface, starting after the one its last CHECK was of; those whose last DEL failed last. */
  private inTurn(containerId: string): DelegatedRecord[] {
    const sorted = [...this.opts.records.of(containerId)].sort((a, b) => byCodeUnits(a.interface, b.interface));
    const last = this.checkedLast.get(containerId);
    const next = last === undefined ? 0 : sorted.findIndex((r) => r.interface > last);
    return this.lastFailedLast(containerId, next <= 0 ? sorted : [...sorted.slice(next), ...sorted.slice(0, next)]);
  }

  /** `items` in their order, those whose last ADD or DEL failed moved to the end. */
  private lastFailedLast<T extends { interface: string }>(containerId: string, items: readonly T[]): T[] {
    const failed = (item: T) => this.failedLast.has(`${containerId}@${item.interface}`);
    return [...items.filter((item) => !failed(item)), ...items.filter(failed)];
  }

  /**
   * Whether the pod's interface of a delegated attachment is as its result says: there, with the
   * result's MAC and addresses. A netns that cannot be read counts as yes: a look that failed is
   * no reason to take an attachment down.
   */
  private async podInterfaceAsMade(record: DelegatedRecord): Promise<boolean> {
    const links = await this.opts.podLinks(record.netns).catch(() => undefined);
    if (!links) return true;
    const link = links.get(record.interface);
    if (!link) return false;
    const made = resultFor(record.result, record.interface);
    if (made.mac && made.mac.toLowerCase() !== link.mac?.toLowerCase()) return false;
    return made.ips.every((address) => link.addresses.includes(address));
  }

  /**
   * A DEL failed. For an ADD that answered, its record stays and DEL is tried again next pass (the
   * attachment is there). For one that did not, a few tries, then podnet gives up and holds the
   * record (isGivenUp): such a DEL often fails for the same reason the ADD did, and an ADD tried
   * again would leave as much behind each time. Whether it gave up.
   */
  private delDidNotTakeBack(record: DelegatedRecord, err: unknown): boolean {
    const fields = { containerId: record.containerId, network: record.network, interface: record.interface, error: toPodnetError(err).message };
    const failedDels = record.result === undefined ? (record.failedDels ?? 0) + 1 : undefined;
    if (failedDels !== undefined) this.opts.records.put({ ...record, failedDels });
    if (failedDels === undefined || failedDels < maxFailedDels) {
      this.opts.log.warn('DEL failed; trying again next pass', fields);
      return false;
    }
    this.opts.log.warn('gave up taking back a failed ADD: DEL failed each time; what the plugins made of it, if anything, is left', fields);
    return true;
  }

  /**
   * The attachments of sandboxes that are gone: DEL, without the netns when it went with them.
   * Their namespaces in turn, within one pass's plugin time (pluginTimePerPassMs), so one
   * tenant's many deleted pods do not hold a pass for all their DELs. Whether some were left for
   * the next pass, which should follow at once.
   */
  async forgetGone(gone: (containerId: string) => boolean): Promise<boolean> {
    const { records, plugins, clock, log } = this.opts;
    const containerOf = (key: string) => key.slice(0, key.lastIndexOf('@'));
    for (const key of [...this.checkOverruled.keys()]) if (gone(containerOf(key))) this.checkOverruled.delete(key);
    for (const key of [...this.remakes]) if (gone(containerOf(key))) this.remakes.delete(key);
    for (const key of [...this.failedLast]) if (gone(containerOf(key))) this.failedLast.delete(key);
    for (const cid of [...this.checkedLast.keys()]) if (gone(cid)) this.checkedLast.delete(cid);
    const sight = this.opts.sight();
    const now = clock();
    let left = false;
    const { now: inTurn } = fairShare(
      records.all().filter((r) => gone(r.containerId)),
      (r) => parseCniArgs(r.args).get('K8S_POD_NAMESPACE') ?? '',
      () => false,
      0,
    );
    for (const record of inTurn) {
      if (isGivenUp(record)) {
        records.remove(record);
        continue;
      }
      // Its DEL gets the netns while it is there (host-device gives its device back from it).
      const netns = sight(record.netns, record.netnsId);
      if (netns === 'unsure') continue;
      // A DEL that keeps failing (its plugin hangs or is gone) must not hold up every pass.
      const key = `${record.containerId}@${record.interface}`;
      const retry = this.delRetries.get(key);
      if (retry && now < retry.retryAt) continue;
      if (clock() - now >= pluginTimePerPassMs) {
        left = true;
        continue;
      }
      try {
        await plugins.del(record.config, targetOf(record, netns === 'net'), record.result);
      } catch (err) {
        const failures = (retry?.failures ?? 0) + 1;
        if (this.delDidNotTakeBack(record, err)) {
          this.delRetries.delete(key);
          records.remove(record);
        } else this.delRetries.set(key, { failures, retryAt: clock() + retryWaitMs(failures) });
        continue;
      }
      this.delRetries.delete(key);
      records.remove(record);
      log.info("took back a gone sandbox's delegated attachment", { containerId: record.containerId, network: record.network, interface: record.interface });
    }
    return left;
  }

  /**
   * GC for each list at CNI 1.1 among `configs` (the current Networks') and the recorded ones: its
   * plugins drop what they hold for attachments podnet has no record of, the leftovers of a DEL
   * given up on or of state podnet lost. Every record of the network counts as valid, also one
   * whose ADD has not answered (GC must never take what an ADD may be making), but not one given
   * up on: what its failed ADD left is GC's to take.
   */
  async collect(configs: readonly DelegatedConfig[]): Promise<void> {
    const { records, plugins, log } = this.opts;
    const lists = new Map<string, DelegatedConfig>();
    for (const config of [...configs, ...records.all().map((r) => r.config)]) {
      if (runsGc(config)) lists.set(JSON.stringify(config), config);
    }
    for (const config of lists.values()) {
      const valid = records
        .all()
        .filter((r) => r.config.name === config.name && !isGivenUp(r))
        .map((r) => ({ containerID: r.containerId, ifname: r.interface }));
      await plugins.gc(config, valid).catch((err: unknown) => log.warn('GC of a delegated network failed; trying again at the next resync', { network: config.name, error: toPodnetError(err).message }));
    }
  }
}

/** The CNI_ARGS a delegated plugin gets: the pod's identity as a kubelet passes it. */
export function cniArgsOf(record: AttachmentRecord): string {
  const { namespace, name, uid } = record.pod;
  const pairs = [
    'IgnoreUnknown=1',
    ...(namespace ? [`K8S_POD_NAMESPACE=${namespace}`] : []),
    ...(name ? [`K8S_POD_NAME=${name}`] : []),
    `K8S_POD_INFRA_CONTAINER_ID=${record.containerId}`,
    ...(uid ? [`K8S_POD_UID=${uid}`] : []),
  ];
  return pairs.join(';');
}
