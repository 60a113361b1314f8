// The client side of the socket contract, shared by the CNI plugin and the CLI. HTTP/1.1 over the
// daemon's unix socket (see docs/adr/0002). Errors come back as PodnetError with the daemon's code.
import { request } from 'node:http';
import { PodnetError, isErrorCode } from '../errors.ts';
import { deadlineHeader } from './paths.ts';

export interface DaemonRequest {
  socketPath: string;
  method: 'GET' | 'PUT' | 'POST' | 'DELETE';
  path: string;
  body?: unknown;
  timeoutMs: number;
}

/**
 * Sends one request and resolves with the parsed JSON body of a 2xx answer (undefined when empty).
 * A daemon that cannot be reached or does not answer in time is NOT_AVAILABLE; a non-2xx answer
 * is the daemon's own error, rebuilt from its ErrorBody.
 */
export function callDaemon(req: DaemonRequest): Promise<unknown> {
  const payload = req.body === undefined ? undefined : JSON.stringify(req.body);
  return new Promise((resolve, reject) => {
    const outgoing = request(
      {
        socketPath: req.socketPath,
        method: req.method,
        path: req.path,
        agent: false,
        headers: {
          [deadlineHeader]: String(Date.now() + req.timeoutMs),
          ...(payload === undefined ? {} : { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) }),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('error', (err) => reject(unreachable(req, err)));
        res.on('end', () => {
          clearTimeout(timer);
          const text = Buffer.concat(chunks).toString('utf8');
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) {
            try {
              resolve(text === '' ? undefined : JSON.parse(text));
            } catch {
              reject(new PodnetError('IO_FAILURE', `podnet daemon sent a body that is not JSON for ${req.method} ${req.path}`));
            }
            return;
          }
          reject(daemonError(req, status, text));
        });
      },
    );
    const timer = setTimeout(() => {
      outgoing.destroy(new PodnetError('NOT_AVAILABLE', `podnet daemon at ${req.socketPath} did not answer within ${req.timeoutMs} ms`));
    }, req.timeoutMs);
    outgoing.on('error', (err) => {
      clearTimeout(timer);
      reject(err instanceof PodnetError ? err : unreachable(req, err));
    });
    outgoing.end(payload);
  });
}

function unreachable(req: DaemonRequest, err: Error & { code?: string }): PodnetError {
  return new PodnetError('NOT_AVAILABLE', `podnet daemon not reachable at ${req.socketPath}: ${err.code ?? err.message}`);
}

function daemonError(req: DaemonRequest, status: number, text: string): PodnetError {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  if (body && typeof body === 'object' && 'code' in body && 'message' in body) {
    const { code, message, details } = body as { code: unknown; message: unknown; details?: unknown };
    if (typeof code === 'string' && isErrorCode(code) && typeof message === 'string') {
      return new PodnetError(code, message, typeof details === 'string' ? details : undefined);
    }
  }
  const code = status === 503 ? 'TRY_AGAIN_LATER' : status >= 500 ? 'IO_FAILURE' : 'INVALID_REQUEST';
  return new PodnetError(code, `podnet daemon answered ${status} to ${req.method} ${req.path}: ${text.slice(0, 200)}`);
}
