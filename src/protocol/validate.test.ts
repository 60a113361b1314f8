import t from 'tap';
import { readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import { generatedFiles } from '../../scripts/generate.ts';
import { parseDocument, type AttachmentRecord, type DocumentName } from './validate.ts';

const root = fileURLToPath(new URL('../../', import.meta.url));

const record: AttachmentRecord = {
  containerId: '9f86d081884c7d65',
  ifname: 'eth0',
  network: 'kindnet',
  netns: '/var/run/netns/cni-1234',
  cniVersion: '1.0.0',
  pod: { namespace: 'shop', name: 'web-0', uid: '0a1b-2c3d', infraContainerId: '9f86d081884c7d65' },
  prevResult: { cniVersion: '1.0.0', ips: [{ address: '10.244.0.5/24' }] },
  createdAt: '2026-03-01T12:00:00.000Z',
};
const key = { containerId: '9f86d081884c7d65', ifname: 'eth0' };

/** What parseDocument throws for `value`; undefined when it accepts it. */
function rejection(name: DocumentName, value: unknown): unknown {
  try {
    parseDocument(name, value, 'test input');
    return undefined;
  } catch (err) {
    return err;
  }
}

/** The shape of a refusal whose message names the place: a PodnetError with the default code. */
const refusal = (message: RegExp) => ({ name: 'PodnetError', code: 'INVALID_REQUEST', message });

interface Case {
  name: DocumentName;
  valid: unknown[];
  /** Each invalid value with a pattern its message must match. */
  invalid: [unknown, RegExp][];
}

const cases: Case[] = [
  {
    name: 'PluginConfig',
    valid: [
      { cniVersion: '1.0.0', name: 'kindnet', type: 'podnet' },
      // Keys podnet does not know stay allowed: a conflist and a runtime may add them.
      {
        cniVersion: '0.4.0', name: 'k8s-pod-network', type: 'podnet', socketPath: '/run/podnet/podnet.sock', stateDir: '/var/lib/podnet',
        timeoutMs: 500, prevResult: {}, runtimeConfig: { portMappings: [] }, capabilities: { portMappings: true },
      },
      { cniVersion: '1.1.0', name: 'kindnet', type: 'podnet', 'cni.dev/valid-attachments': [{ containerID: 'abc', ifname: 'eth0' }] },
    ],
    invalid: [
      [{}, /^invalid test input: at \(top level\): must have required property 'cniVersion'/],
      [{ cniVersion: '1.0', name: 'kindnet', type: 'podnet' }, /at \/cniVersion: must be /],
      [{ cniVersion: '1.0.0', name: '-bad', type: 'podnet' }, /at \/name: must be /],
      [{ cniVersion: '1.0.0', name: 'kindnet', type: '' }, /at \/type: must NOT have fewer than 1 characters/],
      [{ cniVersion: '1.0.0', name: 'kindnet', type: 'podnet', socketPath: 'run/podnet.sock' }, /at \/socketPath: must be /],
      [{ cniVersion: '1.0.0', name: 'kindnet', type: 'podnet', stateDir: '/var/lib/../etc' }, /at \/stateDir: must be /],
      [{ cniVersion: '1.0.0', name: 'kindnet', type: 'podnet', timeoutMs: 0 }, /at \/timeoutMs: must be >= 1/],
      [{ cniVersion: '1.0.0', name: 'kindnet', type: 'podnet', timeoutMs: 1.5 }, /at \/timeoutMs: must be integer/],
      [{ cniVersion: '1.0.0', name: 'kindnet', type: 'podnet', prevResult: [] }, /at \/prevResult: must be object/],
      [
        { cniVersion: '1.1.0', name: 'kindnet', type: 'podnet', 'cni.dev/valid-attachments': [{ containerID: 'abc' }] },
        /at \/cni\.dev~1valid-attachments\/0: must have required property 'ifname'/,
      ],
    ],
  },
  {
    name: 'AttachmentKey',
    valid: [key],
    invalid: [
      [{ containerId: 'abc' }, /at \(top level\): must have required property 'ifname'/],
      [{ ...key, containerId: 'has space' }, /at \/containerId: must be /],
      [{ ...key, containerId: 'a'.repeat(129) }, /at \/containerId: must NOT have more than 128 characters/],
      [{ ...key, extra: 1 }, /at \(top level\): must NOT have additional properties "extra"/],
    ],
  },
  {
    name: 'AttachmentRecord',
    valid: [record, { ...record, pod: {}, prevResult: undefined }, { ...record, pod: { name: 'my-container' }, cniVersion: '0.3.1' }],
    invalid: [
      [{ ...record, ifname: '..' }, /at \/ifname: must be /],
      [{ ...record, netns: 'netns/x' }, /at \/netns: must be /],
      [{ ...record, cniVersion: '0.2.0' }, /at \/cniVersion: must be equal to one of the allowed values/],
      [{ ...record, pod: { namespace: 'Shop' } }, /at \/pod\/namespace: must be /],
      [{ ...record, pod: { labels: {} } }, /at \/pod: must NOT have additional properties "labels"/],
      [{ ...record, createdAt: '2026-03-01 12:00:00' }, /at \/createdAt: must be /],
      [{ ...record, network: undefined }, /at \(top level\): must have required property 'network'/],
    ],
  },
  {
    name: 'AttachmentList',
    valid: [{ items: [] }, { items: [{ record, netnsExists: true }] }],
    invalid: [
      [{}, /at \(top level\): must have required property 'items'/],
      [{ items: [{ record }] }, /at \/items\/0: must have required property 'netnsExists'/],
      [{ items: [{ record: { ...record, ifname: 'a:b' }, netnsExists: false }] }, /at \/items\/0\/record\/ifname: must be /],
    ],
  },
  {
    name: 'GcRequest',
    valid: [{ network: 'kindnet', validAttachments: [] }, { network: 'kindnet', validAttachments: [key] }],
    invalid: [
      [{ network: 'kindnet' }, /at \(top level\): must have required property 'validAttachments'/],
      [{ network: 'kindnet', validAttachments: [{ containerID: 'abc', ifname: 'eth0' }] }, /at \/validAttachments\/0: must have required property 'containerId'/],
    ],
  },
  {
    name: 'GcResponse',
    valid: [{ removed: [] }, { removed: [key] }],
    invalid: [[{ removed: [{ containerId: 'abc' }] }, /at \/removed\/0: must have required property 'ifname'/]],
  },
  {
    name: 'DeleteResponse',
    valid: [{ removed: true }, { removed: false }],
    invalid: [[{ removed: 'yes' }, /at \/removed: must be boolean/]],
  },
  {
    name: 'SpoolEntry',
    valid: [
      { op: 'add', record },
      { op: 'del', key },
      { op: 'gc', gc: { network: 'kindnet', validAttachments: [key] } },
      { version: 1, op: 'del', key },
    ],
    invalid: [
      [{ version: 2, op: 'del', key }, /must match exactly one schema in oneOf/],
      [{ op: 'add', record: { ...record, ifname: 'a/b' } }, /at \/record\/ifname: must be /],
      [{ op: 'del', key: { containerId: 'abc' } }, /at \/key: must have required property 'ifname'/],
      [{ op: 'move', key }, /at \/op: must be equal to constant/],
      [{ op: 'del', key, record }, /must match exactly one schema in oneOf/],
    ],
  },
  {
    name: 'DaemonStatus',
    valid: [{ version: '0.1.0', attachments: 2, spoolPending: 0, quarantined: [{ file: '1-x.json', reason: 'not JSON' }] }],
    invalid: [
      [{ version: '0.1.0', attachments: -1, spoolPending: 0, quarantined: [] }, /at \/attachments: must be >= 0/],
      [{ version: '0.1.0', attachments: 0, spoolPending: 0, quarantined: [{ file: 'x' }] }, /at \/quarantined\/0: must have required property 'reason'/],
    ],
  },
  {
    name: 'ErrorBody',
    valid: [{ code: 'NOT_FOUND', message: 'no such path' }, { code: 'BUSY', message: 'busy', details: 'try later' }],
    invalid: [
      [{ code: 'NOT_FOUND' }, /at \(top level\): must have required property 'message'/],
      [{ code: 404, message: 'x' }, /at \/code: must be string/],
    ],
  },
  {
    name: 'Journal',
    valid: [
      { version: 1, pass: 'lq0-1a2b', undo: [] },
      {
        version: 1,
        pass: 'lq0-1a2b',
        undo: [
          { where: 'host', action: 'link-del', dev: 'pn-blue' },
          { where: { netns: '/run/netns/p' }, action: 'link-del', dev: 'net1' },
          { where: 'host', action: 'addr-del', dev: 'pn-blue', address: '198.18.80.1/24' },
          { where: { netns: '/run/netns/p' }, action: 'link-set', dev: 'eth0', setting: 'up', value: true },
          { where: { netns: '/run/netns/p' }, action: 'route', verb: 'replace', route: { family: 6, to: '2001:db8:9::/64', table: 254, dev: 'net1', seg6: { mode: 'encap', segments: ['2001:db8::1'] } } },
          { where: { netns: '/run/netns/p' }, action: 'rule', verb: 'add', rule: { family: 4, priority: 10, table: 100, fwmark: 7 } },
          { where: { netns: '/run/netns/p' }, action: 'sysctl', path: 'net/ipv4/ip_local_port_range', value: '32768 60999' },
          { where: 'host', action: 'tbf', dev: 'pnv0123456789', rate: 8000, burst: 12000 },
          { where: 'host', action: 'qdisc-del', dev: 'pnv0123456789', parent: 'root' },
        ],
      },
    ],
    invalid: [
      [{ pass: 'p', steps: [] }, /at \(top level\): must have required property 'version'/],
      [{ version: 1, pass: 'p', undo: [{ where: 'host', tool: 'ip', line: 'link del pnb' }] }, /at \/undo\/0: must match exactly one schema in oneOf/],
      [{ version: 1, pass: 'p', undo: [{ where: 'host', action: 'link-del', dev: 'eth0' }] }, /at \/undo\/0\/dev: must be /],
      [{ version: 1, pass: 'p', undo: [{ where: { netns: '/run/netns/p' }, action: 'link-set', dev: 'eth0', setting: 'mtu', value: true }] }, /at \/undo\/0\/value: must be integer/],
      [{ version: 1, pass: 'p', undo: [{ where: { netns: '/run/netns/p' }, action: 'link-set', dev: 'eth0', setting: 'mac', value: '02:11:22:33:44:55 up' }] }, /at \/undo\/0\/value/],
      [{ version: 1, pass: 'p', undo: [{ where: 'host', action: 'route', verb: 'del', route: { family: 4, to: '0.0.0.0/0', table: 254 } }] }, /at \/undo\/0\/where: must be object/],
      [{ version: 1, pass: 'P 1', undo: [] }, /at \/pass: must be /],
    ],
  },
];

for (const c of cases) {
  t.test(c.name, async (t) => {
    for (const value of c.valid) t.strictSame(parseDocument(c.name, value, 'test input'), value, `accepts ${JSON.stringify(value).slice(0, 80)}`);
    for (const [value, message] of c.invalid) t.match(rejection(c.name, value), refusal(message), `refuses ${JSON.stringify(value).slice(0, 80)}`);
  });
}

t.test('the caller chooses the code and names the input', async (t) => {
  const err = t.throws(() => parseDocument('AttachmentKey', { ...key, ifname: 'a/b' }, 'CNI_CONTAINERID or CNI_IFNAME', 'INVALID_ENVIRONMENT'));
  t.match(err, { code: 'INVALID_ENVIRONMENT', cniCode: 4, message: /^invalid CNI_CONTAINERID or CNI_IFNAME: at \/ifname: must be / });
});

t.test('netns paths', async (t) => {
  const netns = (path: string) => ({ ...record, netns: path });
  const accepted = ['/var/run/netns/cni-1234', '/run/netns/netns-1a2b', '/proc/4242/ns/net', '/run/user/1000/netns/netns-abc', '/var/run/docker/netns/0a1b2c'];
  for (const path of accepted) t.equal(parseDocument('AttachmentRecord', netns(path), 'test input').netns, path, `accepts ${path}`);
  const refused = [
    '/var/run/netns/../../etc/passwd',
    '/var/run/netns/..',
    '/var/run/netns/./x',
    '..',
    'var/run/netns/x',
    './x',
    '/var/run/netns/a b',
    ' /var/run/netns/x',
    '/var/run/netns/x\n',
    '/var/run/netns/x/',
    '//x',
    '/',
    '',
    `/${'a'.repeat(4096)}`,
  ];
  for (const path of refused) t.match(rejection('AttachmentRecord', netns(path)), refusal(/at \/netns: must/), `refuses ${JSON.stringify(path.slice(0, 40))}`);
});

t.test('interface names', async (t) => {
  const ifname = (name: string) => ({ ...key, ifname: name });
  for (const name of ['eth0', 'net1', 'eth0.100', 'veth-a_b', '...', 'a'.repeat(15)]) {
    t.equal(parseDocument('AttachmentKey', ifname(name), 'test input').ifname, name, `accepts ${name}`);
  }
  for (const name of ['.', '..', 'a:b', 'a/b', 'a b', 'eth0\t', 'eth0\n', '', 'a'.repeat(16)]) {
    t.match(rejection('AttachmentKey', ifname(name)), refusal(/at \/ifname: must be /), `refuses ${JSON.stringify(name)}`);
  }
  // The kernel's IFNAMSIZ counts bytes (16 with the NUL), and a name is a C string.
  const overBytes = 'é'.repeat(15);
  t.throws(() => parseDocument('AttachmentKey', ifname(overBytes), 'test input'), `refuses a name of ${Buffer.byteLength(overBytes)} bytes`);
  t.throws(() => parseDocument('AttachmentKey', ifname('eth\u0000'), 'test input'), 'refuses a NUL');
});

t.test('src/generated, the CRDs and the Helm chart are what scripts/generate.ts makes from schemas/, proto/ and daemonset/ (run `npm run generate`)', async (t) => {
  const files = await generatedFiles();
  const chart = ['Chart.yaml', 'templates/admission.yaml', 'templates/alerts.yaml', 'templates/controller.yaml', 'templates/crds.yaml', 'templates/daemonset.yaml', 'templates/dra.yaml', 'templates/namespace.yaml', 'templates/permissions.yaml', 'templates/podmonitor.yaml', 'templates/rbac.yaml', 'values.schema.json', 'values.yaml'].map((f) => `charts/podnet/${f}`);
  t.strictSame(Object.keys(files).sort(), [...chart, 'daemonset/crds.yaml', 'src/generated/plugin-validators.js', 'src/generated/protos.ts', 'src/generated/schema-types.ts', 'src/generated/validators.js', 'src/generated/violations.js']);
  for (const [file, text] of Object.entries(files)) {
    t.ok(text === (await readFile(`${root}${file}`, 'utf8')), `${file} is current`);
  }
});

t.test('a pattern is said in words, never as its regular expression: every pattern of every schema has its rule', async (t) => {
  const patterns: string[] = [];
  for (const file of ['cni-plugin-config', 'protocol', 'api', 'state']) {
    const walk = (node: unknown, path: string): void => {
      if (typeof node !== 'object' || node === null) return;
      if ('pattern' in node && !('x-pattern-rule' in node)) patterns.push(`${file} ${path}`);
      for (const [k, v] of Object.entries(node)) walk(v, `${path}/${k}`);
    };
    walk(JSON.parse(await readFile(`${root}schemas/${file}.schema.json`, 'utf8')), '');
  }
  t.same(patterns, [], 'no pattern without x-pattern-rule');
  const sysctl = { apiVersion: 'podnetwork.opdev.io/v1alpha1', kind: 'PodNetworkConfig', metadata: { name: 'c' }, spec: { podSelector: {}, sysctls: [{ name: 'kernel.panic', value: '1' }] } };
  t.match(rejection('PodNetworkConfig', sysctl), refusal(/^invalid test input: at \/spec\/sysctls\/0\/name: must be a key that starts with net\. and has two more parts, such as net\.ipv4\.ip_forward, without spaces$/));
});

t.test('a refusal stays short however much is wrong: every violation of a small document, at most 64, the first of a large one', async (t) => {
  const pod = (keys: number) => ({ ...record, pod: Object.fromEntries(Array.from({ length: keys }, (_, i) => [`k${i}`, 1])) });
  const small = String((rejection('AttachmentRecord', pod(100)) as Error).message);
  t.match(small, /^invalid test input: at \/pod: must NOT have additional properties "k0", "k1", "k2", "k3", "k4", "k5", "k6", "k7" and 92 more$/, 'a hundred extra properties are one entry, naming eight');
  const withMissing = String((rejection('GcRequest', { ...Object.fromEntries(Array.from({ length: 100 }, (_, i) => [`k${i}`, 1])) }) as Error).message);
  t.match(withMissing, /must have required property 'network'/, 'so they do not push out what is missing');
  const many = String((rejection('SandboxList', { items: Array(200).fill({}), documentProblems: [] }) as Error).message);
  t.match(many, /; and \d+ more$/, 'many violations: how many more it does not list');
  t.equal(many.split('; at ').length, 64, 'lists 64');

  const large = String((rejection('AttachmentRecord', pod(20_000)) as Error).message);
  t.match(large, /^invalid test input: at \/pod: [^;]+ \(the first violation; a document of more than 1024 values is not searched for more\)$/, 'names the first violation of a large document, and says so');

  const wide = String((rejection('GcRequest', { network: 'kindnet', validAttachments: Array(20_000).fill({}) }) as Error).message);
  t.match(wide, /^invalid test input: at \/validAttachments\/0: must have required property/, 'a wide list of invalid items: its first');
});
