// Delegated Networks on the real kernel, standalone: a cni Network's plugin list (the reference
// bridge with host-local, then tuning) run for running pods as a runtime would; DEL with the
// cached result when the attachment goes, also after the daemon restarted in between; and
// plugins that fail, are missing, print garbage or hang, each told with what the plugin said,
// leaving nothing behind and the pod's other networking as it was.
import t, { type Test } from 'tap';
import { execa } from 'execa';
import { chmod, mkdir, readdir, readFile, rm, writeFile } from 'node:fs/promises';
import { existsSync } from 'node:fs';
import { dir } from 'tmp-promise';
import { linkOf, podnetCli, startPod, until, type Pod } from './lib/engine.ts';
import { daemonSandbox, type DaemonSandbox } from './lib/daemon.ts';
import { CniRuntime } from './lib/cni-runtime.ts';
import { missingPrerequisite, referencePluginDir } from './lib/env.ts';
import { addressesIn, removeLinkAtTeardown, uniqueName } from './lib/netns.ts';
import { ensureReferencePlugins, findGo } from './cluster/binaries.ts';

const skip = missingPrerequisite(['/bin/busybox', `${referencePluginDir}/bridge`, `${referencePluginDir}/host-local`, `${referencePluginDir}/tuning`]);

/** The reference plugins at a 1.1 release are built with Go once per machine (e2e/cluster/binaries.ts). */
function referencePluginsSkip(): string | undefined {
  return findGo() || process.env['CI'] ? undefined : 'needs Go to build the reference plugins at a release that speaks CNI 1.1';
}

const header = 'apiVersion: podnetwork.opdev.io/v1alpha1';
const everyPod = 'namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: default } }';

/**
 * A daemon that finds plugins in `binDirs` (Debian's reference plugins) and in `extraBinDir`. The plugin
 * timeout is generous unless a test waits for it: under CI's load a reference plugin has taken
 * more than 2 s, and its killed ADD then looked like a flaky attachment.
 */
async function delegatingDaemon(
  t: Test,
  { binDirs = [referencePluginDir], extraBinDir, pluginTimeoutSeconds = 20 }: { binDirs?: string[]; extraBinDir?: string; pluginTimeoutSeconds?: number } = {},
): Promise<DaemonSandbox> {
  const path = [...binDirs, ...(extraBinDir ? [extraBinDir] : [])].join(':');
  const daemon = await daemonSandbox(t, { standalone: true, args: ['--cni-bin-dir', path, '--plugin-timeout-seconds', String(pluginTimeoutSeconds)] });
  await daemon.start();
  t.teardown(() => {
    if (!t.passing()) process.stderr.write(`--- the daemon's log (test failed) ---\n${daemon.log().trimEnd().split('\n').slice(-30).join('\n')}\n`);
  });
  return daemon;
}

/** host-local's files for a network: one per address it handed out (and last_reserved_ip). */
async function allocations(dataDir: string, network: string): Promise<string[]> {
  const path = `${dataDir}/${network}`;
  if (!existsSync(path)) return [];
  return (await readdir(path)).filter((n) => /^\d+\.\d+\.\d+\.\d+$/.test(n));
}

function attachConfig(network: string, ifname: string, pods: string[]): string {
  return `${header}
kind: PodNetworkConfig
metadata: { name: ${network}-pods, namespace: default }
spec:
  podSelector:
    matchExpressions: [{ key: podnetwork.opdev.io/pod-name, operator: In, values: [${pods.join(', ')}] }]
  attachments: [{ network: ${network}, interface: ${ifname} }]
`;
}

async function net1Address(pod: Pod, prefix: string): Promise<string> {
  return until(`net1 with an address in ${pod.name}`, async () => {
    const link = (await addressesIn(pod.ns.name)).find((l) => l.ifname === 'net1');
    return link?.addresses.find((a) => a.startsWith(prefix));
  });
}

