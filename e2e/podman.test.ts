// podman (runc, CNI backend) as the real container runtime calling a conflist that chains podnet:
// `podman run` records the container, `podman rm` removes the record. See shared TESTING.md.
import t from 'tap';
import { execa } from 'execa';
import { copyFile, mkdir, symlink, writeFile } from 'node:fs/promises';
import { dir } from 'tmp-promise';
import { daemonSandbox } from './lib/daemon.ts';
import { missingPrerequisite, referencePluginDir } from './lib/env.ts';
import { removeLinkAtTeardown, uniqueName } from './lib/netns.ts';

const skip = missingPrerequisite(['/usr/bin/podman', '/usr/sbin/runc', '/bin/busybox', `${referencePluginDir}/bridge`]);

t.test('podman run records the container, podman rm removes it', { skip }, async (t) => {
  const daemon = await daemonSandbox(t);
  await daemon.start();
  const work = await dir({ unsafeCleanup: true, prefix: 'podnet-podman-' });
  t.teardown(() => work.cleanup());
  const root = work.path;

  // A root filesystem from busybox-static; no image registry needed.
  await mkdir(`${root}/rootfs/bin`, { recursive: true });
  await copyFile('/bin/busybox', `${root}/rootfs/bin/busybox`);
  for (const tool of ['sh', 'ip', 'sleep']) await symlink('busybox', `${root}/rootfs/bin/${tool}`);

  // podman finds podnet and the reference plugins in one plugin dir of the test's own.
  await mkdir(`${root}/cni-bin`);
  await symlink(`${daemon.binDir}/podnet`, `${root}/cni-bin/podnet`);
  for (const p of ['bridge', 'host-local', 'loopback']) await symlink(`${referencePluginDir}/${p}`, `${root}/cni-bin/${p}`);
  await writeFile(
    `${root}/containers.conf`,
    `[containers]\ndefault_ulimits = []\n[network]\nnetwork_backend = "cni"\ncni_plugin_dirs = ["${root}/cni-bin"]\n`,
  );

  const network = uniqueName('pnpod');
  const bridge = uniqueName('pnpbr');
  removeLinkAtTeardown(t, bridge);
  await mkdir(`${root}/net`);
  await writeFile(
    `${root}/net/${network}.conflist`,
    JSON.stringify({
      cniVersion: '1.0.0',
      name: network,
      plugins: [
        { type: 'bridge', bridge, isGateway: true, ipam: { type: 'host-local', ranges: [[{ subnet: '198.18.61.0/24' }]], dataDir: `${root}/ipam` } },
        { type: 'podnet', ...daemon.pluginSettings() },
      ],
    }),
  );

  const podman = (args: string[]) =>
    execa(
      'podman',
      ['--root', `${root}/storage`, '--runroot', `${root}/runroot`, '--network-config-dir', `${root}/net`,
        '--runtime', '/usr/sbin/runc', '--cgroup-manager=cgroupfs', ...args],
      { env: { CONTAINERS_CONF: `${root}/containers.conf` } },
    );
  const name = uniqueName('cnf-');
  t.teardown(() => podman(['rm', '-f', '--time', '0', name]).catch(() => undefined));

  const { stdout: containerId } = await podman(['run', '-d', '--name', name, '--ulimit', 'host', '--network', network,
    '--rootfs', `${root}/rootfs`, '/bin/sleep', '300']);
  const records = await daemon.records();
  t.equal(records.length, 1, 'one attachment recorded');
  const [record] = records;
  t.equal(record?.containerId, containerId.trim(), 'the record names the container podman made');
  t.equal(record?.pod.name, name, 'podman passes the container name as K8S_POD_NAME');
  t.equal(record?.network, network);
  t.equal(record?.ifname, 'eth0');

  // The record's netns is the one the container runs in: its eth0 has the bridge's address.
  const { stdout: inside } = await execa('ip', ['-n', record!.netns.split('/').pop()!, '-json', 'addr', 'show', 'dev', 'eth0']);
  const { stdout: fromPodman } = await podman(['exec', name, 'ip', '-o', '-4', 'addr', 'show', 'dev', 'eth0']);
  const address = (JSON.parse(inside) as { addr_info: { family: string; local: string }[] }[])[0]?.addr_info.find((a) => a.family === 'inet')?.local;
  t.match(address, /^198\.18\.61\.\d+$/);
  t.ok(fromPodman.includes(`${address}/24`), 'the container sees the same address in its own netns');

  const { stdout: table } = await execa(`${daemon.binDir}/podnet`, ['pods', '--socket', daemon.socketPath]);
  t.match(table, new RegExp(`${name}\\s+${containerId.trim().slice(0, 12)}\\s+eth0\\s+${record!.netns}\\s+\\d+s\\s+yes`), 'podnet pods lists it');

  await podman(['rm', '-f', '--time', '0', name]);
  t.same(await daemon.records(), [], 'podman rm ran DEL through the chain: the record is gone');
});
