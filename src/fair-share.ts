// One pass's share of the node for each namespace (issue 38): passes run one at a time, so a
// tenant whose pods' plugins are slow or many would otherwise set the pace for everyone: every
// such sandbox of its namespace in the pass, the others' waiting behind them, and a request that
// comes meanwhile waiting for the pass to end. A pass starts its sandboxes by namespace in turn,
// so another tenant's sandbox is among the first started; and of the sandboxes that run plugins
// (`costly`), each namespace takes at most `perNamespace` a pass, the rest left to the next pass,
// which follows at once. Sandboxes without plugins (ip and nft steps, milliseconds) are not
// capped: a resync of a node's every pod stays one pass. Pure.

/**
 * The sandboxes a pass takes now, by namespace in turn (the first of each namespace, then the
 * second of each, ...), at most `perNamespace` costly ones of a namespace; and those left for the
 * next pass.
 */
export function fairShare<T>(due: readonly T[], namespaceOf: (item: T) => string, costly: (item: T) => boolean, perNamespace: number): { now: T[]; later: T[] } {
  const byNamespace = new Map<string, T[]>();
  const later: T[] = [];
  const costs = new Map<string, number>();
  for (const item of due) {
    const namespace = namespaceOf(item);
    if (costly(item)) {
      const taken = costs.get(namespace) ?? 0;
      if (taken >= perNamespace) {
        later.push(item);
        continue;
      }
      costs.set(namespace, taken + 1);
    }
    const mine = byNamespace.get(namespace);
    if (mine) mine.push(item);
    else byNamespace.set(namespace, [item]);
  }
  const queues = [...byNamespace.values()];
  const now: T[] = [];
  for (let turn = 0; now.length < due.length - later.length; turn++) {
    for (const mine of queues) if (turn < mine.length) now.push(mine[turn]!);
  }
  return { now, later };
}