t.test('a cni Network: bridge and host-local then tuning, run for two running pods; DEL after a daemon restart releases everything', { skip }, async (t) => {
  const daemon = await delegatingDaemon(t);
  const bridge = uniqueName('cnid');
  removeLinkAtTeardown(t, bridge);
  const ipam = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-ipam-' });
  t.teardown(() => ipam.cleanup());
  const pods = [await startPod(t, daemon, 'pod-a'), await startPod(t, daemon, 'pod-b')];
  const cli = podnetCli(daemon);

  const network = `${header}
kind: Network
metadata: { name: plugged }
spec:
  type: cni
  ${everyPod}
  cni:
    config:
      cniVersion: 1.0.0
      plugins:
        - { type: bridge, bridge: ${bridge}, isGateway: true, ipam: { type: host-local, ranges: [[{ subnet: 198.18.110.0/24 }]], dataDir: ${ipam.path} } }
        - { type: tuning, mtu: 1280 }
`;
  t.equal((await cli.apply('plugged.yaml', network)).exitCode, 0);
  t.equal((await cli.apply('attach.yaml', attachConfig('plugged', 'net1', ['pod-a', 'pod-b']))).exitCode, 0);

  const addresses: string[] = [];
  for (const pod of pods) {
    addresses.push((await net1Address(pod, '198.18.110.')).split('/')[0]!);
    // bridge gives net1 its address before tuning runs, so the MTU may come a moment later.
    const mtu = await until(`${pod.name}: net1 at MTU 1280`, async () => ((await linkOf(pod.ns.name, 'net1'))?.mtu === 1280 ? 1280 : undefined), 10_000).catch(() => undefined);
    t.equal(mtu, 1280, `${pod.name}: tuning ran after bridge, on its result`);
  }
  t.same((await allocations(ipam.path, 'plugged')).sort(), [...addresses].sort(), 'host-local handed out the two addresses');
  const ping = await execa('ip', ['netns', 'exec', pods[0]!.ns.name, 'busybox', 'ping', '-c', '1', '-W', '2', addresses[1]!], { reject: false });
  t.equal(ping.exitCode, 0, 'pod-a reaches pod-b over the delegated network');
  const explained = await cli.explain('default/pod-a');
  t.match(explained.stdout, /net1 on Network plugged: plugins bridge, tuning\n/, 'explain shows what is desired');
  t.match(explained.stdout, new RegExp(`net1 on Network plugged \\(plugins bridge, tuning\\): ${addresses[0]!.replaceAll('.', '\\.')}/24, mac [0-9a-f:]{17}`), 'and what the plugins gave');
  t.equal((await readdir(`${daemon.stateDir}/delegated`)).filter((n) => n.endsWith('.json')).length, 2, 'each result is on file');

  // Drift: net1 deleted behind podnet's back; the resync's CHECK fails, DEL and ADD make it again.
  await execa('ip', ['-n', pods[1]!.ns.name, 'link', 'del', 'net1']);
  addresses[1] = (await net1Address(pods[1]!, '198.18.110.')).split('/')[0]!;
  t.same((await allocations(ipam.path, 'plugged')).sort(), [...addresses].sort(), 'net1 is back; DEL released the old address, ADD took another');
  t.match(daemon.log(), /"msg":"CHECK failed; attaching again".*"interface":"net1"/, 'CHECK told the daemon');

  // The daemon dies with the attachments made; the config goes while it is down.
  await daemon.kill();
  t.equal((await cli.delete('attach.yaml')).exitCode, 0);
  await daemon.start();
  for (const pod of pods) await until(`net1 gone from ${pod.name}`, async () => ((await linkOf(pod.ns.name, 'net1')) === undefined ? true : undefined));
  // The bridge plugin removes the link before it has host-local release the address.
  await until("host-local's addresses released by DEL with the cached result", async () => ((await allocations(ipam.path, 'plugged')).length === 0 ? true : undefined));
  // The record goes once the DEL has answered, a moment after host-local released.
  await until('no delegated record is left', async () => ((await readdir(`${daemon.stateDir}/delegated`)).some((n) => n.endsWith('.json')) ? undefined : true));
  t.equal((await linkOf(pods[0]!.ns.name, 'eth0'))?.mtu, 1500, 'eth0 was never touched');
});

