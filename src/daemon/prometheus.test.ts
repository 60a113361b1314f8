import t from 'tap';
import { parseListenAddress } from './metrics-address.ts';
import { PrometheusMetrics, serveMetrics } from './prometheus.ts';

/** A scrape as Prometheus makes it: GET /metrics, the exposition text. */
async function scrape(port: number, path = '/metrics'): Promise<{ status: number; text: string; type: string | null }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`);
  return { status: res.status, text: await res.text(), type: res.headers.get('content-type') };
}

/** The value of one sample line of `text`, or undefined when there is none. */
function sample(text: string, line: string): number | undefined {
  const found = text.split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.slice(line.length + 1));
}

t.test('GET /metrics serves what the reports and the gauges say, in the exposition format', async (t) => {
  let spooled = 3;
  const metrics = new PrometheusMetrics(
    {
      attachments: () => [
        { network: 'blue', state: 'ready' },
        { network: 'blue', state: 'ready' },
        { network: 'red', state: 'failing' },
      ],
      spoolBacklog: async () => spooled,
      quarantined: () => 1,
    },
    '0.1.0',
  );
  const server = await serveMetrics(metrics, { host: '127.0.0.1', port: 0 });
  t.teardown(() => server.close());

  metrics.passEnded({ seconds: 0.2, steps: 7, resync: false });
  metrics.sandboxFailed('IO_FAILURE');
  metrics.attachmentsChanged('blue', 'attached');
  metrics.attachmentsChanged('blue', 'attached');
  metrics.attachmentsChanged('blue', 'detached');
  metrics.pluginCalled({ plugin: 'bridge', command: 'ADD', seconds: 0.05, ok: true });
  metrics.pluginCalled({ plugin: 'bridge', command: 'ADD', seconds: 2, ok: false });
  metrics.apiWritten('podnetworkconfigs');
  metrics.apiWritten('events');
  metrics.apiWritten('events');
  metrics.apiWriteFailed('pods');
  metrics.watchEventReceived('pods');

  const { status, text, type } = await scrape(server.address.port);
  t.equal(status, 200);
  t.match(type, /^text\/plain; version=0\.0\.4/);
  t.equal(sample(text, 'podnet_build_info{version="0.1.0",node="' + process.version + '"}'), 1);
  t.equal(sample(text, 'podnet_attachments{network="blue",state="ready"}'), 2);
  t.equal(sample(text, 'podnet_attachments{network="red",state="failing"}'), 1);
  t.equal(sample(text, 'podnet_spool_backlog'), 3);
  t.equal(sample(text, 'podnet_quarantined_files'), 1);
  t.equal(sample(text, 'podnet_pass_duration_seconds_count{resync="false"}'), 1);
  t.equal(sample(text, 'podnet_pass_steps_sum{resync="false"}'), 7);
  t.equal(sample(text, 'podnet_sandbox_failures_total{code="IO_FAILURE"}'), 1);
  t.equal(sample(text, 'podnet_attachment_changes_total{network="blue",change="attached"}'), 2);
  t.equal(sample(text, 'podnet_attachment_changes_total{network="blue",change="detached"}'), 1);
  t.equal(sample(text, 'podnet_plugin_call_duration_seconds_count{plugin="bridge",command="ADD"}'), 2);
  t.equal(sample(text, 'podnet_plugin_call_failures_total{plugin="bridge",command="ADD"}'), 1);
  t.equal(sample(text, 'podnet_api_writes_total{resource="podnetworkconfigs"}'), 1);
  t.equal(sample(text, 'podnet_api_writes_total{resource="events"}'), 2);
  t.equal(sample(text, 'podnet_api_write_failures_total{resource="pods"}'), 1);
  t.equal(sample(text, 'podnet_api_writes_total{resource="pods"}'), 0, 'a resource none of whose writes succeeded is served at 0: the failure ratio has its denominator');
  t.equal(sample(text, 'podnet_api_write_failures_total{resource="networks"}'), 0);
  t.equal(sample(text, 'podnet_api_watch_events_total{resource="pods"}'), 1);
  t.ok(sample(text, 'process_resident_memory_bytes')! > 0, "and the process's own (memory, CPU, event loop)");

  spooled = 0;
  t.equal(sample((await scrape(server.address.port)).text, 'podnet_spool_backlog'), 0, 'gauges are read at each scrape');
  t.equal((await scrape(server.address.port, '/')).status, 404, 'nothing but /metrics is served');
});

t.test('a metrics address is HOST:PORT, else an error naming the flag', async (t) => {
  t.same(parseListenAddress('127.0.0.1:9109', '--metrics-address'), { host: '127.0.0.1', port: 9109 });
  t.same(parseListenAddress('[::1]:9109', '--metrics-address'), { host: '::1', port: 9109 });
  t.same(parseListenAddress('fd00:10::7:9109', '--metrics-address'), { host: 'fd00:10::7', port: 9109 }, 'a pod IP of IPv6 as the downward API gives it, unbracketed');
  for (const bad of ['9109', 'localhost', '127.0.0.1:', '127.0.0.1:70000', 'http://127.0.0.1:9109', 'node-a:9109', ':9109']) {
    t.throws(() => parseListenAddress(bad, '--metrics-address'), { code: 'INVALID_CONFIG', message: /^--metrics-address ".*" is not HOST:PORT/ }, bad);
  }
});

t.test('an address already in use is a clear error, not a crash', async (t) => {
  const metrics = new PrometheusMetrics({ attachments: () => [], spoolBacklog: async () => 0, quarantined: () => 0 }, '0.1.0');
  const first = await serveMetrics(metrics, { host: '127.0.0.1', port: 0 });
  t.teardown(() => first.close());
  await t.rejects(serveMetrics(metrics, first.address), { code: 'INVALID_CONFIG', message: `cannot serve metrics on 127.0.0.1:${first.address.port}: EADDRINUSE` });
});
