// Bad input on the real kernel, as a runtime, a local user or a careless admin would send it:
// each gets its clear error, and the daemon stays healthy (it answers, and a good change made
// beside the bad one is applied).
import t from 'tap';
import { execa } from 'execa';
import { mkdir, symlink, unlink, rm, writeFile } from 'node:fs/promises';
import { daemonSandbox } from './lib/daemon.ts';
import { linkOf, podnetCli, startPod, until } from './lib/engine.ts';
import { missingPrerequisite } from './lib/env.ts';
import { removeLinkAtTeardown, uniqueName } from './lib/netns.ts';

const skip = missingPrerequisite(['/bin/busybox']);

t.test('files that are not documents in the config dir are named, never read; the good ones beside them apply', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const bridge = uniqueName('pnbr');
  removeLinkAtTeardown(t, bridge);
  const pod = await startPod(t, daemon, 'pod-f');
  const cli = podnetCli(daemon);
  const at = (name: string) => `${daemon.configDir}/${name}`;
  // The bad ones first: a FIFO (which a read would block on), a device, a folder, a link to nothing, an alias bomb, a deep document.
  await execa('mkfifo', [at('fifo.yaml')]);
  await symlink('/dev/zero', at('zero.yaml'));
  await mkdir(at('folder.yaml'));
  await symlink(at('nowhere'), at('dangling.yaml'));
  await writeFile(at('bomb.yaml'), ['a: &a [x, x, x, x, x, x, x, x, x]', ...Array.from({ length: 9 }, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [${Array(9).fill(`*${String.fromCharCode(97 + i)}`).join(', ')}]`)].join('\n'));
  await writeFile(at('deep.yaml'), `kind: Network\nspec: ${'['.repeat(5000)}${']'.repeat(5000)}\n`);
  await cli.apply(
    'good.yaml',
    `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: fine }
spec: { type: bridge, bridge: { name: ${bridge} }, namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: default } } }
---
apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: fine, namespace: default }
spec: { podSelector: {}, attachments: [{ network: fine, interface: net1 }] }
`,
  );
  await until('the good documents applied', async () => ((await linkOf(pod.ns.name, 'net1')) ? true : undefined));
  t.pass('net1 is made from the good documents beside the bad files');
  const status = await cli.podnet('status', '--socket', daemon.socketPath, '--ready');
  t.equal(status.exitCode, 0, 'the daemon answers and is ready');

  const explained = (await cli.explain('default/pod-f')).stdout;
  t.match(explained, /documents podnet cannot use, for any pod:/);
  for (const [file, why] of [
    ['fifo.yaml', 'is a FIFO, not a regular file'],
    ['zero.yaml', 'is a device, not a regular file'],
    ['folder.yaml', 'is a folder, not a regular file'],
    ['dangling.yaml', 'is a symlink to nothing'],
    ['bomb.yaml document 1 (syntax)', 'alias'],
    ['deep.yaml document 1 (syntax)', 'nests mappings and lists more than 64 deep'],
  ] as const) {
    t.ok(explained.split('\n').some((line) => line.includes(file.split(' ')[0]!) && line.toLowerCase().includes(why.toLowerCase())), `explain names ${file}: ${why}`);
  }
  t.match(daemon.log(), /a document podnet cannot use.*fifo\.yaml/, 'and the log told it');

  // Taken away, they are no one's problem any more; nothing was left waiting on the FIFO.
  for (const name of ['fifo.yaml', 'zero.yaml', 'dangling.yaml', 'bomb.yaml', 'deep.yaml']) await unlink(at(name));
  await rm(at('folder.yaml'), { recursive: true });
  await until('the problems gone from explain', async () => ((await cli.explain('default/pod-f')).stdout.includes('documents podnet cannot use') ? undefined : true));
  t.ok(await linkOf(pod.ns.name, 'net1'), 'net1 stays');
});

t.test('a runtime\'s stdin nested too deep, or too big, is a CNI error naming the bound; nothing is recorded and the daemon goes on', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const env = { CNI_COMMAND: 'ADD', CNI_CONTAINERID: uniqueName('ctr'), CNI_NETNS: '/var/run/netns/none', CNI_IFNAME: 'eth0', CNI_PATH: daemon.binDir };
  const settings = JSON.stringify(daemon.pluginSettings()).slice(1, -1);
  const deep = `{"cniVersion":"1.0.0","name":"k","type":"podnet",${settings},"prevResult":${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}}`;
  for (const [input, why] of [
    [deep, /nests arrays and objects more than 64 deep/],
    [`{"cniVersion":"1.0.0","name":"k","type":"podnet",${settings},"pad":"${'x'.repeat(3 * 1024 * 1024)}"}`, /bytes, more than the 1048576 podnet reads/],
  ] as const) {
    const run = await execa(`${daemon.binDir}/podnet`, [], { env, input, reject: false });
    t.not(run.exitCode, 0);
    t.match(JSON.parse(run.stdout), { code: 6, msg: why });
  }
  t.same(await daemon.records(), [], 'nothing recorded');
  const pod = await startPod(t, daemon, 'pod-after');
  t.ok((await daemon.records()).some((r) => r.containerId === pod.att.containerId), 'a good ADD right after is recorded');
});

t.test('two spellings of one kernel knob: a config rewritten from one to the other, then deleted, leaves the pod as it was', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const pod = await startPod(t, daemon, 'pod-s');
  const cli = podnetCli(daemon);
  const forwarding = async () => (await execa('ip', ['netns', 'exec', pod.ns.name, 'cat', '/proc/sys/net/ipv4/ip_forward'])).stdout.trim();
  const before = await forwarding();
  const asking = (name: string) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: fwd, namespace: default }
spec: { podSelector: {}, sysctls: [{ name: ${name}, value: "1" }] }
`;
  await cli.apply('fwd.yaml', asking('net.ipv4.conf.all.forwarding'));
  await until('forwarding on', async () => ((await forwarding()) === '1' ? true : undefined));
  await cli.apply('fwd.yaml', asking('net.ipv4.ip_forward'));
  await until('the rewrite applied', async () => ((await cli.explain('default/pod-s')).stdout.includes('sysctl net.ipv4.ip_forward = 1') ? true : undefined));
  t.equal(await forwarding(), '1', 'still on');
  await cli.delete('fwd.yaml');
  await until('forwarding back as it was', async () => ((await forwarding()) === before ? true : undefined));
  t.equal(await forwarding(), before, `back to ${before}, the value before podnet's first change`);
});

