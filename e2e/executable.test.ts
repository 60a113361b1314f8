// The built executable as it starts: the command line and the plugin each compiled from the code
// cache the build made of its bundle (ADR 25), the daemon's launcher with its own Node options, and
// none from the environment (ADR 27).
import t from 'tap';
import { execa } from 'execa';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { existsSync, readFileSync } from 'node:fs';
import { executableNodeOptions } from '../bin/embedded.ts';
import { launcherCommand } from '../src/launcher/launcher.ts';
import type { LauncherAnswer, LauncherRequest } from '../src/launcher/protocol.ts';
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

t.test('no Node options come from the environment: a NODE_OPTIONS the container runtime carries changes nothing of a pod\'s ADD or of the command line (ADR 27)', { skip: existsSync(podnetBinary) ? false : `needs ${podnetBinary}: run npm run build` }, async (t) => {
  // A preload that cannot be found: Node fails at start if it takes it, before any of podnet runs.
  const env = { NODE_OPTIONS: `--require /nonexistent/podnet-e2e-${process.pid}.js --max-old-space-size=1` };
  const plugin = await execa(podnetBinary, [], { env: { ...env, CNI_COMMAND: 'VERSION' }, extendEnv: false, input: '{"cniVersion":"1.0.0"}', reject: false });
  t.equal(plugin.exitCode, 0, 'the plugin answers');
  t.match(JSON.parse(plugin.stdout), { cniVersion: '1.0.0' });
  t.equal(plugin.stderr, '', 'and says nothing of the preload');
  const cli = await execa(podnetBinary, ['--version'], { env, reject: false });
  t.equal(cli.exitCode, 0, 'the command line runs');
  t.equal(cli.stderr, '');
});

t.test('the daemon\'s launcher starts with its own Node options, from its code cache, and serves', { skip: existsSync(podnetBinary) ? false : `needs ${podnetBinary}: run npm run build` }, async (t) => {
  // Started as the daemon starts it (ADR 22, 27), with its stderr, which is the daemon's log, kept;
  // and beside it, for what the options change, one started without them.
  const launch = async (command: readonly string[]) => {
    const [file, ...args] = command;
    const child = spawn(file!, args, { stdio: ['ignore', 'ignore', 'pipe', 'ipc'], env: { PODNET_LAUNCHER: '1', PATH: process.env['PATH'] ?? '' } });
    t.teardown(() => void child.kill('SIGKILL'));
    let stderr = '';
    child.stderr?.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
    const answer = new Promise<LauncherAnswer>((resolve) => child.once('message', (a: LauncherAnswer) => resolve(a)));
    const request: LauncherRequest = { op: 'start', id: 1, file: 'printf', args: ['%s', 'launched'], env: { PATH: process.env['PATH'] ?? '' }, maxStdoutBytes: 1024, maxStderrBytes: 1024 };
    child.send(request);
    const answered = await answer;
    const threads = Number(/^Threads:\s+(\d+)$/m.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))?.[1]);
    // It ends with its channel, as when the daemon goes; its stderr read to the end.
    const ended = Promise.all([once(child, 'exit'), once(child.stderr!, 'end')]);
    child.disconnect();
    await ended;
    return { answered, threads, stderr };
  };
  const own = await launch(launcherCommand(podnetBinary));
  t.match(own.answered, { id: 1, exit: { code: 0, stdout: 'launched' } }, 'a tool it starts runs and its output comes back');
  t.equal(own.stderr, '', 'and no word of a refused code cache: its options are none V8 checks a cache against');
  const plain = await launch([podnetBinary]);
  // --v8-pool-size=1: one V8 worker thread instead of Node's four.
  t.ok(own.threads < plain.threads, `its options are taken: ${own.threads} threads, against ${plain.threads} without them`);
});
