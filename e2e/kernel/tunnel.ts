// What the tunnel tests of the VM share (gre.vm.ts, geneve.vm.ts): two nodes, each a netns with its
// own daemon, joined by an underlay veth with IPv4 and IPv6 addresses, and one test of a tunnel
// Network between them: a pod on each reaches the other through it; podnet explain shows it; a
// second pod on a node is refused it; a link deleted in the pod is made again at resync; undo
// leaves no tunnel in the pods or on the nodes.
import type { Test } from 'tap';
import { execa } from 'execa';
import { daemonSandbox, type DaemonSandbox } from '../lib/daemon.ts';
import { attachConfig, linkOf, net1Address, networkDocument, pingFrom, podnetCli, startPod, until, type Pod } from '../lib/engine.ts';
import { missingPrerequisite } from '../lib/env.ts';
import { makeNetns } from '../lib/netns.ts';

const skip = missingPrerequisite(['/bin/busybox']);

/**
 * A tunnel Network to test: its spec toward node `remote` (1 or 2), the remote the pod's
 * attachment chooses when its Network gives ranges, as ip shows its link, as explain shows it,
 * the pods' subnet.
 */
export interface Tunnel {
  name: string;
  kind: string;
  spec: (remote: number) => string;
  attachmentRemote?: (remote: number) => string;
  info: { info_kind: string; info_data: Record<string, unknown> };
  explained: RegExp;
  subnet: string;
}

/** Two node netns joined by `underlay`, node i at 198.18.102.(i+1) and 2001:db8:102::(i+1). */
export async function twoNodes(t: Test) {
  const nodes = [await makeNetns(t, 'pne2e-node-'), await makeNetns(t, 'pne2e-node-')];
  await execa('ip', ['-n', nodes[0]!.name, 'link', 'add', 'underlay', 'type', 'veth', 'peer', 'name', 'underlay', 'netns', nodes[1]!.name]);
  for (const [i, node] of nodes.entries()) {
    await execa('ip', ['-n', node.name, 'addr', 'add', `198.18.102.${i + 1}/24`, 'dev', 'underlay']);
    await execa('ip', ['-n', node.name, 'addr', 'add', `2001:db8:102::${i + 1}/64`, 'dev', 'underlay', 'nodad']);
    await execa('ip', ['-n', node.name, 'link', 'set', 'underlay', 'up']);
  }
  return nodes;
}

/**
 * The names of a netns's links, without the fallback devices (gre0, ip6gre0, ...) the kernel puts
 * in every netns once a tunnel module is loaded: the first tunnel made loads it.
 */
export async function linksOfNetns(ns: string): Promise<string[]> {
  const { stdout } = await execa('ip', ['-n', ns, '-json', 'link', 'show']);
  const fallback = new Set(['gre0', 'gretap0', 'erspan0', 'ip6gre0', 'ip6tnl0', 'sit0', 'tunl0', 'ip_vti0', 'ip6_vti0']);
  return (JSON.parse(stdout) as { ifname: string }[]).map((l) => l.ifname.split('@')[0]!).filter((n) => !fallback.has(n)).sort();
}

/** Registers the test of `tunnel` on `tap`. */
export function testTunnel(tap: Test, tunnel: Tunnel): void {
  tap.test(`${tunnel.name}: pods on two nodes reach each other through the tunnel`, { skip }, async (t) => {
    const nodes = await twoNodes(t);
    const before = await Promise.all(nodes.map((n) => linksOfNetns(n.name)));
    const pods: { pod: Pod; cli: ReturnType<typeof podnetCli>; daemon: DaemonSandbox }[] = [];
    for (const [i, node] of nodes.entries()) {
      const daemon = await daemonSandbox(t, { standalone: true, netns: node.path });
      await daemon.start();
      const cli = podnetCli(daemon);
      t.equal((await cli.apply('tun.yaml', networkDocument('tun', `${tunnel.spec(2 - i)}\n  staticAddresses: true`))).exitCode, 0, `node ${i + 1}: the Network applies`);
      const remote = tunnel.attachmentRemote ? `, remote: "${tunnel.attachmentRemote(2 - i)}"` : '';
      const attach = attachConfig('tun', `${tunnel.subnet}.${i + 1}/24`).replace(' }]\n', `${remote} }]\n`);
      t.equal((await cli.apply('attach.yaml', attach)).exitCode, 0, `node ${i + 1}: the attachment applies`);
      pods.push({ pod: await startPod(t, daemon, `tun-${i}`), cli, daemon });
    }
    for (const { pod } of pods) {
      await until(`net1 in ${pod.name}`, () => net1Address(pod.ns.name, `${tunnel.subnet}.`), 30_000);
      t.match(await linkOf(pod.ns.name, 'net1'), { mtu: 1400, linkinfo: tunnel.info }, `${pod.name}: net1 is a ${tunnel.kind} tunnel to the other node`);
    }
    t.match((await pods[0]!.cli.explain('default/tun-0')).stdout, tunnel.explained, 'podnet explain shows the tunnel');
    t.equal(await pingFrom(pods[0]!.pod.ns.name, `${tunnel.subnet}.2`), 0, 'a pod on node 1 reaches the pod on node 2');
    t.equal(await pingFrom(pods[1]!.pod.ns.name, `${tunnel.subnet}.1`), 0, 'and back');

    // The tunnel's endpoint is the node's: a second pod there asking for it is refused, not made.
    const second = await startPod(t, pods[0]!.daemon, 'tun-0b');
    const refused = await until('the second pod refused', async () => {
      const { stdout } = await pods[0]!.cli.explain('default/tun-0b');
      return stdout.includes('another pod on this node has it') ? stdout : undefined;
    }, 30_000);
    t.match(refused, new RegExp(`Network tun is a ${tunnel.kind === 'ip6gre' ? 'gre' : tunnel.kind} tunnel, and a node has one attachment to it`), 'a second pod on the node is refused the tunnel, naming why');
    t.notOk(await linkOf(second.ns.name, 'net1'), 'and gets no link');
    t.match(await linkOf(pods[0]!.pod.ns.name, 'net1'), { linkinfo: tunnel.info }, 'the first keeps its tunnel');

    await execa('ip', ['-n', pods[0]!.pod.ns.name, 'link', 'del', 'net1']);
    await until('net1 made again', () => net1Address(pods[0]!.pod.ns.name, `${tunnel.subnet}.`), 30_000);
    t.equal(await pingFrom(pods[0]!.pod.ns.name, `${tunnel.subnet}.2`), 0, 'the resync makes the tunnel again, and it carries traffic');

    for (const { pod, cli } of pods) {
      await cli.delete('attach.yaml');
      await until(`net1 gone from ${pod.name}`, async () => ((await linkOf(pod.ns.name, 'net1')) ? undefined : true));
    }
    t.same(await Promise.all(nodes.map((n) => linksOfNetns(n.name))), before, "the nodes' links are as they were");
  });
}
