// The simplest relay Node can do, for benchmarks: each client connection piped both ways to a
// connection of its own to one upstream address, no Kafka code. The floor for any relay in Node.
//
//   node bench/bare-relay.mjs <listen-port> <upstream-host> <upstream-port>
import net from 'node:net';

const [port, host, upstreamPort] = process.argv.slice(2);
net
  .createServer((client) => {
    const upstream = net.connect(Number(upstreamPort), host);
    // As the proxy does: small requests and responses go out at once.
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    client.pipe(upstream);
    upstream.pipe(client);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
  })
  .listen(Number(port), '127.0.0.1', () => console.log('ready'));
