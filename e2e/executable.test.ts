// The built executable as it starts: its command line compiled from the code cache the build made.
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
