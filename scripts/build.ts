// npm run build → dist/podnet, one Node single executable (docs/adr/0001):
//  - dist/main.cjs, the main script: picks the role and loads its bundle (bin/podnet-sea.ts);
//  - dist/plugin.cjs, the CNI plugin path alone, and dist/cli.cjs, the command line and daemon,
//    each embedded as an asset with V8's code cache of it (dist/plugin.cache made after a
//    rehearsed ADD and DEL, ADR 25; dist/cli.cache after its compile), compiled only when it runs.
import { build, type Plugin } from 'esbuild';
import { execFileSync } from 'node:child_process';
import { chmod, copyFile, mkdir, rename, rm, stat, writeFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';

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
 * document. The whole sets are about 0.9 MiB of code, which the executable's main script would
 * load on every plugin run.
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
await build({ ...common, entryPoints: [`${root}bin/podnet-sea.ts`], outfile: `${dist}/main.cjs` });
await build({ ...common, entryPoints: [`${root}src/cni/main.ts`], outfile: `${dist}/plugin.cjs`, plugins: [pluginValidators] });
await build({ ...common, entryPoints: [`${root}src/cli/main.ts`], outfile: `${dist}/cli.cjs` });

// For every run of the executable (plugin, CLI, daemon); it matters to the daemon: V8 grows its
// young generation up to 16 MiB a half by default (the daemon's peak memory at a cold start over
// 200 pods: 151 MiB against 138 with 4), and its objects are short-lived and small.
const execArgv = ['--max-semi-space-size=4'];

// V8's code cache of each bundle, made by this Node with the executable's options (V8 refuses a
// cache made otherwise). The plugin's after a rehearsed ADD and DEL (ADR 25): V8 compiles a
// function at its first call, and a cache of the compile alone left every ADD compiling its
// validators again. The command line's after its compile: without it the daemon's start parsed
// the 3 MiB bundle, and the parser's memory stayed with the process (19 MiB of malloc against 4).
const codeCache = (bundle: string, ...flags: string[]) =>
  execFileSync(process.execPath, [...execArgv, `${root}scripts/code-cache.ts`, `${dist}/${bundle}.cjs`, `${dist}/${bundle}.cache`, ...flags], { stdio: ['ignore', 'ignore', 'inherit'] });
codeCache('plugin', '--rehearse');
codeCache('cli');

const seaConfig = {
  main: `${dist}/main.cjs`,
  // Written beside and renamed over: a daemon or plugin running from dist/podnet keeps its old
  // file, and nothing ever runs a half-written one.
  output: `${dist}/.podnet.new`,
  disableExperimentalSEAWarning: true,
  useCodeCache: true,
  assets: Object.fromEntries(['plugin.cjs', 'plugin.cache', 'cli.cjs', 'cli.cache'].map((f) => [f, `${dist}/${f}`])),
  execArgv,
};
await writeFile(`${dist}/sea-config.json`, JSON.stringify(seaConfig, null, 2));
execFileSync(process.execPath, ['--build-sea', `${dist}/sea-config.json`], { stdio: ['ignore', 'ignore', 'inherit'] });
// Copied once more before it is renamed into place: the file as --build-sea writes it sits in the
// page cache so that every run maps about 35 MiB more of it (79 MiB resident for a plugin VERSION
// against 44 for the same bytes copied), which is no cost of podnet's and made every memory
// figure of a fresh build wrong. `podnet install` copies it onto a node the same way.
await copyFile(`${dist}/.podnet.new`, `${dist}/.podnet.copy`);
await rm(`${dist}/.podnet.new`);
await chmod(`${dist}/.podnet.copy`, 0o755);
await rename(`${dist}/.podnet.copy`, `${dist}/podnet`);

for (const f of ['main.cjs', 'plugin.cjs', 'plugin.cache', 'cli.cjs', 'cli.cache', 'podnet']) {
  console.log(`dist/${f}  ${((await stat(`${dist}/${f}`)).size / 1024).toFixed(0)} KiB`);
}
