// The metrics server's address (`podnet daemon --metrics-address`); what the rooms report is ../metrics.ts.
import { isIP } from 'node:net';
import { PodnetError } from '../errors.ts';

/**
 * `HOST:PORT` as a listen address, or INVALID_CONFIG naming what is wrong. An IPv6 host may be
 * bracketed or not ([::1]:9109, ::1:9109): the port is after the last colon, so that a pod's IP
 * from the downward API fits either way.
 */
export function parseListenAddress(text: string, flag: string): { host: string; port: number } {
  const colon = text.lastIndexOf(':');
  const host = text.slice(0, Math.max(colon, 0)).replace(/^\[(.*)\]$/, '$1');
  const port = /^\d{1,5}$/.test(text.slice(colon + 1)) ? Number(text.slice(colon + 1)) : NaN;
  if (colon < 0 || !(port <= 65535) || (isIP(host) === 0 && host !== 'localhost')) {
    throw new PodnetError('INVALID_CONFIG', `${flag} ${JSON.stringify(text)} is not HOST:PORT with an IP address (127.0.0.1:9109, [::1]:9109)`);
  }
  return { host, port };
}