t.test('plugins that fail, are missing, print garbage or hang: told with what they said, nothing left, the rest untouched', { skip }, async (t) => {
  const fakes = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-plugins-' });
  t.teardown(() => fakes.cleanup());
  const marks = `${fakes.path}/marks`;
  await mkdir(marks);
  const script = async (name: string, body: string) => {
    await writeFile(`${fakes.path}/${name}`, `#!/bin/sh\n${body}\n`);
    await chmod(`${fakes.path}/${name}`, 0o755);
  };
  // Garbage on ADD; on DEL it notes that it ran (the failed ADD is taken back with DEL).
  await script('garbage', `cat >/dev/null; if [ "$CNI_COMMAND" = ADD ]; then echo 'not json at all'; exit 0; fi; touch ${marks}/garbage-$CNI_COMMAND; exit 0`);
  // Not exec: the shell waits on its child, which holds the pipes too; the timeout must end both.
  await script('hang', `cat >/dev/null; if [ "$CNI_COMMAND" = ADD ]; then sleep 60; fi; touch ${marks}/hang-$CNI_COMMAND; exit 0`);
  // JSON, but not a CNI result: status is built from results, so it is refused like garbage.
  await script('badshape', `cat >/dev/null; if [ "$CNI_COMMAND" = ADD ]; then echo '{"cniVersion":"1.0.0","ips":{"address":5}}'; fi; exit 0`);
  const daemon = await delegatingDaemon(t, { extraBinDir: fakes.path, pluginTimeoutSeconds: 5 });
  const ipam = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-ipam-' });
  t.teardown(() => ipam.cleanup());
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);
  const pod = await startPod(t, daemon, 'pod-f');
  const cli = podnetCli(daemon);

  const cniNetwork = (name: string, plugins: string) => `${header}
kind: Network
metadata: { name: ${name} }
spec:
  type: cni
  ${everyPod}
  cni: { config: { cniVersion: 1.0.0, plugins: [${plugins}] } }
---
`;
  // A good native attachment on the same pod, which none of the failures may disturb.
  const good = `${header}
kind: Network
metadata: { name: good }
spec: { type: bridge, bridge: { name: ${bridge} }, ipam: { ranges: [{ subnet: 198.18.111.0/24 }] }, ${everyPod} }
---
`;
  const docs =
    good +
    // host-local without ranges: the reference plugin's own CNI error.
    cniNetwork('refused', `{ type: bridge, bridge: ${bridge}x, ipam: { type: host-local, dataDir: ${ipam.path} } }`) +
    cniNetwork('missing', '{ type: nosuchplugin }') +
    cniNetwork('garbage', '{ type: garbage }') +
    cniNetwork('hang', '{ type: hang }') +
    cniNetwork('badshape', '{ type: badshape }') +
    // Not valid CNI: refused before anything runs, naming the field.
    cniNetwork('notype', '{ ipam: { type: host-local } }') +
    `${header}
kind: Network
metadata: { name: badversion }
spec: { type: cni, ${everyPod}, cni: { config: { cniVersion: 9.9.9, type: bridge } } }
---
` +
    // One config each: a config applies whole (ADR 17), so each failure refuses its own config alone.
    [
      ['good', 'net1'],
      ['refused', 'net2'],
      ['missing', 'net3'],
      ['garbage', 'net4'],
      ['hang', 'net5'],
      ['notype', 'net6'],
      ['badversion', 'net7'],
      ['badshape', 'net8'],
    ]
      .map(
        ([network, ifname]) => `${header}
kind: PodNetworkConfig
metadata: { name: f-${network}, namespace: default }
spec:
  podSelector: { matchLabels: { podnetwork.opdev.io/pod-name: pod-f } }
  attachments: [{ network: ${network}, interface: ${ifname} }]
`,
      )
      .join('---\n');
  removeLinkAtTeardown(t, `${bridge}x`);
  // apply -f refuses the file for the Networks that can never run; the daemon, given it anyway
  // (dropped in its folder by hand), tells each failure at its attachment.
  const refused = await cli.apply('all.yaml', docs);
  t.not(refused.exitCode, 0, 'apply -f refuses it');
  t.match(refused.stderr, /Network notype spec\.cni\.config\.plugins\[0\]\.type: every plugin config needs a type/);
  t.match(refused.stderr, /Network badversion spec\.cni\.config\.cniVersion: cniVersion "9\.9\.9" is not one podnet runs plugins at/);
  await writeFile(`${daemon.configDir}/all.yaml`, docs);
  await net1Address(pod, '198.18.111.');

  const explained = await until('every failure is told', async () => {
    const out = (await cli.explain('default/pod-f')).stdout;
    return ['refused', 'missing', 'garbage', 'hang', 'badshape'].every((n) => out.includes(`PodNetworkConfig default/f-${n} spec.attachments[0]: `)) ? out : undefined;
  }, 30_000);
  t.match(explained, /f-refused spec\.attachments\[0\]: Network refused: plugin (bridge|host-local) ADD: CNI error \d+( \([^)]*\))?: .+/, "the reference plugin's CNI error code and message");
  t.match(explained, /f-missing spec\.attachments\[0\]: Network missing: plugin nosuchplugin is not in the CNI bin dirs/);
  t.match(explained, /f-garbage spec\.attachments\[0\]: Network garbage: plugin garbage ADD: succeeded but printed no JSON result: "not json at all"/);
  t.match(explained, /f-hang spec\.attachments\[0\]: Network hang: plugin hang ADD: no answer in 5 s; killed/);
  t.match(explained, /f-notype spec\.attachments\[0\]: Network notype: spec\.cni\.config\.plugins\[0\]\.type: every plugin config needs a type/);
  t.match(explained, /f-badshape spec\.attachments\[0\]: Network badshape: plugin badshape ADD: its result is not a CNI result \(at \/ips: must be array\)/);
  t.match(explained, /f-badversion spec\.attachments\[0\]: Network badversion: spec\.cni\.config\.cniVersion: cniVersion "9\.9\.9" is not one podnet runs plugins at/);
  // f-refused's failed ADD is not taken back by its DEL (the reference bridge's DEL fails as its
  // ADD did), so it is held (ADR 11), not refused: the hold is what stops its retries.
  for (const n of ['missing', 'garbage', 'hang', 'badshape', 'notype', 'badversion']) t.match(explained, new RegExp(`PodNetworkConfig default/f-${n} spec: nothing of it applies to the pod until all of it can`), `f-${n} is refused whole`);
  t.ok(existsSync(`${marks}/garbage-DEL`), 'the garbage ADD was taken back with DEL');
  t.ok(existsSync(`${marks}/hang-DEL`), 'the hung ADD was killed and taken back with DEL');
  for (const ifname of ['net2', 'net3', 'net4', 'net5', 'net6', 'net7', 'net8']) t.equal(await linkOf(pod.ns.name, ifname), undefined, `no ${ifname} is left in the pod`);
  t.same(await allocations(ipam.path, 'refused'), [], 'no address is left taken');
  // A failing ADD is tried again with backoff, so its intent may be on file; never as made.
  const records = await Promise.all((await readdir(`${daemon.stateDir}/delegated`)).filter((n) => n.endsWith('.json')).map(async (n) => JSON.parse(await readFile(`${daemon.stateDir}/delegated/${n}`, 'utf8')) as { result?: unknown }));
  t.same(records.filter((r) => r.result !== undefined), [], 'no failed attachment is recorded as made');
  t.ok(await linkOf(pod.ns.name, 'net1'), 'the good attachment is untouched');
  t.equal((await linkOf(pod.ns.name, 'eth0'))?.mtu, 1500, 'eth0 is untouched');
});

