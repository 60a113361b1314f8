import t from 'tap';
import { readdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { QuarantineLog, setAside } from './quarantine.ts';

t.test('a file set aside is kept for a human under quarantine/, and listed and logged with what its loss means', async (t) => {
  const stateDir = t.testdir({ applied: { 'c1.json': 'garbage' } });
  const warnings: { msg: string; fields: unknown }[] = [];
  const log = new QuarantineLog({ info() {}, error() {}, warn: (msg, fields) => void warnings.push({ msg, fields }) });
  const path = join(stateDir, 'applied', 'c1.json');
  const set = setAside(stateDir, path, 'not JSON');
  log.told('what podnet applied there is left in place')(path, set.file, set.reason);

  t.same(await readdir(join(stateDir, 'applied')), [], 'out of the way');
  t.same(await readdir(join(stateDir, 'quarantine')), [set.file], 'not lost');
  t.match(set.file, /-c1\.json$/, 'its name still says what it was');
  t.same(log.list(), [{ file: set.file, reason: 'not JSON' }]);
  t.match(warnings, [{ msg: /left in place/, fields: { file: path, quarantinedAs: set.file, reason: 'not JSON' } }]);
});

t.test('two files of one name set aside at once are both kept', async (t) => {
  const stateDir = t.testdir({ spool: {}, records: {} });
  await writeFile(join(stateDir, 'spool', 'x.json'), 'a');
  await writeFile(join(stateDir, 'records', 'x.json'), 'b');
  setAside(stateDir, join(stateDir, 'spool', 'x.json'), 'a');
  setAside(stateDir, join(stateDir, 'records', 'x.json'), 'b');
  t.equal((await readdir(join(stateDir, 'quarantine'))).length, 2);
});
