// CNI spec versions podnet speaks, and the one result conversion a pass-through needs.
import { PodnetError } from '../errors.ts';
import type { CniVersion } from './validate.ts';

export const supportedVersions: readonly CniVersion[] = ['0.3.0', '0.3.1', '0.4.0', '1.0.0', '1.1.0'];
export const latestVersion: CniVersion = '1.1.0';

export function isSupportedVersion(v: string): v is CniVersion {
  return (supportedVersions as readonly string[]).includes(v);
}

/** Negative, zero or positive as `a` is older than, equal to or newer than `b` (x.y.z). */
export function compareVersions(a: string, b: string): number {
  const pa = a.split('.').map(Number);
  const pb = b.split('.').map(Number);
  for (let i = 0; i < 3; i++) {
    const d = (pa[i] ?? 0) - (pb[i] ?? 0);
    if (d !== 0) return d;
  }
  return 0;
}

/** Before 1.0.0 every entry of `ips` carried "version": "4" or "6"; 1.0.0 dropped it. */
function hasIpVersionField(v: string): boolean {
  return compareVersions(v, '1.0.0') < 0;
}

/**
 * Returns `result` as the spec's `to` version writes it. The result of a plugin chain is passed on
 * untouched apart from what the versions differ in: cniVersion itself and ips[].version.
 */
export function convertResult(result: Record<string, unknown>, to: CniVersion): Record<string, unknown> {
  const from = typeof result['cniVersion'] === 'string' ? result['cniVersion'] : to;
  if (!isSupportedVersion(from)) {
    throw new PodnetError(
      'INCOMPATIBLE_CNI_VERSION',
      `prevResult has cniVersion ${from}; podnet converts results of ${supportedVersions.join(', ')}`,
    );
  }
  const out: Record<string, unknown> = { ...result, cniVersion: to };
  const ips = result['ips'];
  if (hasIpVersionField(from) === hasIpVersionField(to) || !Array.isArray(ips)) return out;
  out['ips'] = ips.map((ip: unknown) => {
    if (!ip || typeof ip !== 'object') return ip;
    const { version: _dropped, ...rest } = ip as Record<string, unknown>;
    if (!hasIpVersionField(to)) return rest;
    const address = typeof rest['address'] === 'string' ? rest['address'] : '';
    return { ...rest, version: address.includes(':') ? '6' : '4' };
  });
  return out;
}
