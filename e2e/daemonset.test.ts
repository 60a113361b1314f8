// The image (Containerfile, built by scripts/image.ts) and the DaemonSet's two containers, run with
// podman the way a kubelet would run them: each container's args, securityContext and mounts are
// read from daemonset/daemonset.yaml, with the node's folders (hostPath) mapped into a folder of the
// test's own, except the netns folders, which are the node's: a netns made after the daemon
// started must reach it through the mount's propagation.
import t, { type Test } from 'tap';
import { execa } from 'execa';
import { mkdir, readFile, stat, writeFile } from 'node:fs/promises';
import { dir } from 'tmp-promise';
import { parse } from 'yaml';
import { buildImage } from '../scripts/image.ts';
import { CniRuntime } from './lib/cni-runtime.ts';
import { until } from './lib/engine.ts';
import { missingPrerequisite, repoRoot } from './lib/env.ts';
import { makeNetns, uniqueName } from './lib/netns.ts';

const skip = missingPrerequisite(['/usr/sbin/debootstrap', '/usr/bin/podman', '/usr/sbin/runc']);

interface Mount {
  name: string;
  mountPath: string;
  readOnly?: boolean;
  mountPropagation?: string;
}
interface Container {
  name: string;
  args: string[];
  securityContext: { privileged?: boolean; runAsUser?: number; readOnlyRootFilesystem?: boolean; capabilities?: { drop?: string[] } };
  volumeMounts: Mount[];
}
interface PodSpec {
  hostNetwork: boolean;
  hostPID: boolean;
  initContainers: Container[];
  containers: Container[];
  volumes: { name: string; hostPath?: { path: string }; emptyDir?: unknown }[];
}

const nodeOwned = new Set(['/run/netns']);

/** `podman run` arguments for one container of the pod spec, hostPaths under `node` (but the netns folders). */
function runArgs(spec: PodSpec, container: Container, node: string): string[] {
  const args = ['--ulimit', 'host'];
  if (spec.hostNetwork) args.push('--network', 'host');
  if (spec.hostPID) args.push('--pid', 'host');
  const sc = container.securityContext;
  if (sc.privileged) args.push('--privileged');
  if (sc.runAsUser !== undefined) args.push('--user', String(sc.runAsUser));
  if (sc.readOnlyRootFilesystem) args.push('--read-only');
  for (const cap of sc.capabilities?.drop ?? []) args.push('--cap-drop', cap);
  for (const m of container.volumeMounts) {
    const volume = spec.volumes.find((v) => v.name === m.name)!;
    if (volume.emptyDir) {
      args.push('--tmpfs', m.mountPath);
      continue;
    }
    const hostPath = volume.hostPath!.path;
    const source = nodeOwned.has(hostPath) ? hostPath : `${node}${hostPath}`;
    const options = [m.readOnly ? 'ro' : 'rw', ...(m.mountPropagation === 'HostToContainer' ? ['rslave'] : [])];
    args.push('--volume', `${source}:${m.mountPath}:${options.join(',')}`);
  }
  return args;
}

async function nodeFolders(t: Test, spec: PodSpec): Promise<string> {
  const tmp = await dir({ unsafeCleanup: true, prefix: 'podnet-node-' });
  t.teardown(tmp.cleanup);
  for (const v of spec.volumes) if (v.hostPath && !nodeOwned.has(v.hostPath.path)) await mkdir(`${tmp.path}${v.hostPath.path}`, { recursive: true });
  for (const p of nodeOwned) await mkdir(p, { recursive: true });
  return tmp.path;
}

