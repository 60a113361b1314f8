// A PodNetworkConfig applies to a pod whole, or the generation it had stays (docs/adr/0017): the
// merge of the documents (desiredFor) made again without the configs that have a problem for the
// pod, until none has. Pure.
import type { AppliedConfig, Network, PodNetworkConfig, Problem } from '../protocol/validate.ts';
import { desiredFor, defaultLimits, type DesiredSandbox, type EarlierAttachment, type NodeLimits } from './desired.ts';
import { documentName, selectingConfigs, type SandboxIdentity } from './identity.ts';
import type { RefusedGeneration } from './refusal.ts';
import { canonicalJson } from './canonical-json.ts';

/**
 * What the documents want for a pod, each PodNetworkConfig whole or not at all (docs/adr/0017): a
 * config with any problem for this pod gives it nothing of that generation; the generation the pod
 * last had whole (`had`) stays instead, while it can still be had whole, and otherwise nothing of
 * the config does. In a conflict with a config the pod does not have yet, the one it has keeps its
 * settings. `whole` is the generation of each config the pod gets: what its applied state keeps.
 * `refusedByNode`: generations the node refused after an earlier call (a quota, an address or MAC
 * another pod has): each is failing, as one with a problem of its own is.
 */
export function desiredWhole(
  identity: SandboxIdentity,
  networks: ReadonlyMap<string, Network>,
  configs: readonly PodNetworkConfig[],
  earlier: readonly EarlierAttachment[] = [],
  limits: NodeLimits = defaultLimits,
  had: readonly AppliedConfig[] = [],
  refusedByNode: readonly RefusedGeneration[] = [],
): DesiredSandbox & { whole: AppliedConfig[] } {
  const hadBy = new Map(had.map((c) => [c.name, canonicalJson(c.spec)]));
  // Only the configs that select the pod: each round words every one of them as JSON, and a node's
  // configs are many (every pod's sandboxes against every config was 2.5 x the pods, 5 x the time).
  const current = selectingConfigs(identity, configs);
  const told: Problem[] = [];
  const fellBack = new Set<string>();
  /** Every config that selects the pod, refused or not: each says what it gives the pod, or why not. */
  let selecting: string[] | undefined;
  // Each round falls back or drops at least one config, each at most once: at most two rounds a config.
  for (;;) {
    // Has: the very generation it has. An edited config is new until it applies whole.
    const has = new Set(current.filter((c) => hadBy.get(documentName(c)) === canonicalJson(c.spec)).map(documentName));
    const wanted = desiredFor(identity, networks, current, earlier, limits, has);
    selecting ??= wanted.configs;
    const generation = new Map(current.map((c) => [documentName(c), generationOf(c.spec)]));
    const problemsOf = (name: string, conflictsToo: boolean) => [
      ...wanted.problems.filter((p) => p.document === name && (conflictsToo || !wanted.conflicts?.has(p))),
      ...refusedByNode.filter((r) => r.config === name && r.generation === generation.get(name)).map((r) => r.problem),
    ];
    // Configs with problems of their own go first: a conflict with one of them may be no conflict once it is gone.
    const own = wanted.configs.filter((name) => problemsOf(name, false).length > 0);
    const failing = own.length > 0 ? own : wanted.configs.filter((name) => problemsOf(name, true).length > 0);
    if (failing.length === 0) {
      const specOf = new Map(current.map((c) => [documentName(c), c.spec]));
      const whole = wanted.configs.map((name) => ({ name, spec: specOf.get(name)! }));
      return { ...wanted, configs: selecting, problems: [...told, ...wanted.problems], whole };
    }
    for (const name of failing) {
      told.push(...problemsOf(name, own.length === 0));
      const index = current.findIndex((c) => documentName(c) === name);
      const config = current[index]!;
      const before = had.find((c) => c.name === name)?.spec;
      if (before !== undefined && !fellBack.has(name) && canonicalJson(before) !== canonicalJson(config.spec)) {
        fellBack.add(name);
        current[index] = { ...config, spec: before };
        told.push({ document: name, field: 'spec', reason: 'this generation cannot be applied whole to the pod: the one it had before stays' });
      } else {
        current.splice(index, 1);
        told.push({ document: name, field: 'spec', reason: 'nothing of it applies to the pod until all of it can' });
      }
    }
  }
}

/**
 * The generations of configs a pod was to get anew (in `whole`, and not the very generation it has
 * in `had`) that `problems` name, once for each field they name: what a pass refuses whole
 * when it finds it cannot make a part of it (ADR 17), so that the pod keeps the generation it had
 * or gets nothing of the config. A generation the pod has already is never refused here: a part
 * of it that fails later is its own part's failure, retried.
 */
export function newGenerationsRefused(whole: readonly AppliedConfig[], had: readonly AppliedConfig[] | undefined, problems: readonly Problem[]): RefusedGeneration[] {
  return newGenerations(whole, had).flatMap((config) => {
    const generation = generationOf(config.spec);
    // Each field once: every part that failed is told, not only the first.
    const mine = problems.filter((p, i) => p.document === config.name && problems.findIndex((o) => o.document === p.document && o.field === p.field) === i);
    return mine.map((problem) => ({ config: config.name, generation, problem }));
  });
}

/** Whether `whole` holds a generation the pod does not have (`had`): only then can a pass refuse one. */
export function givesAnew(whole: readonly AppliedConfig[] | undefined, had: readonly AppliedConfig[] | undefined): boolean {
  return newGenerations(whole ?? [], had).length > 0;
}

/** The generations of `whole` that are not the very ones the pod has in `had`. */
function newGenerations(whole: readonly AppliedConfig[], had: readonly AppliedConfig[] | undefined): AppliedConfig[] {
  const hadBy = new Map((had ?? []).map((c) => [c.name, canonicalJson(c.spec)]));
  return whole.filter((c) => hadBy.get(c.name) !== canonicalJson(c.spec));
}

/** What names a config's generation: its spec, whatever order its keys came in. */
export function generationOf(spec: PodNetworkConfig['spec']): string {
  return canonicalJson(spec);
}

