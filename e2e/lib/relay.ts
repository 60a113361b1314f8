// A byte relay between a TCP address and a unix socket, for a node in a netns of its own (the
// two-node e2e's second node, e2e/cluster/node.ts, and the benchmarks' daemons acting as nodes): a
// TCP address lives in one netns, a unix socket's path is reached from every netns that shares
// the mount namespace. So a node in its own netns reaches the API server on the machine's
// 127.0.0.1 through 127.0.0.1 of its own (same port, same kubeconfig, the serving certificate
// still valid), and a benchmark reaches a daemon's metrics there. Run in a netns as a process of
// its own:
//   ip netns exec NS node e2e/lib/relay.ts FROM=TO [FROM=TO ...]
// with each endpoint tcp:HOST:PORT or unix:PATH; it prints "listening" once every FROM listens.
import { connect, createServer, type Server } from 'node:net';
import { rmSync } from 'node:fs';

type Endpoint = { host: string; port: number } | { path: string };

function endpoint(text: string): Endpoint {
  const tcp = /^tcp:(.+):(\d{1,5})$/.exec(text);
  if (tcp) return { host: tcp[1]!, port: Number(tcp[2]) };
  if (text.startsWith('unix:/')) return { path: text.slice('unix:'.length) };
  throw new Error(`an endpoint is tcp:HOST:PORT or unix:/PATH, not "${text}"`);
}

/** Listens on `from` and pipes each connection to a new one to `to`; resolves once it listens. */
export function relay(from: string, to: string): Promise<Server> {
  const [listen, target] = [endpoint(from), endpoint(to)];
  if ('path' in listen) rmSync(listen.path, { force: true });
  const server = createServer((client) => {
    const upstream = connect(target);
    client.pipe(upstream).pipe(client);
    const close = () => {
      client.destroy();
      upstream.destroy();
    };
    client.on('error', close).on('close', close);
    upstream.on('error', close).on('close', close);
  });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(listen, () => resolve(server));
  });
}

if (import.meta.main) {
  const pairs = process.argv.slice(2).map((arg) => arg.split('='));
  if (pairs.length === 0 || pairs.some((p) => p.length !== 2)) {
    console.error('usage: relay.ts FROM=TO [FROM=TO ...] (tcp:HOST:PORT or unix:/PATH)');
    process.exit(2);
  }
  await Promise.all(pairs.map(([from, to]) => relay(from!, to!)));
  console.log('listening');
}
