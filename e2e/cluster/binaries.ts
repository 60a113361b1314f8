// Binaries the e2e builds with Go from the module proxy once per version and caches outside the
// repo: kube-apiserver and etcd for the control plane, and the reference CNI plugins at a release
// that speaks CNI 1.1 (Debian's speak at most 1.0.0, so GC would go untested against a real
// plugin). Run it by hand (`node e2e/cluster/binaries.ts`) to fill the cache before a test run: a
// cold build takes minutes.
import { execa } from 'execa';
import { accessSync, constants, statSync } from 'node:fs';
import { access, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { delimiter, dirname, join } from 'node:path';

/**
 * The newest Kubernetes release whose module the proxy serves in full and that builds with the
 * machine's Go (its go.mod says go 1.26.0).
 */
export const kubernetesVersion = '1.37.1';

/**
 * The node's kubelet: Kubernetes announced 1.35 as the last kubelet that runs on containerd 1.x,
 * which is what Debian 12 ships (1.6.20); its newest patch on the proxy.
 */
export const kubeletVersion = '1.35.4';

/**
 * containerd 2 for the node tests' second runtime (Debian's 1.6 is the first): its libcni caches
 * each pod's netns, which 1.6's does not. The newest release on the proxy.
 */
export const containerd2Version = '2.4.2';

/**
 * The etcd line this Kubernetes release is made for: its kubeadm defaults to etcd 3.7.0 and its
 * apiserver links the 3.7.0 client. 3.7.3 is that line's newest patch on the proxy.
 */
export const etcdVersion = '3.7.3';

/**
 * The reference plugins' release the CNI 1.1 tests run (GC); its plugins are built one by one,
 * only those the tests name, about 20 s each.
 */
export const referencePluginsVersion = '1.9.1';

/**
 * promtool, for the alert rules' unit tests (e2e/alerts.test.ts): Prometheus's module at the
 * newest version the proxy serves (v0.316.0 is Prometheus 3.16). Its cold build fetches 1.8 GB of
 * modules and takes about 6 minutes on 2 cores.
 */
export const prometheusModuleVersion = '0.316.0';

/** helm, for the chart's tests (e2e/helm.test.ts): the newest Helm 4 release on the proxy. */
export const helmVersion = '4.3.1';

/** The reference plugins built, by binary name, and the package each is built from. */
const referencePluginPackages = {
  bridge: 'github.com/containernetworking/plugins/plugins/main/bridge',
  'host-local': 'github.com/containernetworking/plugins/plugins/ipam/host-local',
} as const;

export interface ClusterBinaries {
  kubeApiserver: string;
  etcd: string;
}

/** What a real node adds to the control plane: the kubelet, the controllers, the scheduler, kubectl. */
export interface NodeBinaries {
  kubelet: string;
  kubeControllerManager: string;
  kubeScheduler: string;
  kubectl: string;
  /** containerd 2's daemon; its runc shim (containerd-shim-runc-v2) is in the same folder. */
  containerd2: string;
}

interface BinarySpec {
  component: string;
  version: string;
  binary: string;
  /** What `<binary> <versionArgs>` prints when the build is the one asked for. */
  versionText: string;
  /** How the binary is asked its version; `--version` unless said. */
  versionArgs?: readonly string[];
  /** Builds into `out`, with `work` an empty folder for the throwaway Go module. */
  build(go: string, work: string, out: string): Promise<void>;
}

/** A command of k8s.io/kubernetes (cmd/<binary>) at a release. */
function kubernetesSpec(binary: string, version: string, versionArgs?: readonly string[], versionText = `Kubernetes v${version}`): BinarySpec {
  return {
    component: binary,
    version: `v${version}`,
    binary,
    versionText,
    ...(versionArgs ? { versionArgs } : {}),
    build: (go, work, out) => buildKubernetesCommand(go, work, out, binary, version),
  };
}

const kubeApiserverSpec = kubernetesSpec('kube-apiserver', kubernetesVersion);

/** A command of containerd 2, stamped with its release; without the snapshotters that need cgo. */
function containerd2Spec(binary: string, versionArgs: readonly string[]): BinarySpec {
  return {
    component: 'containerd',
    version: `v${containerd2Version}`,
    binary,
    versionText: `v${containerd2Version}`,
    versionArgs,
    build: (go, work, out) => buildContainerd2Command(go, work, out, binary),
  };
}

const containerd2Shim = containerd2Spec('containerd-shim-runc-v2', ['-v']);

const nodeSpecs = {
  kubelet: kubernetesSpec('kubelet', kubeletVersion),
  kubeControllerManager: kubernetesSpec('kube-controller-manager', kubernetesVersion),
  kubeScheduler: kubernetesSpec('kube-scheduler', kubernetesVersion),
  kubectl: kubernetesSpec('kubectl', kubernetesVersion, ['version', '--client'], `Client Version: v${kubernetesVersion}`),
  containerd2: containerd2Spec('containerd', ['--version']),
} satisfies Record<keyof NodeBinaries, BinarySpec>;

const etcdSpec: BinarySpec = {
  component: 'etcd',
  version: `v${etcdVersion}`,
  binary: 'etcd',
  versionText: `etcd Version: ${etcdVersion}`,
  build: buildEtcd,
};

const promtoolSpec: BinarySpec = {
  component: 'promtool',
  version: `v${prometheusModuleVersion}`,
  binary: 'promtool',
  versionText: 'promtool, version',
  build: buildPromtool,
};

const helmSpec: BinarySpec = {
  component: 'helm',
  version: `v${helmVersion}`,
  binary: 'helm',
  versionArgs: ['version', '--template', '{{ .Version }}'],
  versionText: `v${helmVersion}`,
  build: buildHelm,
};

const referencePluginSpecs: BinarySpec[] = Object.entries(referencePluginPackages).map(([binary, pkg]) => ({
  component: 'cni-plugins',
  version: `v${referencePluginsVersion}`,
  binary,
  versionText: `CNI ${binary} plugin v${referencePluginsVersion}`,
  build: (go, work, out) => buildReferencePlugin(go, work, out, pkg),
}));

/**
 * An argv prefix that makes the kernel SIGKILL the command when this process dies (setpriv's
 * parent-death signal), so a killed test or build leaves no orphan; empty without setpriv.
 */
export const dieWithParent: readonly string[] = (() => {
  const setpriv = ['/usr/bin/setpriv', '/bin/setpriv'].find((p) => isExecutableSync(p));
  return setpriv ? [setpriv, '--pdeathsig', 'KILL', '--'] : [];
})();

export function clusterCacheDir(): string {
  return process.env['PODNET_CLUSTER_CACHE'] ?? '/var/cache/podnet-e2e';
}

const binaryPath = (spec: BinarySpec) => join(clusterCacheDir(), `${spec.component}-${spec.version}`, spec.binary);

/** The go command on PATH, or the Go tarball's usual place; undefined when there is none. */
export function findGo(): string | undefined {
  const dirs = [...(process.env['PATH'] ?? '').split(delimiter).filter(Boolean), '/usr/local/go/bin'];
  return dirs.map((d) => join(d, 'go')).find((candidate) => isExecutableSync(candidate));
}

/** Both binaries when both are cached already, else undefined (then a build is minutes away). */
export async function cachedClusterBinaries(): Promise<ClusterBinaries | undefined> {
  const [kubeApiserver, etcd] = [binaryPath(kubeApiserverSpec), binaryPath(etcdSpec)];
  return (await isExecutable(kubeApiserver)) && (await isExecutable(etcd)) ? { kubeApiserver, etcd } : undefined;
}

let ensuring: Promise<ClusterBinaries> | undefined;

/**
 * The cached binaries, built first when missing. Two processes asking at once build once: the
 * second waits on a lock folder. A binary reaches its cached name only by a rename after it
 * built and answered --version, so a crashed build never counts as cached.
 */
export function ensureClusterBinaries(): Promise<ClusterBinaries> {
  ensuring ??= (async () => {
    // One after the other: the machine has 2 cores and each build uses both.
    const etcd = await ensureBinary(etcdSpec);
    const kubeApiserver = await ensureBinary(kubeApiserverSpec);
    return { kubeApiserver, etcd };
  })();
  ensuring.catch(() => {
    ensuring = undefined;
  });
  return ensuring;
}

/**
 * The node's binaries, built first when missing, one at a time (the kubelet's cold build alone
 * takes about 14 minutes on 2 cores).
 */
export async function ensureNodeBinaries(): Promise<NodeBinaries> {
  const built: Partial<NodeBinaries> = {};
  for (const [key, spec] of Object.entries(nodeSpecs) as [keyof NodeBinaries, BinarySpec][]) built[key] = await ensureBinary(spec);
  await ensureBinary(containerd2Shim);
  return built as NodeBinaries;
}

/** The node's binaries when all are cached already. */
export async function cachedNodeBinaries(): Promise<NodeBinaries | undefined> {
  const paths = Object.fromEntries(Object.entries(nodeSpecs).map(([key, spec]) => [key, binaryPath(spec)])) as unknown as NodeBinaries;
  for (const path of [...Object.values(paths), binaryPath(containerd2Shim)]) if (!(await isExecutable(path))) return undefined;
  return paths;
}

/** promtool at prometheusModuleVersion, built first when missing (needs Go). */
export function ensurePromtool(): Promise<string> {
  return ensureBinary(promtoolSpec);
}

/** helm at helmVersion, built first when missing (needs Go). */
export function ensureHelm(): Promise<string> {
  return ensureBinary(helmSpec);
}

/** The folder of the reference plugins at referencePluginsVersion, built first when missing (needs Go). */
export async function ensureReferencePlugins(): Promise<string> {
  for (const spec of referencePluginSpecs) await ensureBinary(spec);
  return dirname(binaryPath(referencePluginSpecs[0]!));
}

/** That folder when every plugin is cached already. */
export async function cachedReferencePlugins(): Promise<string | undefined> {
  for (const spec of referencePluginSpecs) if (!(await isExecutable(binaryPath(spec)))) return undefined;
  return dirname(binaryPath(referencePluginSpecs[0]!));
}

async function ensureBinary(spec: BinarySpec): Promise<string> {
  const final = binaryPath(spec);
  if (await isExecutable(final)) return final;
  const dir = join(clusterCacheDir(), `${spec.component}-${spec.version}`);
  await mkdir(dir, { recursive: true });
  return withBuildLock(join(dir, '.build-lock'), `${spec.component} ${spec.version}`, async (lockDir) => {
    if (await isExecutable(final)) return final;
    const go = findGo();
    if (!go) throw new Error(`cannot build ${spec.component} ${spec.version}: no go command on PATH or in /usr/local/go/bin`);
    // Under the lock a partial binary is what a killed build left.
    for (const name of await readdir(dir)) if (name.startsWith(`.${spec.binary}.partial-`)) await rm(join(dir, name), { force: true });
    const partial = join(dir, `.${spec.binary}.partial-${process.pid}`);
    // In the lock folder: whoever takes over a stale lock removes a killed build's module too.
    const work = join(lockDir, 'module');
    await mkdir(work);
    const started = Date.now();
    log(`building ${spec.component} ${spec.version} with ${go} into ${final} (a cold build takes minutes)`);
    const heartbeat = setInterval(() => log(`still building ${spec.component} ${spec.version}: ${minutesSince(started)} so far`), 60_000);
    try {
      await spec.build(go, work, partial);
      // CNI plugins tell their version on stderr.
      const { all } = await execa(partial, [...(spec.versionArgs ?? ['--version'])], { all: true });
      if (!all.includes(spec.versionText)) throw new Error(`${spec.component} built, but --version says ${JSON.stringify(all)}, not ${spec.versionText}`);
      await rename(partial, final);
      log(`built ${spec.component} ${spec.version} in ${minutesSince(started)}`);
      return final;
    } finally {
      clearInterval(heartbeat);
      await rm(partial, { force: true });
    }
  });
}

/**
 * k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with folders of its
 * own tree; a module depending on it replaces each with the version published beside the release.
 */
async function buildKubernetesCommand(go: string, work: string, out: string, command: string, version: string): Promise<void> {
  const module = `k8s.io/kubernetes@v${version}`;
  await runGo(go, work, ['mod', 'init', `podnet.local/build/${command}`]);
  const { stdout } = await runGo(go, work, ['mod', 'download', '-json', module]);
  const info = JSON.parse(stdout) as { GoMod?: string; Error?: string };
  if (!info.GoMod) throw new Error(`go mod download ${module}: ${info.Error ?? 'no go.mod'}`);
  const staging = stagingModules(await readFile(info.GoMod, 'utf8'));
  if (staging.length === 0) throw new Error(`${module}: its go.mod requires no module at v0.0.0; the recipe needs a look`);
  const published = `v0.${version.replace(/^1\./, '')}`;
  await runGo(go, work, ['mod', 'edit', `-require=${module}`, ...staging.map((m) => `-replace=${m}=${m}@${published}`)]);
  await runGo(go, work, ['get', `k8s.io/kubernetes/cmd/${command}@v${version}`]);
  // What hack/lib/version.sh stamps, so /version tells the release rather than v0.0.0-master.
  const [major, minor] = version.split('.');
  const stamp = [`gitVersion=v${version}`, `gitMajor=${major}`, `gitMinor=${minor}`, 'gitTreeState=clean'].flatMap((kv) => [
    `-X k8s.io/component-base/version.${kv}`,
    // kubectl reports its client version from client-go's copy of the stamp.
    `-X k8s.io/client-go/pkg/version.${kv}`,
  ]);
  await goBuild(go, work, out, `k8s.io/kubernetes/cmd/${command}`, stamp);
}

/** The modules a k8s.io/kubernetes go.mod requires at v0.0.0: its staging modules. */
function stagingModules(goMod: string): string[] {
  return [...goMod.matchAll(/^\s*(?:require\s+)?(k8s\.io\/[\w.-]+)\s+v0\.0\.0\s*$/gm)].map((m) => m[1]!);
}

async function buildContainerd2Command(go: string, work: string, out: string, command: string): Promise<void> {
  await runGo(go, work, ['mod', 'init', `podnet.local/build/${command}`]);
  await runGo(go, work, ['get', `github.com/containerd/containerd/v2@v${containerd2Version}`]);
  // btrfs, devmapper and zfs need cgo (the builds here are static); the node uses overlayfs.
  await goBuild(go, work, out, `github.com/containerd/containerd/v2/cmd/${command}`, [`-X github.com/containerd/containerd/v2/version.Version=v${containerd2Version}`], ['no_btrfs', 'no_devmapper', 'no_zfs']);
}

/** etcd's server module is its main package; its own replace lines are ignored as a dependency. */
async function buildEtcd(go: string, work: string, out: string): Promise<void> {
  await runGo(go, work, ['mod', 'init', 'podnet.local/build/etcd']);
  await runGo(go, work, ['get', `go.etcd.io/etcd/server/v3@v${etcdVersion}`]);
  await goBuild(go, work, out, 'go.etcd.io/etcd/server/v3', []);
}

async function buildPromtool(go: string, work: string, out: string): Promise<void> {
  await runGo(go, work, ['mod', 'init', 'podnet.local/build/promtool']);
  await runGo(go, work, ['get', `github.com/prometheus/prometheus@v${prometheusModuleVersion}`]);
  await goBuild(go, work, out, 'github.com/prometheus/prometheus/cmd/promtool', []);
}

/** helm, stamped with its release as its own build does. */
async function buildHelm(go: string, work: string, out: string): Promise<void> {
  await runGo(go, work, ['mod', 'init', 'podnet.local/build/helm']);
  await runGo(go, work, ['get', `helm.sh/helm/v4@v${helmVersion}`]);
  await goBuild(go, work, out, 'helm.sh/helm/v4/cmd/helm', [`-X helm.sh/helm/v4/internal/version.version=v${helmVersion}`]);
}

/** A reference plugin, stamped with its release as the project's own build does. */
async function buildReferencePlugin(go: string, work: string, out: string, pkg: string): Promise<void> {
  await runGo(go, work, ['mod', 'init', 'podnet.local/build/cni-plugins']);
  await runGo(go, work, ['get', `github.com/containernetworking/plugins@v${referencePluginsVersion}`]);
  await goBuild(go, work, out, pkg, [`-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=v${referencePluginsVersion}`]);
}

function goBuild(go: string, work: string, out: string, pkg: string, ldflags: string[], tags: string[] = []) {
  // nice: the build takes both cores for minutes; whatever else runs should keep going.
  return runGo(go, work, ['build', '-trimpath', ...(tags.length > 0 ? [`-tags=${tags.join(',')}`] : []), `-ldflags=-s -w ${ldflags.join(' ')}`.trim(), '-o', out, pkg], ['nice', '-n', '10']);
}

function runGo(go: string, cwd: string, args: string[], wrapper: string[] = []) {
  const [file, ...rest] = [...dieWithParent, ...wrapper, go, ...args];
  return execa(file!, rest, {
    cwd,
    // Go's own messages (downloads, errors) go to the CI log as they come and into the error.
    stdout: 'pipe',
    stderr: ['pipe', 'inherit'],
    stdin: 'ignore',
    env: {
      CGO_ENABLED: '0',
      // Build with this Go or fail saying which the release needs; never fetch a toolchain.
      GOTOOLCHAIN: 'local',
      GOWORK: 'off',
      // The throwaway module is ours to change; a GOFLAGS of the machine's (-mod=vendor) is not.
      GOFLAGS: '-mod=mod',
    },
  });
}

/**
 * An exclusive lock as a folder holding its owner's pid. A lock whose owner is gone is stale and
 * is taken over: a killed build must not stop every later one.
 */
export async function withBuildLock<T>(lockDir: string, what: string, fn: (lockDir: string) => Promise<T>): Promise<T> {
  let lastSaid = 0;
  for (;;) {
    try {
      await mkdir(lockDir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
      const owner = await lockOwner(lockDir);
      if (owner === 'stale') {
        await rm(lockDir, { recursive: true, force: true });
        continue;
      }
      if (Date.now() - lastSaid > 60_000) {
        log(`waiting for process ${owner} that is building ${what}`);
        lastSaid = Date.now();
      }
      await new Promise((r) => setTimeout(r, 2000));
      continue;
    }
    await writeFile(join(lockDir, 'pid'), String(process.pid));
    try {
      return await fn(lockDir);
    } finally {
      await rm(lockDir, { recursive: true, force: true });
    }
  }
}

async function lockOwner(lockDir: string): Promise<number | 'unknown' | 'stale'> {
  const pid = Number(await readFile(join(lockDir, 'pid'), 'utf8').catch(() => ''));
  if (!pid) {
    // Between mkdir and writing the pid; a lock without a pid for long is a crash in that gap.
    const made = await stat(lockDir).then((s) => s.mtimeMs, () => 0);
    return Date.now() - made > 30_000 ? 'stale' : 'unknown';
  }
  try {
    process.kill(pid, 0);
    return pid;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'ESRCH' ? 'stale' : pid;
  }
}

async function isExecutable(path: string): Promise<boolean> {
  return access(path, constants.X_OK).then(() => true, () => false);
}

function isExecutableSync(path: string): boolean {
  // Sync on purpose: a prerequisite check at a test's top, before anything is started.
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

function minutesSince(started: number): string {
  const s = Math.round((Date.now() - started) / 1000);
  return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
}

function log(message: string): void {
  process.stderr.write(`[podnet e2e cluster] ${message}\n`);
}

if (import.meta.main) {
  const binaries = await ensureClusterBinaries();
  const referencePlugins = await ensureReferencePlugins();
  const node = await ensureNodeBinaries();
  const promtool = await ensurePromtool();
  const helm = await ensureHelm();
  process.stdout.write(`${JSON.stringify({ ...binaries, referencePlugins, ...node, promtool, helm }, null, 2)}\n`);
}