t.test('the image runs the DaemonSet: install chains podnet, the daemon gets ready and adopts a pod made after it started', { skip, timeout: 900_000 }, async (t) => {
  const work = await dir({ unsafeCleanup: true, prefix: 'podnet-image-' });
  t.teardown(work.cleanup);
  await writeFile(`${work.path}/containers.conf`, '[containers]\ndefault_ulimits = []\n');
  const env = { CONTAINERS_CONF: `${work.path}/containers.conf` };
  const podman = (args: string[]) => execa('podman', ['--runtime', '/usr/sbin/runc', '--cgroup-manager=cgroupfs', ...args], { env, reject: false });

  const image = `localhost/podnet:${uniqueName('e2e-')}`;
  t.teardown(() => podman(['rmi', '--force', image]));
  buildImage(image);

  const manifest = parse(await readFile(`${repoRoot}daemonset/daemonset.yaml`, 'utf8')) as { spec: { template: { spec: PodSpec } } };
  const spec = manifest.spec.template.spec;
  const [install] = spec.initContainers;
  const [daemon] = spec.containers;
  const node = await nodeFolders(t, spec);

  // The tools the daemon runs are in the image.
  const tools = await podman(['run', '--rm', '--network', 'none', '--ulimit', 'host', '--entrypoint', '/bin/sh', image, '-c', 'ip -V && tc -V && nsenter --version && sysctl --version']);
  t.equal(tools.exitCode, 0, `ip, tc, nsenter and sysctl run in the image: ${tools.stderr}`);

  // The init container, on a conf dir whose primary is not valid CNI: exit non-zero, nothing changed.
  const conf = `${node}/etc/cni/net.d`;
  await writeFile(`${conf}/10-pods.conflist`, '{"cniVersion": "1.0.0", "name": "pods", "plugins": [');
  const refused = await podman(['run', '--rm', ...runArgs(spec, install!, node), image, ...install!.args]);
  t.not(refused.exitCode, 0, 'the init container fails, so the pod shows Init:Error');
  t.match(refused.stderr, /10-pods\.conflist: not JSON .*podnet changed nothing/, 'its log says which file and what is wrong');
  t.rejects(stat(`${node}/opt/cni/bin/podnet`), 'no executable was put in the bin dir');

  const primary = { cniVersion: '1.0.0', name: 'pods', plugins: [{ type: 'bridge', bridge: 'cni0', ipam: { type: 'host-local', ranges: [[{ subnet: '198.18.93.0/24' }]] } }] };
  await writeFile(`${conf}/10-pods.conflist`, JSON.stringify(primary));
  const installed = await podman(['run', '--rm', ...runArgs(spec, install!, node), image, ...install!.args]);
  t.equal(installed.exitCode, 0, `the init container installs, with no capability: ${installed.stderr}`);
  t.match(JSON.parse(await readFile(`${conf}/10-pods.conflist`, 'utf8')), { name: 'pods', plugins: [{ type: 'bridge' }, { type: 'podnet' }] }, 'podnet is chained into the primary');
  const onNode = await execa(`${node}/opt/cni/bin/podnet`, ['version']);
  t.match(onNode.stdout, /^podnet \d+\.\d+\.\d+/, 'the executable it put in the bin dir runs on the node');

  // The daemon container: ready, then a pod networked after it started is adopted at its next start.
  const name = uniqueName('podnet-ds-');
  t.teardown(() => podman(['rm', '--force', '--time', '0', name]));
  // No API server here (e2e/kube.test.ts has one): the daemon runs on its node's own state alone,
  // and no kubelet for a DRA driver (e2e/dra.test.ts has one).
  const daemonArgs = daemon!.args.filter((a, i, all) => a !== '--node-name' && all[i - 1] !== '--node-name' && a !== '--dra');
  const started = await podman(['run', '--detach', '--name', name, ...runArgs(spec, daemon!, node), image, ...daemonArgs]);
  t.equal(started.exitCode, 0, `the daemon container starts: ${started.stderr}`);
  const probe = async () => (await podman(['exec', name, '/usr/local/bin/podnet', 'status', '--ready'])).exitCode === 0 || undefined;
  t.ok(await until('the readiness probe passes', probe, 30_000), 'its readiness probe passes');

  const ns = await makeNetns(t);
  const containerId = uniqueName('ctr');
  await mkdir(`${node}/var/lib/cni/results`, { recursive: true });
  await writeFile(
    `${node}/var/lib/cni/results/pods-${containerId}-eth0`,
    JSON.stringify({ kind: 'cniCacheV1', containerId, ifName: 'eth0', networkName: 'pods', netns: ns.path, cniArgs: [['K8S_POD_NAMESPACE', 'shop'], ['K8S_POD_NAME', 'web-0']], result: { cniVersion: '1.0.0' } }),
  );
  t.equal((await podman(['restart', '--time', '10', name])).exitCode, 0, 'the daemon container restarts');
  await until('ready again', probe, 30_000);
  const adopted = await podman(['exec', name, '/usr/local/bin/podnet', 'pods']);
  t.match(adopted.stdout, new RegExp(`shop\\s+web-0\\s+${containerId}\\s+eth0\\s+${ns.path}\\s+\\S+\\s+yes\\s+yes`), 'the pod from the result cache is adopted');

  // A pod made now: its netns is mounted on the node after the container started, and reaches the
  // daemon only through the mount's propagation. The plugin runs on the node, as the runtime runs it.
  const later = await makeNetns(t);
  const runtime = new CniRuntime([`${node}/opt/cni/bin`]);
  const list = { cniVersion: '1.0.0', name: 'pods', plugins: [{ type: 'podnet', stateDir: `${node}/var/lib/podnet`, socketPath: `${node}/run/podnet/podnet.sock` }] };
  const att = { containerId: uniqueName('ctr'), netns: later.path, ifname: 'eth0', args: 'K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-1' };
  await runtime.invoke(list, list.plugins[0]!, 'ADD', att, { cniVersion: '1.0.0', interfaces: [{ name: 'eth0' }], ips: [] });
  const seen = await until('the new pod listed', async () => {
    const { stdout } = await podman(['exec', name, '/usr/local/bin/podnet', 'pods']);
    return stdout.includes('web-1') ? stdout : undefined;
  });
  t.match(seen, new RegExp(`shop\\s+web-1\\s+${att.containerId}\\s+eth0\\s+${later.path}\\s+\\S+\\s+yes\\s+no`), 'its netns exists for the daemon; it is recorded, not adopted');

  // Taking it off the node (daemonset/uninstall.yaml), once the daemon is stopped.
  const removal = parse(await readFile(`${repoRoot}daemonset/uninstall.yaml`, 'utf8')) as { spec: { template: { spec: PodSpec } } };
  const removalSpec = removal.spec.template.spec;
  const [uninstall] = removalSpec.initContainers;
  const early = await podman(['run', '--rm', ...runArgs(removalSpec, uninstall!, node), image, ...uninstall!.args]);
  t.not(early.exitCode, 0, 'refused while the daemon runs');
  t.match(JSON.parse(await readFile(`${conf}/10-pods.conflist`, 'utf8')), { plugins: [{ type: 'bridge' }, { type: 'podnet' }] }, 'and nothing changed');
  t.equal((await podman(['stop', '--time', '10', name])).exitCode, 0, 'the daemon container stops');
  const removed = await podman(['run', '--rm', ...runArgs(removalSpec, uninstall!, node), image, ...uninstall!.args]);
  t.equal(removed.exitCode, 0, `the uninstall container runs: ${removed.stderr}`);
  t.equal(await readFile(`${conf}/10-pods.conflist`, 'utf8'), JSON.stringify(primary), "the primary's file is back as it was");
  t.rejects(stat(`${node}/opt/cni/bin/podnet`), 'the executable is gone');
});
