// A Network's quota per namespace (spec.limits.attachmentsPerNamespace) across the pods of a
// node: its addresses come from node-local ranges, so a node is what one tenant could exhaust for
// the others; and the one attachment a node can have to a tunnel Network (its kind's onePerNode),
// per remote where each attachment chooses its own (two remotes are two tunnel endpoints).
// Counted before any address is taken. An attachment a pod already has keeps its place; new ones
// are counted after them, by pod and interface, so the same ones win every pass and a new pod
// never takes a running pod's attachment away; a tunnel attachment that chooses another remote is a
// new one, so it never takes the endpoint another pod has. Pure.
import type { DesiredAttachment } from './desired.ts';
import { kindOf } from './kinds/index.ts';
import { canonicalRemote } from './kinds/kind.ts';
import { addRefusal, type Refusal } from './refusal.ts';
import { byCodeUnits } from '../order.ts';

export interface QuotaClaims {
  containerId: string;
  namespace: string;
  attachments: readonly DesiredAttachment[];
  /** What it has attached already, as "network/interface", with the tunnel remote its attachment chose (AppliedAttachment.remote), where it chose one. */
  has: ReadonlyMap<string, string | undefined>;
}

/** Whether the sandbox has the attachment already; one whose remote it chooses, only to the remote its link goes to (whatever else of its Network changed). */
function holds(sandbox: QuotaClaims, attachment: DesiredAttachment): boolean {
  const key = `${attachment.network.metadata.name}/${attachment.interface}`;
  if (!sandbox.has.has(key)) return false;
  const had = sandbox.has.get(key);
  return attachment.remote === undefined || had === undefined || had === canonicalRemote(attachment.remote);
}

/** Per sandbox, its attachments beyond their Network's quota or its one per node, each with the problem to tell. */
export function overQuota(sandboxes: readonly QuotaClaims[]): Map<string, Refusal[]> {
  const claims = sandboxes.flatMap((s) =>
    s.attachments
      .filter((a) => a.network.spec.limits?.attachmentsPerNamespace !== undefined || kindOf(a.network).onePerNode !== undefined)
      .map((a) => ({ sandbox: s, attachment: a, held: holds(s, a) })),
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
          : `Network ${network} is a ${attachment.network.spec.type} tunnel, and a node has one attachment to it per remote: ${onePerNode}; another pod on this node has it to the same remote (${remote})`
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

