import t from 'tap';
import { unlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { dir } from 'tmp-promise';
import { configDirReader } from './config-dir.ts';

const network = (name: string, mtu: number) =>
  `apiVersion: podnetwork.opdev.io/v1alpha1\nkind: Network\nmetadata: { name: ${name} }\nspec: { type: bridge, mtu: ${mtu} }\n`;

t.test('configDirReader follows the files: a changed file is read anew, an unchanged one reused, a removed one gone', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  writeFileSync(join(tmp.path, 'a.yaml'), network('a', 1400));
  writeFileSync(join(tmp.path, 'b.yaml'), network('b', 1500));
  const read = configDirReader(tmp.path);
  const first = read();
  t.same([...first.networks.keys()], ['a', 'b']);

  writeFileSync(join(tmp.path, 'a.yaml'), network('a', 9000));
  const second = read();
  t.equal(second.networks.get('a')!.spec.mtu, 9000, 'the change is seen');
  t.equal(second.networks.get('b'), first.networks.get('b'), 'the unchanged file was not parsed again');

  unlinkSync(join(tmp.path, 'b.yaml'));
  writeFileSync(join(tmp.path, 'c.yaml'), 'kind: [');
  const third = read();
  t.same([...third.networks.keys()], ['a']);
  t.match(third.problems, [{ document: /c\.yaml/, field: '(syntax)' }], 'a broken file is a problem named by its file');
});
