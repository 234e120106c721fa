// A bare relay on the proxy's own socket layer, for benchmarks: each client connection relayed both
// ways to a connection of its own to one upstream address, its reads into reused buffers
// (reused-reads.ts) and its writes below Node's Writable (socket-writer.ts), no Kafka code. Beside
// bare-relay.mjs (Node's pipe()) it shows what the proxy's socket path costs without its Kafka
// work, so the difference to the proxy side is the Kafka work. Runs from the sources with tsx as a
// loader (one process; nothing is compiled while it relays).
//
//   node --import tsx bench/raw-relay.ts <listen-port> <upstream-host> <upstream-port>
//   npx tsx bench/proxy.ts --external-side 'raw=node --import tsx bench/raw-relay.ts {listenPort} 127.0.0.1 {relayedBrokerPort}'
import net from 'node:net';
import {
  ReusedReadBuffer,
  registerReusedReads,
  readSocket,
  reuseAcceptedReads,
} from '../proxy/core/reused-reads.js';
import { SocketWriter } from '../proxy/core/socket-writer.js';

const [port, host, upstreamPort] = process.argv.slice(2);
net
  .createServer({ pauseOnConnect: true }, (client) => {
    const reads = new ReusedReadBuffer();
    const upstream = net.connect({ port: Number(upstreamPort), host, onread: reads.onread });
    registerReusedReads(upstream, reads);
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    reuseAcceptedReads(client);
    const toUpstream = new SocketWriter(upstream, () => client.resume());
    const toClient = new SocketWriter(client, () => upstream.resume());
    upstream.once('connect', () => {
      readSocket(client, (chunk) => {
        if (!toUpstream.write(chunk)) client.pause();
        return toUpstream.unsent > 0;
      });
      client.resume();
    });
    readSocket(upstream, (chunk) => {
      if (!toClient.write(chunk)) upstream.pause();
      return toClient.unsent > 0;
    });
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  })
  .listen(Number(port), '127.0.0.1', () => console.log('ready'));
