import t from 'tap';
import { readdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { dir } from 'tmp-promise';
import { removeTempFiles, tempPrefix, writeFileAtomic } from './atomic-file.ts';

t.test('removeTempFiles: the temp files of writes cut short go, the files stay', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  writeFileAtomic(join(tmp.path, 'kept.json'), '{}');
  writeFileSync(join(tmp.path, `${tempPrefix}kept.json.1.2`), '{"half');
  t.same(removeTempFiles(tmp.path), [`${tempPrefix}kept.json.1.2`]);
  t.same(readdirSync(tmp.path), ['kept.json']);
  t.same(removeTempFiles(join(tmp.path, 'missing')), [], 'a folder not made yet has none');
});
