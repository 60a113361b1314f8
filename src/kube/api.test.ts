import t, { type Test } from 'tap';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { KubeApi } from './api.ts';

/** An API server stand-in on 127.0.0.1 (plain HTTP, as a kubeconfig with insecure-skip-tls-verify allows), and a kubeconfig naming it. */
async function apiServer(t: Test, handle: (req: IncomingMessage, res: ServerResponse) => void) {
  const server = createServer(handle);
  let open = 0;
  let most = 0;
  server.on('connection', (socket) => {
    most = Math.max(most, ++open);
    socket.on('close', () => open--);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.teardown(() => new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  }));
  const { port } = server.address() as { port: number };
  const folder = await mkdtemp(join(tmpdir(), 'podnet-kubeapi-'));
  t.teardown(() => rm(folder, { recursive: true, force: true }));
  const kubeconfig = join(folder, 'kubeconfig');
  await writeFile(kubeconfig, JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'c', cluster: { server: `http://127.0.0.1:${port}`, 'insecure-skip-tls-verify': true } }],
    users: [{ name: 'u', user: { token: 'x' } }],
    contexts: [{ name: 'ctx', context: { cluster: 'c', user: 'u' } }],
    'current-context': 'ctx',
  }));
  return { kubeconfig, mostConnections: () => most };
}

t.test('a burst of requests shares at most 4 connections, kept alive: the rest wait their turn', async (t) => {
  const { kubeconfig, mostConnections } = await apiServer(t, (_req, res) => setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'), 20));
  const api = KubeApi.load(kubeconfig);
  await Promise.all(Array.from({ length: 40 }, (_, i) => api.merge(`/api/v1/namespaces/a/pods/p${i}`, { metadata: {} })));
  t.equal(mostConnections(), 4, '40 writes, 4 connections');
});

t.test('a request waiting for a connection is bounded too: an API server that answers nothing fails it at the deadline', async (t) => {
  const { kubeconfig } = await apiServer(t, () => undefined);
  const api = KubeApi.load(kubeconfig, { deadlineMs: 300 });
  const started = Date.now();
  const results = await Promise.allSettled(Array.from({ length: 8 }, (_, i) => api.get(`/api/v1/pods/p${i}`)));
  t.ok(results.every((r) => r.status === 'rejected' && /no answer in 0\.3s, the wait for a connection included/.test((r.reason as Error).message)), 'each fails saying why, queued or not');
  t.ok(Date.now() - started < 2000, 'all within the deadline of their call, not one deadline after another');
});
