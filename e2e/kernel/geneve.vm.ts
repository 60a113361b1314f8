// geneve Networks on a kernel that has them (run in a VM of Debian's kernel by
// e2e/kernel.test.ts): between two nodes (e2e/kernel/tunnel.ts); a remote that is no unicast
// address is refused naming the field.
import t from 'tap';
import { daemonSandbox } from '../lib/daemon.ts';
import { networkDocument, podnetCli } from '../lib/engine.ts';
import { missingPrerequisite } from '../lib/env.ts';
import { testTunnel } from './tunnel.ts';

testTunnel(t, {
  name: 'geneve',
  kind: 'geneve',
  spec: (remote) => `  type: geneve\n  geneve: { vni: 77, remote: 198.18.102.${remote} }\n  mtu: 1400`,
  info: { info_kind: 'geneve', info_data: { id: 77, remote: /198\.18\.102\./ } },
  explained: /net1 on Network tun: geneve 77 to 198\.18\.102\.2 port 6081/,
  subnet: '198.18.105',
});

t.test('a tunnel to a multicast address is refused, naming the field', { skip: missingPrerequisite(['/bin/busybox']) }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  await daemon.start();
  const cli = podnetCli(daemon);
  const refused = await cli.apply('bad.yaml', networkDocument('bad', '  type: geneve\n  geneve: { vni: 5, remote: 239.1.1.1 }'));
  t.not(refused.exitCode, 0, 'podnet apply refuses it');
  t.match(refused.stderr, /Network bad spec\.geneve\.remote: 239\.1\.1\.1 is not a unicast address: a geneve tunnel goes to one endpoint/);
});
