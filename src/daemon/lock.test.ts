import t from 'tap';
import { chmodSync, existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { dir } from 'tmp-promise';
import { acquireStateLock, lockFileName } from './lock.ts';

/** This process's start time, field 22 of /proc/self/stat. */
const startTime = () => {
  const stat = readFileSync('/proc/self/stat', 'utf8');
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
};

t.test('the lock holds the pid and the time its process started, and is released', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  const lock = acquireStateLock(tmp.path);
  t.equal(readFileSync(join(tmp.path, lockFileName), 'utf8'), `${process.pid} ${startTime()}\n`);
  t.throws(() => acquireStateLock(tmp.path), { code: 'BUSY', message: new RegExp(`held by the podnet daemon with pid ${process.pid}$`) }, 'a second daemon is refused');
  lock.release();
  t.notOk(existsSync(join(tmp.path, lockFileName)), 'released');
});

t.test('a lock left by a dead process or by a process that is no daemon is taken over', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  // pid 1 lives but is no podnet daemon; 2^22+1 is above the kernel's pid limit and so dead.
  // The last: this very pid, with a start time that is not its own (a dead daemon's pid given again).
  for (const stale of ['1', String(2 ** 22 + 1), 'garbage', `${process.pid} 1`]) {
    writeFileSync(join(tmp.path, lockFileName), `${stale}\n`);
    const lock = acquireStateLock(tmp.path);
    t.equal(readFileSync(join(tmp.path, lockFileName), 'utf8'), `${process.pid} ${startTime()}\n`, `over a lock holding "${stale}"`);
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