t.test('macvlan with host-local, and host-device moving a host link into the pod and back', { skip: skip ?? missingPrerequisite([`${referencePluginDir}/macvlan`, `${referencePluginDir}/host-device`]) }, async (t) => {
  const daemon = await delegatingDaemon(t);
  const ipam = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-ipam-' });
  t.teardown(() => ipam.cleanup());
  const parent = uniqueName('pndm');
  const [device, peer] = [uniqueName('pnhd'), uniqueName('pnhp')];
  for (const name of [parent, device, peer]) removeLinkAtTeardown(t, name);
  // A veth for a parent: this kernel has no dummy links.
  await execa('ip', ['link', 'add', parent, 'type', 'veth', 'peer', 'name', `${parent}p`]);
  for (const l of [parent, `${parent}p`]) await execa('ip', ['link', 'set', l, 'up']);
  await execa('ip', ['link', 'add', device, 'type', 'veth', 'peer', 'name', peer]);
  const pods = [await startPod(t, daemon, 'pod-m'), await startPod(t, daemon, 'pod-n')];
  const cli = podnetCli(daemon);
  const docs = `${header}
kind: Network
metadata: { name: mv }
spec:
  type: cni
  ${everyPod}
  cni: { config: { type: macvlan, master: ${parent}, mode: bridge, ipam: { type: host-local, ranges: [[{ subnet: 198.18.112.0/24 }]], dataDir: ${ipam.path} } } }
---
${header}
kind: Network
metadata: { name: hd }
spec:
  type: cni
  ${everyPod}
  cni: { config: { cniVersion: 0.4.0, type: host-device, device: ${device} } }
---
${attachConfig('mv', 'net1', ['pod-m', 'pod-n'])}---
${header}
kind: PodNetworkConfig
metadata: { name: hd-pod, namespace: default }
spec:
  podSelector: { matchLabels: { podnetwork.opdev.io/pod-name: pod-m } }
  attachments: [{ network: hd, interface: net7 }]
`;
  t.equal((await cli.apply('all.yaml', docs)).exitCode, 0);
  const addresses = [];
  for (const pod of pods) {
    addresses.push((await net1Address(pod, '198.18.112.')).split('/')[0]!);
    t.equal((await linkOf(pod.ns.name, 'net1'))?.linkinfo?.info_kind, 'macvlan', `${pod.name}: net1 is a macvlan`);
  }
  const ping = await execa('ip', ['netns', 'exec', pods[0]!.ns.name, 'busybox', 'ping', '-c', '1', '-W', '2', addresses[1]!], { reject: false });
  t.equal(ping.exitCode, 0, 'pod-m reaches pod-n over the macvlan network');
  await until('the host device is in pod-m as net7', async () => ((await linkOf(pods[0]!.ns.name, 'net7')) ? true : undefined));
  t.equal(await linkOf(undefined, device), undefined, 'and no longer on the host');

  t.equal((await cli.delete('all.yaml')).exitCode, 0);
  await until('the host device is back on the host', async () => ((await linkOf(undefined, device)) ? true : undefined));
  for (const pod of pods) await until(`net1 gone from ${pod.name}`, async () => ((await linkOf(pod.ns.name, 'net1')) === undefined ? true : undefined));
  t.equal(await linkOf(pods[0]!.ns.name, 'net7'), undefined, 'net7 left pod-m');
  await until("host-local's addresses released", async () => ((await allocations(ipam.path, 'mv')).length === 0 ? true : undefined));
});

