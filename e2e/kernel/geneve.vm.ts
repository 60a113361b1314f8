// geneve Networks on a kernel that has them (run in a VM of Debian's kernel by
// e2e/kernel.test.ts): between two nodes (e2e/kernel/tunnel.ts), each pod choosing its remote
// within the Network's remoteRanges; a remote that is no unicast address, or outside the ranges,
// is refused naming the field.
import t from 'tap';
import { daemonSandbox } from '../lib/daemon.ts';
import { attachConfig, networkDocument, podnetCli } from '../lib/engine.ts';
import { missingPrerequisite } from '../lib/env.ts';
import { testTunnel } from './tunnel.ts';

testTunnel(t, {
  name: 'geneve',
  kind: 'geneve',
  // The admin gives the underlay's subnet; each pod's attachment chooses the other node in it.
  spec: () => '  type: geneve\n  geneve: { vni: 77, remoteRanges: [198.18.102.0/24] }\n  mtu: 1400',
  attachmentRemote: (remote) => `198.18.102.${remote}`,
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

t.test("an attachment's remote outside its Network's remoteRanges is refused, naming the field", { skip: missingPrerequisite(['/bin/busybox']) }, async (t) => {
  const daemon = await daemonSandbox(t, { standalone: true });
  const cli = podnetCli(daemon);
  await cli.apply('tun.yaml', networkDocument('ranged', '  type: geneve\n  geneve: { vni: 5, remoteRanges: [198.18.102.0/24] }'));
  const refused = await cli.apply('attach.yaml', attachConfig('ranged').replace(' }]\n', ', remote: "198.18.103.2" }]\n'));
  t.not(refused.exitCode, 0, 'podnet apply refuses it');
  t.match(refused.stderr, /PodNetworkConfig default\/attach spec\.attachments\[0\]\.remote: 198\.18\.103\.2 is outside Network ranged's spec\.geneve\.remoteRanges \(198\.18\.102\.0\/24\)/);
});
