// The daemon's edge to the Kubernetes API: JSON requests over HTTPS with the credentials of a
// kubeconfig or of the pod's service account, and watches (client-node's Watch) for the informers.
// Requests go through node:https rather than the generated clients: podnet needs a handful of
// paths, and merge and apply patches on subresources, which those clients make awkward.
import { KubeConfig, Watch } from '@kubernetes/client-node';
import { Agent, request, type RequestOptions } from 'node:https';
import { Agent as PlainAgent, request as plainRequest } from 'node:http';
import { PodnetError } from '../errors.ts';

export type Json = Record<string, unknown>;

export const mergePatch = 'application/merge-patch+json';
export const applyPatch = 'application/apply-patch+yaml';
export const jsonPatch = 'application/json-patch+json';

/**
 * What the API server sends for a list and a watch asked with these: each object's metadata alone
 * (PartialObjectMetadata), for a cache that needs no more of a large object, such as a Node's.
 */
export const metadataOnly = {
  list: 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1',
  watch: 'application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1',
} as const;

/** How long a request may go unanswered once it has its connection; a watch is not a request. */
const requestTimeoutMs = 15_000;

/**
 * How long a request may take from its call, the wait for a connection included: an API server
 * that answers nothing must not hold a pass's writes queued for minutes, nor the daemon's stop.
 */
const requestDeadlineMs = 30_000;

/**
 * Connections a daemon opens for its requests, kept alive; more requests wait their turn. A pass
 * over hundreds of pods makes a write for each (network-status, Events): all at once, every node
 * of a cluster would open hundreds of TLS connections, spend its CPU on handshakes and meet the
 * API server's 429 (bench/kube-scale found both at 11 nodes of 50 pods). A kubeconfig's proxy-url
 * keeps client-node's proxy agent, unbounded.
 */
const maxConnections = 4;

/**
 * The kubeconfig file given, else the pod's service account (`cluster`, the daemon) or what a
 * person's kubectl reads (`default`: $KUBECONFIG, ~/.kube/config); a failure names which.
 */
function loadKubeConfig(kubeconfig: string | undefined, otherwise: 'cluster' | 'default'): KubeConfig {
  const config = new KubeConfig();
  try {
    if (kubeconfig) config.loadFromFile(kubeconfig);
    else if (otherwise === 'cluster') config.loadFromCluster();
    else config.loadFromDefault();
  } catch (err) {
    const what = kubeconfig ? `the kubeconfig ${kubeconfig}` : otherwise === 'cluster' ? 'the in-cluster config' : 'a kubeconfig ($KUBECONFIG or ~/.kube/config)';
    throw new PodnetError('INVALID_CONFIG', `cannot load ${what}: ${(err as Error).message}`);
  }
  return config;
}

export class KubeApi {
  readonly server: string;
  readonly watch: Watch;
  /** A watch whose events carry their objects' metadata alone (metadataOnly). */
  readonly metadataWatch: Watch;
  private readonly config: KubeConfig;
  private readonly agents = { tls: new Agent({ keepAlive: true, maxSockets: maxConnections }), plain: new PlainAgent({ keepAlive: true, maxSockets: maxConnections }) };
  /** Whether the kubeconfig's cluster goes through a proxy: then its agent is client-node's. */
  private readonly proxied: boolean;
  /** requestDeadlineMs, shorter in tests. */
  private readonly deadlineMs: number;

  private constructor(config: KubeConfig, deadlineMs: number) {
    const cluster = config.getCurrentCluster();
    if (!cluster) throw new PodnetError('INVALID_CONFIG', 'the kubeconfig has no current cluster');
    this.config = config;
    this.deadlineMs = deadlineMs;
    this.proxied = cluster.proxyUrl !== undefined && cluster.proxyUrl !== '';
    this.server = cluster.server.replace(/\/+$/, '');
    this.watch = new Watch(config);
    // The same config, its requests asking for metadata alone: client-node's Watch takes no header of its own.
    const asking = Object.create(config) as KubeConfig;
    asking.applySecurityAuthentication = async (context) => {
      await config.applySecurityAuthentication(context);
      context.setHeaderParam('Accept', metadataOnly.watch);
    };
    this.metadataWatch = new Watch(asking);
  }

  /** From a kubeconfig file, or (none given) the pod's service account: how the DaemonSet runs it. */
  static load(kubeconfig: string | undefined, { deadlineMs = requestDeadlineMs }: { deadlineMs?: number } = {}): KubeApi {
    const config = loadKubeConfig(kubeconfig, 'cluster');
    if (!kubeconfig && !process.env['KUBERNETES_SERVICE_HOST']) {
      throw new PodnetError('INVALID_CONFIG', 'no --kubeconfig given and not running in a pod (KUBERNETES_SERVICE_HOST is unset)');
    }
    return new KubeApi(config, deadlineMs);
  }

