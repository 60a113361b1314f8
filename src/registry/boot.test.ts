import t, { type Test } from 'tap';
import { existsSync, mkdirSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { dir } from 'tmp-promise';
import { bootIdFile, hostObjectsFile, stateLayout } from '../protocol/paths.ts';
import { dropStateOfEarlierBoot } from './boot.ts';

/** A state dir with one file in each kernel-mirroring folder, the bridges file and a record. */
async function stateDir(t: Test): Promise<string> {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  for (const folder of [stateLayout.applied, stateLayout.ipam, stateLayout.journal, stateLayout.records]) {
    mkdirSync(join(tmp.path, folder));
    writeFileSync(join(tmp.path, folder, 'x.json'), '{}');
  }
  writeFileSync(join(tmp.path, hostObjectsFile), '{"bridges":["pn-a"]}');
  return tmp.path;
}

const kernelMirrors = (path: string) => [stateLayout.applied, stateLayout.ipam, stateLayout.journal].flatMap((f) => readdirSync(join(path, f)));

t.test('state without a boot record (an older podnet) is kept, and this boot recorded', async (t) => {
  const path = await stateDir(t);
  t.equal(dropStateOfEarlierBoot(path, 'b1'), false);
  t.same(kernelMirrors(path), ['x.json', 'x.json', 'x.json']);
  t.equal(readFileSync(join(path, bootIdFile), 'utf8'), 'b1\n');
});

t.test('a start in the boot that wrote the state keeps it', async (t) => {
  const path = await stateDir(t);
  dropStateOfEarlierBoot(path, 'b1');
  t.equal(dropStateOfEarlierBoot(path, 'b1'), false);
  t.same(kernelMirrors(path), ['x.json', 'x.json', 'x.json']);
  t.ok(existsSync(join(path, hostObjectsFile)));
});

t.test("a start in a later boot drops what the earlier one said of its kernel, and the records of its sandboxes", async (t) => {
  const path = await stateDir(t);
  dropStateOfEarlierBoot(path, 'b1');
  writeFileSync(join(path, stateLayout.ipam, 'torn.json'), ''); // what a power cut may leave
  t.equal(dropStateOfEarlierBoot(path, 'b2'), true);
  t.same(kernelMirrors(path), []);
  t.notOk(existsSync(join(path, hostObjectsFile)), 'the bridges went with the kernel');
  t.same(readdirSync(join(path, stateLayout.records)), [], 'the records of its sandboxes went too: nothing else removes one the runtime sends no DEL for');
  t.equal(readFileSync(join(path, bootIdFile), 'utf8'), 'b2\n');
});

t.test('where /proc gives no boot id, nothing is dropped or recorded', async (t) => {
  const path = await stateDir(t);
  writeFileSync(join(path, bootIdFile), 'b1\n');
  t.equal(dropStateOfEarlierBoot(path, 'unknown'), false);
  t.same(kernelMirrors(path), ['x.json', 'x.json', 'x.json']);
});
