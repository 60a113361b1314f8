import t from 'tap';
import { execFileSync } from 'node:child_process';
import { isNamespaceFile, isNetworkNamespace, isNodeNetworkNamespace, networkNamespaceSight } from './probe.ts';

t.test('a network namespace file is one; other namespace types and plain files are not', async (t) => {
  t.equal(isNetworkNamespace('/proc/self/ns/mnt'), false, 'a mount namespace');
  t.equal(isNetworkNamespace('/proc/self/ns/pid'), false, 'a pid namespace');
  t.equal(isNetworkNamespace('/etc/hostname'), false, 'a plain file');
  t.equal(isNetworkNamespace('/proc/self/ns'), false, 'a directory');
  t.equal(isNetworkNamespace('/nonexistent/netns'), false, 'a missing path');
  t.equal(isNamespaceFile('/proc/self/ns/net'), true, 'the plugin\'s check: a net namespace');
  for (const other of ['/proc/self/ns/mnt', '/etc/hostname', '/proc/self/ns']) t.equal(isNamespaceFile(other), false, `the plugin's check refuses ${other}`);
});

t.test('the node\'s own network namespace is never a sandbox\'s: the daemon sees no netns there', async (t) => {
  t.ok(isNodeNetworkNamespace('/proc/self/ns/net'), 'this process\'s, which is the node\'s for the daemon and the plugin');
  t.equal(isNetworkNamespace('/proc/self/ns/net'), false);
  t.equal(networkNamespaceSight()('/proc/self/ns/net'), 'not-net');
  t.notOk(isNodeNetworkNamespace('/etc/hostname'));
  t.notOk(isNodeNetworkNamespace('/nonexistent/netns'));
});

const root = process.getuid?.() === 0;
t.test('a bind-mounted netns (ip netns add) is one', { skip: root ? false : 'needs root to make a named netns' }, async (t) => {
  const name = `pnprobe${process.pid}`;
  execFileSync('ip', ['netns', 'add', name]);
  t.teardown(() => execFileSync('ip', ['netns', 'del', name]));
  t.equal(isNetworkNamespace(`/run/netns/${name}`), true);
  t.notOk(isNodeNetworkNamespace(`/run/netns/${name}`), 'a netns of its own is not the node\'s');
});

t.test('the node\'s netns bind-mounted under another name is still the node\'s', { skip: root ? false : 'needs root to bind-mount a namespace' }, async (t) => {
  const file = `/tmp/pnprobe-node-${process.pid}`;
  execFileSync('touch', [file]);
  execFileSync('mount', ['--bind', '/proc/self/ns/net', file]);
  t.teardown(() => {
    execFileSync('umount', [file]);
    execFileSync('rm', ['-f', file]);
  });
  t.ok(isNodeNetworkNamespace(file));
  t.equal(isNetworkNamespace(file), false);
});

t.test('a bind-mounted namespace of another type is not one', { skip: root ? false : 'needs root to bind-mount a namespace' }, async (t) => {
  const file = `/tmp/pnprobe-uts-${process.pid}`;
  execFileSync('touch', [file]);
  execFileSync('unshare', [`--uts=${file}`, 'true']);
  t.teardown(() => {
    execFileSync('umount', [file]);
    execFileSync('rm', ['-f', file]);
  });
  t.equal(isNetworkNamespace(file), false, 'a UTS namespace mounted on a file');
  t.equal(isNamespaceFile(file), true, 'the plugin\'s cheap check sees a namespace file of unknown type');
});

t.test('a FIFO is refused without being opened', async (t) => {
  const fifo = `/tmp/pnprobe-fifo-${process.pid}`;
  execFileSync('mkfifo', [fifo]);
  t.teardown(() => execFileSync('rm', ['-f', fifo]));
  // Opening a FIFO for reading would block until a writer comes: returning at all is the test.
  t.equal(isNetworkNamespace(fifo), false);
  t.equal(isNamespaceFile(fifo), false);
});

t.test('a path that cannot be looked at is unsure, not gone: the daemon takes back only what is gone', async (t) => {
  const loop = `/tmp/pnprobe-loop-${process.pid}`;
  // Two symlinks naming each other: every look at the path fails with ELOOP.
  execFileSync('ln', ['-s', `${loop}-b`, `${loop}-a`]);
  execFileSync('ln', ['-s', `${loop}-a`, `${loop}-b`]);
  t.teardown(() => execFileSync('rm', ['-f', `${loop}-a`, `${loop}-b`]));
  const sight = networkNamespaceSight();
  t.equal(sight(`${loop}-a`), 'unsure', 'ELOOP');
  t.equal(sight('/nonexistent/netns'), 'not-net', 'a missing path');
  t.equal(sight('/etc/hostname/x'), 'not-net', 'under a file (ENOTDIR)');
  t.equal(sight('/etc/hostname'), 'not-net', 'a plain file');
  t.equal(sight('/proc/self/ns/uts'), 'not-net', 'another namespace type');
  t.equal(sight('/proc/self/ns/net'), 'not-net', 'the node\'s own');
  t.equal(isNetworkNamespace(`${loop}-a`), false, 'the yes-or-no check says no');
});
