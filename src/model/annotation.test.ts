import t from 'tap';
import type { NetworkStatusEntry } from '../protocol/validate.ts';
import { formatNetworkStatus, parseNetworksAnnotation } from './annotation.ts';

const problemOf = (text: string): string => {
  const read = parseNetworksAnnotation(text);
  if (!('problem' in read)) throw new Error(`expected a problem, got ${JSON.stringify(read)}`);
  return read.problem;
};

t.test('the JSON list form gives the selections as written', async (t) => {
  const selections = [{ name: 'blue', interface: 'net9', ips: ['198.18.5.7/24'], mac: '02:00:00:00:00:01' }];
  t.same(parseNetworksAnnotation(JSON.stringify(selections)), { selections });
  t.same(parseNetworksAnnotation('  [{"name":"blue"}, {"name":"red"}]\n'), { selections: [{ name: 'blue' }, { name: 'red' }] }, 'surrounding whitespace is fine');
});

t.test('the short form: names, an interface after @, whitespace trimmed', async (t) => {
  t.same(parseNetworksAnnotation('blue, red@net9'), { selections: [{ name: 'blue' }, { name: 'red', interface: 'net9' }] });
  t.same(parseNetworksAnnotation('  blue  ,red@net9 '), { selections: [{ name: 'blue' }, { name: 'red', interface: 'net9' }] });
  t.same(parseNetworksAnnotation('blue'), { selections: [{ name: 'blue' }] });
});

t.test('an empty value asks for nothing', async (t) => {
  t.same(parseNetworksAnnotation(''), { selections: [] });
  t.same(parseNetworksAnnotation('   \n\t '), { selections: [] });
});

t.test('bad JSON is a problem naming the annotation', async (t) => {
  const problem = problemOf('[{"name":"blue",}]');
  t.match(problem, 'podnetwork.opdev.io/networks');
  t.match(problem, 'is not JSON');
  t.match(problemOf('{bad'), 'is not JSON', 'a value starting with { is read as JSON too');
});

t.test('JSON that breaks the schema is a problem saying where', async (t) => {
  const cases: [string, unknown, RegExp][] = [
    ['a namespace', [{ name: 'blue', namespace: 'other' }], /at \/0: .*"namespace"/],
    ['an interface name longer than the kernel allows', [{ name: 'blue', interface: 'a-very-long-interface-name' }], /at \/0\/interface:/],
    ['a name with upper case', [{ name: 'blue' }, { name: 'Red' }], /at \/1\/name:/],
    ['a multicast MAC', [{ name: 'blue', mac: '01:00:00:00:00:01' }], /at \/0\/mac:/],
    ['an address without a prefix length', [{ name: 'blue', ips: ['198.18.5.7'] }], /at \/0\/ips\/0:/],
    ['no name', [{ interface: 'net1' }], /at \/0:/],
    ['more than 16 entries', Array.from({ length: 17 }, (_, i) => ({ name: `n${i}` })), /more than 16 items/],
    ['a single object, not a list', { name: 'blue' }, /must be array/],
  ];
  for (const [what, value, where] of cases) {
    const problem = problemOf(JSON.stringify(value));
    t.match(problem, 'podnetwork.opdev.io/networks', what);
    t.match(problem, where, what);
  }
  t.ok('selections' in parseNetworksAnnotation(JSON.stringify(Array.from({ length: 16 }, (_, i) => ({ name: `n${i}` })))), '16 entries are fine');
});

t.test('the short form with a namespace is refused: Networks are cluster-scoped', async (t) => {
  const problem = problemOf('blue, other/red@net2');
  t.match(problem, 'podnetwork.opdev.io/networks');
  t.match(problem, '"other/red@net2"');
  t.match(problem, 'cluster-scoped');
});

t.test('the short form with an empty entry or a bad interface is refused by the schema', async (t) => {
  t.match(problemOf('blue,,red'), /at \/1\/name:/);
  t.match(problemOf('blue,'), /at \/1\/name:/, 'a trailing comma is an empty entry');
  t.match(problemOf('blue@'), /at \/0\/interface:/);
  t.match(problemOf('blue@a-very-long-interface-name'), /at \/0\/interface:/);
  t.match(problemOf('Blue'), /at \/0\/name:/);
});

t.test('network-status is compact JSON that reads back the same', async (t) => {
  const entries: NetworkStatusEntry[] = [
    { name: 'k8s-pod-network', interface: 'eth0', ips: ['10.244.1.5', 'fd00::5'], mac: '0a:58:0a:f4:01:05', default: true },
    { name: 'blue', interface: 'net1', ips: ['198.18.5.7'], mac: '02:00:00:00:00:01', mtu: 9000 },
    { name: 'red', interface: 'net2', problem: 'no address left in the range' },
  ];
  const text = formatNetworkStatus(entries);
  t.same(JSON.parse(text), entries);
  t.notMatch(text, /\n/);
  t.notMatch(text, /[,:] "|[[{] /, 'no spaces between tokens');
  t.equal(formatNetworkStatus([]), '[]');
});
