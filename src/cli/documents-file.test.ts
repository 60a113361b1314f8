import t from 'tap';
import { join } from 'node:path';
import { readDocumentsFile } from './documents-file.ts';

t.test('a file that cannot be read is named with the reason, not a raw errno', async (t) => {
  const dir = t.testdir({ 'empty.yaml': '' });
  t.throws(() => readDocumentsFile(join(dir, 'blue.yaml')), { code: 'INVALID_REQUEST', message: /^cannot read .*blue\.yaml: there is no such file$/ });
  t.throws(() => readDocumentsFile(dir), { message: /^cannot read .*: it is a folder$/ });
  t.throws(() => readDocumentsFile(join(dir, 'empty.yaml')), { message: /empty\.yaml holds no document/ });
});

t.test('a file is read no further than the daemon would read it from the config dir', async (t) => {
  t.throws(() => readDocumentsFile('/dev/zero'), { code: 'INVALID_REQUEST', message: 'nothing applied; /dev/zero is more than the 262144 bytes podnet reads of a documents file' });
  const dir = t.testdir({ 'big.yaml': `# ${'x'.repeat(256 * 1024)}\n` });
  t.throws(() => readDocumentsFile(join(dir, 'big.yaml')), { message: /big\.yaml is more than the 262144 bytes/ });
});
