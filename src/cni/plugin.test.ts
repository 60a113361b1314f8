import t, { type Test } from 'tap';
import { PodnetError } from '../errors.ts';
import type { AttachmentKey, AttachmentRecord, CniVersion, FirstPassResponse, GcRequest } from '../protocol/validate.ts';
import { runPlugin } from './plugin.ts';
import type { Recorder, RecorderSettings } from './recorder.ts';
import { compareVersions, supportedVersions } from '../protocol/cni-version.ts';

// ---- the runtime's side: environment, stdin, and what comes back -----------------------------

const versions: CniVersion[] = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'];
const since = (v: string) => versions.filter((x) => compareVersions(x, v) >= 0);
const before = (v: string) => versions.filter((x) => compareVersions(x, v) < 0);

const now = new Date('2026-03-01T12:00:00.000Z');
const netnsPath = '/var/run/netns/cni-5b3c';
const key: AttachmentKey = { containerId: '5b3c9a0e1f2d', ifname: 'eth0' };

/** What the kubelet's runtime sets for a pod's attachment. */
function kubeletEnv(command: string | undefined, extra: Record<string, string | undefined> = {}) {
  return {
    CNI_COMMAND: command,
    CNI_CONTAINERID: key.containerId,
    CNI_NETNS: netnsPath,
    CNI_IFNAME: key.ifname,
    CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAMESPACE=shop;K8S_POD_NAME=web-0;K8S_POD_INFRA_CONTAINER_ID=5b3c9a0e1f2d;K8S_POD_UID=7c1e-44aa',
    CNI_PATH: '/opt/cni/bin',
    ...extra,
  };
}

/** The bridge plugin's result as version `v` writes it (ips[].version only before 1.0.0). */
function prevResult(v: string): Record<string, unknown> {
  const family = compareVersions(v, '1.0.0') < 0;
  return {
    cniVersion: v,
    interfaces: [{ name: 'cni0', mac: '0a:58:0a:f4:00:01' }, { name: 'eth0', mac: '0a:58:0a:f4:00:05', sandbox: netnsPath }],
    ips: [{ ...(family ? { version: '4' } : {}), address: '10.244.0.5/24', gateway: '10.244.0.1', interface: 1 }],
    routes: [{ dst: '0.0.0.0/0' }],
    dns: {},
  };
}

function config(v: string, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return { cniVersion: v, name: 'kindnet', type: 'podnet', ...extra };
}

// ---- the fake Recorder: records what it received, answers from what it was given --------------

type Call =
  | { op: 'add'; record: AttachmentRecord }
  | { op: 'del'; key: AttachmentKey }
  | { op: 'gc'; gc: GcRequest }
  | { op: 'find'; key: AttachmentKey }
  | { op: 'ready' }
  | { op: 'delegatedGone'; containerId: string }
  | { op: 'firstPass'; record: AttachmentRecord };

interface FakeOptions {
  /** Paths the fake isNetworkNamespace calls network namespaces. */
  namespaces?: string[];
  /** Records find() knows. */
  records?: AttachmentRecord[];
  /** What every add/del/gc/ready throws, when set. */
  failure?: PodnetError;
  /** What the daemon answers an ADD's first pass (none: it did not answer). */
  firstPass?: FirstPassResponse;
}

/** The node's own netns, as the fake probe knows it. */
const nodeNetns = '/proc/1/ns/net';

interface Outcome {
  stdout: string;
  exitCode: number;
  /** stdout parsed, undefined when empty. */
  answer: unknown;
  calls: Call[];
  opened: RecorderSettings[];
}

