// npm run build → dist/podnet, one Node single executable (docs/adr/0001):
//  - dist/main.cjs, the main script: picks the role and loads its bundle (bin/podnet-sea.ts);
//  - dist/plugin.cjs, the CNI plugin path alone, and dist/cli.cjs, the command line and daemon,
//    each embedded as an asset with V8's code cache of it (dist/plugin.cache made after a
//    rehearsed ADD and DEL, ADR 25; dist/cli.cache after its compile), compiled only when it runs.
import { build, type Plugin } from 'esbuild';
import { execFileSync, spawnSync } from 'node:child_process';
import { chmod, copyFile, mkdir, mkdtemp, rename, rm, stat, writeFile } from 'node:fs/promises';
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { executableNodeOptions } from '../bin/embedded.ts';
import { launcherCommand } from '../src/launcher/launcher.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const dist = `${root}dist`;

const common = {
  bundle: true,
  platform: 'node',
  target: 'node26',
  format: 'cjs',
  minify: true,
  legalComments: 'none',
  logLevel: 'warning',
} as const;

/**
 * The plugin path checks five documents: its bundle takes the generated validators of those alone
 * for both validator modules (src/generated/plugin-validators.js), naming the first violation of a
 * document. The whole sets are about 0.9 MiB of code, which the plugin's bundle would load on
 * every plugin run.
 */
const pluginValidators: Plugin = {
  name: 'plugin-validators',
  setup(b) {
    // The two modules read as a re-export of the plugin's, rather than resolved elsewhere: esbuild
    // then imports each as the ES module its package.json says it is, and a default import of
    // ajv's CommonJS runtime is its exports object, as in Node (a path given by a plugin loses that).
    b.onLoad({ filter: /\/src\/generated\/(validators|violations)\.js$/ }, () => ({ contents: "export * from './plugin-validators.js';", loader: 'js', resolveDir: `${root}src/generated` }));
  },
};

await mkdir(dist, { recursive: true });
// Each build in a folder of its own, from its bundles to the executable: V8 checks a cache against
// its source's length, not its text, so a bundle and its cache must come from the same build
// (two builds at once, or a run of --build-sea on an earlier build's config, would pair them
// wrongly otherwise). The bundles and caches are moved to dist/ at the end, for reading.
const work = await mkdtemp(`${dist}/.build-`);
// Gone at the end, whether the build made it or failed on the way.
process.on('exit', () => rmSync(work, { recursive: true, force: true }));
const bundles = ['plugin', 'cli'] as const;
await build({ ...common, entryPoints: [`${root}bin/podnet-sea.ts`], outfile: `${work}/main.cjs` });
await build({ ...common, entryPoints: [`${root}src/cni/main.ts`], outfile: `${work}/plugin.cjs`, plugins: [pluginValidators] });
await build({ ...common, entryPoints: [`${root}src/cli/main.ts`], outfile: `${work}/cli.cjs` });

const execArgv = executableNodeOptions;
// The Node runs of the build get no NODE_OPTIONS of the shell's: a V8 flag there (--expose-gc,
// --jitless) would make caches the executable refuses.
const { NODE_OPTIONS: _, ...buildEnv } = process.env;

// V8's code cache of each bundle, made by this Node with the executable's options (V8 refuses a
// cache made otherwise). The plugin's after a rehearsed ADD and DEL (ADR 25): V8 compiles a
// function at its first call, and a cache of the compile alone left every ADD compiling its
// validators again. The command line's after its compile: without it the daemon's start parsed
// the 3 MiB bundle, and the parser's memory stayed with the process (19 MiB of malloc against 4).
const codeCache = (bundle: (typeof bundles)[number], ...flags: string[]) =>
  execFileSync(process.execPath, [...execArgv, `${root}scripts/code-cache.ts`, `${work}/${bundle}.cjs`, `${work}/${bundle}.cache`, ...flags], { stdio: ['ignore', 'ignore', 'inherit'], env: buildEnv });
