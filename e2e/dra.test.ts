// podnet as a DRA driver on a real node (docs/adr/0033): the kubelet registers podnet's plugin,
// the scheduler allocates podnet's devices to tenants' ResourceClaims, the kubelet has podnet
// prepare them before it makes the sandbox, and the pod's interfaces are there before its first
// container. Everything is done and checked through kubectl (kubectl exec to look inside pods);
// containerd 2, kube-apiserver and kube-scheduler 1.37, kubelet 1.35.
import t, { type Test } from 'tap';
import { existsSync } from 'node:fs';
import { readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { stringify } from 'yaml';
import { prepareClusterTest, startCluster } from './cluster/cluster.ts';
import { missingNodePrerequisite, prepareNodeTest, startNode } from './cluster/node.ts';
import { until } from './lib/engine.ts';
import { missingPrerequisite } from './lib/env.ts';
import { installPodnet, podnetImage, tenantMayCreate } from './lib/podnet-node.ts';
import { bridgeNetwork } from './lib/kube.ts';
import { claimedPod, claimSpec, driver, json, slicesOf, type Claim } from './lib/claims.ts';

const skip = missingPrerequisite(['/usr/sbin/debootstrap']) ?? missingNodePrerequisite() ?? (await prepareClusterTest(t)) ?? (await prepareNodeTest(t));

const tenant = 'tenant-a';
async function draNode(t: Test, subnets: { primary: string; blue: string }) {
  const cluster = await startCluster(t, { forNode: true });
  const node = await startNode(t, cluster, { primarySubnet: subnets.primary, runtime: 'containerd-2' });
  const tag = await podnetImage(t, node);
  const asTenant = (args: string[], input?: string) => node.kubectl(['-n', tenant, ...args], { as: 'tenant-a', input });
  await node.kubectl(['create', 'namespace', tenant]);
  await node.kubectl(['create', 'rolebinding', '-n', tenant, 'tenant-a-edit', '--clusterrole=edit', '--user=tenant-a']);
  await tenantMayCreate(node.kubectl, 'pods', 'the aggregation controller filled edit');
  return { cluster, node, tag, asTenant };
}

t.test('a tenant claims a bridge Network: podnet offers it as a device, net1 is there before the init container, the claim tells its address and MAC, two claimed pods ping; a bad claim is told and nothing made', { skip, timeout: 900_000 }, async (t) => {
  const { cluster, node, tag, asTenant } = await draNode(t, { primary: '198.18.240.0/24', blue: '198.18.241.0/24' });
  await installPodnet(t, cluster, node, tag);
  t.ok((await node.kubectl(['get', 'deviceclass', 'podnet'])).stdout.includes('podnet'), 'the podnet DeviceClass is installed with the DaemonSet');
  const empty = await until('podnet publishes the node\'s pool', async () => ((await slicesOf(node)).length === 1 ? await slicesOf(node) : undefined), 60_000);
  t.strictSame(empty[0]!.spec.devices ?? [], [], 'a pool of nothing while no Network is served');
  t.equal(empty[0]!.spec.pool.name, node.name, 'the pool is the node\'s');

  const blue = bridgeNetwork(t, 'blue', ['198.18.241.0/24'], [tenant]);
  await node.kubectl(['apply', '-f', '-'], { input: stringify(blue) });
  const slices = await until('the slice offers blue', async () => {
    const found = await slicesOf(node);
    return found[0]?.spec.devices?.some((d) => d.name === 'blue') ? found : undefined;
  }, 60_000);
  const device = slices[0]!.spec.devices!.find((d) => d.name === 'blue')!;
  t.strictSame([device.attributes?.['network']?.string, device.attributes?.['type']?.string, device.capacity?.['addresses']?.value, device.allowMultipleAllocations], ['blue', 'bridge', '253', true], 'device blue: its Network, its type, 253 addresses to give, shared');
  t.match((await node.kubectl(['get', 'resourceslices'])).stdout, new RegExp(`${slices[0]!.metadata.name}\\s+${node.name}\\s+${driver.replaceAll('.', '\\.')}\\s+${node.name}`), 'kubectl get resourceslices shows it');

  await tenantMayCreate(node.kubectl, 'resourceclaimtemplates.resource.k8s.io', "edit aggregates DRA's claims");
  await asTenant(['apply', '-f', '-'], stringify({ apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaimTemplate', metadata: { name: 'blue-net1', namespace: tenant }, spec: { spec: claimSpec('blue', { interface: 'net1' }) } }));
  for (const name of ['claim-a', 'claim-b']) await asTenant(['apply', '-f', '-'], stringify(claimedPod(name, { template: 'blue-net1' }, '198.18.241.')));
  for (const name of ['claim-a', 'claim-b']) await asTenant(['wait', '--for=condition=Ready', `pod/${name}`, '--timeout=120s']);
  t.pass('both pods are Ready: each init container found net1 with its address before it ran');

  const addressOf = async (pod: string) => /inet (\S+)/.exec((await asTenant(['exec', pod, '--', 'ip', '-o', '-4', 'addr', 'show', 'dev', 'net1'])).stdout)?.[1];
  const macOf = async (pod: string) => /link\/ether (\S+)/.exec((await asTenant(['exec', pod, '--', 'ip', '-o', 'link', 'show', 'dev', 'net1'])).stdout)?.[1];
  for (const pod of ['claim-a', 'claim-b']) {
    const claimName = (await asTenant(['get', 'pod', pod, '-o', 'jsonpath={.status.resourceClaimStatuses[0].resourceClaimName}'])).stdout;
    const [address, mac] = [await addressOf(pod), await macOf(pod)];
    const status = await until(`${claimName}'s status tells net1`, async () => {
      const claim = await json<Claim>(node, ['resourceclaim', '-n', tenant, claimName]);
      const entry = claim.status?.devices?.find((d) => d.driver === driver);
      return entry?.networkData?.interfaceName === 'net1' ? entry : undefined;
    }, 60_000);
    t.strictSame(
      { driver: status.driver, pool: status.pool, device: status.device, ready: status.conditions?.find((c) => c.type === 'Ready')?.status, networkData: status.networkData },
      { driver, pool: node.name, device: 'blue', ready: 'True', networkData: { interfaceName: 'net1', ips: [address], hardwareAddress: mac } },
      `${pod}: its claim's status.devices has net1's address (CIDR) and MAC, Ready`,
    );
  }
  const to = (await addressOf('claim-b'))!.split('/')[0]!;
  const addressA = await addressOf('claim-a');
  const ping = await asTenant(['exec', 'claim-a', '--', 'ping', '-c', '1', '-W', '5', to]);
  t.equal(ping.exitCode, 0, 'claim-a pings claim-b over net1');
  const prepared = join(node.folder('/var/lib/podnet'), 'claims');
  t.equal((await readdir(prepared)).filter((f) => f.endsWith('.json')).length, 2, 'two claims prepared, on file in the state dir');

  // The kubelet restarted: it deletes the node's slices at its start and registers the plugin
  // again; podnet offers its devices again, and the running claimed pods keep their network.
  const before = (await slicesOf(node))[0]!.spec.pool.generation;
  await node.restartKubelet();
  // The kubelet wipes in the background of its start; podnet writes again when the plugin is
  // registered, or at its next look (30 s) when the wipe came after.
  const again = await until("podnet's pool written again after the kubelet's wipe", async () => {
    const found = await slicesOf(node);
    return found[0] && found[0].spec.pool.generation > before && found[0].spec.devices?.some((d) => d.name === 'blue') ? found : undefined;
  }, 120_000);
  t.ok(again[0]!.spec.pool.generation > before, `the pool offers blue again, at generation ${again[0]!.spec.pool.generation} (was ${before})`);
  const kept = await until('claim-a answers kubectl exec again (the kubelet serving)', () => addressOf('claim-a').catch(() => undefined), 60_000);
  t.equal(kept, addressA, 'claim-a kept net1 and its address through the kubelet\'s restart');
  await asTenant(['apply', '-f', '-'], stringify(claimedPod('claim-c', { template: 'blue-net1' }, '198.18.241.')));
  await asTenant(['wait', '--for=condition=Ready', 'pod/claim-c', '--timeout=120s']);
  t.pass('a pod claiming blue after the restart starts with net1');

  // A claim on a Network its namespace may not use, or naming none in the one form: refused at once.
  const red = bridgeNetwork(t, 'red', ['198.18.246.0/24'], ['tenant-b']);
  await node.kubectl(['apply', '-f', '-'], { input: stringify(red) });
  // The policy weighs the claim against each Network the API server's cache has: red may not be
  // there the moment it is written, so the claim is tried until refused (and taken back if admitted).
  const foreign = await until('the policy refuses a claim on red', async () => {
    const answer = await asTenant(['apply', '-f', '-'], stringify({ apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaim', metadata: { name: 'foreign', namespace: tenant }, spec: claimSpec('red') })).catch((err: { stderr: string; exitCode: number }) => err);
    if (answer.exitCode === 0) await asTenant(['delete', 'resourceclaim', 'foreign']);
    return answer.exitCode === 0 ? undefined : answer;
  });
  t.match(foreign, { exitCode: 1, stderr: /ValidatingAdmissionPolicy 'podnet-claims-networks'.*Network red does not admit namespace tenant-a/ }, "a claim on a Network that does not admit its namespace is refused at creation: it would hold the Network's address");
  const vague = { ...claimSpec('blue') };
  vague.devices.requests[0]!.exactly.selectors = [{ cel: { expression: 'device.attributes["dra.podnetwork.opdev.io"].type == "bridge"' } }];
  const unnamed = await asTenant(['apply', '-f', '-'], stringify({ apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaim', metadata: { name: 'vague', namespace: tenant }, spec: vague })).catch((err: { stderr: string; exitCode: number }) => err);
  t.match(unnamed, { exitCode: 1, stderr: /names its Network with exactly one selector/ }, 'a claim of the podnet class naming no Network is refused, saying the form');

  // A claim whose parameters break podnet's schema: the kubelet tells why, and nothing is made.
  await asTenant(['apply', '-f', '-'], stringify({ apiVersion: 'resource.k8s.io/v1', kind: 'ResourceClaim', metadata: { name: 'bad', namespace: tenant }, spec: claimSpec('blue', { ips: ['not-an-address'] }) }));
  await asTenant(['apply', '-f', '-'], stringify(claimedPod('bad-pod', { claim: 'bad' }, '198.18.241.')));
  const told = await until('the kubelet tells why the claim is not prepared', async () => {
    const events = (await asTenant(['get', 'events', '--field-selector=involvedObject.name=bad-pod', '-o', 'jsonpath={range .items[*]}{.reason}: {.message}{"\\n"}{end}'])).stdout;
    return events.split('\n').find((e) => e.includes('spec.devices.config[0].opaque.parameters'));
  }, 120_000);
  t.match(told, /ResourceClaim tenant-a\/bad: .*spec\.devices\.config\[0\]\.opaque\.parameters.*ips/, 'the Event names the claim and the field');
  t.equal((await asTenant(['get', 'pod', 'bad-pod', '-o', 'jsonpath={.status.phase}'])).stdout, 'Pending', 'the pod does not run without its network');
  t.equal((await readdir(prepared)).filter((f) => f.endsWith('.json')).length, 3, 'nothing prepared for it');

  // The pods deleted: the kubelet unprepares their claims, and podnet forgets them.
  await asTenant(['delete', 'pod', 'claim-a', 'claim-b', 'claim-c', 'bad-pod', '--wait=true', '--timeout=120s']);
  await until('every claim unprepared', async () => ((await readdir(prepared)).filter((f) => f.endsWith('.json')).length === 0 ? true : undefined), 120_000);
  t.pass('the kubelet unprepared every claim and podnet removed them from its state dir');
  t.ok(existsSync(join(node.folder('/var/lib/kubelet'), 'plugins_registry', `${driver}-reg.sock`)), "podnet's registration socket is in the kubelet's plugins_registry");
});
