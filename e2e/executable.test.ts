// The built executable as it starts: the command line and the plugin each compiled from the code
// cache the build made of its bundle (ADR 25).
import t from 'tap';
import { execa } from 'execa';
import { existsSync, readFileSync } from 'node:fs';
import { executableNodeOptions } from '../bin/embedded.ts';
import { podnetBinary } from './lib/env.ts';

t.test('the command line starts from its code cache, saying nothing of it', { skip: existsSync(podnetBinary) ? false : `needs ${podnetBinary}: run npm run build` }, async (t) => {
  const run = await execa(podnetBinary, ['--version'], { reject: false });
  t.equal(run.exitCode, 0);
  t.match(run.stdout, /^\d+\.\d+\.\d+/, 'it prints its version');
  t.equal(run.stderr, '', 'and no word of a refused code cache (V8 checks it against the Node and options that run it)');
});

t.test('the plugin starts from its code cache, saying nothing of it', { skip: existsSync(podnetBinary) ? false : `needs ${podnetBinary}: run npm run build` }, async (t) => {
  const run = await execa(podnetBinary, [], { env: { CNI_COMMAND: 'VERSION' }, extendEnv: false, input: '{"cniVersion":"1.0.0"}', reject: false });
  t.equal(run.exitCode, 0);
  t.match(JSON.parse(run.stdout), { cniVersion: '1.0.0', supportedVersions: ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'] }, 'it answers the runtime');
  t.equal(run.stderr, '', 'and no word of a refused code cache');
});

t.test('the plugin\'s code cache holds what its rehearsal calls: the build rehearsed before taking it', { skip: existsSync(podnetBinary) ? false : `needs ${podnetBinary}: run npm run build` }, async (t) => {
  const dist = new URL('../dist/', import.meta.url);
  const stateDir = t.testdir();
  // The bundle and cache the executable embeds, in a Node run as the executable runs: a cache taken
  // after the compile alone would grow threefold as the rehearsal compiles the ADD's functions.
  const run = await execa(process.execPath, [...executableNodeOptions, '--input-type=module', '-e', `import { compileBundle } from ${JSON.stringify(new URL('../bin/embedded.ts', import.meta.url).href)};
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
const cache = readFileSync(new URL('plugin.cache', ${JSON.stringify(dist.href)}));
const bundle = compileBundle('plugin', readFileSync(new URL('plugin.cjs', ${JSON.stringify(dist.href)}), 'utf8'), cache);
await bundle.run(createRequire(import.meta.url)).rehearsePlugin(${JSON.stringify(stateDir)});
console.log(JSON.stringify({ refused: bundle.cacheRefused, before: cache.length, after: bundle.cacheData().length }));`]);
  const { refused, before, after } = JSON.parse(run.stdout) as { refused: boolean; before: number; after: number };
  t.equal(refused, false, 'V8 takes the cache');
  // A few bytes either way are V8's own bookkeeping; a cache of the compile alone is a third the size.
  t.ok(Math.abs(after - before) < before / 100, `the rehearsal compiles nothing the cache lacks (${before} bytes, then ${after})`);
  t.ok(readFileSync(new URL('plugin.cjs', dist)).length > 0);
});
