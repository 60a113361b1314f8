import t from 'tap';
import type { Network } from '../protocol/validate.ts';
import { delegatedCniVersions, delegatedConfigOf, isConfigProblem, pluginStdin, resultFor, resultShapeProblem, runsCheck, runsGc, runsStatus, type CniResult, type ConfigProblem, type DelegatedConfig } from './cni-config.ts';

/** A cni Network named `name` whose spec.cni.config is `config` (any value: bad ones too). */
const cniNetwork = (config: unknown, name = 'plugged', spec: Partial<Network['spec']> = {}): Network => ({
  apiVersion: 'podnetwork.opdev.io/v1alpha1',
  kind: 'Network',
  metadata: { name },
  spec: { type: 'cni', cni: { config: config as {} }, ...spec },
});
const configOf = (network: Network): DelegatedConfig => {
  const config = delegatedConfigOf(network);
  if (isConfigProblem(config)) throw new Error(`expected a config, got ${JSON.stringify(config)}`);
  return config;
};
const problemOf = (network: Network): ConfigProblem => {
  const config = delegatedConfigOf(network);
  if (!isConfigProblem(config)) throw new Error(`expected a problem, got ${JSON.stringify(config)}`);
  return config;
};
const hostLocal = { type: 'host-local', ranges: [[{ subnet: '198.18.5.0/24', gateway: '198.18.5.1' }]], routes: [{ dst: '0.0.0.0/0' }] };
const list = (...plugins: unknown[]) => ({ cniVersion: '1.0.0', name: 'lab', plugins });
const supported = '(0.3.0, 0.3.1, 0.4.0, 1.0.0, 1.1.0)';

t.test('a single plugin config becomes a list of one, with name and cniVersion defaulted', async (t) => {
  t.strictSame(configOf(cniNetwork({ type: 'macvlan', master: 'eth1', mode: 'bridge' })), {
    name: 'plugged',
    cniVersion: '1.0.0',
    plugins: [{ type: 'macvlan', master: 'eth1', mode: 'bridge' }],
  });
  t.equal(configOf(cniNetwork({ type: 'macvlan' }, 'other-net')).name, 'other-net', "the name is the Network's");
});

t.test("a single plugin's name and cniVersion are the list's; they, and prevResult, leave its entry and every other key stays", async (t) => {
  const plugin = { cniVersion: '0.4.0', name: 'lab', type: 'bridge', bridge: 'br-lab', isGateway: true, mtu: 1400, ipam: hostLocal, prevResult: { ips: [] } };
  t.strictSame(configOf(cniNetwork(plugin)), {
    name: 'lab',
    cniVersion: '0.4.0',
    plugins: [{ type: 'bridge', bridge: 'br-lab', isGateway: true, mtu: 1400, ipam: hostLocal }],
  });
  t.strictSame(Object.keys(plugin), ['cniVersion', 'name', 'type', 'bridge', 'isGateway', 'mtu', 'ipam', 'prevResult'], 'the Network is not changed');
});

t.test('a list keeps its name, its cniVersion and the order of its plugins', async (t) => {
  const config = configOf(cniNetwork({ cniVersion: '0.3.1', name: 'lab', plugins: [{ type: 'bridge', bridge: 'br-lab', ipam: hostLocal }, { type: 'tuning', sysctl: { 'net.ipv4.conf.IFNAME.arp_filter': '1' } }, { type: 'portmap', capabilities: { portMappings: true } }] }));
  t.strictSame(config, {
    name: 'lab',
    cniVersion: '0.3.1',
    plugins: [{ type: 'bridge', bridge: 'br-lab', ipam: hostLocal }, { type: 'tuning', sysctl: { 'net.ipv4.conf.IFNAME.arp_filter': '1' } }, { type: 'portmap', capabilities: { portMappings: true } }],
  });
});

t.test("a list's name and cniVersion default too; its plugins' own name, cniVersion and prevResult are dropped", async (t) => {
  const config = configOf(cniNetwork({ plugins: [{ type: 'bridge', name: 'mine', cniVersion: '0.3.0', prevResult: {}, bridge: 'br-lab' }, { type: 'firewall' }] }));
  t.strictSame(config, { name: 'plugged', cniVersion: '1.0.0', plugins: [{ type: 'bridge', bridge: 'br-lab' }, { type: 'firewall' }] });
});

