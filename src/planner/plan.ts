// The planner: a pure function of (desired, observed, applied) to ordered steps. Nothing here
// runs a command or reads a file; the executor runs the steps, `podnet diff` prints them.
// Order: take back what is no longer wanted (freeing names), then attach, then tune.
import type { Problem } from '../model/desired.ts';
import { linkSettingNames, type AppliedState, type LinkSettingName, type LinkSettings, type Observed, type ObservedLink, type ResolvedAttachment, type ResolvedTuning, type Step } from '../model/state.ts';
import type { Where } from '../netns/ip.ts';

export interface PlanInput {
  containerId: string;
  netns: string;
  attachments: readonly ResolvedAttachment[];
  tuning: readonly ResolvedTuning[];
  observed: Observed;
  applied: AppliedState | undefined;
  /** How a command inside the pod's netns names the host's: the daemon's pid (ip's `netns PID`). */
  hostNetnsRef: string;
}

export interface Plan {
  steps: Step[];
  /** Part of the desired state waits for a next pass (tuning of an interface this pass makes). */
  deferred: boolean;
  /** What podnet will have applied once every step succeeded. */
  next: AppliedState;
  problems: Problem[];
}

const host: Where = 'host';

export function plan(input: PlanInput): Plan {
  const pod: Where = { netns: input.netns };
  const steps: Step[] = [];
  const problems: Problem[] = [];
  const applied = input.applied ?? { containerId: input.containerId, netns: input.netns, attachments: [], tuning: [] };
  const { observed } = input;
  const next: AppliedState = { containerId: input.containerId, netns: input.netns, attachments: [], tuning: [] };
  const wanted = new Map(input.attachments.map((a) => [a.interface, a]));
  const tuned = new Map(input.tuning.map((t) => [t.interface, t]));

  // 1. Take back attachments and tuning no longer wanted.
  for (const was of applied.attachments) {
    if (wanted.get(was.interface)?.network === was.network) continue;
    if (observed.host.has(was.hostIf)) steps.push({ where: host, line: `link del ${was.hostIf}` });
    else if (observed.pod.has(was.interface)) steps.push({ where: pod, line: `link del ${was.interface}` });
  }
  for (const was of applied.tuning) {
    const link = observed.pod.get(was.interface);
    if (!tuned.has(was.interface) && link) steps.push(...restore(pod, link, was.original, linkSettingNames));
  }

  // 2. Attach.
  const bridgesReady = new Set<string>();
  for (const want of input.attachments) {
    const mine = applied.attachments.find((a) => a.interface === want.interface && a.network === want.network);
    const existing = observed.pod.get(want.interface);
    if (existing && !mine) {
      problems.push({ document: `pod interface ${want.interface}`, field: 'interface', reason: `${want.interface} already exists in the pod and podnet did not make it` });
      continue;
    }
    if (!bridgesReady.has(want.bridge)) {
      steps.push(...bridgeSteps(want, observed));
      bridgesReady.add(want.bridge);
    }
    const hostEnd = observed.host.get(want.hostIf);
    const fresh = !existing || !hostEnd;
    if (fresh) {
      // A pod end without its host end (or the reverse) is drift: make the pair anew.
      if (existing) steps.push({ where: pod, line: `link del ${want.interface}` });
      const mtu = want.mtu ? ` mtu ${want.mtu}` : '';
      steps.push({
        where: pod,
        line: `link add ${want.interface}${mtu} type veth peer name ${want.hostIf}${mtu} netns ${input.hostNetnsRef}`,
        undo: { where: pod, line: `link del ${want.interface}` },
      });
    }
    if (fresh || hostEnd?.master !== want.bridge || !hostEnd.up) steps.push({ where: host, line: `link set ${want.hostIf} master ${want.bridge} up` });
    if (fresh || !existing?.up) steps.push({ where: pod, line: `link set ${want.interface} up` });
    const present = new Set(fresh ? [] : existing?.addresses);
    for (const address of want.addresses) {
      if (!present.has(address)) {
        steps.push({ where: pod, line: `addr add ${address} dev ${want.interface}`, undo: { where: pod, line: `addr del ${address} dev ${want.interface}` } });
      }
    }
    for (const address of mine?.addresses ?? []) {
      if (!want.addresses.includes(address) && present.has(address)) steps.push({ where: pod, line: `addr del ${address} dev ${want.interface}` });
    }
    next.attachments.push({ interface: want.interface, network: want.network, bridge: want.bridge, hostIf: want.hostIf, addresses: [...want.addresses] });
  }

  // 3. Tune; each original value is the one before podnet's first change, kept across passes.
  let deferred = false;
  for (const want of input.tuning) {
    const link = observed.pod.get(want.interface);
    if (!link) {
      if (wanted.has(want.interface)) deferred = true; // made in this pass: tuned in the next
      else problems.push({ document: `pod interface ${want.interface}`, field: 'interfaces', reason: `the pod has no interface ${want.interface}` });
      continue;
    }
    const before = applied.tuning.find((t) => t.interface === want.interface)?.original ?? {};
    const original: LinkSettings = {};
    for (const setting of linkSettingNames) {
      const value = want.settings[setting];
      if (value === undefined) continue;
      const current = observedSetting(link, setting);
      (original as Record<string, unknown>)[setting] = before[setting] ?? current;
      if (current !== value) steps.push({ where: pod, line: settingLine(want.interface, setting, value), undo: { where: pod, line: settingLine(want.interface, setting, current) } });
    }
    // Settings asked for before but not now go back to their original.
    steps.push(...restore(pod, link, before, linkSettingNames.filter((s) => want.settings[s] === undefined)));
    next.tuning.push({ interface: want.interface, original });
  }
  return { steps, next, problems, deferred };
}