codeCache('plugin', '--rehearse');
codeCache('cli');

const seaConfig = {
  main: `${work}/main.cjs`,
  output: `${work}/podnet.sea`,
  disableExperimentalSEAWarning: true,
  useCodeCache: true,
  assets: Object.fromEntries(bundles.flatMap((b) => [`${b}.cjs`, `${b}.cache`]).map((f) => [f, `${work}/${f}`])),
  execArgv,
  // Node options come from a `--node-options=` argument alone, never from NODE_OPTIONS (ADR 27):
  // the plugin runs with the container runtime's environment, and a --require or a V8 flag set
  // there for something else would run in every pod's ADD. The daemon gives its launcher its own.
  execArgvExtension: 'cli',
};
await writeFile(`${work}/sea-config.json`, JSON.stringify(seaConfig, null, 2));
// With the executable's options too: the main script's code cache is made here, and V8 refuses
// one made under other flags.
execFileSync(process.execPath, [...execArgv, '--build-sea', `${work}/sea-config.json`], { stdio: ['ignore', 'ignore', 'inherit'], env: buildEnv });
// Copied once more before it is renamed into place: the file as --build-sea writes it sits in the
// page cache so that every run maps about 35 MiB more of it (79 MiB resident for a plugin VERSION
// against 44 for the same bytes copied), which is no cost of podnet's and made every memory
// figure of a fresh build wrong. `podnet install` copies it onto a node the same way.
await copyFile(`${work}/podnet.sea`, `${work}/podnet`);
await chmod(`${work}/podnet`, 0o755);

// The executable starts both ways, in an empty environment, and says nothing on stderr: a refused
// cache is said there (bin/podnet-sea.ts), and would cost every run the compile the cache saves.
for (const [args, env, input] of [[['--version'], {}, ''], [[], { CNI_COMMAND: 'VERSION' }, '{"cniVersion":"1.0.0"}']] as const) {
  const run = spawnSync(`${work}/podnet`, args, { env, input, encoding: 'utf8' });
  if (run.status !== 0 || run.stderr !== '') throw new Error(`the built executable, run with ${JSON.stringify({ args, env })}, exited ${run.status} and said: ${run.stderr}`);
}

// The launcher, started as the daemon starts it but with no daemon to serve, says that alone: its
// own options (ADR 27) must not be flags V8 checks the main script's code cache against, or every
// daemon's launcher would compile it again and warn on the daemon's log.
const [launcherFile, ...launcherArgs] = launcherCommand(`${work}/podnet`);
const launcherRun = spawnSync(launcherFile, launcherArgs, { env: { PODNET_LAUNCHER: '1' }, encoding: 'utf8' });
if (launcherRun.status !== 2 || !/^podnet: PODNET_LAUNCHER is set, but there is no daemon to launch for [^\n]*\n$/.test(launcherRun.stderr)) {
  throw new Error(`the built executable's launcher, run without a daemon, exited ${launcherRun.status} and said: ${launcherRun.stderr}`);
}

// Renamed over: a daemon or plugin running from dist/podnet keeps its old file, and nothing ever
// runs a half-written one.
await rename(`${work}/podnet`, `${dist}/podnet`);
for (const f of ['main.cjs', ...bundles.flatMap((b) => [`${b}.cjs`, `${b}.cache`])]) await rename(`${work}/${f}`, `${dist}/${f}`);
// What builds before this layout left in dist/.
await rm(`${dist}/sea-config.json`, { force: true });
await rm(`${dist}/plugin-main.cjs`, { force: true });

for (const f of ['main.cjs', 'plugin.cjs', 'plugin.cache', 'cli.cjs', 'cli.cache', 'podnet']) {
  console.log(`dist/${f}  ${((await stat(`${dist}/${f}`)).size / 1024).toFixed(0)} KiB`);
}
