// What the plugins before podnet hand it as prevResult, checked before ADD passes it on: the
// runtime caches what ADD answers as the attachment's result, and the reference plugins refuse a
// result they cannot parse. A list that is no list, an address that is no address with its prefix
// length, an interface index past the interfaces: refused, naming the field, not passed through.
import { PodnetError } from '../errors.ts';
import { parseCidr, parseIp } from '../model/cidr.ts';
import { parseDocument } from '../protocol/validate.ts';

/** The prevResult as a CNI result, or a DECODE_FAILURE naming what in it is not one. */
export function checkPrevResult(prevResult: Record<string, unknown>): void {
  const refuse = (what: string) => new PodnetError('DECODE_FAILURE', `the prevResult the plugins before podnet gave is no CNI result podnet can pass on: ${what}`);
  let result;
  try {
    result = parseDocument('CniResult', prevResult, 'prevResult', 'DECODE_FAILURE');
  } catch (err) {
    throw refuse((err as Error).message);
  }
  const interfaces = result.interfaces ?? [];
  (result.ips ?? []).forEach((ip, i) => {
    if (ip.address === undefined || parseCidr(ip.address) === undefined) throw refuse(`ips[${i}].address ${JSON.stringify(ip.address ?? null)} is not an address with its prefix length`);
    if (ip.gateway !== undefined && parseIp(ip.gateway) === undefined) throw refuse(`ips[${i}].gateway ${JSON.stringify(ip.gateway)} is not an address`);
    if (ip.interface !== undefined && ip.interface >= interfaces.length) throw refuse(`ips[${i}].interface ${ip.interface} names no interface (the result has ${interfaces.length})`);
  });
}
