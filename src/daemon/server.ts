// The daemon's socket: HTTP/1.1 on a unix socket only root can reach (docs/adr/0002). Bodies are
// JSON, bounded in size and validated against schemas/; errors go out as ErrorBody with a code.
// What each route answers is routes.ts; this file is the HTTP around it.
import { parseBoundedJson } from '../protocol/bounded-json.ts';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { chmod, lstat, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { PodnetError, toPodnetError } from '../errors.ts';
import { routes } from '../protocol/paths.ts';
import { parseDocument, type ErrorBody } from '../protocol/validate.ts';
import { checkPrivateDir, ensurePrivateDir } from '../registry/atomic-file.ts';
import type { Logger } from '../log.ts';
import { routeTable, type DaemonParts } from './routes.ts';

export interface ServerOptions extends DaemonParts {
  socketPath: string;
  log: Logger;
  /** Largest request body accepted. */
  maxBodyBytes?: number;
  /** Connections served at once; more are refused until one closes. */
  maxConnections?: number;
}

export interface RunningServer {
  close(): Promise<void>;
}

export async function startServer(opts: ServerOptions): Promise<RunningServer> {
  const maxBodyBytes = opts.maxBodyBytes ?? 1024 * 1024;

  const readJson = async (req: IncomingMessage): Promise<unknown> => {
    const type = req.headers['content-type'] ?? '';
    if (!/^application\/json\s*(;|$)/i.test(type)) {
      throw new PodnetError('UNSUPPORTED_MEDIA_TYPE', `request body must be application/json, not "${type}"`);
    }
    const declared = Number(req.headers['content-length'] ?? NaN);
    if (declared > maxBodyBytes) throw new PodnetError('PAYLOAD_TOO_LARGE', `request body of ${declared} bytes is over the ${maxBodyBytes}-byte limit`);
    const chunks: Buffer[] = [];
    let size = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      size += chunk.length;
      if (size > maxBodyBytes) throw new PodnetError('PAYLOAD_TOO_LARGE', `request body is over the ${maxBodyBytes}-byte limit`);
      chunks.push(chunk);
    }
    return parseBoundedJson(Buffer.concat(chunks).toString('utf8'), 'request body', { maxBytes: maxBodyBytes });
  };

  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    const chunks = jsonChunks(body);
    chunks.push('\n');
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': chunks.reduce((n, c) => n + Buffer.byteLength(c), 0), ...headers });
    for (const chunk of chunks) res.write(chunk);
    res.end();
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const method = req.method ?? 'GET';
    try {
      const onPath = routeTable.filter((r) => r.pattern.test(path));
      if (onPath.length === 0) throw new PodnetError('NOT_FOUND', `no such path ${path}; the paths are ${Object.values(routes).join(', ')}`);
      const route = onPath.find((r) => r.method === method);
      if (!route) {
        res.setHeader('allow', onPath.map((r) => r.method).join(', '));
        throw new PodnetError('METHOD_NOT_ALLOWED', `${method} is not allowed on ${path}`);
      }
      const params = route.pattern.exec(path)?.slice(1) ?? [];
      const expected = route.body;
      const body = async () => expected && parseDocument(expected.document, await readJson(req), expected.what);
      const { status, body: answer } = await route.handle(opts, { params, body });
      send(res, status, answer);
    } catch (thrown) {
      const err = toPodnetError(thrown);
      if (err.code === 'INTERNAL' || err.httpStatus >= 500) opts.log.error('request failed', { method, path, code: err.code, error: err.message });
      const body: ErrorBody = { code: err.code, message: err.message };
      if (err.details !== undefined) body.details = err.details;
      // A body left unread would stall the connection; the answer ends it.
      send(res, err.httpStatus, body, err.code === 'PAYLOAD_TOO_LARGE' ? { connection: 'close' } : {});
    }
  };

  const server = createServer((req, res) => void handle(req, res));
  // Each ADD of a pod that asks something holds a connection through its first pass (ADR 28): a
  // node restart makes every pod's sandbox at once (the kubelet's default bound is 110 pods), and
  // an ADD refused here starts its pod without its network.
  server.maxConnections = opts.maxConnections ?? 256;
  server.headersTimeout = 10_000;
  server.requestTimeout = 30_000;
  server.keepAliveTimeout = 5_000;

  await claimSocketPath(opts.socketPath);
  await listenPrivately(server, opts.socketPath);
  return {
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

/** Under V8's large-object size (128 KiB), and a fair share of a socket's buffer. */
const chunkChars = 32 * 1024;

/**
 * `body` as JSON.stringify writes it, in strings of about `chunkChars`: each element of an array
 * in a field of a plain body (a node's sandboxes) is written alone, and an element longer than
 * that is a string of its own. The list of 500 sandboxes is about 2 MB; as one string it went to
 * V8's large-object space, which only a full collection empties, and a client that polled the
 * list (bench/resync, or `watch podnet explain`) grew the daemon by tens of MiB. Anything else
 * (an array or a class at the top, anything with toJSON) is written whole.
 */
export function jsonChunks(body: unknown): string[] {
  const chunks: string[] = [];
  let current = '';
  const add = (text: string) => {
    if (current.length > 0 && current.length + text.length > chunkChars) {
      chunks.push(current);
      current = '';
    }
    current += text;
  };
  const ownJson = (value: unknown) => typeof (value as { toJSON?: unknown } | null)?.toJSON === 'function';
  const plain = (value: unknown): value is object => {
    if (typeof value !== 'object' || value === null || ownJson(value)) return false;
    const prototype = Object.getPrototypeOf(value) as unknown;
    return prototype === Object.prototype || prototype === null;
  };
  if (!plain(body)) add(JSON.stringify(body) ?? 'null');
  else {
    add('{');
    let first = true;
    for (const [key, value] of Object.entries(body)) {
      const list = Array.isArray(value) && !ownJson(value) ? (value as unknown[]) : undefined;
      const whole = list ? undefined : JSON.stringify(value);
      // What JSON.stringify leaves out of an object: undefined, functions, symbols.
      if (!list && whole === undefined) continue;
      add(`${first ? '' : ','}${JSON.stringify(key)}:`);
      first = false;
      if (!list) add(whole!);
      else {
        add('[');
        // An index, not forEach: a hole is null, as JSON.stringify writes it.
        for (let i = 0; i < list.length; i++) add(`${i === 0 ? '' : ','}${JSON.stringify(list[i]) ?? 'null'}`);
        add(']');
      }
    }
    add('}');
  }
  if (current.length > 0) chunks.push(current);
  return chunks;
}

/**
 * Makes way for the socket: refuses when a live daemon holds it, removes a stale socket, and
 * touches nothing else on the host. A folder that is not the daemon's user's alone is refused
 * (checkPrivateDir): whoever can write there can put their own socket in podnet's place.
 */
export async function claimSocketPath(socketPath: string): Promise<void> {
  const dir = dirname(socketPath);
  ensurePrivateDir(dir);
  checkPrivateDir(dir, 'socket folder');
  const existing = await lstat(socketPath).catch(() => undefined);
  if (existing && !existing.isSocket()) {
    throw new PodnetError('INVALID_REQUEST', `${socketPath} exists and is not a socket; podnet will not remove it`);
  }
  const live = await new Promise<boolean>((resolve) => {
    const probe = connect(socketPath);
    probe.once('connect', () => {
      probe.destroy();
      resolve(true);
    });
    probe.once('error', () => resolve(false));
  });
  if (live) throw new PodnetError('BUSY', `another podnet daemon is serving ${socketPath}`);
  await unlink(socketPath).catch((err: NodeJS.ErrnoException) => {
    if (err.code !== 'ENOENT') throw err;
  });
}

async function listenPrivately(server: Server, socketPath: string): Promise<void> {
  // The umask makes the socket 0600 from its first instant, with no window before the chmod.
  const previous = process.umask(0o177);
  try {
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => {
        server.off('error', reject);
        resolve();
      });
    });
  } finally {
    process.umask(previous);
  }
  await chmod(socketPath, 0o600);
}
