import t from 'tap';
import { nestingPast, nestsDeeperThan, parseBoundedJson } from './bounded-json.ts';

t.test('nesting is counted outside strings, escapes honoured, without recursion', async (t) => {
  t.equal(nestingPast('{"a":[1,{"b":2}]}', 3), undefined);
  t.equal(nestingPast('{"a":[1,{"b":[]}]}', 3), 4);
  t.equal(nestingPast('{"a":"[[[[{{{{"}', 1), undefined, 'brackets in a string are text');
  t.equal(nestingPast('{"a":"\\\\"}', 1), undefined, 'an escaped backslash ends before the quote');
  t.equal(nestingPast('{"a":"\\"[[["}', 1), undefined, 'an escaped quote does not end the string');
  t.equal(nestingPast('['.repeat(1_000_000), 64), 65, 'a million levels: stops at the bound');
});

t.test('parseBoundedJson refuses too big, too deep and not JSON, each in words, with the code given', async (t) => {
  t.same(parseBoundedJson('{"a":[1]}', 'x', { maxBytes: 100 }), { a: [1] });
  t.throws(() => parseBoundedJson('"ééé"', 'the body', { maxBytes: 6 }), { code: 'INVALID_REQUEST', message: 'the body is 8 bytes, more than the 6 podnet reads' });
  t.throws(() => parseBoundedJson('[[[]]]', 'the body', { maxBytes: 100, maxDepth: 2 }, 'IO_FAILURE'), { code: 'IO_FAILURE', message: 'the body nests arrays and objects more than 2 deep' });
  t.throws(() => parseBoundedJson('{', 'the body', { maxBytes: 100 }), { code: 'INVALID_REQUEST', message: /^the body is not JSON: / });
});

t.test('nestsDeeperThan walks a parsed value with its own stack', async (t) => {
  let deep: unknown = 1;
  for (let i = 0; i < 100_000; i++) deep = { a: deep };
  t.ok(nestsDeeperThan(deep));
  t.notOk(nestsDeeperThan({ a: [1, { b: 'x' }] }, 3));
  t.ok(nestsDeeperThan({ a: [1, { b: [] }] }, 3));
  const cycle: Record<string, unknown> = {};
  cycle['self'] = cycle;
  t.ok(nestsDeeperThan(cycle), 'a cycle is as deep as it goes: it ends at the bound');
});
