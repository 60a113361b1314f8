// Main script of the single executable (docs/adr/0001). It holds the plugin path alone; the
// command line and daemon ride in the executable as an asset, compiled only when a command runs.
import { pluginMain } from '../src/cni/main.ts';

type CliModule = { exports: { cliMain?: (argv: readonly string[]) => Promise<void> } };

function loadCli(): CliModule['exports'] {
  // Loaded here, not at the top: the plugin path needs none of them.
  const { getAsset } = process.getBuiltinModule('node:sea');
  const { compileFunction } = process.getBuiltinModule('node:vm');
  const { createRequire } = process.getBuiltinModule('node:module');
  const source = getAsset('cli.cjs', 'utf8');
  // With the code cache the build made of it (scripts/build.ts): V8 checks it against the source,
  // its version and options, and compiles as without one when it does not match.
  const cachedData = new Uint8Array(getAsset('cli.cache'));
  const run = compileFunction(source, ['exports', 'require', 'module', '__filename', '__dirname'], { filename: 'podnet-cli.cjs', cachedData });
  // Said, not hidden: each start then costs the bundle's parse again, and the daemon 15 MiB more.
  if ((run as { cachedDataRejected?: boolean }).cachedDataRejected) process.stderr.write('podnet: V8 refused the command line\'s code cache (the executable was built by another Node, or with other options); starting without it\n');
  const module: CliModule = { exports: {} };
  run(module.exports, createRequire(process.execPath), module, process.execPath, '/');
  return module.exports;
}

// The main script is CommonJS (what a single executable runs), so no top-level await. The
// daemon's launcher (ADR 22) is this executable too, and needs none of the command line. It is
// imported only when it runs: its code loads node:child_process, which every plugin run would
// pay for otherwise (bench/plugin-add: VERSION 1.11 to 1.17 x node -e 0 with it, 0.99 to 1.05
// without; the bundler makes the import a lazy call, not a module load).
const launcher = () => import('../src/launcher/main.ts').then((m) => m.launcherMain());
const main = process.env['CNI_COMMAND'] ? pluginMain() : process.env['PODNET_LAUNCHER'] ? launcher() : loadCli().cliMain?.(process.argv);
void main?.catch((err: unknown) => {
  process.stderr.write(`podnet: ${String(err)}\n`);
  process.exitCode = 1;
});
