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
import { connectWithReusedReads, readSocket, reuseAcceptedReads } from '../proxy/core/reused-reads.js';
import type { ChunkReader } from '../proxy/core/reused-reads.js';
import { SocketWriter } from '../proxy/core/socket-writer.js';

/** One direction: each read of `from` written to `to`, `from` paused while `to` is full. */
class Direction implements ChunkReader {
  readonly writer: SocketWriter;

  constructor(
    private readonly from: net.Socket,
    to: net.Socket,
  ) {
    this.writer = new SocketWriter(to, () => from.resume());
  }

  readBytes(buffer: Buffer, end: number): boolean {
    if (!this.writer.write(end === buffer.length ? buffer : buffer.subarray(0, end))) this.from.pause();
    return this.writer.unsent > 0;
  }
}

const [port, host, upstreamPort] = process.argv.slice(2);
net
  .createServer({ pauseOnConnect: true }, (client) => {
    const upstream = connectWithReusedReads({ port: Number(upstreamPort), host });
    client.setNoDelay(true);
    upstream.setNoDelay(true);
    reuseAcceptedReads(client);
    const toUpstream = new Direction(client, upstream);
    const toClient = new Direction(upstream, client);
    upstream.once('connect', () => {
      readSocket(client, toUpstream);
      client.resume();
    });
    readSocket(upstream, toClient);
    client.on('error', () => upstream.destroy());
    upstream.on('error', () => client.destroy());
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
  })
  .listen(Number(port), '127.0.0.1', () => console.log('ready'));