async function invoke(env: Record<string, string | undefined>, stdin: unknown, fake: FakeOptions = {}): Promise<Outcome> {
  const calls: Call[] = [];
  const opened: RecorderSettings[] = [];
  const namespaces = new Set(fake.namespaces ?? [netnsPath]);
  const stored = new Map((fake.records ?? []).map((r) => [`${r.containerId}@${r.ifname}`, r]));
  const deliver = async (call: Call): Promise<void> => {
    calls.push(call);
    if (fake.failure) throw fake.failure;
  };
  const recorder: Recorder = {
    add: (record) => deliver({ op: 'add', record }),
    del: (k) => deliver({ op: 'del', key: k }),
    gc: (gc) => deliver({ op: 'gc', gc }),
    async find(k) {
      calls.push({ op: 'find', key: k });
      return stored.get(`${k.containerId}@${k.ifname}`);
    },
    async ready() {
      calls.push({ op: 'ready' });
      if (fake.failure) throw fake.failure;
    },
    async delegatedGone(containerId) {
      calls.push({ op: 'delegatedGone', containerId });
    },
    async firstPass(r) {
      calls.push({ op: 'firstPass', record: r });
      return fake.firstPass;
    },
  };
  const out = await runPlugin({
    env,
    stdin: typeof stdin === 'string' ? stdin : JSON.stringify(stdin),
    openRecorder(settings) {
      opened.push(settings);
      return recorder;
    },
    isNetworkNamespace: (path) => namespaces.has(path),
    isNodeNetworkNamespace: (path) => path === nodeNetns,
    netnsIdentity: (path) => `4:${path.length}`,
    now: () => now,
  });
  return { ...out, answer: out.stdout === '' ? undefined : JSON.parse(out.stdout), calls, opened };
}

/** What a runtime must see on failure: exit 1 and exactly the spec's error object on stdout. */
function assertCniError(t: Test, out: Outcome, want: { cniVersion: string; code: number; msg: RegExp }) {
  t.equal(out.exitCode, 1, 'exit code 1');
  t.ok(out.stdout.endsWith('}\n') && out.stdout.indexOf('\n') === out.stdout.length - 1, 'one JSON line on stdout');
  const answer = (out.answer ?? {}) as Record<string, unknown>;
  t.equal(answer['cniVersion'], want.cniVersion, `answered in ${want.cniVersion}`);
  t.equal(answer['code'], want.code, `code ${want.code}`);
  t.match(answer['msg'], want.msg, 'the message says why');
  t.strictSame(Object.keys(answer).filter((k) => !['cniVersion', 'code', 'msg', 'details'].includes(k)), [], 'no other keys');
}

/** The record of the ADD handed to the recorder, if one was. */
const sentRecord = (out: Outcome) => out.calls.find((c): c is Extract<Call, { op: 'add' }> => c.op === 'add')?.record;

/** The calls that would change the registry. */
const changesSent = (out: Outcome) => out.calls.filter((c) => c.op === 'add' || c.op === 'del' || c.op === 'gc');

// ---- VERSION ----------------------------------------------------------------------------------

t.test('VERSION', async (t) => {
  for (const v of versions) {
    const out = await invoke({ CNI_COMMAND: 'VERSION' }, { cniVersion: v });
    t.equal(out.exitCode, 0);
    t.strictSame(out.answer, { cniVersion: v, supportedVersions: [...supportedVersions] }, `answers in ${v}`);
    t.strictSame(out.opened, [], 'opens no recorder');
  }
  // The spec: the answer's cniVersion is the input's, even one podnet does not speak.
  const unknown = await invoke({ CNI_COMMAND: 'VERSION' }, '{"cniVersion":"9.9.9"}');
  t.strictSame(unknown.answer, { cniVersion: '9.9.9', supportedVersions: [...supportedVersions] }, 'an unknown version is echoed');
  for (const stdin of ['', 'not json']) {
    const out = await invoke({ CNI_COMMAND: 'VERSION' }, stdin);
    t.strictSame(out.answer, { cniVersion: '1.1.0', supportedVersions: [...supportedVersions] }, `stdin ${JSON.stringify(stdin)}: latest`);
  }
});

// ---- ADD --------------------------------------------------------------------------------------

