// A TCP port that is a Unix socket: run in a node's own network namespace, it gives that node the
// apiserver at 127.0.0.1:<port>, as the machine's namespace has it, through a Unix socket the test
// process serves (a socket file is reached from any network namespace). The apiserver's serving
// certificate names 127.0.0.1, so clients there verify it as on the machine.
// node forward.ts <listen address> <listen port> <unix socket>
import { connect, createServer } from 'node:net';

const [host, port, path] = process.argv.slice(2);
if (!host || !port || !path) throw new Error('usage: forward.ts <listen address> <listen port> <unix socket>');
createServer((client) => {
  const upstream = connect({ path });
  client.pipe(upstream).pipe(client);
  const close = () => {
    client.destroy();
    upstream.destroy();
  };
  client.on('error', close).on('close', close);
  upstream.on('error', close).on('close', close);
}).listen(Number(port), host, () => process.stdout.write(`forwarding ${host}:${port} to ${path}\n`));