function observedSetting(link: ObservedLink, setting: LinkSettingName): LinkSettings[LinkSettingName] {
  return link[setting];
}

/** The ip line that sets one setting; every value passed the schema (numbers, a MAC, booleans). */
function settingLine(dev: string, setting: LinkSettingName, value: LinkSettings[LinkSettingName]): string {
  switch (setting) {
    case 'mtu':
      return `link set ${dev} mtu ${value}`;
    case 'txqueuelen':
      return `link set ${dev} txqueuelen ${value}`;
    case 'mac':
      return `link set ${dev} address ${value}`;
    case 'up':
      return `link set ${dev} ${value ? 'up' : 'down'}`;
    case 'promisc':
      return `link set ${dev} promisc ${value ? 'on' : 'off'}`;
  }
}

/** Steps that put the `settings` of `link` back to `original`, where it recorded one. */
function restore(pod: Where, link: ObservedLink, original: LinkSettings, settings: readonly LinkSettingName[]): Step[] {
  const steps: Step[] = [];
  for (const setting of settings) {
    const value = original[setting];
    const current = observedSetting(link, setting);
    if (value === undefined || value === current) continue;
    steps.push({ where: pod, line: settingLine(link.name, setting, value), undo: { where: pod, line: settingLine(link.name, setting, current) } });
  }
  return steps;
}

function bridgeSteps(want: ResolvedAttachment, observed: Observed): Step[] {
  const steps: Step[] = [];
  const bridge = observed.host.get(want.bridge);
  if (!bridge) steps.push({ where: host, line: `link add name ${want.bridge} type bridge`, undo: { where: host, line: `link del ${want.bridge}` } });
  if (want.mtu && bridge?.mtu !== want.mtu) steps.push({ where: host, line: `link set ${want.bridge} mtu ${want.mtu}` });
  if (!bridge?.up) steps.push({ where: host, line: `link set ${want.bridge} up` });
  for (const address of want.bridgeAddresses) {
    if (!bridge?.addresses.includes(address)) {
      steps.push({ where: host, line: `addr add ${address} dev ${want.bridge}`, undo: { where: host, line: `addr del ${address} dev ${want.bridge}` } });
    }
  }
  return steps;
}
