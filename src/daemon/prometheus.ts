// The daemon's metrics as Prometheus serves them: a registry fed by the reports of
// src/metrics.ts, gauges read from the daemon's parts at each scrape, and the /metrics server.
import { createServer, type Server } from 'node:http';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { PodnetError, type ErrorCode } from '../errors.ts';
import { writtenResources, type AttachmentState, type Metrics, type WatchedResource, type WrittenResource } from '../metrics.ts';

/** What the gauges read at each scrape. */
export interface MetricsSources {
  /** Each attachment the sandboxes want or have, with its Network and state. */
  attachments(): Iterable<{ network: string; state: AttachmentState }>;
  /** Entries the plugins spooled that the daemon has not read yet. */
  spoolBacklog(): Promise<number>;
  /** Files of the state dir set aside in quarantine/. */
  quarantined(): number;
}

/** The Prometheus registry of one daemon, and the reports that feed it. */
export class PrometheusMetrics implements Metrics {
  readonly registry = new Registry();
  private readonly passSeconds: Histogram<'resync'>;
  private readonly passSteps: Histogram<'resync'>;
  private readonly failures: Counter<'code'>;
  private readonly changes: Counter<'network' | 'change'>;
  private readonly pluginSeconds: Histogram<'plugin' | 'command'>;
  private readonly pluginFailures: Counter<'plugin' | 'command'>;
  private readonly apiWrites: Counter<'resource'>;
  private readonly apiFailures: Counter<'resource'>;
  private readonly watchEvents: Counter<'resource'>;

  constructor(sources: MetricsSources, version: string) {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    new Gauge({ name: 'podnet_build_info', help: 'podnet and Node versions of this daemon; always 1', labelNames: ['version', 'node'], registers }).set({ version, node: process.version }, 1);
    new Gauge({
      name: 'podnet_attachments',
      help: 'Attachments the sandboxes of this node want or have, by Network and state (ready, failing, pending)',
      labelNames: ['network', 'state'],
      registers,
      collect() {
        this.reset();
        for (const { network, state } of sources.attachments()) this.inc({ network, state });
      },
    });
    new Gauge({
      name: 'podnet_spool_backlog',
      help: 'Entries the CNI plugin spooled that the daemon has not read yet',
      registers,
      async collect() {
        this.set(await sources.spoolBacklog());
      },
    });
    new Gauge({
      name: 'podnet_quarantined_files',
      help: 'Files of the state dir set aside in quarantine/ (podnet status lists them)',
      registers,
      collect() {
        this.set(sources.quarantined());
      },
    });
    this.passSeconds = new Histogram({ name: 'podnet_pass_duration_seconds', help: 'How long a pass took, by whether it was a resync', labelNames: ['resync'], buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30], registers });
    this.passSteps = new Histogram({ name: 'podnet_pass_steps', help: 'Steps (ip, tc, sysctl, nft commands) a pass ran', labelNames: ['resync'], buckets: [0, 1, 5, 10, 50, 100, 500, 1000], registers });
    this.failures = new Counter({ name: 'podnet_sandbox_failures_total', help: "Sandbox reconciles that failed and were taken back, by podnet's error code", labelNames: ['code'], registers });
    this.changes = new Counter({ name: 'podnet_attachment_changes_total', help: 'Attachments of the kinds whose link podnet makes (every kind but cni) made (attached) or removed (detached), by Network; cni Networks\' are their plugin calls', labelNames: ['network', 'change'], registers });
    this.pluginSeconds = new Histogram({ name: 'podnet_plugin_call_duration_seconds', help: "Delegated CNI plugin calls' durations, by plugin and command", labelNames: ['plugin', 'command'], buckets: [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30], registers });
    this.pluginFailures = new Counter({ name: 'podnet_plugin_call_failures_total', help: 'Delegated CNI plugin calls that failed, by plugin and command', labelNames: ['plugin', 'command'], registers });
    this.apiWrites = new Counter({ name: 'podnet_api_writes_total', help: 'Writes to the API server that succeeded (network-status patches, status applies, Events), by resource', labelNames: ['resource'], registers });
    this.apiFailures = new Counter({ name: 'podnet_api_write_failures_total', help: 'Writes to the API server that failed, by resource', labelNames: ['resource'], registers });
    this.watchEvents = new Counter({ name: 'podnet_api_watch_events_total', help: "Objects the daemon's informers were told of by the API server (each watch event, and each object a list added, changed or removed), by resource", labelNames: ['resource'], registers });
    // Served at 0 from the start: a daemon none of whose writes ever succeeded (RBAC wrong since the
    // install) must still have the writes its failure ratio divides by (daemonset-metrics/alerts.yaml).
    for (const resource of writtenResources) {
      this.apiWrites.inc({ resource }, 0);
      this.apiFailures.inc({ resource }, 0);
    }
  }

  passEnded({ seconds, steps, resync }: { seconds: number; steps: number; resync: boolean }): void {
    const labels = { resync: String(resync) };
    this.passSeconds.observe(labels, seconds);
    this.passSteps.observe(labels, steps);
  }

  sandboxFailed(code: ErrorCode): void {
    this.failures.inc({ code });
  }

  attachmentsChanged(network: string, change: 'attached' | 'detached'): void {
    this.changes.inc({ network, change });
  }

  pluginCalled({ plugin, command, seconds, ok }: { plugin: string; command: string; seconds: number; ok: boolean }): void {
    this.pluginSeconds.observe({ plugin, command }, seconds);
    if (!ok) this.pluginFailures.inc({ plugin, command });
  }

  apiWritten(resource: WrittenResource): void {
    this.apiWrites.inc({ resource });
  }

  apiWriteFailed(resource: WrittenResource): void {
    this.apiFailures.inc({ resource });
  }

  watchEventReceived(resource: WatchedResource): void {
    this.watchEvents.inc({ resource });
  }
}

export interface MetricsServer {
  /** Where it listens, the port chosen when 0 was asked. */
  address: { host: string; port: number };
  close(): Promise<void>;
}

/** Serves GET /metrics of `metrics` on `address`; anything else is 404. */
export async function serveMetrics(metrics: PrometheusMetrics, address: { host: string; port: number }): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' || (req.url !== '/metrics' && !req.url?.startsWith('/metrics?'))) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('podnet serves /metrics only\n');
      return;
    }
    metrics.registry.metrics().then(
      (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
      (err: Error) => res.writeHead(500, { 'content-type': 'text/plain' }).end(`${err.message}\n`),
    );
  });
  // A scraper that stops reading holds nothing for long.
  server.requestTimeout = 10_000;
  server.maxConnections = 16;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) => reject(new PodnetError('INVALID_CONFIG', `cannot serve metrics on ${address.host}:${address.port}: ${err.code ?? err.message}`)));
    server.listen(address.port, address.host, () => resolve());
  });
  const bound = server.address();
  const port = typeof bound === 'object' && bound !== null ? bound.port : address.port;
  return {
    address: { host: address.host, port },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
