// npm run image [-- --tag NAME | --rootfs-only] → the container image of Containerfile, built with podman:
//  - build/rootfs.tar: a Debian minbase root with the tools podnet runs, made by debootstrap from
//    Debian's archive and cached by release and package list outside the tree (a second build
//    takes seconds);
//  - dist/podnet: the executable, as `npm run build` made it.
// Needs root, debootstrap and podman.
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, renameSync, rmSync, unlinkSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { podnetVersion } from '../src/version.ts';

const root = fileURLToPath(new URL('..', import.meta.url));

const release = 'bookworm';
/**
 * ip and tc (iproute2), sysctl (procps), nft for port security (nftables), wg for WireGuard
 * Networks (wireguard-tools); nsenter, unshare and
 * setpriv (a plugin's PID namespace ends with the daemon) come with util-linux, which minbase has
 * (Essential in Debian). The executable itself, Node's, links libstdc++ and libatomic.
 */
const packages = ['iproute2', 'procps', 'nftables', 'wireguard-tools', 'libatomic1', 'libstdc++6'];

/** Debian's root for the image, from the cache when it was made before with the same release and packages. */
export function rootfsTarball(log: (line: string) => void = () => undefined): string {
  const cacheDir = process.env['PODNET_IMAGE_CACHE'] ?? '/var/cache/podnet-image';
  const key = createHash('sha256').update(`${release} ${packages.join(',')}`).digest('hex').slice(0, 12);
  const tarball = join(cacheDir, `rootfs-${release}-${key}.tar`);
  if (existsSync(tarball)) return tarball;
  mkdirSync(cacheDir, { recursive: true });
  const work = mkdtempSync(join(cacheDir, '.work-'));
  try {
    const mirror = process.env['PODNET_DEBIAN_MIRROR'] ?? 'http://deb.debian.org/debian';
    log(`debootstrap ${release} with ${packages.join(', ')} from ${mirror} (a minute or two, once)`);
    const tree = join(work, 'root');
    execFileSync('debootstrap', ['--variant=minbase', `--include=${packages.join(',')}`, release, tree, mirror], { stdio: ['ignore', 'ignore', 'inherit'] });
    // What only apt needs, or a person reading: not in an image that never installs anything.
    for (const dir of ['var/cache/apt', 'var/lib/apt/lists', 'usr/share/doc', 'usr/share/man', 'usr/share/locale', 'usr/share/info']) {
      rmSync(join(tree, dir), { recursive: true, force: true });
    }
    // /var/run is a link to /run in Debian; here it is a folder of its own, so that the
    // DaemonSet's mounts of the node's /run/netns and /var/run/netns land on two places, as on a
    // node where they are two folders.
    const varRun = join(tree, 'var/run');
    if (lstatSync(varRun).isSymbolicLink()) {
      unlinkSync(varRun);
      mkdirSync(varRun);
    }
    const partial = join(work, 'rootfs.tar');
    execFileSync('tar', ['--numeric-owner', '--xattrs', '-C', tree, '-cf', partial, '.']);
    // Renamed into place whole: an interrupted build never leaves a tarball that counts as cached.
    renameSync(partial, tarball);
    return tarball;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

/** Builds the image from Containerfile and returns its name. */
export function buildImage(tag: string, log: (line: string) => void = () => undefined): string {
  const binary = join(root, 'dist/podnet');
  if (!existsSync(binary)) throw new Error(`${binary} is missing: run npm run build first`);
  const tarball = rootfsTarball(log);
  mkdirSync(join(root, 'build'), { recursive: true });
  // Renamed into place: another build from this checkout (a test beside this one) may be reading
  // the file it replaces, and must read it whole.
  const partial = join(root, `build/.rootfs.tar.${process.pid}`);
  copyFileSync(tarball, partial);
  renameSync(partial, join(root, 'build/rootfs.tar'));
  log(`podman build -t ${tag}`);
  execFileSync('podman', ['build', '--quiet', '--file', join(root, 'Containerfile'), '--tag', tag, root], { stdio: ['ignore', 'ignore', 'inherit'] });
  return tag;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const { values } = parseArgs({ options: { tag: { type: 'string', default: `localhost/podnet:${podnetVersion}` }, 'rootfs-only': { type: 'boolean', default: false } } });
  // --rootfs-only: Debian's root alone, into its cache (a test machine's set-up, before any test's clock runs).
  if (values['rootfs-only']) console.log(rootfsTarball((line) => console.error(line)));
  else console.log(buildImage(values.tag, (line) => console.error(line)));
}
