import t from 'tap';
import { chmodSync, chownSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { dir } from 'tmp-promise';
import { checkPrivateDir, ensurePrivateDir, removeTempFiles, tempPrefix, writeFileAtomic } from './atomic-file.ts';

t.test('removeTempFiles: the temp files of writes cut short go, the files stay', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  writeFileAtomic(join(tmp.path, 'kept.json'), '{}');
  writeFileSync(join(tmp.path, `${tempPrefix}kept.json.1.2`), '{"half');
  t.same(removeTempFiles(tmp.path), [`${tempPrefix}kept.json.1.2`]);
  t.same(readdirSync(tmp.path), ['kept.json']);
  t.same(removeTempFiles(join(tmp.path, 'missing')), [], 'a folder not made yet has none');
});

t.test('a private folder is the daemon\'s user\'s alone: a symlink, a file, group or other write, another owner are refused, naming it', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  const at = (name: string) => join(tmp.path, name);
  mkdirSync(at('private'), { mode: 0o700 });
  t.doesNotThrow(() => checkPrivateDir(at('private'), 'state dir'));
  mkdirSync(at('readable'), { mode: 0o755 });
  t.doesNotThrow(() => checkPrivateDir(at('readable'), 'state dir'), 'others may read, not write');
  for (const mode of [0o777, 0o770, 0o1777, 0o702]) {
    mkdirSync(at(`open-${mode.toString(8)}`));
    chmodSync(at(`open-${mode.toString(8)}`), mode);
    t.throws(() => checkPrivateDir(at(`open-${mode.toString(8)}`), 'state dir'), { code: 'INVALID_CONFIG', message: new RegExp(`^state dir .*open-${mode.toString(8)} is writable by group or others \\(mode ${mode.toString(8)}\\): chmod 700 it$`) });
  }
  symlinkSync(at('private'), at('link'));
  t.throws(() => checkPrivateDir(at('link'), 'socket folder'), { message: /^socket folder .*link is a symlink/ });
  writeFileSync(at('file'), '');
  t.throws(() => checkPrivateDir(at('file'), 'state dir'), { message: /is not a folder/ });
});

t.test('a folder of another owner is refused', { skip: process.geteuid?.() === 0 ? false : 'needs root to give a folder away' }, async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  const theirs = join(tmp.path, 'theirs');
  mkdirSync(theirs, { mode: 0o700 });
  chownSync(theirs, 65534, 65534);
  t.throws(() => checkPrivateDir(theirs, 'state dir'), { code: 'INVALID_CONFIG', message: /is owned by uid 65534, not by the daemon's user \(uid 0\): chown 0 it/ });
});

t.test('a folder that cannot be made where its parent is (procfs) is an error at once, not a loop', async (t) => {
  // Node's recursive mkdir retried this forever: a plugin given stateDir /proc/self spun until killed.
  t.throws(() => ensurePrivateDir('/proc/self/spool'), { code: 'ENOENT' });
  t.throws(() => ensurePrivateDir('/proc/self/a/b/c'), { code: 'ENOENT' });
});
