// The daemon's socket: HTTP/1.1 on a unix socket only root can reach (docs/adr/0002). Bodies are
// JSON, bounded in size and validated against schemas/; errors go out as ErrorBody with a code.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect } from 'node:net';
import { chmod, lstat, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { PodnetError, toPodnetError } from '../errors.ts';
import { routes } from '../protocol/paths.ts';
import { parseDocument, type AttachmentKey, type AttachmentList, type DaemonStatus, type DiffResponse, type ErrorBody, type Network, type PodNetworkConfig, type SandboxList } from '../protocol/validate.ts';
import { ensurePrivateDir } from '../registry/atomic-file.ts';
import type { Registry } from '../registry/registry.ts';
import { isNetworkNamespace, networkNamespaceCheck } from '../netns/probe.ts';
import type { Logger } from '../log.ts';

export interface ServerOptions {
  socketPath: string;
  registry: Registry;
  version: string;
  log: Logger;
  /** Largest request body accepted. */
  maxBodyBytes?: number;
  /** Connections served at once; more are refused until one closes. */
  maxConnections?: number;
  /** What the reconciler knows of each sandbox (standalone mode), for `podnet explain`. */
  sandboxes?: () => SandboxList;
  /** What the reconciler would do with these documents on top (standalone mode), for `podnet diff`. */
  diff?: (documents: (Network | PodNetworkConfig)[]) => Promise<DiffResponse>;
}

export interface RunningServer {
  close(): Promise<void>;
}

type Handler = (req: IncomingMessage, params: string[]) => Promise<{ status: number; body: unknown }>;

interface Route {
  pattern: RegExp;
  methods: Partial<Record<string, Handler>>;
}

export async function startServer(opts: ServerOptions): Promise<RunningServer> {
  const { registry } = opts;
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
    try {
      return JSON.parse(Buffer.concat(chunks).toString('utf8'));
    } catch (err) {
      throw new PodnetError('INVALID_REQUEST', `request body is not JSON: ${(err as Error).message}`);
    }
  };

  const decodeSegment = (segment: string | undefined): string => {
    try {
      return decodeURIComponent(segment ?? '');
    } catch {
      throw new PodnetError('INVALID_REQUEST', `request path segment "${segment}" is not valid percent-encoding`);
    }
  };
  const keyFromPath = (params: string[]): AttachmentKey =>
    parseDocument(
      'AttachmentKey',
      { containerId: decodeSegment(params[0]), ifname: decodeSegment(params[1]) },
      'attachment in the request path',
    );

  const view = async (key: AttachmentKey) => {
    await registry.drainSpool();
    const record = registry.get(key);
    if (!record) throw new PodnetError('NOT_FOUND', `no attachment recorded for container ${key.containerId} interface ${key.ifname}`);
    return { record, netnsExists: isNetworkNamespace(record.netns) };
  };

  const table: Route[] = [
    { pattern: /^\/healthz$/, methods: { GET: async () => ({ status: 200, body: { status: 'ok' } }) } },
    {
      // Ready while the daemon can apply changes: its records and the plugins' spool are writable.
      pattern: /^\/readyz$/,
      methods: {
        GET: async () => {
          const problem = await registry.writableProblem();
          if (problem) throw new PodnetError('NOT_AVAILABLE', `not ready: ${problem}`);
          return { status: 200, body: { status: 'ready' } };
        },
      },
    },
    {
      pattern: /^\/v1\/status$/,
      methods: {
        GET: async () => {
          const status: DaemonStatus = {
            version: opts.version,
            attachments: registry.size,
            spoolPending: await registry.spoolPending(),
            quarantined: [...registry.quarantined()],
          };
          return { status: 200, body: status };
        },
      },
    },
    {
      pattern: /^\/v1\/attachments$/,
      methods: {
        GET: async () => {
          await registry.drainSpool();
          const netnsExists = networkNamespaceCheck();
          const items = registry.list().map((record) => ({ record, netnsExists: netnsExists(record.netns) }));
          const list: AttachmentList = { items };
          return { status: 200, body: list };
        },
      },
    },
    {
      pattern: /^\/v1\/attachments\/([^/]+)\/([^/]+)$/,
      methods: {
        GET: async (_req, params) => ({ status: 200, body: await view(keyFromPath(params)) }),
        PUT: async (req, params) => {
          const key = keyFromPath(params);
          const record = parseDocument('AttachmentRecord', await readJson(req), 'attachment record');
          if (record.containerId !== key.containerId || record.ifname !== key.ifname) {
            throw new PodnetError('INVALID_REQUEST', `record of ${record.containerId}/${record.ifname} sent to the path of ${key.containerId}/${key.ifname}`);
          }
          await registry.apply({ op: 'add', record });
          return { status: 200, body: { record, netnsExists: isNetworkNamespace(record.netns) } };
        },
        DELETE: async (_req, params) => {
          const changes = await registry.apply({ op: 'del', key: keyFromPath(params) });
          return { status: 200, body: { removed: changes.removed.length > 0 } };
        },
      },
    },
    {
      pattern: /^\/v1\/sandboxes$/,
      methods: {
        GET: async () => {
          if (!opts.sandboxes) throw new PodnetError('NOT_FOUND', 'this daemon follows no documents (start it with --config-dir)');
          return { status: 200, body: opts.sandboxes() };
        },
      },
    },
    {
      pattern: /^\/v1\/diff$/,
      methods: {
        POST: async (req) => {
          if (!opts.diff) throw new PodnetError('NOT_FOUND', 'this daemon follows no documents (start it with --config-dir)');
          const request = parseDocument('DiffRequest', await readJson(req), 'diff request');
          // Each document against its own kind's schema: the request's schema only names the kinds.
          const documents = request.documents.map((doc, i) => parseDocument(doc.kind, doc, `diff request document ${i + 1}`));
          return { status: 200, body: await opts.diff(documents) };
        },
      },
    },
    {
      pattern: /^\/v1\/gc$/,
      methods: {
        POST: async (req) => {
          const gc = parseDocument('GcRequest', await readJson(req), 'GC request');
          const changes = await registry.apply({ op: 'gc', gc });
          return { status: 200, body: { removed: changes.removed } };
        },
      },
    },
  ];

  const send = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) => {
    const text = `${JSON.stringify(body)}\n`;
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers });
    res.end(text);
  };

  const handle = async (req: IncomingMessage, res: ServerResponse) => {
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const method = req.method ?? 'GET';
    try {
      const route = table.find((r) => r.pattern.test(path));
      if (!route) throw new PodnetError('NOT_FOUND', `no such path ${path}; see ${routes.attachments}, ${routes.gc}, ${routes.status}`);
      const handler = route.methods[method];
      if (!handler) {
        res.setHeader('allow', Object.keys(route.methods).join(', '));
        throw new PodnetError('METHOD_NOT_ALLOWED', `${method} is not allowed on ${path}`);
      }
      const params = route.pattern.exec(path)?.slice(1) ?? [];
      const { status, body } = await handler(req, params);
      send(res, status, body);
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
  server.maxConnections = opts.maxConnections ?? 64;
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

/**
 * Makes way for the socket: refuses when a live daemon holds it, removes a stale socket, and
 * touches nothing else on the host. A folder that others may write into (without the sticky bit)
 * is refused: whoever can write there can put their own socket in podnet's place.
 */
export async function claimSocketPath(socketPath: string): Promise<void> {
  const dir = dirname(socketPath);
  ensurePrivateDir(dir);
  const folder = await lstat(dir);
  if ((folder.mode & 0o022) !== 0 && (folder.mode & 0o1000) === 0) {
    throw new PodnetError('INVALID_REQUEST', `socket folder ${dir} is writable by others (mode ${(folder.mode & 0o7777).toString(8)}); give it 0700 or choose another --socket`);
  }
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