t.test('ADD passes prevResult through and records the attachment, with the identity of its netns', async (t) => {
  for (const v of versions) {
    const out = await invoke(kubeletEnv('ADD'), config(v, { prevResult: prevResult(v) }));
    t.equal(out.exitCode, 0, `${v}: exit 0`);
    t.strictSame(out.answer, prevResult(v), `${v}: stdout is prevResult, cniVersion ${v}`);
    const sent = {
      containerId: key.containerId,
      ifname: key.ifname,
      network: 'kindnet',
      netns: netnsPath,
      cniVersion: v,
      pod: { namespace: 'shop', name: 'web-0', uid: '7c1e-44aa', infraContainerId: '5b3c9a0e1f2d' },
      prevResult: prevResult(v),
      createdAt: '2026-03-01T12:00:00.000Z',
      netnsId: `4:${netnsPath.length}`,
    };
    t.strictSame(out.calls, [{ op: 'add', record: sent }, { op: 'firstPass', record: sent }], `${v}: the record sent, then its first pass waited for`);
    t.strictSame(out.opened, [{ socketPath: '/run/podnet/podnet.sock', stateDir: '/var/lib/podnet', timeoutMs: 1000, firstPassTimeoutMs: 5000 }], `${v}: default settings`);
  }
});

t.test('ADD under podman records the pod name alone', async (t) => {
  const out = await invoke(kubeletEnv('ADD', { CNI_ARGS: 'IgnoreUnknown=1;K8S_POD_NAME=my-container' }), config('1.0.0', { prevResult: prevResult('1.0.0') }));
  t.equal(out.exitCode, 0);
  t.strictSame(sentRecord(out)?.pod, { name: 'my-container' });
});

t.test('ADD with no CNI_ARGS records an empty identity', async (t) => {
  const out = await invoke(kubeletEnv('ADD', { CNI_ARGS: undefined }), config('1.1.0', { prevResult: prevResult('1.1.0') }));
  t.equal(out.exitCode, 0);
  t.strictSame(sentRecord(out)?.pod, {});
});

t.test('the configuration\'s socketPath, stateDir, timeoutMs and firstPassTimeoutMs reach the recorder', async (t) => {
  const out = await invoke(
    kubeletEnv('ADD'),
    config('1.0.0', { prevResult: prevResult('1.0.0'), socketPath: '/run/custom/d.sock', stateDir: '/srv/podnet', timeoutMs: 250, firstPassTimeoutMs: 0 }),
  );
  t.strictSame(out.opened, [{ socketPath: '/run/custom/d.sock', stateDir: '/srv/podnet', timeoutMs: 250, firstPassTimeoutMs: 0 }]);
});

t.test("ADD passes prevResult through whatever its first pass came to: the pod's creation never fails for the daemon", async (t) => {
  for (const firstPass of [undefined, { outcome: 'failed', error: 'the host has no interface eth9' }, { outcome: 'pending' }, { outcome: 'unknown-pod' }] as const) {
    const out = await invoke(kubeletEnv('ADD'), config('1.0.0', { prevResult: prevResult('1.0.0') }), firstPass ? { firstPass } : {});
    t.equal(out.exitCode, 0, firstPass?.outcome ?? 'no answer');
    t.strictSame(out.answer, prevResult('1.0.0'));
  }
});

