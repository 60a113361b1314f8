// A Network's quota per namespace (spec.limits.attachmentsPerNamespace) across the pods of a
// node: its addresses come from node-local ranges, so a node is what one tenant could exhaust for
// the others; and the one attachment a node can have to a tunnel Network (its kind's onePerNode),
// per remote where each attachment chooses its own (two remotes are two tunnel endpoints).
// Counted before any address is taken. An attachment a pod already has keeps its place; new ones
// are counted after them, by pod and interface, so the same ones win every pass and a new pod
// never takes a running pod's attachment away. Pure.
import type { DesiredAttachment } from './desired.ts';
import { kindOf } from './kinds/index.ts';
import { canonicalRemote } from './kinds/kind.ts';
import { addRefusal, type Refusal } from './refusal.ts';
import { byCodeUnits } from '../order.ts';

export interface QuotaClaims {
  containerId: string;
  namespace: string;
  attachments: readonly DesiredAttachment[];
  /** What it has attached already, as "network/interface". */
  has: ReadonlySet<string>;
}

/** Per sandbox, its attachments beyond their Network's quota or its one per node, each with the problem to tell. */
export function overQuota(sandboxes: readonly QuotaClaims[]): Map<string, Refusal[]> {
  const claims = sandboxes.flatMap((s) =>
    s.attachments
      .filter((a) => a.network.spec.limits?.attachmentsPerNamespace !== undefined || kindOf(a.network).onePerNode !== undefined)
      .map((a) => ({ sandbox: s, attachment: a, held: s.has.has(`${a.network.metadata.name}/${a.interface}`) })),
  );
  claims.sort((x, y) => Number(y.held) - Number(x.held) || byCodeUnits(x.sandbox.containerId, y.sandbox.containerId) || byCodeUnits(x.attachment.interface, y.attachment.interface));
  const counted = new Map<string, number>();
  const refused = new Map<string, Refusal[]>();
  const onNode = new Set<string>();
  for (const { sandbox, attachment } of claims) {
    const network = attachment.network.metadata.name;
    const onePerNode = kindOf(attachment.network).onePerNode;
    const limit = attachment.network.spec.limits?.attachmentsPerNamespace;
    const key = `${network}\n${sandbox.namespace}`;
    const count = counted.get(key) ?? 0;
    const remote = attachment.remote === undefined ? undefined : canonicalRemote(attachment.remote);
    const endpoint = `${network}\n${remote ?? ''}`;
    // Whose the tunnel is, and other tenants' counts, are not told: they are not the asker's to learn.
    const reason =
      onePerNode !== undefined && onNode.has(endpoint)
        ? remote === undefined
          ? `Network ${network} is a ${attachment.network.spec.type} tunnel, and a node has one attachment to it: ${onePerNode}; another pod on this node has it`
          : `Network ${network} is a ${attachment.network.spec.type} tunnel, and a node has one attachment to it per remote: ${onePerNode}; another pod on this node has it to ${remote}`
        : limit !== undefined && count >= limit
          ? `Network ${network} allows ${limit} attachment${limit === 1 ? '' : 's'} per namespace on a node (its spec.limits.attachmentsPerNamespace), and namespace ${sandbox.namespace} has ${limit} here already`
          : undefined;
    if (reason !== undefined) {
      addRefusal(refused, sandbox.containerId, { interface: attachment.interface, problem: { document: attachment.from, field: attachment.field, reason } });
      continue;
    }
    counted.set(key, count + 1);
    if (onePerNode !== undefined) onNode.add(endpoint);
  }
  return refused;
}

