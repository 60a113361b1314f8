// Runs an e2e test file inside a VM of Debian's kernel (e2e/vm/kernel.ts), for what this
// machine's kernel cannot make: qemu with TCG (KVM does not work here), the machine's own root
// shared read-only over 9p under a tmpfs overlay (so the VM has the built executable, the
// pinned Node, the reference plugins and the test sources as they are), and e2e/vm/init.sh as
// PID 1. The test file runs as root in the VM's first netns and asserts there; its TAP comes
// back over the VM's second serial port and is a subtest here, its stderr and the kernel's in
// console.log beside the VM.
import { execa } from 'execa';
import { existsSync, statSync } from 'node:fs';
import { chmod, copyFile, mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import { join, relative } from 'node:path';
import type { Test } from 'tap';
import { dir } from 'tmp-promise';
import { cachedKernel, type DebianKernel } from './kernel.ts';
import { podnetBinary, repoRoot } from '../lib/env.ts';

const qemu = 'qemu-system-x86_64';
const busybox = '/bin/busybox';

/** What the VM loads before it can mount its root (the rest loads on demand, by the kernel's modprobe). */
const bootModules = ['drivers/virtio/virtio_pci', 'net/9p/9pnet_virtio', 'fs/9p/9p', 'fs/overlayfs/overlay'];

/** `wanted` and what they need, each after what it needs, from the package's modules.dep (paths without .ko). */
async function withDependencies(kernel: DebianKernel, wanted: readonly string[]): Promise<string[]> {
  const dep = new Map(
    (await readFile(join(kernel.modules, 'modules.dep'), 'utf8'))
      .split('\n')
      .filter((line) => line.includes(':'))
      .map((line) => {
        const [module, needs] = line.split(':') as [string, string];
        return [module.replace(/\.ko$/, ''), needs.trim().split(/\s+/).filter(Boolean).map((m) => m.replace(/\.ko$/, ''))] as const;
      }),
  );
  const order: string[] = [];
  const visit = (module: string) => {
    if (order.includes(module)) return;
    const needs = dep.get(`kernel/${module}`) ?? dep.get(module);
    if (needs === undefined) throw new Error(`${kernel.modules}/modules.dep has no ${module}: the VM cannot mount its root without it`);
    for (const need of needs) visit(need.replace(/^kernel\//, ''));
    order.push(module);
  };
  for (const module of wanted) visit(module);
  return order;
}

/** Why this machine cannot run VM tests, or undefined when it can; under CI, a missing part fails. */
export async function vmPrerequisite(): Promise<string | undefined> {
  const missing = [
    ...(process.getuid?.() === 0 ? [] : ['root (the VM shares the whole root filesystem)']),
    ...(existsSync(podnetBinary) ? [] : [`the built executable ${podnetBinary} (npm run build)`]),
    ...((await execa(qemu, ['--version'], { reject: false })).exitCode === 0 ? [] : [`${qemu} (apt-get install qemu-system-x86)`]),
    ...(existsSync(busybox) ? [] : [`${busybox} (apt-get install busybox-static)`]),
    ...((await cachedKernel()) ? [] : ["Debian's kernel in the cache (node e2e/vm/kernel.ts)"]),
  ];
  if (missing.length === 0) return undefined;
  if (process.env['CI']) throw new Error(`CI machine lacks ${missing.join(', ')}; .ci/run should have prepared it`);
  return `needs ${missing.join(', ')}`;
}

/**
 * How long a VM may take to boot and print its test's first TAP: about 2 s on an idle machine. A
 * VM silent that long is stuck before its test (seen once in many runs, under a loaded machine: a
 * VM that printed nothing, not even its test's own timeout), and is booted again, once.
 */
const firstTapMs = 240_000;

/**
 * Boots a VM that runs `file` (a path in the repository) and reports its TAP as a subtest of `t`,
 * with the kernel's console appended as a comment when it fails. The VM's files are in a folder
 * of this test's own, removed at its end.
 */
export async function testInVm(t: Test, file: string, options: { timeoutMs: number }): Promise<void> {
  const kernel = await cachedKernel();
  if (!kernel) throw new Error('no Debian kernel in the cache: node e2e/vm/kernel.ts');
  const path = relative(repoRoot, join(repoRoot, file));
  // The kernel's command line splits on spaces and takes no quotes.
  for (const word of [repoRoot, path]) if (!/^[\w./+-]+$/.test(word)) throw new Error(`${word}: a VM test needs a path of letters, digits and ._+/- only`);
  // The VM mounts tmpfs over /tmp and /run (init.sh): a repository there would be hidden.
  if (/^\/(tmp|run)\//.test(repoRoot)) throw new Error(`${repoRoot}: the test VM hides /tmp and /run under its own; run the VM tests from a checkout elsewhere`);
  const work = await dir({ unsafeCleanup: true, prefix: 'podnet-e2e-vm-' });
  t.teardown(() => work.cleanup());
  const initrd = await initramfs(work.path, kernel);
  const consoleOf = (attempt: number) => join(work.path, `console-${attempt}.log`);
  const lastLines = async (attempt: number) => (await readFile(consoleOf(attempt), 'utf8').catch(() => '')).split('\n').slice(-60).join('\n');
  let run = await bootOnce(kernel, initrd, path, work.path, 1, options.timeoutMs);
  if (run.silent) {
    t.comment(`the VM printed no TAP within ${firstTapMs / 1000} s; booted again. Its console (${path}):\n${await lastLines(1)}`);
    run = await bootOnce(kernel, initrd, path, work.path, 2, options.timeoutMs);
  }
  // The TAP the VM wrote, as a subtest of its own.
  const results = await t.spawn('cat', [run.tap], {}, `${path} on Linux ${kernel.release}`);
  if (run.silent) t.fail(`${path}: the VM printed no TAP within ${firstTapMs / 1000} s, twice`);
  else if (run.timedOut) t.fail(`${path}: the VM ran past ${(options.timeoutMs + 60_000) / 1000} s and was stopped`);
  // Its test exited with a status not 0: init.sh ends qemu through isa-debug-exit, with a status not 0.
  else if (run.exitCode !== 0) t.fail(`${path}: the VM ended with status ${run.exitCode}`);
  // A VM whose init died powers off as if all were well (panic=-1, -no-reboot), with no TAP: tap
  // would count that a skip.
  if (!results || results.count === 0) t.fail(`${path} ran no test in the VM`);
  if (!t.passing()) t.comment(`the VM's console (${path}):\n${await lastLines(run.attempt)}`);
}

/** One boot of the VM: its TAP in a file of `work`, its console in another. */
async function bootOnce(kernel: DebianKernel, initrd: string, path: string, work: string, attempt: number, timeoutMs: number): Promise<{ tap: string; attempt: number; exitCode?: number; timedOut: boolean; silent: boolean }> {
  const tap = join(work, `tap-${attempt}.txt`);
  const seconds = Math.ceil(timeoutMs / 1000);
  const args = [
    ...['-accel', 'tcg', '-m', '1536', '-smp', '2', '-nodefaults', '-no-user-config', '-display', 'none', '-no-reboot'],
    ...['-kernel', kernel.vmlinuz, '-initrd', initrd],
    ...['-append', `console=ttyS0 quiet panic=-1 -- ${repoRoot} ${path} ${seconds} ${process.env['CI'] ? 'true' : '-'}`],
    ...['-virtfs', 'local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap'],
    ...['-serial', `file:${join(work, `console-${attempt}.log`)}`, '-serial', 'stdio', '-device', 'isa-debug-exit,iobase=0xf4,iosize=0x01'],
  ];
  // A little over the test's own timeout: the VM boots first, and the test reports its own expiry.
  const vm = execa(qemu, args, { stdin: 'ignore', stdout: { file: tap }, stderr: 'inherit', reject: false, timeout: timeoutMs + 60_000, killSignal: 'SIGKILL' });
  let silent = false;
  const started = Date.now();
  const watch = setInterval(() => {
    if (silent || Date.now() - started < firstTapMs) return;
    if (statSync(tap, { throwIfNoEntry: false })?.size) return clearInterval(watch);
    silent = true;
    vm.kill('SIGKILL');
  }, 1000);
  const result = await vm.finally(() => clearInterval(watch));
  return { tap, attempt, silent, timedOut: result.timedOut === true, ...(result.exitCode !== undefined ? { exitCode: result.exitCode } : {}) };
}

/** An uncompressed cpio of busybox, the boot modules and init.sh, written in `work`. */
async function initramfs(work: string, kernel: DebianKernel): Promise<string> {
  const root = join(work, 'initramfs');
  for (const d of ['bin', 'modules', 'dev', 'proc', 'sys']) await mkdir(join(root, d), { recursive: true });
  await copyFile(busybox, join(root, 'bin', 'busybox'));
  await copyFile(new URL('./init.sh', import.meta.url), join(root, 'init'));
  for (const executable of ['init', 'bin/busybox']) await chmod(join(root, executable), 0o755);
  for (const [i, module] of (await withDependencies(kernel, bootModules)).entries()) {
    await copyFile(join(kernel.modules, 'kernel', `${module}.ko`), join(root, 'modules', `${String(i).padStart(2, '0')}-${module.split('/').at(-1)}.ko`));
  }
  await writeFile(join(root, 'modules.path'), kernel.modules);
  const out = join(work, 'initramfs.cpio');
  const list = await filesUnder(root);
  await execa(busybox, ['cpio', '-o', '-H', 'newc'], { cwd: root, input: `${list.join('\n')}\n`, stdout: { file: out } });
  return out;
}

async function filesUnder(root: string, sub = '.'): Promise<string[]> {
  const out: string[] = [sub];
  for (const entry of await readdir(join(root, sub), { withFileTypes: true })) {
    const path = `${sub}/${entry.name}`;
    out.push(...(entry.isDirectory() ? await filesUnder(root, path) : [path]));
  }
  return out;
}
