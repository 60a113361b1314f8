// The netns runner on the real kernel: the host's ip process kept ready for the next batch.
import t from 'tap';
import { execa } from 'execa';
import { setTimeout as sleep } from 'node:timers/promises';
import { netnsRunner } from '../src/netns/runner.ts';
import { missingPrerequisite } from './lib/env.ts';
import { removeLinkAtTeardown, uniqueName } from './lib/netns.ts';

t.test('a host batch run by the process kept ready acts on a link made again under the same name', { skip: missingPrerequisite() }, async (t) => {
  const name = uniqueName('pnrd');
  removeLinkAtTeardown(t, name);
  t.same(await netnsRunner.batch('host', 'ip', [`link add ${name} type veth peer name ${name}p`]), { done: 1 }, 'a first host batch');
  // Its process has exited and the next one is waiting: a link made again gets a new index.
  await sleep(200);
  const indexOf = async () => (JSON.parse((await execa('ip', ['-json', 'link', 'show', 'dev', name])).stdout) as { ifindex: number }[])[0]!.ifindex;
  const before = await indexOf();
  await execa('ip', ['link', 'del', name]);
  await execa('ip', ['link', 'add', name, 'type', 'veth', 'peer', 'name', `${name}p`]);
  t.not(await indexOf(), before, 'the link made again has another index');
  t.same(await netnsRunner.batch('host', 'ip', [`link set ${name} up`, `addr add 198.18.83.1/32 dev ${name}`]), { done: 2 }, 'the next host batch succeeds');
  const { stdout } = await execa('ip', ['-json', 'addr', 'show', 'dev', name]);
  const [link] = JSON.parse(stdout) as { flags: string[]; addr_info: unknown[] }[];
  t.ok(link!.flags.includes('UP'), 'the new link is up');
  t.match(link!.addr_info, [{ local: '198.18.83.1', prefixlen: 32 }], 'and has the address');
});
