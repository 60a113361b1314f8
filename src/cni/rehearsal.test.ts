import t from 'tap';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { listSpool, readSpoolEntry } from '../registry/spool.ts';
import { rehearsePlugin } from './rehearsal.ts';

t.test('the rehearsal records an ADD and its DEL in the state dir it is given, as a pod creation and removal would', async (t) => {
  const stateDir = t.testdir();
  await rehearsePlugin(stateDir);
  const entries = await Promise.all((await listSpool(stateDir)).map((name) => readSpoolEntry(stateDir, name)));
  t.strictSame(entries.map((e) => e.op), ['add', 'add', 'del'], 'the spool holds the ADD, its record marked as started without a daemon, then the DEL');
  const added = entries[0];
  t.match(added, { op: 'add', record: { containerId: 'podnet-rehearsal', ifname: 'eth0', pod: { namespace: 'rehearsal', name: 'rehearsal-0' } } });
  t.match(entries[1], { op: 'add', record: { containerId: 'podnet-rehearsal', startedWithoutNetwork: true } });
});

t.test('a rehearsal the plugin refuses stops the build rather than caching the error path', async (t) => {
  const stateDir = t.testdir();
  const notADir = join(stateDir, 'file');
  writeFileSync(notADir, '');
  await t.rejects(rehearsePlugin(notADir), /the plugin's rehearsed ADD failed: .*could not record the add .*not a directory/);
});