  /**
   * As a person's kubectl would: the kubeconfig given, else $KUBECONFIG or ~/.kube/config (else the
   * pod's service account), with `context` or its current one; and the namespace that context names.
   */
  static forUser({ kubeconfig, context }: { kubeconfig?: string | undefined; context?: string | undefined }): { api: KubeApi; namespace: string } {
    const config = loadKubeConfig(kubeconfig, 'default');
    if (context !== undefined) {
      if (!config.getContextObject(context)) throw new PodnetError('INVALID_CONFIG', `context "${context}" does not exist`);
      config.setCurrentContext(context);
    }
    const namespace = config.getContextObject(config.getCurrentContext())?.namespace || 'default';
    return { api: new KubeApi(config, requestDeadlineMs), namespace };
  }

  /** `accept`: another representation than plain JSON (metadataOnly.list). */
  get<T = Json>(path: string, accept?: string): Promise<T> {
    return this.send('GET', path, undefined, undefined, accept) as Promise<T>;
  }

  /** A JSON merge patch (metadata.annotations of a pod). */
  merge(path: string, body: Json): Promise<Json> {
    return this.send('PATCH', path, body, mergePatch);
  }

  /** Server-side apply as `fieldManager`; forced: the fields this manager applies are its own. */
  apply(path: string, body: Json, fieldManager: string): Promise<Json> {
    return this.send('PATCH', `${path}?fieldManager=${encodeURIComponent(fieldManager)}&force=true`, body, applyPatch);
  }

  /** A JSON patch (RFC 6902); a `test` of metadata.resourceVersion among its operations makes it a write over what was read. */
  patch(path: string, operations: readonly Json[], fieldManager: string): Promise<Json> {
    return this.send('PATCH', `${path}?fieldManager=${encodeURIComponent(fieldManager)}`, operations, jsonPatch);
  }

  post(path: string, body: Json): Promise<Json> {
    return this.send('POST', path, body, 'application/json');
  }

  /** Deletes the object at `path`; `uid`: only when it is still that very object (a precondition). */
  delete(path: string, uid?: string): Promise<Json> {
    return this.send('DELETE', path, uid === undefined ? undefined : { kind: 'DeleteOptions', apiVersion: 'v1', preconditions: { uid } }, 'application/json');
  }

  private async send(method: string, path: string, body?: Json | readonly Json[], contentType?: string, accept = 'application/json'): Promise<Json> {
    const options: RequestOptions = { method, headers: { accept }, timeout: requestTimeoutMs };
    await this.config.applyToHTTPSOptions(options);
    const payload = body === undefined ? undefined : JSON.stringify(body);
    if (payload !== undefined) options.headers = { ...options.headers, 'content-type': contentType!, 'content-length': Buffer.byteLength(payload) };
    const url = `${this.server}${path}`;
    const tls = url.startsWith('https:');
    if (!this.proxied) options.agent = tls ? this.agents.tls : this.agents.plain;
    const send = tls ? request : plainRequest;
    const { status, text } = await new Promise<{ status: number; text: string }>((resolve, reject) => {
      const req = send(url, options, (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
        res.on('error', reject);
      });
      const deadline = setTimeout(() => req.destroy(new Error(`no answer in ${this.deadlineMs / 1000}s, the wait for a connection included`)), this.deadlineMs);
      req.on('close', () => clearTimeout(deadline));
      req.on('timeout', () => req.destroy(new Error(`no answer in ${requestTimeoutMs / 1000}s`)));
      req.on('error', (err) => reject(new PodnetError('NOT_AVAILABLE', `${method} ${path}: the API server is unreachable: ${err.message}`)));
      req.end(payload);
    });
    let answer: Json = {};
    try {
      answer = text === '' ? {} : (JSON.parse(text) as Json);
    } catch {
      // A proxy's HTML error page, say: the status code below tells what happened.
    }
    if (status >= 200 && status < 300) return answer;
    const message = `${method} ${path}: ${status} ${typeof answer['message'] === 'string' ? answer['message'] : text.slice(0, 200)}`;
    // The Status's reason (NotFound, Forbidden, ...), as kubectl tells a server's error.
    const reason = typeof answer['reason'] === 'string' ? answer['reason'] : undefined;
    throw new PodnetError(status === 404 ? 'NOT_FOUND' : status === 409 ? 'CONFLICT' : 'IO_FAILURE', message, reason);
  }
}
