// wireguard Networks on a kernel that has WireGuard (run in a VM of Debian's kernel by
// e2e/kernel.test.ts): two nodes (e2e/kernel/tunnel.ts), a pod on each with a WireGuard interface
// made from its node. Each pod's private key is made on its node, in the state dir and nowhere
// else (not in explain, the applied state or the log); its public key is what explain and the
// interface show. Given each other as peers, the pods ping each other through the tunnel; a link
// deleted in the pod is made again with the same key; the node's guard of the port drops the
// tunnel once its peer sends from outside the Network's remoteRanges (WireGuard would follow it);
// an endpoint outside them is refused naming the field; taken back, the key file and the guards go
// and the nodes' links are as they were.
import t from 'tap';
import { execa } from 'execa';
import { readFile, readdir, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { daemonSandbox, type DaemonSandbox } from '../lib/daemon.ts';
import { linkOf, networkDocument, pingFrom, podnetCli, startPod, until, type Pod } from '../lib/engine.ts';
import { missingPrerequisite } from '../lib/env.ts';
import { linksOfNetns, twoNodes } from './tunnel.ts';
import { guardTable } from '../../src/model/wireguard-guard.ts';

const skip = missingPrerequisite(['/bin/busybox', '/usr/bin/wg', '/usr/sbin/nft']);

const config = (pod: string, address: string, peer?: { key: string; node: number; address: string }) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: attach, namespace: default }
spec:
  podSelector: { matchLabels: { podnetwork.opdev.io/pod-name: ${pod} } }
  attachments:
    - network: wg
      interface: wg0
      ips: [${address}/24]
