// Main script of the single executable (docs/adr/0001): it picks the role and loads that role's
// bundle, which rides in the executable as an asset with the code cache the build made of it
// (ADR 25): the CNI plugin's, or the command line's and daemon's.
import { getRawAsset } from 'node:sea';
import { compileBundle } from './embedded.ts';

// An asset as the executable maps it, not a copy.
const asset = (key: string) => Buffer.from(getRawAsset(key));

/** The entry `entry` of bundle `name`, compiled with its cache. */
function entryOf<Entry>(name: 'plugin' | 'cli', entry: string): Entry {
  const bundle = compileBundle(name, asset(`${name}.cjs`).toString('utf8'), asset(`${name}.cache`));
  // Said, not hidden: each start then compiles the bundle again (the daemon keeps 15 MiB more).
  if (bundle.cacheRefused) process.stderr.write(`podnet: V8 refused the code cache of the ${name} bundle (the executable was built by another Node, or with other options); starting without it\n`);
  const found = bundle.run(require)[entry];
  // Loud, not a silent exit 0 that a runtime would take for a DEL done.
  if (typeof found !== 'function') throw new Error(`the executable's ${name} bundle has no ${entry}: it was built wrong`);
  return found as Entry;
}

// The main script is CommonJS (what a single executable runs), so no top-level await. The
// daemon's launcher (ADR 22) is this executable too, and needs neither bundle. It is imported
// only when it runs: its code loads node:child_process, which every plugin run would pay for
// otherwise (bench/plugin-add: VERSION 1.11 to 1.17 x node -e 0 with it, 0.99 to 1.05 without;
// the bundler makes the import a lazy call, not a module load).
const launcher = () => import('../src/launcher/main.ts').then((m) => m.launcherMain());
const main = process.env['CNI_COMMAND']
  ? entryOf<() => Promise<void>>('plugin', 'pluginMain')()
  : process.env['PODNET_LAUNCHER']
    ? launcher()
    : entryOf<(argv: readonly string[]) => Promise<void>>('cli', 'cliMain')(process.argv);
void main.catch((err: unknown) => {
  process.stderr.write(`podnet: ${String(err)}\n`);
  process.exitCode = 1;
});
