import t from 'tap';
import { netnsRunner } from './runner.ts';

t.test('a batch line holding a character ip reads specially is refused before anything runs', async (t) => {
  for (const line of ['route add 0.0.0.0/1 dev eth0# table 100', 'link add "a b" type dummy', "link set x alias 'y'", 'link set a\\ b up', 'link set a up\nlink del eth0']) {
    const result = await netnsRunner.batch({ netns: '/run/netns/none' }, 'ip', [line]);
    t.equal(result.done, 0);
    t.match(result.error, { code: 'INVALID_REQUEST', message: /would read specially/ }, JSON.stringify(line));
  }
});
