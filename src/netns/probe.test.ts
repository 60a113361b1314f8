import t from 'tap';
import { execFileSync } from 'node:child_process';
import { isNetworkNamespace } from './probe.ts';

t.test('a network namespace file is one; other namespace types and plain files are not', async (t) => {
  t.equal(isNetworkNamespace('/proc/self/ns/net'), true, '/proc/self/ns/net');
  t.equal(isNetworkNamespace('/proc/self/ns/mnt'), false, 'a mount namespace');
  t.equal(isNetworkNamespace('/proc/self/ns/pid'), false, 'a pid namespace');
  t.equal(isNetworkNamespace('/etc/hostname'), false, 'a plain file');
  t.equal(isNetworkNamespace('/proc/self/ns'), false, 'a directory');
  t.equal(isNetworkNamespace('/nonexistent/netns'), false, 'a missing path');
});

const root = process.getuid?.() === 0;
t.test('a bind-mounted netns (ip netns add) is one', { skip: root ? false : 'needs root to make a named netns' }, async (t) => {
  const name = `pnprobe${process.pid}`;
  execFileSync('ip', ['netns', 'add', name]);
  t.teardown(() => execFileSync('ip', ['netns', 'del', name]));
  t.equal(isNetworkNamespace(`/run/netns/${name}`), true);
});
