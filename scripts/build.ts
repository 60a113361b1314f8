// npm run build → dist/podnet, one Node single executable (docs/adr/0001):
//  - dist/plugin-main.cjs, the main script: the CNI plugin path alone, with V8's code cache;
//  - dist/cli.cjs, the command line and daemon, embedded as an asset and compiled on demand, with
//    V8's code cache of it (dist/cli.cache), embedded too.
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
await build({ ...common, entryPoints: [`${root}bin/podnet-sea.ts`], outfile: `${dist}/plugin-main.cjs`, plugins: [pluginValidators] });
await build({ ...common, entryPoints: [`${root}src/cli/main.ts`], outfile: `${dist}/cli.cjs` });

// For every run of the executable (plugin, CLI, daemon); it matters to the daemon: V8 grows its
// young generation up to 16 MiB a half by default (the daemon's peak memory at a cold start over
// 200 pods: 151 MiB against 138 with 4), and its objects are short-lived and small.
const execArgv = ['--max-semi-space-size=4'];

// V8's code cache of the command line, made by this Node with the executable's options, the
// parameters and the source bin/podnet-sea.ts compiles it with (V8 refuses a cache made otherwise,
// and compiles as without one). Without it the daemon's start parsed the 3 MiB bundle, and the
// parser's memory stayed with the process: 19 MiB of malloc against 4.
const cacheCli = `const { compileFunction } = require('node:vm');
const { readFileSync, writeFileSync } = require('node:fs');
const run = compileFunction(readFileSync(process.argv[1], 'utf8'), ['exports', 'require', 'module', '__filename', '__dirname'], { filename: 'podnet-cli.cjs', produceCachedData: true });
writeFileSync(process.argv[2], run.cachedData);`;
execFileSync(process.execPath, [...execArgv, '-e', cacheCli, `${dist}/cli.cjs`, `${dist}/cli.cache`], { stdio: ['ignore', 'ignore', 'inherit'] });

const seaConfig = {
  main: `${dist}/plugin-main.cjs`,
  // Written beside and renamed over: a daemon or plugin running from dist/podnet keeps its old
  // file, and nothing ever runs a half-written one.
  output: `${dist}/.podnet.new`,
  disableExperimentalSEAWarning: true,
  useCodeCache: true,
  assets: { 'cli.cjs': `${dist}/cli.cjs`, 'cli.cache': `${dist}/cli.cache` },
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

for (const f of ['plugin-main.cjs', 'cli.cjs', 'podnet']) {
  console.log(`dist/${f}  ${((await stat(`${dist}/${f}`)).size / 1024).toFixed(0)} KiB`);
}
