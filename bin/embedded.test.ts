import t from 'tap';
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

// Each step in a Node of its own, as the build and the executable are: within one process V8
// finds a source it compiled before in its own memory, and never reads the cache it is given.
const embedded = new URL('./embedded.ts', import.meta.url).href;
const inNode = (dir: string, body: string): unknown =>
  JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', `import { compileBundle } from '${embedded}';
import { readFileSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
const require = createRequire(import.meta.url);
const dir = ${JSON.stringify(dir)};
const source = readFileSync(dir + '/bundle.cjs', 'utf8');
${body}`], { encoding: 'utf8' }));

// A bundle as esbuild writes one: CommonJS, a function its top level does not call.
const source = `const { basename } = require('node:path');
exports.greet = function greet(name) { return 'hello ' + basename(name); };`;

t.test('a cache made after a call holds that function, and the next Node takes it', async (t) => {
  const dir = t.testdir({ 'bundle.cjs': source });
  const made = inNode(dir, `const bundle = compileBundle('greeter', source);
const compiledOnly = bundle.cacheData();
const greeting = bundle.run(require).greet('/x/ada');
writeFileSync(dir + '/greeter.cache', bundle.cacheData());
console.log(JSON.stringify({ greeting, compiledOnly: compiledOnly.length, rehearsed: bundle.cacheData().length }));`) as { greeting: string; compiledOnly: number; rehearsed: number };
  t.equal(made.greeting, 'hello ada', 'the bundle runs with the require it is given');
  t.ok(made.rehearsed > made.compiledOnly, `the cache after the call holds the called function too (${made.rehearsed} bytes against ${made.compiledOnly})`);

  const taken = inNode(dir, `const bundle = compileBundle('greeter', source, readFileSync(dir + '/greeter.cache'));
console.log(JSON.stringify({ refused: bundle.cacheRefused, greeting: bundle.run(require).greet('grace') }));`);
  t.strictSame(taken, { refused: false, greeting: 'hello grace' }, 'V8 takes the cache for the same source');

  const reused = inNode(dir, `const bundle = compileBundle('greeter', source, readFileSync(dir + '/greeter.cache'));
bundle.run(require).greet('linus');
console.log(JSON.stringify({ before: readFileSync(dir + '/greeter.cache').length, after: bundle.cacheData().length }));`) as { before: number; after: number };
  t.equal(reused.after, reused.before, 'and the called function comes from it: calling it compiles nothing more');
});

t.test('a cache of a source of another length is refused, and the bundle runs without it', async (t) => {
  const dir = t.testdir({ 'bundle.cjs': source });
  writeFileSync(join(dir, 'other.cache'), execFileSync(process.execPath, ['--input-type=module', '-e', `import { compileBundle } from '${embedded}';
process.stdout.write(compileBundle('other', 'exports.answer = 42;').cacheData());`]));
  t.ok(readFileSync(join(dir, 'other.cache')).length > 0);
  const run = inNode(dir, `const bundle = compileBundle('greeter', source, readFileSync(dir + '/other.cache'));
console.log(JSON.stringify({ refused: bundle.cacheRefused, greeting: bundle.run(require).greet('ada') }));`);
  t.strictSame(run, { refused: true, greeting: 'hello ada' });
});

// What the build guards against by making each bundle and its cache in a folder of its own
// (scripts/build.ts): V8 checks the source's length, not its text. Should a later V8 check the
// text, this test fails and says so; the build's folder stays right either way.
t.test('V8 takes a cache for another source of the same length', async (t) => {
  const dir = t.testdir({ 'bundle.cjs': source });
  const sameLength = source.replace("'hello '", "'howdy '");
  t.equal(sameLength.length, source.length);
  writeFileSync(join(dir, 'other.cache'), execFileSync(process.execPath, ['--input-type=module', '-e', `import { compileBundle } from '${embedded}';
process.stdout.write(compileBundle('other', ${JSON.stringify(sameLength)}).cacheData());`]));
  const run = inNode(dir, `const bundle = compileBundle('greeter', source, readFileSync(dir + '/other.cache'));
console.log(JSON.stringify({ refused: bundle.cacheRefused }));`);
  t.strictSame(run, { refused: false }, 'not refused: only the build keeps a bundle and its cache together');
});
