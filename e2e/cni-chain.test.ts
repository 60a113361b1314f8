// podnet chained after the reference plugins (Debian's containernetworking-plugins), run per the
// spec's chaining rules for every CNI version podnet claims, in namespaces the test makes.
import t, { type Test } from 'tap';
import { execa } from 'execa';
import { readdir, readFile, writeFile } from 'node:fs/promises';
import { dir } from 'tmp-promise';
import { supportedVersions } from '../src/protocol/cni-version.ts';
import { currentBootId } from '../src/registry/boot.ts';
import { spoolFileName } from '../src/registry/spool.ts';
import { CniRuntime, type Attachment, type Conflist } from './lib/cni-runtime.ts';
import { daemonSandbox, type DaemonSandbox } from './lib/daemon.ts';
import { until } from './lib/engine.ts';
import { missingPrerequisite, referencePluginDir, repoRoot } from './lib/env.ts';
import { addressesIn, linkExists, makeNetns, removeLinkAtTeardown, uniqueName } from './lib/netns.ts';

const skip = missingPrerequisite([`${referencePluginDir}/bridge`, `${referencePluginDir}/ptp`, `${referencePluginDir}/host-local`]);

/** An example conflist from cni-conf/, pointed at this test's daemon, bridge, subnet and IPAM dir. */
async function exampleConflist(
  t: Test,
  file: string,
  version: string,
  daemon: DaemonSandbox,
  subnetIndex: number,
): Promise<Conflist> {
  const list = JSON.parse(await readFile(`${repoRoot}cni-conf/${file}`, 'utf8')) as Conflist;
  const ipamDir = await dir({ unsafeCleanup: true });
  t.teardown(() => ipamDir.cleanup());
  const [primary, podnet] = list.plugins;
  if (!primary || podnet?.type !== 'podnet') throw new Error(`${file} does not chain podnet second`);
  const ipam = primary['ipam'] as Record<string, unknown>;
  ipam['ranges'] = [[{ subnet: `198.18.${subnetIndex}.0/24` }]];
  ipam['dataDir'] = ipamDir.path;
  if (primary.type === 'bridge') {
    primary['bridge'] = uniqueName('pnbr');
    removeLinkAtTeardown(t, String(primary['bridge']));
  }
  list.plugins = [primary, { ...podnet, ...daemon.pluginSettings() }];
  return { ...list, cniVersion: version, name: `${list.name}-${subnetIndex}` };
}

const cases = supportedVersions.flatMap((version, i) => [
  { file: '10-bridge-podnet.conflist', version, subnet: 10 + i },
  { file: '10-ptp-podnet.conflist', version, subnet: 20 + i },
]);

for (const { file, version, subnet } of cases) {
  t.test(`${file} at cniVersion ${version}`, { skip }, async (t) => {
    const daemon = await daemonSandbox(t);
    await daemon.start();
    const runtime = new CniRuntime([daemon.binDir, referencePluginDir]);
    const list = await exampleConflist(t, file, version, daemon, subnet);
    const netns = await makeNetns(t);
    const att: Attachment = {
      containerId: uniqueName('ctr'),
      netns: netns.path,
      ifname: 'eth0',
      args: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=tenant-a;K8S_POD_NAME=cnf-0;K8S_POD_UID=6f1c2d3e-0000-4000-8000-000000000001',
    };

    // ADD: podnet hands the runtime exactly what the primary plugin gave it.
    const primaryOnly: Conflist = { ...list, plugins: list.plugins.slice(0, 1) };
    const [primary, podnet] = list.plugins;
    const primaryResult = await runtime.add(primaryOnly, att);
    const podnetOut = await runtime.invoke(list, podnet!, 'ADD', att, primaryResult);
    t.same(podnetOut, primaryResult, 'podnet passes the primary result through unchanged');
    t.equal(podnetOut?.['cniVersion'], version);
    const eth0 = (await addressesIn(netns.name)).find((l) => l.ifname === 'eth0');
    t.match(eth0?.addresses, [new RegExp(`^198\\.18\\.${subnet}\\.\\d+/24$`)], 'the pod has its address from the primary plugin');

    // The record: who, where, which network.
    const [record, ...others] = await daemon.records();
    t.equal(others.length, 0);
    t.match(record, {
      containerId: att.containerId,
      ifname: 'eth0',
      network: list.name,
      netns: netns.path,
      cniVersion: version,
      pod: { namespace: 'tenant-a', name: 'cnf-0', uid: '6f1c2d3e-0000-4000-8000-000000000001' },
    });

    if (version >= '0.4.0') await runtime.check(list, att, podnetOut!);

    // DEL, in reverse, twice: the record goes, the second DEL is a no-op success.
    await runtime.del(list, att, podnetOut);
    t.same(await daemon.records(), [], 'DEL removed the record');
    await runtime.del(list, att, podnetOut);
    t.pass('a repeated DEL succeeds');
    if (version >= '0.4.0') {
      await t.rejects(runtime.invoke(list, podnet!, 'CHECK', att, podnetOut), { code: 100 }, 'CHECK after DEL fails with podnet\'s own code (3 would tell the runtime to skip DEL)');
    }
    if (primary?.type === 'bridge') t.ok(await linkExists(String(primary['bridge'])), 'the primary bridge is the primary plugin\'s to remove');
  });
}