t.test('podnet apply -f says when no daemon follows the folder it wrote to', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const cli = podnetCli(daemon);
  const doc = `apiVersion: podnetwork.opdev.io/v1alpha1
kind: Network
metadata: { name: quiet }
spec: { type: bridge, namespaceSelector: { matchLabels: { kubernetes.io/metadata.name: default } } }
`;
  const followed = await cli.apply('quiet.yaml', doc);
  t.equal(followed.stdout, 'Network quiet applied', 'the daemon at the socket follows the folder: nothing more to say');
  const elsewhere = `${daemon.root}/elsewhere.d`;
  const lonely = await cli.podnet('apply', '-f', `${daemon.root}/quiet.yaml`, '--config-dir', elsewhere, '--socket', daemon.socketPath);
  t.match(lonely.stdout, new RegExp(`^Network quiet applied\nnote: the daemon at ${daemon.socketPath} follows ${daemon.configDir}, not ${elsewhere}: the documents wait there until a daemon runs with --config-dir ${elsewhere}$`));
  const none = await cli.podnet('apply', '-f', `${daemon.root}/quiet.yaml`, '--config-dir', elsewhere, '--socket', `${daemon.root}/none.sock`);
  t.match(none.stdout, /note: no podnet daemon answers at .*none\.sock, not /);
});

