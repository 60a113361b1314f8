import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { sameContent } from './install.ts';

t.test('two files are the same content only when every byte is, also past the first chunk', async (t) => {
  const dir = t.testdir();
  const big = Buffer.alloc((5 << 20) / 2, 7);
  const at = (name: string, body: Buffer) => {
    writeFileSync(join(dir, name), body);
    return join(dir, name);
  };
  const a = at('a', big);
  t.ok(sameContent(a, at('same', Buffer.from(big))));
  const lastByte = Buffer.from(big);
  lastByte[lastByte.length - 1] = 8;
  t.notOk(sameContent(a, at('last', lastByte)), 'a byte in the last chunk');
  t.notOk(sameContent(a, at('shorter', big.subarray(1))), 'another size');
  t.notOk(sameContent(a, join(dir, 'missing')), 'a file that is not there');
  t.ok(sameContent(at('empty', Buffer.alloc(0)), at('empty2', Buffer.alloc(0))), 'two empty files');
});