${peer ? `      peers: [{ publicKey: "${peer.key}", endpoint: { address: 198.18.102.${peer.node}, port: 51820 }, allowedIPs: [${peer.address}/32] }]\n` : ''}`;

/** What `wg show wg0 <what>` prints in the pod. */
async function wgShow(pod: Pod, what: string): Promise<string> {
  return (await execa('ip', ['netns', 'exec', pod.ns.name, 'wg', 'show', 'wg0', what])).stdout.trim();
}

t.test('wireguard: pods on two nodes, keys made on their nodes, reach each other through the tunnel', { skip }, async (t) => {
  const nodes = await twoNodes(t);
  const before = await Promise.all(nodes.map((n) => linksOfNetns(n.name)));
  const sides: { pod: Pod; cli: ReturnType<typeof podnetCli>; daemon: DaemonSandbox; address: string }[] = [];
  for (const [i, node] of nodes.entries()) {
    const daemon = await daemonSandbox(t, { standalone: true, netns: node.path });
    await daemon.start();
    const cli = podnetCli(daemon);
    t.equal((await cli.apply('wg.yaml', networkDocument('wg', '  type: wireguard\n  wireguard: { listenPort: 51820, remoteRanges: [198.18.102.0/24] }\n  mtu: 1420\n  staticAddresses: true'))).exitCode, 0, `node ${i + 1}: the Network applies`);
    const pod = await startPod(t, daemon, `wg-${i}`);
    const address = `10.99.0.${i + 1}`;
    t.equal((await cli.apply('attach.yaml', config(pod.name, address))).exitCode, 0, `node ${i + 1}: wg0 asked, no peer yet`);
    sides.push({ pod, cli, daemon, address });
  }

  const keys: string[] = [];
  for (const { pod, cli, daemon } of sides) {
    await until(`wg0 in ${pod.name}`, async () => ((await linkOf(pod.ns.name, 'wg0'))?.linkinfo?.info_kind === 'wireguard' ? true : undefined), 30_000);
    const explained = await until(`${pod.name}'s public key`, async () => /public key ([A-Za-z0-9+/]{43}=)/.exec((await cli.explain(`default/${pod.name}`)).stdout)?.[1], 30_000);
    keys.push(explained);
    t.equal(await wgShow(pod, 'public-key'), explained, `${pod.name}: the interface's public key is the one explain shows`);
    t.equal(await wgShow(pod, 'listen-port'), '51820');
    const files = await readdir(join(daemon.stateDir, 'wireguard'));
    t.equal(files.length, 1, 'one key on the node');
    const file = join(daemon.stateDir, 'wireguard', files[0]!);
    t.equal((await stat(file)).mode & 0o777, 0o600, "the key file is root's alone");
    const privateKey = (await readFile(file, 'utf8')).trim();
    t.equal(await wgShow(pod, 'private-key'), privateKey, 'the interface has the key made on its node');
    const told = [(await cli.explain(`default/${pod.name}`)).stdout, ...(await Promise.all((await readdir(join(daemon.stateDir, 'applied'))).map((f) => readFile(join(daemon.stateDir, 'applied', f), 'utf8')))), daemon.log()];
    t.notOk(told.some((text) => text.includes(privateKey)), 'the private key is in no explain, applied state or log');
  }

  for (const [i, { pod, cli }] of sides.entries()) {
    const other = sides[1 - i]!;
    t.equal((await cli.apply('attach.yaml', config(pod.name, sides[i]!.address, { key: keys[1 - i]!, node: 2 - i, address: other.address }))).exitCode, 0, `${pod.name}: the other pod is its peer`);
    await until(`${pod.name}'s peer`, async () => ((await wgShow(pod, 'peers')) === keys[1 - i] ? true : undefined), 30_000);
  }
  t.equal(await pingFrom(sides[0]!.pod.ns.name, sides[1]!.address), 0, 'the pod on node 1 reaches the pod on node 2 through WireGuard');
  t.equal(await pingFrom(sides[1]!.pod.ns.name, sides[0]!.address), 0, 'and back');

  // The port's guard on node 1: WireGuard would follow its peer to a source outside the ranges;
  // node 1's table drops what comes from there, so the tunnel holds only inside them.
  const [node1, node2] = nodes.map((n) => (...args: string[]) => execa('ip', ['-n', n.name, ...args]));
  const guard = guardTable(sides[0]!.pod.att.containerId, 'wg0');
  const listed = (await execa('ip', ['netns', 'exec', nodes[0]!.name, 'nft', 'list', 'table', ...guard.split(' ')])).stdout;
  t.match(listed, /udp dport 51820 ip saddr != 198\.18\.102\.0\/24 drop/, "node 1 guards the pod's port: it hears the ranges alone");
  t.match(listed, /udp sport 51820 ip daddr != 198\.18\.102\.0\/24 drop/, 'and speaks to them alone');
  // Node 2 moves to an address outside the ranges: its WireGuard then sends from there.
  await node2!('addr', 'del', '198.18.102.2/24', 'dev', 'underlay');
  await node2!('addr', 'add', '198.18.103.2/24', 'dev', 'underlay');
  await node2!('route', 'add', '198.18.102.0/24', 'dev', 'underlay');
  await node1!('route', 'add', '198.18.103.0/24', 'dev', 'underlay');
  t.not(await pingFrom(sides[1]!.pod.ns.name, sides[0]!.address), 0, "node 2's tunnel from outside the ranges: dropped on node 1");
  t.not(await pingFrom(sides[1]!.pod.ns.name, sides[0]!.address), 0, 'and still, a handshake later');
  t.match(await wgShow(sides[0]!.pod, 'endpoints'), /198\.18\.102\.2:51820/, "pod 1's peer is where the request put it: not followed outside the ranges");
  // What the guard stops: without it, WireGuard follows the peer there. Emptied by hand (its table
  // and chains left, its rules flushed), the guard is read as not the one written at the next
  // resync and written again; until then, the tunnel follows. (Deleted whole: the same, unit-tested.)
  await execa('ip', ['netns', 'exec', nodes[0]!.name, 'nft', 'flush', 'table', ...guard.split(' ')]);
  t.ok(await until('the tunnel followed without the guard', async () => ((await pingFrom(sides[1]!.pod.ns.name, sides[0]!.address)) === 0 ? true : undefined), 30_000), 'without the guard, the tunnel follows its peer outside the ranges');
  const rewritten = await until('the guard written again', async () => {
    const { stdout } = await execa('ip', ['netns', 'exec', nodes[0]!.name, 'nft', 'list', 'table', ...guard.split(' ')], { reject: false });
    return /udp dport 51820 ip saddr != 198\.18\.102\.0\/24 drop/.test(stdout) ? stdout : undefined;
  }, 30_000);
  t.match(rewritten, /udp sport 51820 ip daddr != 198\.18\.102\.0\/24 drop/, 'the resync finds the guard emptied and writes it again whole');
  await node1!('route', 'del', '198.18.103.0/24', 'dev', 'underlay');
  await node2!('route', 'del', '198.18.102.0/24', 'dev', 'underlay');
  await node2!('addr', 'del', '198.18.103.2/24', 'dev', 'underlay');
  await node2!('addr', 'add', '198.18.102.2/24', 'dev', 'underlay');

  // Drift: the link deleted in the pod is made again at resync, with the same key and peer.
  await execa('ip', ['-n', sides[0]!.pod.ns.name, 'link', 'del', 'wg0']);
  await until('wg0 made again with its peer', async () => ((await linkOf(sides[0]!.pod.ns.name, 'wg0')) && (await wgShow(sides[0]!.pod, 'peers').catch(() => '')) === keys[1] ? true : undefined), 30_000);
  t.equal(await wgShow(sides[0]!.pod, 'public-key'), keys[0], 'with the same key');
  t.equal(await pingFrom(sides[0]!.pod.ns.name, sides[1]!.address), 0, 'and it carries traffic again');

  // Drift: its peer removed by hand and a stranger added (what NET_ADMIN in the pod could do): the
  // resync reads the interface back and gives it its own peer again, and no other.
  const stranger = 'TrMvSoP4jYQlY6RIzBgbssQqY3vxI2Pi+y71lOWWXX0=';
  await execa('ip', ['netns', 'exec', sides[0]!.pod.ns.name, 'wg', 'set', 'wg0', 'peer', keys[1]!, 'remove', 'peer', stranger, 'allowed-ips', '10.99.0.77/32']);
  t.equal(await wgShow(sides[0]!.pod, 'peers'), stranger, 'changed by hand');
  await until('its own peer given back, the stranger removed', async () => ((await wgShow(sides[0]!.pod, 'peers')) === keys[1] ? true : undefined), 60_000);
  t.equal(await wgShow(sides[0]!.pod, 'allowed-ips'), `${keys[1]}\t10.99.0.2/32`, 'with the allowed IPs the request gives');
  // As set, it reads back as set: the resyncs (every second) that follow change nothing, though
  // its peer's endpoint is wherever the peer last sent from.
  const applied = () => sides[0]!.daemon.log().match(/"msg":"applied"/g)?.length ?? 0;
  const appliedBefore = applied();
  t.ok(appliedBefore > 0, 'the repair was told as a pass that applied steps');
  await new Promise((r) => setTimeout(r, 4000));
  t.equal(applied(), appliedBefore, 'no pass in the next resyncs changed anything');
  t.equal(await pingFrom(sides[0]!.pod.ns.name, sides[1]!.address), 0, 'and it carries traffic again');

  const outside = await sides[0]!.cli.apply('bad.yaml', config('wg-x', '10.99.0.9', { key: keys[1]!, node: 2, address: '10.99.0.2' }).replace('198.18.102.2', '198.18.103.2').replace('name: attach', 'name: bad'));
  t.not(outside.exitCode, 0, 'an endpoint outside the remoteRanges is refused');
  t.match(outside.stderr, /PodNetworkConfig default\/bad spec\.attachments\[0\]\.peers\[0\]\.endpoint\.address: 198\.18\.103\.2 is outside Network wg's spec\.wireguard\.remoteRanges/);

  for (const { pod, cli, daemon } of sides) {
    await cli.delete('attach.yaml');
    await until(`wg0 gone from ${pod.name}`, async () => ((await linkOf(pod.ns.name, 'wg0')) ? undefined : true));
    await until(`${pod.name}'s key deleted`, async () => ((await readdir(join(daemon.stateDir, 'wireguard'))).length === 0 ? true : undefined));
  }
  const guards = await Promise.all(nodes.map(async (n) => (await execa('ip', ['netns', 'exec', n.name, 'nft', 'list', 'tables'])).stdout));
  t.notOk(guards.some((tables) => tables.includes('pnw')), "the guards are gone from the nodes");
  t.same(await Promise.all(nodes.map((n) => linksOfNetns(n.name))), before, "the nodes' links are as they were");
});