t.test('an edit that cannot be applied whole keeps the generation the pod had; a config that conflicts with it is refused; deleting takes it all back', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const pod = await startPod(t, daemon, 'pod-k');
  const cli = podnetCli(daemon);
  const mtu = async () => (await linkOf(pod.ns.name, 'eth0'))?.mtu;
  const forwarding = async () => (await execa('ip', ['netns', 'exec', pod.ns.name, 'cat', '/proc/sys/net/ipv4/ip_forward'])).stdout.trim();
  const before = await forwarding();
  const keep = (mtuValue: number, sysctl: string) => `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: keep, namespace: default }
spec: { podSelector: {}, interfaces: [{ name: eth0, mtu: ${mtuValue} }], sysctls: [{ name: ${sysctl}, value: "1" }] }
`;
  await cli.apply('keep.yaml', keep(1400, 'net.ipv4.ip_forward'));
  await until('the first generation applied', async () => ((await mtu()) === 1400 && (await forwarding()) === '1' ? true : undefined));

  // An edit with a key off the allowlist, dropped in by hand (apply -f would refuse it).
  await writeFile(`${daemon.configDir}/podnetworkconfig.default.keep.yaml`, keep(1300, 'net.core.rmem_max'));
  // A write by hand is not atomic: a pass may read it halfway (then the file keeps its last whole
  // documents) and the next event or the resync reads it whole; on a loaded machine that is more
  // than the default wait.
  const told = await until(
    'the edit is told',
    async () => {
      const out = (await cli.explain('default/pod-k')).stdout;
      return out.includes('the one it had before stays') ? out : undefined;
    },
    45_000,
  );
  t.match(told, /PodNetworkConfig default\/keep spec\.sysctls\[0\]\.name: net\.core\.rmem_max is not on podnet's sysctl allowlist/);
  t.equal(await mtu(), 1400, 'eth0 keeps the MTU of the generation it had');
  t.equal(await forwarding(), '1', 'and its forwarding');

  await cli.apply('rival.yaml', `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: rival, namespace: default }
spec: { podSelector: {}, interfaces: [{ name: eth0, mtu: 1280 }] }
`);
  const rival = await until('the rival is told', async () => {
    const out = (await cli.explain('default/pod-k')).stdout;
    return out.includes('which the pod has already') ? out : undefined;
  });
  t.match(rival, /PodNetworkConfig default\/rival spec\.interfaces\[0\]\.mtu: the mtu of eth0 is set, differently, by PodNetworkConfig default\/keep \(spec\.interfaces\[0\]\.mtu\), which the pod has already; this one does not apply/);
  t.equal(await mtu(), 1400, 'the config applied first keeps its setting');

  await cli.delete('rival.yaml');
  await unlink(`${daemon.configDir}/podnetworkconfig.default.keep.yaml`);
  await until('everything taken back', async () => ((await mtu()) === 1500 && (await forwarding()) === before ? true : undefined));
  t.pass('deleting the configs takes back what they caused');
});

t.test('a step the kernel refuses names the document and field that asked for it', { skip }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  await startPod(t, daemon, 'pod-g');
  const cli = podnetCli(daemon);
  // Valid in every document's eyes; only the kernel can tell the gateway is on no link of the pod.
  await cli.apply('gw.yaml', `apiVersion: podnetwork.opdev.io/v1alpha1
kind: PodNetworkConfig
metadata: { name: gw, namespace: default }
spec: { podSelector: {}, routes: [{ to: 198.18.95.0/24, via: 192.0.2.77, table: 100 }] }
`);
  const told = await until('the failure is told', async () => {
    const out = (await cli.explain('default/pod-g')).stdout;
    return /last error: (?!none)/.test(out) ? out : undefined;
  });
  t.match(told, /last error: PodNetworkConfig default\/gw spec\.routes\[0\]: the node could not make it: ip route (add|replace) 198\.18\.95\.0\/24 via 192\.0\.2\.77 .*/);
  t.match(told, /PodNetworkConfig default\/gw spec: nothing of it applies to the pod until all of it can/, 'and the config, refused whole, says so');
});