t.test('ADD fails when the daemon refuses it for a required attachment, with the CNI error naming the attachment', async (t) => {
  const error = "the pod's required attachments cannot be made: net1 on Network blue (Pod shop/web-0 metadata.annotations[\"podnetwork.opdev.io/networks\"][0]): no Network named blue";
  const unmet = [{ document: 'Pod shop/web-0', field: 'metadata.annotations["podnetwork.opdev.io/networks"][0]', network: 'blue', interface: 'net1', reason: 'no Network named blue' }];
  const out = await invoke(kubeletEnv('ADD'), config('1.0.0', { prevResult: prevResult('1.0.0') }), { firstPass: { outcome: 'refused', error, unmet } });
  assertCniError(t, out, { cniVersion: '1.0.0', code: 101, msg: /^the pod's required attachments cannot be made: net1 on Network blue .*no Network named blue$/ });
});

t.test('ADD refuses a prevResult that is no CNI result, naming what in it is wrong, and records nothing', async (t) => {
  const bad: [object, RegExp][] = [
    [{ cniVersion: '1.0.0', ips: 'many' }, /prevResult.*\/ips/],
    [{ cniVersion: '1.0.0', interfaces: [{ name: 'eth0' }], ips: [{ address: '999.1.1.1/99', interface: 0 }] }, /ips\[0\]\.address "999\.1\.1\.1\/99" is not an address with its prefix length/],
    [{ cniVersion: '1.0.0', interfaces: [{ name: 'eth0' }], ips: [{ address: '10.0.0.5/24', interface: 3 }] }, /ips\[0\]\.interface 3 names no interface \(the result has 1\)/],
    [{ cniVersion: '1.0.0', ips: [{ address: '10.0.0.5/24', gateway: 'router' }] }, /ips\[0\]\.gateway "router" is not an address/],
    [{ cniVersion: '1.0.0', ips: [{ gateway: '10.0.0.1' }] }, /ips\[0\]\.address null is not an address/],
  ];
  for (const [prevResult, msg] of bad) {
    const out = await invoke(kubeletEnv('ADD'), config('1.0.0', { prevResult }));
    assertCniError(t, out, { cniVersion: '1.0.0', code: 6, msg });
    t.strictSame(out.calls, [], 'nothing recorded, no first pass');
  }
  const good = await invoke(kubeletEnv('ADD'), config('1.0.0', { prevResult: { cniVersion: '1.0.0', interfaces: [{ name: 'eth0', sandbox: netnsPath }], ips: [{ address: 'fd00::5/64', gateway: 'fd00::1', interface: 0 }, { address: '10.0.0.5/24' }] } }));
  t.equal(good.exitCode, 0, 'addresses of both families, with and without their interface');
});

t.test('ADD converts a prevResult of the other family to the configuration\'s version', async (t) => {
  for (const [conf, prev] of [['0.4.0', '1.0.0'], ['1.1.0', '0.3.1']] as const) {
    const out = await invoke(kubeletEnv('ADD'), config(conf, { prevResult: prevResult(prev) }));
    t.strictSame(out.answer, prevResult(conf), `prevResult ${prev} answered as ${conf}`);
    t.strictSame(sentRecord(out)?.prevResult, prevResult(prev), 'the record keeps prevResult as received');
  }
});

t.test('ADD with a prevResult of an unsupported version: code 1', async (t) => {
  for (const v of versions) {
    const out = await invoke(kubeletEnv('ADD'), config(v, { prevResult: { cniVersion: '0.2.0', ip4: { ip: '10.0.0.2/24' } } }));
    assertCniError(t, out, { cniVersion: v, code: 1, msg: /prevResult has cniVersion 0\.2\.0/ });
    t.strictSame(changesSent(out), [], 'nothing recorded');
  }
});

t.test('ADD without prevResult: code 7', async (t) => {
  for (const v of versions) {
    const out = await invoke(kubeletEnv('ADD'), config(v));
    assertCniError(t, out, { cniVersion: v, code: 7, msg: /ADD without a prevResult/ });
    t.strictSame(changesSent(out), [], 'nothing recorded');
  }
});

t.test('ADD when CNI_NETNS is not a network namespace, or unset: code 4', async (t) => {
  for (const v of versions) {
    const stdin = config(v, { prevResult: prevResult(v) });
    const notNetns = await invoke(kubeletEnv('ADD', { CNI_NETNS: '/etc/hostname' }), stdin);
    assertCniError(t, notNetns, { cniVersion: v, code: 4, msg: /CNI_NETNS \/etc\/hostname is not a network namespace/ });
    const unset = await invoke(kubeletEnv('ADD', { CNI_NETNS: undefined }), stdin);
    assertCniError(t, unset, { cniVersion: v, code: 4, msg: /CNI_NETNS is not set/ });
    t.strictSame([...changesSent(notNetns), ...changesSent(unset)], [], 'nothing recorded');
  }
});

t.test('ADD whose CNI_NETNS is the node\'s own network namespace: code 4, nothing recorded', async (t) => {
  const out = await invoke(kubeletEnv('ADD', { CNI_NETNS: nodeNetns }), config('1.0.0', { prevResult: prevResult('1.0.0') }), { namespaces: [nodeNetns] });
  assertCniError(t, out, { cniVersion: '1.0.0', code: 4, msg: /CNI_NETNS \/proc\/1\/ns\/net is the node's own network namespace, not a pod's/ });
  t.strictSame(changesSent(out), [], 'nothing recorded');
});

t.test('ADD whose CNI_NETNS is a namespace but not a path the schema allows: code 4', async (t) => {
  const odd = '/var/run/netns/has space';
  const out = await invoke(kubeletEnv('ADD', { CNI_NETNS: odd }), config('1.0.0', { prevResult: prevResult('1.0.0') }), { namespaces: [odd] });
  assertCniError(t, out, { cniVersion: '1.0.0', code: 4, msg: /at \/netns: must be / });
});

t.test('ADD when the change cannot be recorded: the recorder\'s code', async (t) => {
  const out = await invoke(kubeletEnv('ADD'), config('1.0.0', { prevResult: prevResult('1.0.0') }), {
    failure: new PodnetError('IO_FAILURE', 'podnet could not record the add in /var/lib/podnet/spool: EROFS'),
  });
  assertCniError(t, out, { cniVersion: '1.0.0', code: 5, msg: /could not record the add/ });
});

// ---- bad environment and configuration, for every command that reads them --------------------

t.test('a bad CNI_IFNAME or CNI_CONTAINERID: code 4', async (t) => {
  const bad: Record<string, string | undefined>[] = [
    { CNI_IFNAME: 'a/b' },
    { CNI_IFNAME: '..' },
    { CNI_IFNAME: 'a'.repeat(16) },
    { CNI_IFNAME: undefined },
    { CNI_CONTAINERID: 'has space' },
    { CNI_CONTAINERID: undefined },
  ];
  for (const v of versions) {
    for (const command of ['ADD', 'DEL']) {
      for (const extra of bad) {
        const out = await invoke(kubeletEnv(command, extra), config(v, { prevResult: prevResult(v) }));
        assertCniError(t, out, { cniVersion: v, code: 4, msg: /CNI_CONTAINERID|CNI_IFNAME/ });
        t.strictSame(changesSent(out), [], `${v} ${command} ${JSON.stringify(extra)}: nothing recorded`);
      }
    }
  }
});

t.test('stdin that is not JSON: code 6', async (t) => {
  for (const command of ['ADD', 'DEL', 'CHECK']) {
    const out = await invoke(kubeletEnv(command), '{"cniVersion": "1.0.0",');
    assertCniError(t, out, { cniVersion: '1.1.0', code: 6, msg: /network configuration on stdin is not JSON/ });
  }
  assertCniError(t, await invoke(kubeletEnv('ADD'), ''), { cniVersion: '1.1.0', code: 6, msg: /not JSON/ });
});

t.test('stdin nested too deep or too big: code 6 naming the bound, nothing recorded', async (t) => {
  const deep = `{"cniVersion":"1.0.0","name":"k","type":"podnet","prevResult":${'{"a":'.repeat(20_000)}1${'}'.repeat(20_000)}}`;
  const out = await invoke(kubeletEnv('ADD'), deep);
  assertCniError(t, out, { cniVersion: '1.1.0', code: 6, msg: /^network configuration on stdin nests arrays and objects more than 64 deep$/ });
  t.strictSame(changesSent(out), []);
  const big = JSON.stringify({ cniVersion: '1.0.0', name: 'k', type: 'podnet', pad: 'x'.repeat(1024 * 1024) });
  assertCniError(t, await invoke(kubeletEnv('ADD'), big), { cniVersion: '1.1.0', code: 6, msg: /network configuration on stdin is 10486\d\d bytes, more than the 1048576 podnet reads/ });
});

t.test('a configuration without cniVersion: code 7', async (t) => {
  const out = await invoke(kubeletEnv('ADD'), { name: 'kindnet', type: 'podnet', prevResult: prevResult('1.0.0') });
  assertCniError(t, out, { cniVersion: '1.1.0', code: 7, msg: /invalid network configuration: at \(top level\): must have required property 'cniVersion'/ });
});

t.test('an invalid configuration is answered in its own cniVersion', async (t) => {
  for (const v of versions) {
    const out = await invoke(kubeletEnv('ADD'), { cniVersion: v, type: 'podnet', prevResult: prevResult(v) });
    t.equal(out.exitCode, 1);
    t.match(out.answer, { code: 7, msg: /must have required property 'name'/ });
    // The spec: the error's cniVersion is "the same value as provided by the configuration".
    t.equal((out.answer as { cniVersion: string }).cniVersion, v, `answered in ${v}`);
  }
});

t.test('an unsupported cniVersion: code 1, answered in that version', async (t) => {
  for (const command of ['ADD', 'DEL', 'CHECK', 'STATUS', 'GC']) {
    const out = await invoke(kubeletEnv(command), config('9.9.9', { prevResult: prevResult('1.0.0') }));
    assertCniError(t, out, { cniVersion: '9.9.9', code: 1, msg: /cniVersion 9\.9\.9 is not supported; podnet speaks 0\.3\.0, 0\.3\.1, 0\.4\.0, 1\.0\.0, 1\.1\.0/ });
    t.strictSame(out.calls, [], `${command}: the recorder is not used`);
  }
});

t.test('an unknown or unset CNI_COMMAND: code 4', async (t) => {
  for (const v of versions) {
    const unknown = await invoke(kubeletEnv('UPDATE'), config(v, { prevResult: prevResult(v) }));
    assertCniError(t, unknown, { cniVersion: v, code: 4, msg: /unknown CNI_COMMAND "UPDATE"/ });
    t.match(unknown.answer, { details: /ADD, DEL, CHECK, STATUS, GC and VERSION/ });
    const unset = await invoke(kubeletEnv(undefined), config(v, { prevResult: prevResult(v) }));
    assertCniError(t, unset, { cniVersion: v, code: 4, msg: /CNI_COMMAND is not set/ });
    t.strictSame([...unknown.calls, ...unset.calls], [], 'the recorder is not used');
  }
});

// ---- DEL --------------------------------------------------------------------------------------

t.test('DEL succeeds with empty stdout, netns or not', async (t) => {
  for (const v of versions) {
    for (const extra of [{}, { CNI_NETNS: undefined }, { CNI_NETNS: '/var/run/netns/gone' }]) {
      const out = await invoke(kubeletEnv('DEL', extra), config(v));
      t.equal(out.exitCode, 0, `${v} ${JSON.stringify(extra)}: exit 0`);
      t.equal(out.stdout, '', 'empty stdout');
      t.strictSame(out.calls, [{ op: 'del', key }, { op: 'delegatedGone', containerId: key.containerId }], 'the removal is recorded, then the delegated DELs are waited for');
    }
  }
});

// ---- CHECK ------------------------------------------------------------------------------------

const recorded = (netns: string): AttachmentRecord => ({
  ...key,
  network: 'kindnet',
  netns,
  cniVersion: '1.0.0',
  pod: { namespace: 'shop', name: 'web-0' },
  createdAt: '2026-03-01T11:00:00.000Z',
});

t.test('CHECK before 0.4.0: code 1', async (t) => {
  for (const v of before('0.4.0')) {
    const out = await invoke(kubeletEnv('CHECK'), config(v, { prevResult: prevResult(v) }), { records: [recorded(netnsPath)] });
    assertCniError(t, out, { cniVersion: v, code: 1, msg: /CHECK needs cniVersion 0\.4\.0 or later; the configuration has/ });
  }
});

t.test('CHECK', async (t) => {
  for (const v of since('0.4.0')) {
    const stdin = config(v, { prevResult: prevResult(v) });
    const found = await invoke(kubeletEnv('CHECK'), stdin, { records: [recorded(netnsPath)] });
    t.equal(found.exitCode, 0, `${v}: recorded and in place: exit 0`);
    t.equal(found.stdout, '', 'empty stdout');
    t.strictSame(found.calls, [{ op: 'find', key }]);

    const missing = await invoke(kubeletEnv('CHECK'), stdin);
    assertCniError(t, missing, { cniVersion: v, code: 100, msg: /podnet has no record of container 5b3c9a0e1f2d interface eth0/ });

    const elsewhere = await invoke(kubeletEnv('CHECK'), stdin, { records: [recorded('/var/run/netns/cni-other')], namespaces: [netnsPath, '/var/run/netns/cni-other'] });
    assertCniError(t, elsewhere, { cniVersion: v, code: 100, msg: /recorded netns \/var\/run\/netns\/cni-other .* the runtime says \/var\/run\/netns\/cni-5b3c/ });

    const gone = await invoke(kubeletEnv('CHECK'), stdin, { records: [recorded(netnsPath)], namespaces: [] });
    assertCniError(t, gone, { cniVersion: v, code: 100, msg: /netns \/var\/run\/netns\/cni-5b3c of container 5b3c9a0e1f2d is gone/ });
  }
});

// ---- STATUS and GC ----------------------------------------------------------------------------

t.test('STATUS and GC before 1.1.0: code 1', async (t) => {
  for (const v of before('1.1.0')) {
    for (const command of ['STATUS', 'GC']) {
      const out = await invoke(kubeletEnv(command), config(v));
      assertCniError(t, out, { cniVersion: v, code: 1, msg: new RegExp(`${command} needs cniVersion 1\\.1\\.0 or later`) });
      t.strictSame(out.calls, [], `${v} ${command}: the recorder is not used`);
    }
  }
});

t.test('STATUS', async (t) => {
  const ok = await invoke({ CNI_COMMAND: 'STATUS' }, config('1.1.0'));
  t.equal(ok.exitCode, 0, 'ready: exit 0');
  t.equal(ok.stdout, '', 'empty stdout');
  t.strictSame(ok.calls, [{ op: 'ready' }]);

  const failing = await invoke({ CNI_COMMAND: 'STATUS' }, config('1.1.0'), {
    failure: new PodnetError('NOT_AVAILABLE', 'podnet cannot record attachments: the spool /var/lib/podnet/spool is not writable'),
  });
  assertCniError(t, failing, { cniVersion: '1.1.0', code: 50, msg: /podnet cannot record attachments/ });
});

t.test('GC hands the daemon the valid attachments it can match, renamed', async (t) => {
  const out = await invoke({ CNI_COMMAND: 'GC', CNI_PATH: '/opt/cni/bin' }, config('1.1.0', {
    'cni.dev/valid-attachments': [
      { containerID: 'aaa', ifname: 'eth0' },
      { containerID: 'has space', ifname: 'eth0' },
      { containerID: 'bbb', ifname: 'a/b' },
      { containerID: 'ccc', ifname: 'net1' },
    ],
  }));
  t.equal(out.exitCode, 0);
  t.equal(out.stdout, '');
  t.strictSame(out.calls, [{
    op: 'gc',
    gc: { network: 'kindnet', validAttachments: [{ containerId: 'aaa', ifname: 'eth0' }, { containerId: 'ccc', ifname: 'net1' }] },
  }]);
});

t.test('GC when the change cannot be recorded: the recorder\'s code', async (t) => {
  const out = await invoke({ CNI_COMMAND: 'GC' }, config('1.1.0', { 'cni.dev/valid-attachments': [] }), {
    failure: new PodnetError('IO_FAILURE', 'podnet could not record the gc in /var/lib/podnet/spool: EROFS'),
  });
  assertCniError(t, out, { cniVersion: '1.1.0', code: 5, msg: /could not record the gc/ });
});