t.test('every version podnet runs plugins at is taken', async (t) => {
  t.strictSame([...delegatedCniVersions], ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']);
  for (const cniVersion of delegatedCniVersions) t.equal(configOf(cniNetwork({ cniVersion, type: 'bridge' })).cniVersion, cniVersion, cniVersion);
});

t.test('plugin binary names: letters, digits, _ . + - up to 64 characters', async (t) => {
  for (const type of ['host-local', 'static', 'my_plugin.v2', 'c++', 'A1', 'x'.repeat(64)]) {
    t.strictSame(configOf(cniNetwork({ type })).plugins, [{ type }], type);
  }
});

t.test('no config is a problem at spec.cni.config', async (t) => {
  const bare = (spec: Network['spec']): Network => ({ apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'Network', metadata: { name: 'plugged' }, spec });
  const cases: [string, Network][] = [
    ['no spec.cni', bare({ type: 'cni' })],
    ['an empty spec.cni', bare({ type: 'cni', cni: {} })],
    ['a list, not an object', cniNetwork([{ type: 'bridge' }])],
    ['a string', cniNetwork('{"type":"bridge"}')],
    ['null', cniNetwork(null)],
  ];
  for (const [what, network] of cases) {
    const problem = problemOf(network);
    t.equal(problem.field, 'spec.cni.config', what);
    t.match(problem.reason, /needs a CNI config \(spec\.cni\.config\) or a NetworkAttachmentDefinition/, what);
  }
});

t.test('a NetworkAttachmentDefinition reference without its config is a problem at spec.cni.networkAttachmentDefinition', async (t) => {
  const reference = { namespace: 'lab', name: 'macvlan-conf' };
  const problem = problemOf(cniNetwork(undefined, 'plugged', { cni: { networkAttachmentDefinition: reference } }));
  t.equal(problem.field, 'spec.cni.networkAttachmentDefinition');
  t.match(problem.reason, 'NetworkAttachmentDefinition lab/macvlan-conf gives no config');
  const filled = cniNetwork(undefined, 'plugged', { cni: { networkAttachmentDefinition: reference, config: { type: 'macvlan', master: 'eth1' } } });
  t.strictSame(configOf(filled), { name: 'plugged', cniVersion: '1.0.0', plugins: [{ type: 'macvlan', master: 'eth1' }] }, 'the config the source put in is run');
});

t.test("spec.ipam on a cni Network is a problem at spec.ipam: the plugins do their own", async (t) => {
  const problem = problemOf(cniNetwork({ type: 'bridge', ipam: hostLocal }, 'plugged', { ipam: { ranges: [{ subnet: '198.18.5.0/24' }] } }));
  t.equal(problem.field, 'spec.ipam');
  t.match(problem.reason, /do their own IPAM/);
});

t.test('a cniVersion podnet does not run plugins at is a problem listing the ones it does', async (t) => {
  const cases: [unknown, string][] = [
    ['0.2.0', '"0.2.0"'],
    ['0.1.0', '"0.1.0"'],
    ['2.0.0', '"2.0.0"'],
    ['1.0', '"1.0"'],
    [1, '1'],
    ['', '""'],
  ];
  for (const [cniVersion, shown] of cases) {
    for (const config of [{ cniVersion, type: 'bridge' }, { cniVersion, plugins: [{ type: 'bridge' }] }]) {
      const problem = problemOf(cniNetwork(config));
      t.equal(problem.field, 'spec.cni.config.cniVersion', String(cniVersion));
      t.equal(problem.reason, `cniVersion ${shown} is not one podnet runs plugins at ${supported}`, String(cniVersion));
    }
  }
});

t.test('cniVersions (1.1): the highest version listed that podnet runs, as libcni picks; else cniVersion', async (t) => {
  const versionOf = (config: Record<string, unknown>) => configOf(cniNetwork({ ...config, type: 'bridge' })).cniVersion;
  t.equal(versionOf({ cniVersion: '1.0.0', cniVersions: ['1.0.0', '1.1.0'] }), '1.1.0', 'the highest listed');
  t.equal(versionOf({ cniVersions: ['1.1.0', '0.4.0'] }), '1.1.0', 'in any order, without cniVersion');
  t.equal(versionOf({ cniVersion: '1.0.0', cniVersions: ['1.0.0', '1.2.0'] }), '1.0.0', 'a version podnet does not run is passed over');
  t.equal(versionOf({ cniVersion: '0.4.0', cniVersions: ['7.0.0'] }), '0.4.0', 'none listed that podnet runs: cniVersion');
  t.equal(versionOf({ cniVersions: [] }), '1.0.0', 'an empty list: the default');
  const stdin = pluginStdin(configOf(cniNetwork({ cniVersions: ['1.1.0'], plugins: [{ type: 'bridge', cniVersions: ['0.4.0'] }] })), 0);
  t.strictSame(stdin, { type: 'bridge', name: 'plugged', cniVersion: '1.1.0' }, 'the plugin is told the chosen version, and no list of versions');
  const none = problemOf(cniNetwork({ cniVersion: '9.0.0', cniVersions: ['9.0.0'], type: 'bridge' }));
  t.strictSame(none, { field: 'spec.cni.config.cniVersion', reason: `cniVersion "9.0.0" is not one podnet runs plugins at ${supported} nor is any of cniVersions ["9.0.0"]` });
  for (const bad of ['1.1.0', ['1.1.0', 1], { v: '1.1.0' }, null]) {
    t.strictSame(problemOf(cniNetwork({ cniVersions: bad, type: 'bridge' })), { field: 'spec.cni.config.cniVersions', reason: 'cniVersions must be a list of versions' }, JSON.stringify(bad));
  }
});

t.test('an empty or non-string name is a problem at spec.cni.config.name', async (t) => {
  for (const config of [{ name: '', type: 'bridge' }, { name: 7, type: 'bridge' }, { name: '', plugins: [{ type: 'bridge' }] }]) {
    const problem = problemOf(cniNetwork(config));
    t.equal(problem.field, 'spec.cni.config.name', JSON.stringify(config));
    t.match(problem.reason, /is not a CNI network name/);
  }
});

t.test('plugins that are not a list of at least one is a problem at spec.cni.config.plugins', async (t) => {
  for (const plugins of [[], {}, { type: 'bridge' }, 'bridge', null]) {
    const problem = problemOf(cniNetwork({ cniVersion: '1.0.0', name: 'lab', plugins }));
    t.equal(problem.field, 'spec.cni.config.plugins', JSON.stringify(plugins));
    t.match(problem.reason, /at least one plugin config/);
  }
});

t.test('a plugin that is not an object is a problem at its index', async (t) => {
  for (const plugin of ['tuning', null, 3, [{ type: 'tuning' }]]) {
    const problem = problemOf(cniNetwork(list({ type: 'bridge' }, plugin)));
    t.equal(problem.field, 'spec.cni.config.plugins[1]', JSON.stringify(plugin));
    t.match(problem.reason, /must be an object/);
  }
});

t.test('a plugin without a type is a problem at its type: it needs one', async (t) => {
  const inList = problemOf(cniNetwork(list({ type: 'bridge' }, { sysctl: {} })));
  t.equal(inList.field, 'spec.cni.config.plugins[1].type');
  t.equal(inList.reason, 'every plugin config needs a type: the plugin binary to run');
  const single = problemOf(cniNetwork({ bridge: 'br-lab' }));
  t.equal(single.field, 'spec.cni.config.type');
  t.equal(single.reason, 'every plugin config needs a type: the plugin binary to run');
});

t.test('a type that is a path, has shell characters or is not a string is refused at its type', async (t) => {
  const bad: unknown[] = ['../bin/sh', '/usr/bin/x', 'bin/x', 'a b', 'x;y', '$(reboot)', 'x|y', '.hidden', '..', '-rf', '', 'x'.repeat(65), 42, null];
  for (const type of bad) {
    const inList = problemOf(cniNetwork(list({ type: 'bridge' }, { type })));
    t.equal(inList.field, 'spec.cni.config.plugins[1].type', JSON.stringify(type));
    t.equal(inList.reason, `type ${JSON.stringify(type)} is not a plugin binary's name (letters, digits, _ . + -; no path)`, JSON.stringify(type));
    const single = problemOf(cniNetwork({ type }));
    t.equal(single.field, 'spec.cni.config.type', JSON.stringify(type));
    t.match(single.reason, /no path/, JSON.stringify(type));
  }
});

t.test('the first bad plugin is the one named', async (t) => {
  t.equal(problemOf(cniNetwork(list({ type: 'bridge' }, { type: 'a/b' }, 'tuning'))).field, 'spec.cni.config.plugins[1].type');
  t.equal(problemOf(cniNetwork(list({ type: 'bridge' }, { type: 'tuning' }, 'tuning'))).field, 'spec.cni.config.plugins[2]');
});

const lab: DelegatedConfig = {
  name: 'lab',
  cniVersion: '0.4.0',
  plugins: [
    { type: 'bridge', bridge: 'br-lab', ipam: hostLocal },
    { type: 'tuning', sysctl: { 'net.ipv4.conf.IFNAME.arp_filter': '1' } },
  ],
};

t.test("pluginStdin: the plugin's keys with the list's name and cniVersion, no prevResult when none is given", async (t) => {
  const stdin = pluginStdin(lab, 0);
  t.strictSame(stdin, { type: 'bridge', bridge: 'br-lab', ipam: hostLocal, name: 'lab', cniVersion: '0.4.0' });
  t.notOk('prevResult' in stdin, 'no prevResult key at all');
  t.strictSame(pluginStdin(lab, 1), { type: 'tuning', sysctl: { 'net.ipv4.conf.IFNAME.arp_filter': '1' }, name: 'lab', cniVersion: '0.4.0' });
});

t.test('pluginStdin: prevResult when given', async (t) => {
  const prevResult: CniResult = { cniVersion: '0.4.0', interfaces: [{ name: 'net1', sandbox: '/var/run/netns/pod' }], ips: [{ address: '198.18.5.7/24', interface: 0 }] };
  const stdin = pluginStdin(lab, 1, prevResult);
  t.strictSame(stdin, { type: 'tuning', sysctl: { 'net.ipv4.conf.IFNAME.arp_filter': '1' }, name: 'lab', cniVersion: '0.4.0', prevResult });
  t.equal(stdin['prevResult'], prevResult);
  t.strictSame(Object.keys(lab.plugins[1]!), ['type', 'sysctl'], "the list's plugin is not changed");
});

t.test("pluginStdin: the list's name and cniVersion win over a plugin's own", async (t) => {
  const config: DelegatedConfig = { name: 'lab', cniVersion: '1.0.0', plugins: [{ type: 'bridge', name: 'mine', cniVersion: '0.3.0' }] };
  t.strictSame(pluginStdin(config, 0), { type: 'bridge', name: 'lab', cniVersion: '1.0.0' });
});

t.test('a list read from a Network gives each plugin the stdin the chain needs', async (t) => {
  const config = configOf(cniNetwork({ name: 'lab', cniVersion: '1.1.0', plugins: [{ type: 'bridge', cniVersion: '0.3.1' }, { type: 'tuning', name: 'other' }] }));
  t.strictSame(pluginStdin(config, 0), { type: 'bridge', name: 'lab', cniVersion: '1.1.0' });
  t.strictSame(pluginStdin(config, 1, { cniVersion: '1.1.0' }), { type: 'tuning', name: 'lab', cniVersion: '1.1.0', prevResult: { cniVersion: '1.1.0' } });
});

t.test("resultFor: the pod interface's addresses, MAC and gateways", async (t) => {
  const result: CniResult = {
    cniVersion: '1.0.0',
    interfaces: [
      { name: 'br-lab', mac: '02:00:00:00:00:aa' },
      { name: 'veth1a2b3c', mac: '02:00:00:00:00:bb' },
      { name: 'net1', mac: '02:00:00:00:00:07', sandbox: '/var/run/netns/pod' },
    ],
    ips: [
      { address: '198.18.5.7/24', gateway: '198.18.5.1', interface: 2 },
      { address: '198.18.9.1/24', gateway: '198.18.9.254', interface: 0 },
      { address: '2001:db8::7/64', gateway: '2001:db8::1', interface: 2 },
      { address: '203.0.113.4/32' },
    ],
  };
  t.strictSame(resultFor(result, 'net1'), { ips: ['198.18.5.7/24', '2001:db8::7/64', '203.0.113.4/32'], mac: '02:00:00:00:00:07', gateways: ['198.18.5.1', '2001:db8::1'] });
});

t.test('resultFor: a host-side interface of the same name (no sandbox) is not the pod one', async (t) => {
  const result: CniResult = {
    interfaces: [
      { name: 'net1', mac: '02:00:00:00:00:aa' },
      { name: 'net1', mac: '02:00:00:00:00:07', sandbox: '/var/run/netns/pod' },
    ],
    ips: [
      { address: '198.18.9.1/24', gateway: '198.18.9.254', interface: 0 },
      { address: '198.18.5.7/24', gateway: '198.18.5.1', interface: 1 },
    ],
  };
  t.strictSame(resultFor(result, 'net1'), { ips: ['198.18.5.7/24'], mac: '02:00:00:00:00:07', gateways: ['198.18.5.1'] });
  const hostOnly: CniResult = { interfaces: [{ name: 'net1', mac: '02:00:00:00:00:aa' }], ips: [{ address: '198.18.5.7/24' }] };
  const given = resultFor(hostOnly, 'net1');
  t.notOk('mac' in given, "the host-side interface's MAC is not the pod's");
  t.strictSame(given, { ips: ['198.18.5.7/24'], gateways: [] });
});

t.test('resultFor: a pod interface of another name is not taken', async (t) => {
  const result: CniResult = {
    interfaces: [
      { name: 'eth0', mac: '02:00:00:00:00:01', sandbox: '/var/run/netns/pod' },
      { name: 'net1', mac: '02:00:00:00:00:07', sandbox: '/var/run/netns/pod' },
    ],
    ips: [
      { address: '10.0.0.5/24', gateway: '10.0.0.1', interface: 0 },
      { address: '198.18.5.7/24', gateway: '198.18.5.1', interface: 1 },
    ],
  };
  t.strictSame(resultFor(result, 'net1'), { ips: ['198.18.5.7/24'], mac: '02:00:00:00:00:07', gateways: ['198.18.5.1'] });
  t.strictSame(resultFor(result, 'eth0'), { ips: ['10.0.0.5/24'], mac: '02:00:00:00:00:01', gateways: ['10.0.0.1'] });
});

t.test('resultFor: a result without interfaces gives every address, and no MAC', async (t) => {
  const result: CniResult = { cniVersion: '0.4.0', ips: [{ address: '198.18.5.7/24', gateway: '198.18.5.1' }, { address: '2001:db8::7/64' }, { gateway: '198.18.6.1' }] };
  t.strictSame(resultFor(result, 'net1'), { ips: ['198.18.5.7/24', '2001:db8::7/64'], gateways: ['198.18.5.1', '198.18.6.1'] });
});

t.test('resultFor: a result with no interface in the sandbox gives every address, whatever its index, and no MAC', async (t) => {
  const result: CniResult = {
    interfaces: [{ name: 'net1', mac: '02:00:00:00:00:07' }, { name: 'veth1a2b3c', mac: '02:00:00:00:00:bb' }],
    ips: [{ address: '198.18.5.7/24', gateway: '198.18.5.1', interface: 0 }, { address: '198.18.9.1/24', interface: 1 }],
  };
  t.strictSame(resultFor(result, 'net1'), { ips: ['198.18.5.7/24', '198.18.9.1/24'], gateways: ['198.18.5.1'] });
});

t.test('resultFor: no result, or one without ips, gives no addresses', async (t) => {
  t.strictSame(resultFor(undefined, 'net1'), { ips: [], gateways: [] });
  t.strictSame(resultFor({ cniVersion: '1.0.0' }, 'net1'), { ips: [], gateways: [] });
  t.strictSame(resultFor({ interfaces: [{ name: 'net1', mac: '02:00:00:00:00:07', sandbox: '/var/run/netns/pod' }] }, 'net1'), { ips: [], mac: '02:00:00:00:00:07', gateways: [] });
});

t.test('CHECK is known from 0.4.0 on, GC only at 1.1.0; a list may opt out of either', async (t) => {
  const at = (cniVersion: string, flags: object = {}) => ({ name: 'n', cniVersion, plugins: [{ type: 'x' }], ...flags });
  t.strictSame(delegatedCniVersions.map((v) => runsCheck(at(v))), [false, false, true, true, true]);
  t.strictSame(delegatedCniVersions.map((v) => runsGc(at(v))), [false, false, false, false, true]);
  t.strictSame(delegatedCniVersions.map((v) => runsStatus(at(v))), [false, false, false, false, true]);
  t.equal(runsCheck(at('1.1.0', { disableCheck: true })), false);
  t.equal(runsGc(at('1.1.0', { disableGC: true })), false);
});

t.test('disableCheck and disableGC are kept from the list; other values are refused', async (t) => {
  const config = delegatedConfigOf(cniNetwork({ cniVersion: '1.1.0', disableCheck: true, disableGC: false, plugins: [{ type: 'bridge' }] }));
  t.match(config, { disableCheck: true });
  t.notOk('disableGC' in config, 'false is the default, not kept');
  t.same(delegatedConfigOf(cniNetwork({ disableGC: 'yes', type: 'bridge' })), { field: 'spec.cni.config.disableGC', reason: 'disableGC must be true or false' });
});

t.test('a network name that is not the CNI spec\'s is refused: plugins make paths of it', async (t) => {
  for (const name of ['../../etc', 'a/b', '.hidden', '', 'x y']) {
    t.match(delegatedConfigOf(cniNetwork({ name, type: 'bridge' })), { field: 'spec.cni.config.name', reason: /is not a CNI network name/ }, JSON.stringify(name));
  }
  t.match(delegatedConfigOf(cniNetwork({ name: 'Net_1.a-b', type: 'bridge' })), { name: 'Net_1.a-b' });
});

t.test('a single plugin\'s disableGC is the list\'s, not passed to the plugin', async (t) => {
  const config = delegatedConfigOf(cniNetwork({ type: 'bridge', disableGC: true })) as DelegatedConfig;
  t.equal(config.disableGC, true);
  t.same(config.plugins, [{ type: 'bridge' }]);
});

t.test('an IPAM type with a path is refused like a plugin type', async (t) => {
  t.same(delegatedConfigOf(cniNetwork({ type: 'bridge', ipam: { type: '../../bin/sh' } })), {
    field: 'spec.cni.config.ipam.type',
    reason: 'type "../../bin/sh" is not a plugin binary\'s name (letters, digits, _ . + -; no path)',
  });
  t.match(delegatedConfigOf(cniNetwork({ type: 'bridge', ipam: { type: 'host-local' } })), { plugins: [{ ipam: { type: 'host-local' } }] });
});

t.test('a result of the wrong shape is told, naming what is wrong; a good one passes', async (t) => {
  t.equal(resultShapeProblem({ cniVersion: '1.0.0', interfaces: [{ name: 'net1', mac: '02:00:00:00:00:01', sandbox: '/run/netns/x' }], ips: [{ address: '198.18.5.2/24', gateway: '198.18.5.1', interface: 0 }], dns: { nameservers: ['198.18.5.1'] } }), undefined);
  t.equal(resultShapeProblem([]), 'at (top level): must be object');
  t.equal(resultShapeProblem({ ips: {} }), 'at /ips: must be array');
  t.equal(resultShapeProblem({ ips: [{ address: 5 }] }), 'at /ips/0/address: must be string');
  t.equal(resultShapeProblem({ interfaces: [{ name: 'x'.repeat(16) }] }), 'at /interfaces/0/name: must NOT have more than 15 characters');
  t.equal(resultShapeProblem({ dns: { nameservers: 'one' } }), 'at /dns/nameservers: must be array');
  t.equal(resultShapeProblem({ ips: Array.from({ length: 65 }, () => ({})) }), 'at /ips: must NOT have more than 64 items', 'bounded');
});
