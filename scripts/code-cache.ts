// V8's code cache of one bundle of the executable, run by scripts/build.ts with the Node and the
// V8 options the executable runs with (V8 refuses a cache made otherwise, and compiles as without
// one):  node OPTIONS scripts/code-cache.ts BUNDLE.cjs CACHE-FILE [--rehearse]
// With --rehearse the bundle runs first and plays its `rehearsePlugin` in a state dir of its own,
// removed after: the cache then holds every function an ADD and a DEL call (ADR 25). Without, it
// holds what compiling the bundle compiles, its top level.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { compileBundle } from '../bin/embedded.ts';

const [bundlePath, cachePath, ...flags] = process.argv.slice(2);
if (!bundlePath || !cachePath) throw new Error('usage: node scripts/code-cache.ts BUNDLE.cjs CACHE-FILE [--rehearse]');
const bundle = compileBundle(basename(bundlePath, '.cjs'), readFileSync(bundlePath, 'utf8'));
if (flags.includes('--rehearse')) {
  const { rehearsePlugin } = bundle.run(createRequire(import.meta.url)) as { rehearsePlugin: (stateDir: string) => Promise<void> };
  const stateDir = mkdtempSync(join(tmpdir(), 'podnet-rehearsal-'));
  try {
    await rehearsePlugin(stateDir);
  } finally {
    rmSync(stateDir, { recursive: true, force: true });
  }
}
writeFileSync(cachePath, bundle.cacheData());