t.test('GC and STATUS at cniVersion 1.1.0', { skip }, async (t) => {
  const daemon = await daemonSandbox(t);
  await daemon.start();
  const runtime = new CniRuntime([daemon.binDir, referencePluginDir]);
  const list = await exampleConflist(t, '10-bridge-podnet.conflist', '1.1.0', daemon, 40);
  const [, podnet] = list.plugins;
  const pods = await Promise.all([0, 1, 2].map(() => makeNetns(t)));
  const atts = pods.map((ns): Attachment => ({ containerId: uniqueName('ctr'), netns: ns.path, ifname: 'eth0' }));
  const results = [];
  for (const att of atts) results.push(await runtime.add(list, att));
  t.equal((await daemon.records()).length, 3);

  await runtime.invoke(list, podnet!, 'STATUS', undefined);
  t.pass('STATUS succeeds while the daemon answers');

  const keep = atts[1]!;
  await runtime.invoke({ ...list }, { ...podnet!, 'cni.dev/valid-attachments': [{ containerID: keep.containerId, ifname: 'eth0' }] }, 'GC', undefined);
  t.same((await daemon.records()).map((r) => r.containerId), [keep.containerId], 'GC dropped every record the runtime did not list');

  // A GC of another network leaves this network's records alone.
  await runtime.invoke({ ...list, name: 'some-other-network' }, { ...podnet!, 'cni.dev/valid-attachments': [] }, 'GC', undefined);
  t.equal((await daemon.records()).length, 1);

  for (const [i, att] of atts.entries()) await runtime.del(list, att, results[i]);

  await daemon.stop();
  await runtime.invoke(list, podnet!, 'STATUS', undefined);
  t.pass('STATUS still succeeds with the daemon down: the spool is writable');
});

t.test('bad input from the runtime gets the spec error codes', { skip }, async (t) => {
  const daemon = await daemonSandbox(t);
  const runtime = new CniRuntime([daemon.binDir]);
  const base = { cniVersion: '1.0.0', name: 'bad-input', type: 'podnet', ...daemon.pluginSettings() };
  const notNetns = { containerId: 'c1', netns: '/etc/hostname', ifname: 'eth0' };
  const codeOf = async (command: string, config: unknown, att?: Attachment) => {
    const run = await runtime.exec('podnet', command, config, att);
    t.equal(run.exitCode, 1, `${command} exits 1`);
    return (JSON.parse(run.stdout) as { code: number; msg: string }).code;
  };
  const run = await runtime.exec('podnet', 'ADD', '{"cniVersion": ', notNetns);
  t.equal((JSON.parse(run.stdout) as { code: number }).code, 7, 'a string that is JSON but not an object: invalid config');
  const garbage = await execRaw(daemon.binDir, 'ADD', '{not json');
  t.equal(garbage.code, 6, 'malformed JSON: decode failure');
  t.equal(await codeOf('ADD', { name: 'x', type: 'podnet' }, notNetns), 7, 'no cniVersion: invalid config');
  t.equal(await codeOf('ADD', { ...base, cniVersion: '0.2.0', prevResult: {} }, notNetns), 1, 'cniVersion 0.2.0: incompatible');
  t.equal(await codeOf('ADD', { ...base, prevResult: { cniVersion: '1.0.0' } }, notNetns), 4, 'CNI_NETNS that is a plain file');
  t.equal(await codeOf('FROB', base, notNetns), 4, 'unknown command');
  // The runtime's own netns is the node's: what a runtime passing its own by mistake, or a forged ADD, names.
  for (const netns of ['/proc/self/ns/net']) {
    const node = await runtime.exec('podnet', 'ADD', { ...base, prevResult: { cniVersion: '1.0.0' } }, { containerId: 'c1', netns, ifname: 'eth0' });
    t.equal(node.exitCode, 1, `CNI_NETNS ${netns}: refused`);
    t.match(JSON.parse(node.stdout), { code: 4, msg: /is the node's own network namespace, not a pod's/ }, 'the node\'s own netns is never a pod\'s');
  }
  t.same(await readdir(`${daemon.stateDir}/spool`).catch(() => []), [], 'nothing was recorded');
});

async function execRaw(binDir: string, command: string, stdin: string): Promise<{ code: number }> {
  const r = await execa(`${binDir}/podnet`, [], { env: { CNI_COMMAND: command }, extendEnv: false, input: stdin, reject: false });
  return JSON.parse(r.stdout) as { code: number };
}

t.test('a spool entry naming the node\'s own network namespace, planted by hand, is set aside and never a sandbox', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const entry = { version: 1, op: 'add', record: { containerId: 'planted', ifname: 'eth0', network: 'kindnet', netns: '/proc/self/ns/net', cniVersion: '1.0.0', pod: { namespace: 'default', name: 'planted' }, createdAt: new Date().toISOString() } };
  await writeFile(`${daemon.stateDir}/spool/${spoolFileName(currentBootId(), 1n, 1)}`, JSON.stringify(entry));
  await until('set aside', async () => ((await readdir(`${daemon.stateDir}/spool`)).length === 0 ? true : undefined));
  t.same(await daemon.records(), [], 'not recorded');
  const status = await execa(`${daemon.binDir}/podnet`, ['status', '--socket', daemon.socketPath]);
  t.match(status.stdout, /quarantined: +1\n.*netns \/proc\/self\/ns\/net of container planted is the node's own network namespace/, 'podnet status names it and why');
});
