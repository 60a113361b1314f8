import t from 'tap';
import { PodnetError } from '../errors.ts';
import type { CniVersion } from '../protocol/validate.ts';
import { compareVersions, convertResult, isSupportedVersion, latestVersion, supportedVersions } from './cni-version.ts';

const oldVersions: CniVersion[] = ['0.3.0', '0.3.1', '0.4.0'];
const newVersions: CniVersion[] = ['1.0.0', '1.1.0'];

/** A bridge plugin's result with one IPv4 and one IPv6 address, as version `v` writes it. */
function bridgeResult(v: CniVersion): Record<string, unknown> {
  const withVersion = compareVersions(v, '1.0.0') < 0;
  const ip = (family: '4' | '6', address: string, gateway: string) =>
    withVersion ? { version: family, address, gateway, interface: 2 } : { address, gateway, interface: 2 };
  return {
    cniVersion: v,
    interfaces: [
      { name: 'cni0', mac: '0a:58:0a:f4:00:01' },
      { name: 'veth1234', mac: '6e:1d:4f:aa:bb:cc' },
      { name: 'eth0', mac: '0a:58:0a:f4:00:05', sandbox: '/var/run/netns/cni-1' },
    ],
    ips: [ip('4', '10.244.0.5/24', '10.244.0.1'), ip('6', 'fd00:10:244::5/64', 'fd00:10:244::1')],
    routes: [{ dst: '0.0.0.0/0', gw: '10.244.0.1' }],
    dns: { nameservers: ['10.96.0.10'] },
  };
}

t.test('compareVersions', async (t) => {
  t.ok(compareVersions('0.3.1', '0.4.0') < 0, '0.3.1 is older than 0.4.0');
  t.ok(compareVersions('1.1.0', '1.0.0') > 0, '1.1.0 is newer than 1.0.0');
  t.equal(compareVersions('1.0.0', '1.0.0'), 0);
  t.ok(compareVersions('1.10.0', '1.9.0') > 0, 'parts compare as numbers, not as text');
  t.equal(compareVersions('1.0', '1.0.0'), 0, 'a missing part counts as 0');
});

t.test('isSupportedVersion', async (t) => {
  t.strictSame(supportedVersions, ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0']);
  t.equal(latestVersion, '1.1.0');
  for (const v of supportedVersions) t.ok(isSupportedVersion(v), `${v} is supported`);
  for (const v of ['0.1.0', '0.2.0', '1.2.0', '9.9.9', '1.0', '']) t.notOk(isSupportedVersion(v), `"${v}" is not supported`);
});

t.test('convertResult', async (t) => {
  t.test('old to new: ips[].version is removed, the rest kept', async (t) => {
    for (const from of oldVersions) {
      for (const to of newVersions) t.strictSame(convertResult(bridgeResult(from), to), bridgeResult(to), `${from} -> ${to}`);
    }
  });

  t.test('new to old: ips[].version is added from the address family', async (t) => {
    for (const from of newVersions) {
      for (const to of oldVersions) {
        const out = convertResult(bridgeResult(from), to);
        t.strictSame(out, bridgeResult(to), `${from} -> ${to}`);
        t.strictSame((out['ips'] as { version: string }[]).map((ip) => ip.version), ['4', '6']);
      }
    }
  });

  t.test('within one family only cniVersion changes', async (t) => {
    for (const family of [oldVersions, newVersions]) {
      for (const from of family) {
        for (const to of family) {
          t.strictSame(convertResult(bridgeResult(from), to), { ...bridgeResult(from), cniVersion: to }, `${from} -> ${to}`);
        }
      }
    }
  });

  t.test('the input is not changed', async (t) => {
    const input = bridgeResult('1.0.0');
    convertResult(input, '0.3.1');
    t.strictSame(input, bridgeResult('1.0.0'));
  });

  t.test('a result without ips converts', async (t) => {
    t.strictSame(convertResult({ cniVersion: '0.4.0', interfaces: [] }, '1.1.0'), { cniVersion: '1.1.0', interfaces: [] });
  });

  t.test('a result without cniVersion is taken as already in the target version', async (t) => {
    t.strictSame(convertResult({ ips: [{ address: '10.0.0.2/24' }] }, '1.0.0'), { cniVersion: '1.0.0', ips: [{ address: '10.0.0.2/24' }] });
  });

  t.test('a prevResult of an unsupported version is refused', async (t) => {
    const legacy = { cniVersion: '0.2.0', ip4: { ip: '10.0.0.2/24' } };
    const err = t.throws(() => convertResult(legacy, '1.0.0'));
    t.ok(err instanceof PodnetError, 'a PodnetError');
    t.match(err, { code: 'INCOMPATIBLE_CNI_VERSION', cniCode: 1, message: /prevResult has cniVersion 0\.2\.0/ });
  });
});