t.test('a failed ADD whose DEL keeps failing is held: not run again, so not leaked again, until the config changes', { skip }, async (t) => {
  const fakes = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-plugins-' });
  t.teardown(() => fakes.cleanup());
  // Every call leaves a mark, as a plugin leaks what a refused ADD took; ADD and DEL both fail.
  await writeFile(
    `${fakes.path}/leaky`,
    `#!/bin/sh
case "$(cat)" in *size*) config=changed ;; *) config=first ;; esac
mktemp ${fakes.path}/$CNI_COMMAND-$config.XXXXXX >/dev/null
echo '{"cniVersion":"1.0.0","code":7,"msg":"no room left"}'
exit 1
`,
  );
  await chmod(`${fakes.path}/leaky`, 0o755);
  const calls = async (command: string, config: 'first' | 'changed' = 'first') => (await readdir(fakes.path)).filter((n) => n.startsWith(`${command}-${config}.`)).length;
  const daemon = await delegatingDaemon(t, { extraBinDir: fakes.path });
  const pod = await startPod(t, daemon, 'pod-l');
  const cli = podnetCli(daemon);
  const docs = (extra: string) => `${header}
kind: Network
metadata: { name: leaky }
spec: { type: cni, ${everyPod}, cni: { config: { cniVersion: 1.0.0, type: leaky${extra} } } }
---
${attachConfig('leaky', 'net1', ['pod-l'])}`;
  t.equal((await cli.apply('leaky.yaml', docs('')).then((r) => r.exitCode)), 0);
  const held = await until('the attachment held', async () => {
    const out = (await cli.explain('default/pod-l')).stdout;
    return out.includes('are not run for this pod again') ? out : undefined;
  }, 30_000);
  t.match(held, /spec\.attachments\[0\]: Network leaky: plugin leaky ADD: CNI error 7[^:]*: no room left; its DEL failed 3 times, so the Network's plugins are not run for this pod again until the Network's config changes/, 'the ADD\'s error, and why it is not tried again');
  // Resyncs come every second: three of them run nothing.
  await new Promise((r) => setTimeout(r, 3500));
  t.same([await calls('ADD'), await calls('DEL')], [1, 3], 'one ADD, three DELs, and nothing since');
  t.match(daemon.log(), /gave up taking back a failed ADD/);

  // A changed config is a new attempt.
  t.equal((await cli.apply('leaky.yaml', docs(', size: 2')).then((r) => r.exitCode)), 0);
  await until('the changed config run, and its failed ADD taken back with DEL', async () => ((await calls('DEL', 'changed')) >= 1 ? true : undefined));
  t.equal(await calls('ADD', 'changed'), 1, 'the changed config was run once');
  t.same([await calls('ADD'), await calls('DEL')], [1, 3], 'the held record of the first went without a DEL');
  // No longer asked for: held or not, its record goes, and no DEL of the first config ran.
  t.equal((await cli.delete('leaky.yaml')).exitCode, 0);
  await until('no delegated record is left', async () => ((await readdir(`${daemon.stateDir}/delegated`)).some((n) => n.endsWith('.json')) ? undefined : true), 30_000);
  t.equal(await calls('DEL'), 3);
  t.ok((await calls('DEL', 'changed')) <= 3, 'the changed config\'s DEL was tried at most three times');
  t.equal(await linkOf(pod.ns.name, 'net1'), undefined);
});

