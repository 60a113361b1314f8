import t from 'tap';
import { chmodSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { dir } from 'tmp-promise';
import { acquireStateLock, lockFileName } from './lock.ts';

t.test('the lock holds the pid and is released', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  const lock = acquireStateLock(tmp.path);
  t.equal(readFileSync(join(tmp.path, lockFileName), 'utf8'), `${process.pid}\n`);
  lock.release();
  t.notOk(existsSync(join(tmp.path, lockFileName)), 'released');
});

t.test('a lock left by a dead process or by a process that is no daemon is taken over', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  // pid 1 lives but is no podnet daemon; 2^22+1 is above the kernel's pid limit and so dead.
  for (const stale of ['1', String(2 ** 22 + 1), 'garbage']) {
    writeFileSync(join(tmp.path, lockFileName), `${stale}\n`);
    const lock = acquireStateLock(tmp.path);
    t.equal(readFileSync(join(tmp.path, lockFileName), 'utf8'), `${process.pid}\n`, `over a lock holding "${stale}"`);
    lock.release();
  }
});

t.test('a state dir others may write into, or with a folder that is a link elsewhere, is refused before anything is read or written', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  const open = join(tmp.path, 'open');
  mkdirSync(open);
  chmodSync(open, 0o777);
  t.throws(() => acquireStateLock(open), { code: 'INVALID_CONFIG', message: /^state dir .*open is writable by group or others \(mode 777\)/ });
  t.notOk(existsSync(join(open, lockFileName)), 'no lock taken');

  const linked = join(tmp.path, 'linked');
  mkdirSync(linked, { mode: 0o700 });
  mkdirSync(join(tmp.path, 'elsewhere'), { mode: 0o700 });
  symlinkSync(join(tmp.path, 'elsewhere'), join(linked, 'spool'));
  t.throws(() => acquireStateLock(linked), { message: /^state dir folder .*linked\/spool is a symlink/ });
  t.notOk(existsSync(join(linked, lockFileName)), 'no lock taken');
});
