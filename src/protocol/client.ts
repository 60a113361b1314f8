// The client side of the socket contract, shared by the CNI plugin (CHECK) and the CLI: one
// HTTP/1.1 request per connection over the daemon's unix socket (docs/adr/0002). Written on
// node:net rather than node:http, which costs a measurable part of a plugin run to load. The daemon always answers with content-length and closes the
// connection, which is all this client needs to read. Errors come back as PodnetError with the
// daemon's code.
import { PodnetError, isErrorCode } from '../errors.ts';

export interface DaemonRequest {
  socketPath: string;
  method: 'GET' | 'PUT' | 'POST' | 'DELETE';
  path: string;
  body?: unknown;
  timeoutMs: number;
}

interface RawResponse {
  status: number;
  body: string;
}

/**
 * Sends one request and resolves with the parsed JSON body of a 2xx answer (undefined when empty).
 * A daemon that cannot be reached or does not answer in time is NOT_AVAILABLE; a non-2xx answer
 * is the daemon's own error, rebuilt from its ErrorBody.
 */
export async function callDaemon(req: DaemonRequest): Promise<unknown> {
  const res = await exchange(req);
  if (res.status >= 200 && res.status < 300) {
    try {
      return res.body === '' ? undefined : JSON.parse(res.body);
    } catch {
      throw new PodnetError('IO_FAILURE', `podnet daemon sent a body that is not JSON for ${req.method} ${req.path}`);
    }
  }
  throw daemonError(req, res);
}

export function encodeRequest(req: DaemonRequest): string {
  const payload = req.body === undefined ? '' : JSON.stringify(req.body);
  const headers = [
    `${req.method} ${req.path} HTTP/1.1`,
    'host: podnet',
    'connection: close',
    `content-length: ${Buffer.byteLength(payload)}`,
  ];
  if (payload !== '') headers.push('content-type: application/json');
  return `${headers.join('\r\n')}\r\n\r\n${payload}`;
}

/** Status and body of an HTTP/1.1 response with content-length; undefined while incomplete. */
export function decodeResponse(raw: Buffer): RawResponse | undefined {
  const end = raw.indexOf('\r\n\r\n');
  if (end < 0) return undefined;
  const head = raw.subarray(0, end).toString('latin1').split('\r\n');
  const status = /^HTTP\/1\.[01] (\d{3})/.exec(head[0] ?? '');
  if (!status) throw new PodnetError('IO_FAILURE', `podnet daemon sent no HTTP status line: ${JSON.stringify(head[0])}`);
  const lengthLine = head.find((h) => /^content-length:/i.test(h));
  const length = lengthLine ? Number(lengthLine.slice(lengthLine.indexOf(':') + 1)) : 0;
  const body = raw.subarray(end + 4);
  if (body.length < length) return undefined;
  return { status: Number(status[1]), body: body.subarray(0, length).toString('utf8') };
}

function exchange(req: DaemonRequest): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    // Loaded on first use: of the plugin's commands only CHECK talks to the daemon.
    const socket = process.getBuiltinModule('node:net').createConnection(req.socketPath);
    let received = Buffer.alloc(0);
    let settled = false;
    const settle = (fn: () => void) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      fn();
    };
    const timer = setTimeout(
      () => settle(() => reject(new PodnetError('NOT_AVAILABLE', `podnet daemon at ${req.socketPath} did not answer within ${req.timeoutMs} ms`))),
      req.timeoutMs,
    );
    // Not end(): a half-closed connection makes node's HTTP server drop the answer. The server
    // closes after answering (connection: close).
    socket.once('connect', () => socket.write(encodeRequest(req)));
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      try {
        const res = decodeResponse(received);
        if (res) settle(() => resolve(res));
      } catch (err) {
        settle(() => reject(err));
      }
    });
    socket.once('end', () =>
      settle(() => reject(new PodnetError('NOT_AVAILABLE', `podnet daemon at ${req.socketPath} closed the connection without a full answer`))),
    );
    socket.once('error', (err: NodeJS.ErrnoException) => settle(() => reject(new PodnetError('NOT_AVAILABLE', unreachable(req.socketPath, err)))));
  });
}

/** Why the daemon's socket could not be reached, in words that say what to check. */
export function unreachable(socketPath: string, err: NodeJS.ErrnoException): string {
  switch (err.code) {
    case 'ENOENT':
      return `no podnet daemon serves ${socketPath} (there is no socket): is the daemon running, and is that its socket?`;
    case 'ECONNREFUSED':
      return `no podnet daemon serves ${socketPath} (the socket is there, nothing listens): is the daemon running?`;
    case 'EACCES':
    case 'EPERM':
      return `may not open ${socketPath} (permission denied): the daemon's socket is root's alone; run this as root`;
    default:
      return `podnet daemon not reachable at ${socketPath}: ${err.code ?? err.message}`;
  }
}

function daemonError(req: DaemonRequest, res: RawResponse): PodnetError {
  let body: unknown;
  try {
    body = JSON.parse(res.body);
  } catch {
    body = undefined;
  }
  if (body && typeof body === 'object' && 'code' in body && 'message' in body) {
    const { code, message, details } = body as { code: unknown; message: unknown; details?: unknown };
    if (typeof code === 'string' && isErrorCode(code) && typeof message === 'string') {
      return new PodnetError(code, message, typeof details === 'string' ? details : undefined);
    }
  }
  const code = res.status === 503 ? 'TRY_AGAIN_LATER' : res.status >= 500 ? 'IO_FAILURE' : 'INVALID_REQUEST';
  return new PodnetError(code, `podnet daemon answered ${res.status} to ${req.method} ${req.path}: ${res.body.slice(0, 200)}`);
}
