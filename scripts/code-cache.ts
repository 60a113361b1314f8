// V8's code cache of one bundle of the executable, run by scripts/build.ts with the Node and the
// V8 options the executable runs with (V8 refuses a cache made otherwise, and compiles as without
// one):  node OPTIONS scripts/code-cache.ts BUNDLE.cjs CACHE-FILE [--rehearse]
// With --rehearse the bundle runs first and plays its `rehearsePlugin` in a state dir of its own,
// removed after: the cache then holds every function the rehearsal called (ADR 25). Without, it
// holds what compiling the bundle compiles, its top level.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire, isBuiltin } from 'node:module';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { compileBundle } from '../bin/embedded.ts';

const usage = 'usage: node scripts/code-cache.ts BUNDLE.cjs CACHE-FILE [--rehearse]';
const [bundlePath, cachePath, ...flags] = process.argv.slice(2);
if (!bundlePath || !cachePath) throw new Error(usage);
const unknown = flags.filter((f) => f !== '--rehearse');
if (unknown.length > 0) throw new Error(`unknown ${unknown.join(' ')}; ${usage}`);

const bundle = compileBundle(basename(bundlePath, '.cjs'), readFileSync(bundlePath, 'utf8'));
if (flags.includes('--rehearse')) {
  // The executable gives its bundles a require of Node's built-in modules alone: so does the
  // rehearsal, so that a bundle that needs anything else fails here rather than on every pod.
  const nodeRequire = createRequire(import.meta.url);
  const builtinsOnly = Object.assign((id: string): unknown => {
    if (!isBuiltin(id)) throw new Error(`${bundlePath} requires ${id}, which the executable does not hold: bundles require Node's built-in modules alone`);
    return nodeRequire(id);
  }, nodeRequire) as NodeJS.Require;
  const { rehearsePlugin } = bundle.run(builtinsOnly) as { rehearsePlugin?: (stateDir: string) => Promise<void> };
  if (typeof rehearsePlugin !== 'function') throw new Error(`${bundlePath} exports no rehearsePlugin to rehearse`);
  const stateDir = mkdtempSync(join(tmpdir(), 'podnet-rehearsal-'));
  try {
    await rehearsePlugin(stateDir);
  } finally {
    rmSync(stateDir, { recursive: true, force: true });
  }
}
const cache = bundle.cacheData();
if (cache.length === 0) throw new Error(`V8 made an empty code cache of ${bundlePath}`);
writeFileSync(cachePath, cache);
