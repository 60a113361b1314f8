// Debian's own kernel, for the e2e tests of link kinds this machine's kernel lacks (vlan, ipvlan,
// VRF, GRE, Geneve, WireGuard): the package linux-image-amd64 depends on, unpacked once per
// machine into the cluster cache with its modules indexed, so a test VM loads them on demand.
// Run it by hand (`node e2e/vm/kernel.ts`) to fill the cache; setup/test does.
import { execa } from 'execa';
import { existsSync } from 'node:fs';
import { mkdir, readdir, rename, rm, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { clusterCacheDir, withBuildLock } from '../cluster/binaries.ts';

export interface DebianKernel {
  /** `uname -r` inside the VM, e.g. 6.1.0-56-amd64. */
  release: string;
  vmlinuz: string;
  /** lib/modules/<release> of the package, with modules.dep and modules.alias made. */
  modules: string;
}

const prefix = 'linux-image-';
/** Written last: a folder without it is what a killed preparation left. */
const readyMarker = '.ready';

function kernelAt(dir: string, release: string): DebianKernel {
  return { release, vmlinuz: join(dir, 'boot', `vmlinuz-${release}`), modules: join(dir, 'lib', 'modules', release) };
}

/** The newest prepared kernel in the cache, or undefined when none is. */
export async function cachedKernel(): Promise<DebianKernel | undefined> {
  const names = await readdir(clusterCacheDir()).catch(() => [] as string[]);
  const ready = names.filter((n) => n.startsWith(prefix) && existsSync(join(clusterCacheDir(), n, readyMarker)));
  const newest = ready.sort((a, b) => a.localeCompare(b, 'en', { numeric: true })).at(-1);
  return newest ? kernelAt(join(clusterCacheDir(), newest), newest.slice(prefix.length)) : undefined;
}

/**
 * The kernel linux-image-amd64 names today, downloaded and prepared when not cached yet. Two
 * processes asking at once prepare once (a lock folder).
 */
export async function ensureKernel(): Promise<DebianKernel> {
  const release = await currentRelease();
  const dir = join(clusterCacheDir(), `${prefix}${release}`);
  if (existsSync(join(dir, readyMarker))) return kernelAt(dir, release);
  await mkdir(clusterCacheDir(), { recursive: true });
  return withBuildLock(`${dir}.lock`, `${prefix}${release}`, async (lockDir) => {
    if (existsSync(join(dir, readyMarker))) return kernelAt(dir, release);
    await rm(dir, { recursive: true, force: true });
    const download = join(lockDir, 'download');
    await mkdir(download);
    await aptDownload(`${prefix}${release}`, download);
    const [deb] = (await readdir(download)).filter((f) => f.endsWith('.deb'));
    if (!deb) throw new Error(`apt-get download ${prefix}${release} left no .deb in ${download}`);
    const unpacked = join(lockDir, 'root');
    await execa('dpkg-deb', ['-x', join(download, deb), unpacked]);
    // The package's index of modules is made by its postinst; busybox's depmod makes the
    // modules.dep and modules.alias that the VM's modprobe (busybox's too) reads.
    await execa('busybox', ['depmod', '-b', unpacked, release]);
    const kernel = kernelAt(unpacked, release);
    if (!existsSync(kernel.vmlinuz)) throw new Error(`${deb} has no ${kernel.vmlinuz}`);
    await writeFile(join(unpacked, readyMarker), `${deb}\n`);
    await rename(unpacked, dir);
    process.stderr.write(`[podnet e2e vm] prepared ${deb} in ${dir}\n`);
    return kernelAt(dir, release);
  });
}

/** The release linux-image-amd64 depends on (the ABI number moves with Debian's updates). */
async function currentRelease(): Promise<string> {
  const { stdout } = await execa('apt-cache', ['depends', 'linux-image-amd64']);
  const release = /Depends: linux-image-([\w.-]+-amd64)$/m.exec(stdout)?.[1];
  if (!release) throw new Error(`apt-cache depends linux-image-amd64 names no linux-image-*-amd64:\n${stdout}`);
  return release;
}

/** apt-get download into `dir`; once more after an update when the lists are older than the mirror. */
async function aptDownload(pkg: string, dir: string): Promise<void> {
  const download = () => execa('apt-get', ['download', '-q', pkg], { cwd: dir, reject: false });
  if ((await download()).exitCode === 0) return;
  await execa('apt-get', ['update', '-qq']);
  const again = await download();
  if (again.exitCode !== 0) throw new Error(`apt-get download ${pkg} failed: ${again.stderr.trim()}`);
}

if (import.meta.main) {
  process.stdout.write(`${JSON.stringify(await ensureKernel(), null, 2)}\n`);
}