t.test('a list at CNI 1.1 (chosen from cniVersions): no ADD while STATUS fails; GC on resync with the attachments podnet still has as the valid ones; DEL after a restart gets the cached result', { skip }, async (t) => {
  const fakes = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-plugins-' });
  t.teardown(() => fakes.cleanup());
  // A 1.1 plugin that makes nothing, answers ADD with an address of its own, and notes GC's and DEL's stdin.
  await writeFile(
    `${fakes.path}/gcnote`,
    `#!/bin/sh
input=$(cat)
case "$CNI_COMMAND" in
  STATUS) if [ -e ${fakes.path}/not-ready ]; then echo '{"cniVersion":"1.1.0","code":50,"msg":"waiting for its agent"}'; exit 1; fi ;;
  ADD) touch ${fakes.path}/added-$CNI_CONTAINERID; echo '{"cniVersion":"1.1.0","interfaces":[],"ips":[{"address":"198.18.115.7/24"}]}' ;;
  GC) echo "$input" > ${fakes.path}/last-gc.json ;;
  DEL) echo "$input" > ${fakes.path}/del-$CNI_CONTAINERID.json ;;
esac
exit 0
`,
  );
  await chmod(`${fakes.path}/gcnote`, 0o755);
  await writeFile(`${fakes.path}/not-ready`, '');
  const daemon = await delegatingDaemon(t, { extraBinDir: fakes.path });
  const pods = [await startPod(t, daemon, 'pod-g'), await startPod(t, daemon, 'pod-h')];
  const cli = podnetCli(daemon);
  // cniVersions: the list says it runs at 1.0.0 and at 1.1.0; podnet runs it at 1.1.0.
  const docs = `${header}
kind: Network
metadata: { name: collected }
spec: { type: cni, ${everyPod}, cni: { config: { cniVersion: 1.0.0, cniVersions: [1.0.0, 1.1.0], type: gcnote } } }
---
${attachConfig('collected', 'net1', ['pod-g', 'pod-h'])}`;
  t.equal((await cli.apply('gc.yaml', docs)).exitCode, 0);
  // STATUS says the plugin is not ready: no ADD runs, and the pod is told why.
  const waiting = await until('STATUS told', async () => {
    const out = (await cli.explain('default/pod-g')).stdout;
    return out.includes('CNI error 50') ? out : undefined;
  });
  t.match(waiting, /Network collected: plugin gcnote STATUS: CNI error 50 \(plugin not available\): waiting for its agent/);
  t.same((await readdir(fakes.path)).filter((n) => n.startsWith('added-')), [], 'no ADD ran while STATUS failed');
  await rm(`${fakes.path}/not-ready`);
  const valid = async () => {
    const text = await readFile(`${fakes.path}/last-gc.json`, 'utf8').catch(() => undefined);
    if (!text) return undefined;
    const stdin = JSON.parse(text) as { name: string; cniVersion: string; 'cni.dev/valid-attachments': { containerID: string; ifname: string }[] };
    return stdin;
  };
  const both = await until('a GC naming both attachments', async () => {
    const stdin = await valid();
    return stdin?.['cni.dev/valid-attachments'].length === 2 ? stdin : undefined;
  });
  t.same([both.name, both.cniVersion], ['collected', '1.1.0']);
  t.same(both['cni.dev/valid-attachments'].map((a) => a.containerID).sort(), pods.map((p) => p.att.containerId).sort());

  // pod-g's sandbox goes (its netns with it): its attachment is no longer valid.
  await execa('ip', ['netns', 'del', pods[0]!.ns.name]);
  const after = await until('a GC naming only pod-h', async () => {
    const stdin = await valid();
    return stdin?.['cni.dev/valid-attachments'].length === 1 ? stdin : undefined;
  });
  t.same(after['cni.dev/valid-attachments'], [{ containerID: pods[1]!.att.containerId, ifname: 'net1' }]);

  // The daemon restarts between attach and detach: DEL is given the result ADD answered.
  await daemon.kill();
  t.equal((await cli.delete('gc.yaml')).exitCode, 0);
  await daemon.start();
  const del = await until("pod-h's DEL", () => readFile(`${fakes.path}/del-${pods[1]!.att.containerId}.json`, 'utf8').then((text) => JSON.parse(text) as { prevResult?: unknown }, () => undefined));
  t.same(del.prevResult, { cniVersion: '1.1.0', interfaces: [], ips: [{ address: '198.18.115.7/24' }] }, 'the cached result, as prevResult');
});

