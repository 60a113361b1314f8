// Pods that ran before podnet was installed: the runtime networked them with the reference bridge
// plugin and left libcni's result cache, as containerd and CRI-O do. Then podnet is installed
// (chained into the primary's conflist) and its daemon started: it adopts those pods from the cache,
// lists them as adopted, changes their network on request, and forgets them at their CNI DEL, which
// now runs through the chained conflist.
import t from 'tap';
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import { dir } from 'tmp-promise';
import { CniRuntime, type Attachment, type Conflist } from './lib/cni-runtime.ts';
import { daemonSandbox } from './lib/daemon.ts';
import { linkOf, podnetCli, until } from './lib/engine.ts';
import { missingPrerequisite, referencePluginDir } from './lib/env.ts';
import { addressesIn, makeNetns, removeLinkAtTeardown, uniqueName } from './lib/netns.ts';

const skip = missingPrerequisite([`${referencePluginDir}/bridge`, `${referencePluginDir}/host-local`]);

const tuning = (pod: string) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: ${pod}-mtu, namespace: shop }
spec:
  podSelector: { matchLabels: { podnetwork.opdev.io/pod-name: ${pod} } }
  interfaces: [{ name: eth0, mtu: 1400 }]
`;

t.test('pods networked before podnet was chained are adopted from the result cache, listed as adopted, changed, and let go at DEL', { skip }, async (t) => {
  const tmp = await dir({ unsafeCleanup: true, prefix: 'podnet-adopt-' });
  t.teardown(tmp.cleanup);
  const [bin, conf, cacheDir, ipamDir] = ['bin', 'net.d', 'cni', 'ipam'].map((d) => `${tmp.path}/${d}`) as [string, string, string, string];
  for (const d of [bin, conf, ipamDir]) await mkdir(d);
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);
  const primary: Conflist = {
    cniVersion: '1.0.0',
    name: 'pods',
    plugins: [{ type: 'bridge', bridge, isGateway: true, ipam: { type: 'host-local', ranges: [[{ subnet: '198.18.91.0/24' }]], dataDir: ipamDir } }],
  };
  await writeFile(`${conf}/10-pods.conflist`, JSON.stringify(primary, null, 2));
  const runtime = new CniRuntime([bin, referencePluginDir], { cacheDir });

  // Before podnet: two pods of the primary network, one of another network, one whose netns is gone.
  const sandbox = async (name: string, list: Conflist = primary) => {
    const ns = await makeNetns(t);
    const att: Attachment = { containerId: uniqueName('ctr'), netns: ns.path, ifname: 'eth0', args: `IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=${name};K8S_POD_INFRA_CONTAINER_ID=x` };
    await runtime.add(list, att);
    t.teardown(() => runtime.del(list, att, undefined).catch(() => undefined));
    return { name, ns, att };
  };
  const web = await sandbox('web-0');
  const db = await sandbox('db-0');
  const otherBridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, otherBridge);
  const other: Conflist = { ...primary, name: 'storage', plugins: [{ ...primary.plugins[0]!, bridge: otherBridge, ipam: { type: 'host-local', ranges: [[{ subnet: '198.18.92.0/24' }]], dataDir: ipamDir } }] };
  await sandbox('storage-0', other);
  const gone = await sandbox('gone-0');
  await execa('ip', ['netns', 'del', gone.ns.name]);
  t.ok(existsSync(runtime.cacheFile(primary, web.att)), 'the runtime left its result cache');

  // podnet arrives: installed into the conf dir, then its daemon starts.
  const daemon = await daemonSandbox(t, { standalone: true, args: ['--cni-conf-dir', conf, '--cni-cache-dir', cacheDir] });
  const settings = daemon.pluginSettings();
  const installed = await execa(`${daemon.binDir}/podnet`, ['install', '--cni-bin-dir', bin, '--cni-conf-dir', conf, '--socket', settings.socketPath, '--state-dir', settings.stateDir, '--wait-seconds', '0'], { reject: false });
  t.equal(installed.exitCode, 0, `podnet install: ${installed.stderr}`);
  await daemon.start();

  const records = await daemon.records();
  t.same(
    records.map((r) => [r.pod.name, r.containerId, r.netns]).sort(),
    [
      ['db-0', db.att.containerId, db.ns.path],
      ['web-0', web.att.containerId, web.ns.path],
    ],
    'the pods of the primary network whose netns is there are recorded; another network and a gone pod are not',
  );
  t.equal(records.find((r) => r.pod.name === 'web-0')?.adoptedFrom, runtime.cacheFile(primary, web.att), 'each says the cache file it came from');
  t.match(records.find((r) => r.pod.name === 'web-0'), { pod: { namespace: 'shop', name: 'web-0' }, network: 'pods', cniVersion: '1.0.0' });
  const pods = await execa(`${daemon.binDir}/podnet`, ['pods', '--socket', daemon.socketPath]);
  t.match(pods.stdout, new RegExp(`shop\\s+web-0\\s+${web.att.containerId.slice(0, 12)}\\s+eth0\\s+${web.ns.path}\\s+\\S+\\s+yes\\s+yes`), 'podnet pods marks it adopted');
  t.notMatch(pods.stdout, /storage-0|gone-0/);

  // An adopted pod's network can be changed like any other's.
  const cli = podnetCli(daemon);
  t.equal((await cli.apply('web-mtu.yaml', tuning('web-0'))).exitCode, 0, 'podnet apply -f web-mtu.yaml');
  t.equal(await until('eth0 at MTU 1400', async () => ((await linkOf(web.ns.name, 'eth0'))?.mtu === 1400 ? 1400 : undefined)), 1400, "the adopted pod's eth0 follows the request");
  t.equal((await linkOf(db.ns.name, 'eth0'))?.mtu, 1500, 'the other pod is untouched');
  t.match((await addressesIn(web.ns.name)).find((l) => l.ifname === 'eth0')?.addresses, [/^198\.18\.91\.\d+\/24$/], 'its address from the primary is kept');

  // The runtime now reads the chained conflist: the pod's DEL reaches podnet, which forgets it.
  const chained = JSON.parse(await readFile(`${conf}/10-pods.conflist`, 'utf8')) as Conflist;
  t.match(chained.plugins.map((p) => p.type), ['bridge', 'podnet'], 'the primary conflist chains podnet');
  await runtime.del(chained, db.att, runtime.cachedResult(primary, db.att));
  await until('db-0 forgotten', async () => ((await daemon.records()).some((r) => r.pod.name === 'db-0') ? undefined : true));
  t.pass('the DEL through the chained conflist removed the adopted record');

  // A restart adopts nothing twice and nothing already deleted.
  await daemon.stop();
  await daemon.start();
  t.same((await daemon.records()).map((r) => r.pod.name), ['web-0'], 'after a restart: the one pod left, once');
});
