// Durable file writes: a crash at any point leaves either the old file or the new one, never a
// torn one. Temp file in the same directory, fsync, rename, fsync of the directory.
import { open, rename, unlink, mkdir } from 'node:fs/promises';
import { basename, dirname, join } from 'node:path';

/** Temp files start with this; a reader skips them and a start-up sweep may remove stale ones. */
export const tempPrefix = '.tmp-';

export async function ensurePrivateDir(dir: string): Promise<void> {
  await mkdir(dir, { recursive: true, mode: 0o700 });
}

async function syncDir(dir: string): Promise<void> {
  const handle = await open(dir, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export async function writeFileAtomic(path: string, data: string, mode = 0o600): Promise<void> {
  const dir = dirname(path);
  // pid and the monotonic clock make the name unique without loading node:crypto on the plugin path.
  const temp = join(dir, `${tempPrefix}${basename(path)}.${process.pid}.${process.hrtime.bigint()}`);
  const handle = await open(temp, 'wx', mode);
  try {
    await handle.writeFile(data);
    await handle.sync();
  } catch (err) {
    await handle.close();
    await unlink(temp).catch(() => undefined);
    throw err;
  }
  await handle.close();
  try {
    await rename(temp, path);
  } catch (err) {
    await unlink(temp).catch(() => undefined);
    throw err;
  }
  await syncDir(dir);
}

/** Removes `path` durably; false when it was not there. */
export async function removeFileDurable(path: string): Promise<boolean> {
  try {
    await unlink(path);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return false;
    throw err;
  }
  await syncDir(dirname(path));
  return true;
}
