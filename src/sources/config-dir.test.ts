import t from 'tap';
import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
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

t.test('a file under a document\'s name that is not one is that file\'s problem, named, never read; every other document still counts', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  const at = (name: string) => join(tmp.path, name);
  writeFileSync(at('good.yaml'), network('good', 1400));
  execFileSync('mkfifo', [at('fifo.yaml')]);
  mkdirSync(at('folder.yaml'));
  symlinkSync('/dev/zero', at('zero.yaml'));
  symlinkSync(at('nowhere'), at('dangling.yaml'));
  symlinkSync(at('good.yaml'), at('linked.yml'));
  writeFileSync(at('huge.yaml'), `# ${'x'.repeat(2 * 1024 * 1024)}\n`);
  writeFileSync(at('bomb.yaml'), ['a: &a [x, x, x, x, x, x, x, x, x]', ...Array.from({ length: 9 }, (_, i) => `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [${Array(9).fill(`*${String.fromCharCode(97 + i)}`).join(', ')}]`)].join('\n'));
  writeFileSync(at('deep.yaml'), `kind: Network\nspec: ${'['.repeat(200)}${']'.repeat(200)}\n`);

  const started = Date.now();
  const read = configDirReader(tmp.path)();
  t.ok(Date.now() - started < 5000, 'the FIFO did not block the read');
  t.same([...read.networks.keys()], ['good'], 'the good document counts (and its symlinked twin is the same name, told below)');
  const reasons = Object.fromEntries(read.problems.map((p) => [p.document.replace(/ document \d+$/, ''), p.reason]));
  t.match(reasons, {
    'fifo.yaml': 'is a FIFO, not a regular file: podnet reads only regular files (and symlinks to them)',
    'folder.yaml': 'is a folder, not a regular file',
    'zero.yaml': 'is a device, not a regular file',
    'dangling.yaml': 'is a symlink to nothing',
    'huge.yaml': /is 20971\d\d bytes, more than the 262144 podnet reads/,
    'bomb.yaml': /alias/i,
    'deep.yaml': 'nests mappings and lists more than 64 deep',
  });
  t.match(read.problems.find((p) => p.document.startsWith('Network good in linked.yml')), { reason: /also defined in good\.yaml/ }, 'a symlink to a regular file is read');
});

t.test('a file caught halfway written, or swapped for something unreadable, keeps the documents it held when last read whole', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  const at = (f: string) => join(tmp.path, f);
  writeFileSync(at('a.yaml'), network('a', 1400));
  const read = configDirReader(tmp.path);
  t.equal(read().networks.get('a')?.spec.mtu, 1400);

  // An editor's write, truncated then filled: the half seen first is not the file's new content.
  writeFileSync(at('a.yaml'), network('a', 9000).slice(0, 70));
  const half = read();
  t.equal(half.networks.get('a')?.spec.mtu, 1400, 'the Network stays as it was: not taken for deleted');
  t.match(half.problems, [{ document: /a\.yaml/, field: '(syntax)', reason: /the documents it held when last read whole stay until it can be read again$/ }]);
  writeFileSync(at('a.yaml'), network('a', 9000));
  t.equal(read().networks.get('a')?.spec.mtu, 9000, 'the whole write is taken');

  // Caught right after the truncation: empty is that write halfway, not a deletion.
  writeFileSync(at('a.yaml'), '');
  const emptied = read();
  t.equal(emptied.networks.get('a')?.spec.mtu, 9000, 'an emptied file keeps its documents');
  t.match(emptied.problems, [{ document: 'a.yaml', field: '(file)', reason: /^is empty; the documents it held when last read whole stay .*\(delete the file to delete its documents\)$/ }]);
  writeFileSync(at('a.yaml'), network('a', 9000));
  t.equal(read().networks.get('a')?.spec.mtu, 9000, 'and the whole write after it is taken');

  unlinkSync(at('a.yaml'));
  mkdirSync(at('a.yaml'));
  const swapped = read();
  t.equal(swapped.networks.get('a')?.spec.mtu, 9000, 'a folder under its name: still the last documents');
  t.match(swapped.problems, [{ document: 'a.yaml', field: '(file)', reason: /^is a folder, not a regular file.*; the documents it held when last read whole stay/ }]);

  execFileSync('rmdir', [at('a.yaml')]);
  t.equal(read().networks.size, 0, 'removed: its documents go with it');
  writeFileSync(at('b.yaml'), 'kind: [');
  t.same([...read().networks.keys()], [], 'a file never read whole has no documents to keep');
});

t.test('a PodNetworkPermission file counts with the documents: standalone, an admin bounds a namespace the same way', async (t) => {
  const tmp = await dir({ unsafeCleanup: true });
  t.teardown(() => tmp.cleanup());
  writeFileSync(join(tmp.path, 'podnetworkpermission.tenant-a.lab.yaml'), 'apiVersion: podnetwork.opdev.io/v1alpha1\nkind: PodNetworkPermission\nmetadata: { name: lab, namespace: tenant-a }\nspec: { allow: [attachments], mtu: { min: 1280 } }\n');
  writeFileSync(join(tmp.path, 'bad.yaml'), 'apiVersion: podnetwork.opdev.io/v1alpha1\nkind: PodNetworkPermission\nmetadata: { name: bad, namespace: tenant-a }\nspec: { allow: [everything] }\n');
  const docs = configDirReader(tmp.path)();
  t.same(docs.permissions.map((p) => [p.metadata.name, p.spec.allow]).sort(), [['bad', []], ['lab', ['attachments']]], 'one that breaks the schema stands, allowing nothing');
  t.match(docs.problems, [{ document: /bad\.yaml/, field: 'PodNetworkPermission', reason: /allow/ }], 'and is a problem naming it');
});