t.test('the reference plugins of a release that speaks 1.1 (bridge, host-local): STATUS, ADD, CHECK, GC and DEL on the real kernel; a CHECK that fails on the bridge, not the pod, keeps the attachment', { skip: skip ?? referencePluginsSkip() }, async (t) => {
  const pluginDir = await ensureReferencePlugins();
  const daemon = await delegatingDaemon(t, { binDirs: [pluginDir] });
  const bridge = uniqueName('cn11');
  removeLinkAtTeardown(t, bridge);
  const ipam = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-ipam-' });
  t.teardown(() => ipam.cleanup());
  const pods = [await startPod(t, daemon, 'pod-m'), await startPod(t, daemon, 'pod-n')];
  const cli = podnetCli(daemon);
  const docs = `${header}
kind: Network
metadata: { name: current }
spec:
  type: cni
  ${everyPod}
  cni:
    config:
      cniVersion: 1.1.0
      plugins:
        - { type: bridge, bridge: ${bridge}, ipam: { type: host-local, ranges: [[{ subnet: 198.18.116.0/24 }]], dataDir: ${ipam.path} } }
---
${attachConfig('current', 'net1', ['pod-m', 'pod-n'])}`;
  t.equal((await cli.apply('current.yaml', docs)).exitCode, 0);
  const addresses = [];
  for (const pod of pods) addresses.push((await net1Address(pod, '198.18.116.')).split('/')[0]!);
  const ping = await execa('ip', ['netns', 'exec', pods[0]!.ns.name, 'busybox', 'ping', '-c', '1', '-W', '2', addresses[1]!], { reject: false });
  t.equal(ping.exitCode, 0, 'pod-m reaches pod-n');
  // Resyncs come every second, each with CHECK and GC. The bridge's MAC is changed (without a
  // gateway address the plugin sets none, and the kernel's follows the lowest port): bridge's
  // CHECK then fails for both pods, though their interfaces are as made. They are kept.
  await execa('ip', ['link', 'set', bridge, 'address', '02:00:00:00:00:01']);
  await until('CHECK failing on the bridge MAC, told once for each pod', async () => (daemon.log().match(/CHECK failed, but the pod's interface is as the plugins made it; kept/g)?.length === 2 ? true : undefined));
  t.match(daemon.log(), /Bridge interface .* Mac doesn't match/, "the plugin's words are in the log");
  await new Promise((r) => setTimeout(r, 2500));
  t.same((await allocations(ipam.path, 'current')).sort(), [...addresses].sort(), "host-local's addresses are the pods' still");
  for (const [i, pod] of pods.entries()) t.equal((await net1Address(pod, '198.18.116.')).split('/')[0], addresses[i], `${pod.name} keeps its address`);
  t.equal(daemon.log().match(/CHECK failed, but the pod's interface/g)?.length, 2, 'and is not told again');
  t.notMatch(daemon.log(), /CHECK failed; attaching again|GC of a delegated network failed/, 'nothing attached again; GC passed on every resync');
  t.equal((await cli.delete('current.yaml')).exitCode, 0);
  for (const pod of pods) await until(`net1 gone from ${pod.name}`, async () => ((await linkOf(pod.ns.name, 'net1')) === undefined ? true : undefined));
  await until("host-local's addresses released", async () => ((await allocations(ipam.path, 'current')).length === 0 ? true : undefined));
});

t.test('the runtime\'s DEL waits for the delegated DELs while the netns is there: host-device gives its device back before the netns goes', { skip: skip ?? missingPrerequisite([`${referencePluginDir}/host-device`]) }, async (t) => {
  // After host-device in the list, a plugin whose DEL (run first) takes a while: a DEL that did not
  // wait for it would let the netns go, and the device with it, before host-device gives it back.
  // Its result has no interfaces, which host-device's CHECK would refuse: the list opts out of CHECK.
  const fakes = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-plugins-' });
  t.teardown(() => fakes.cleanup());
  await writeFile(`${fakes.path}/slowdel`, `#!/bin/sh
cat >/dev/null
case "$CNI_COMMAND" in
  ADD) echo '{"cniVersion":"0.4.0","interfaces":[],"ips":[]}' ;;
  DEL) sleep 0.4 ;;
esac
exit 0
`);
  await chmod(`${fakes.path}/slowdel`, 0o755);
  const daemon = await delegatingDaemon(t, { extraBinDir: fakes.path });
  const [device, peer] = [uniqueName('pnhd'), uniqueName('pnhp')];
  for (const name of [device, peer]) removeLinkAtTeardown(t, name);
  await execa('ip', ['link', 'add', device, 'type', 'veth', 'peer', 'name', peer]);
  const pod = await startPod(t, daemon, 'pod-d');
  const cli = podnetCli(daemon);
  const docs = `${header}
kind: Network
metadata: { name: hd }
spec: { type: cni, ${everyPod}, cni: { config: { cniVersion: 0.4.0, disableCheck: true, plugins: [{ type: host-device, device: ${device} }, { type: slowdel }] } } }
---
${attachConfig('hd', 'net1', ['pod-d'])}`;
  t.equal((await cli.apply('hd.yaml', docs)).exitCode, 0);
  await until('the device is in the pod', async () => ((await linkOf(pod.ns.name, 'net1')) ? true : undefined));

  // What a runtime does when the pod goes: DEL of its chain (podnet last), then the netns removed at once.
  const runtime = new CniRuntime([daemon.binDir]);
  // A timeout that a loaded machine cannot reach: what is asserted is that the DEL waits, not how fast the machine is.
  const timeoutMs = 20_000;
  const list = { cniVersion: '1.0.0', name: 'primary', plugins: [{ type: 'podnet', ...daemon.pluginSettings(), timeoutMs }] };
  const started = Date.now();
  await runtime.del(list, pod.att);
  const took = Date.now() - started;
  await execa('ip', ['netns', 'del', pod.ns.name]);
  t.ok(await linkOf(undefined, device), `the device is back on the host under its own name (the DEL took ${took} ms)`);
  t.ok(took >= 400 && took < timeoutMs, 'it waited for the delegated DELs, within the plugin\'s timeout');
});
