// Main script of the single executable (docs/adr/0001): it picks the role and loads that role's
// bundle, which rides in the executable as an asset with the code cache the build made of it
// (ADR 25): the CNI plugin's, or the command line's and daemon's.
import { getRawAsset } from 'node:sea';
import { compileBundle } from './embedded.ts';

type Bundle = { pluginMain?: () => Promise<void>; cliMain?: (argv: readonly string[]) => Promise<void> };

// An asset as the executable maps it, not a copy.
const asset = (key: string) => Buffer.from(getRawAsset(key));

function loadBundle(name: 'plugin' | 'cli'): Bundle {
  const bundle = compileBundle(name, asset(`${name}.cjs`).toString('utf8'), asset(`${name}.cache`));
  // Said, not hidden: each start then compiles the bundle again (the daemon keeps 15 MiB more).
  if (bundle.cacheRefused) process.stderr.write(`podnet: V8 refused the code cache of the ${name} bundle (the executable was built by another Node, or with other options); starting without it\n`);
  return bundle.run(require) as Bundle;
}

// The main script is CommonJS (what a single executable runs), so no top-level await. The
// daemon's launcher (ADR 22) is this executable too, and needs neither bundle. It is imported
// only when it runs: its code loads node:child_process, which every plugin run would pay for
// otherwise (bench/plugin-add: VERSION 1.11 to 1.17 x node -e 0 with it, 0.99 to 1.05 without;
// the bundler makes the import a lazy call, not a module load).
const launcher = () => import('../src/launcher/main.ts').then((m) => m.launcherMain());
const main = process.env['CNI_COMMAND'] ? loadBundle('plugin').pluginMain?.() : process.env['PODNET_LAUNCHER'] ? launcher() : loadBundle('cli').cliMain?.(process.argv);
void main?.catch((err: unknown) => {
  process.stderr.write(`podnet: ${String(err)}\n`);
  process.exitCode = 1;
});
