// The built executable as it starts: the command line and the plugin each compiled from the code
// cache the build made of its bundle (ADR 25).
import t from 'tap';
import { execa } from 'execa';
import { existsSync } from 'node:fs';
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
