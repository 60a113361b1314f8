// A bundle the executable carries as an asset (docs/adr/0001, 0025): its CommonJS source, compiled
// as a script of its own with the V8 code cache the build made of it. The build's cache maker
// (scripts/code-cache.ts) compiles through this module too, so both wrap the source alike. V8
// refuses a cache made by another V8 or with other flags, or for a source of another length; it
// does not compare the text itself: the build makes each bundle and its cache in one folder of
// its own (scripts/build.ts).
import { Script } from 'node:vm';

/**
 * The Node options of every run of the executable (plugin, CLI, daemon, and its launcher, which
 * adds its own: src/launcher/launcher.ts), and so of the build's cache making and of its
 * --build-sea. Both matter to the long-lived processes, whose objects are short-lived and small:
 *  - V8 grows its young generation up to 16 MiB a half by default (the daemon's peak memory at a
 *    cold start over 200 pods: 151 MiB against 138 with 4);
 *  - after a full collection V8 sets the next at up to 4 times what lived, by how fast it
 *    collects, so a cold pass's garbage piled up for seconds; at 1.25 times (and at least 8 MiB
 *    more), the cold start over 500 pods peaked at 143 to 151 MiB against 154 to 157, for 0.1 to
 *    0.2 s more of the daemon's CPU (bench/resync, 2026-11-25).
 */
export const executableNodeOptions = ['--max-semi-space-size=4', '--heap-growing-percent=25'];

export interface CompiledBundle {
  /** V8 refused the cache (another Node, other options): the bundle was compiled without it. */
  readonly cacheRefused: boolean;
  /** The cache of what is compiled so far: after a run, it holds the functions that run called. */
  cacheData(): Buffer;
  /** Runs the bundle's top level once and returns its exports; `require` is the caller's (the bundles require Node's built-in modules alone). */
  run(require: NodeJS.Require): Record<string, unknown>;
}

export function compileBundle(name: string, source: string, cachedData?: Uint8Array): CompiledBundle {
  // The wrapper a CommonJS module gets from Node: the bundles are esbuild's cjs output.
  const script = new Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`, { filename: `podnet-${name}.cjs`, cachedData });
  return {
    cacheRefused: cachedData !== undefined && script.cachedDataRejected === true,
    cacheData: () => script.createCachedData(),
    run(require) {
      const module = { exports: {} as Record<string, unknown> };
      script.runInThisContext()(module.exports, require, module, process.execPath, '/');
      return module.exports;
    },
  };
}
