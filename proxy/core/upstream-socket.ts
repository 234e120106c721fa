/** How the relay and the proxy's own client dial a broker: plain TCP, or TLS with these settings. */
import net from 'node:net';
import tls from 'node:tls';
import type { HostPort } from './broker-map.js';

export interface UpstreamTls {
  ca?: Buffer;
  cert?: Buffer;
  key?: Buffer;
  rejectUnauthorized: boolean;
  servername?: string;
}

/**
 * Reads of one broker connection: each read's bytes, a view of a buffer that the next read
 * overwrites. True when some of those bytes are still referenced after the call (a socket write
 * that the kernel has not taken yet): the next read then goes into a new buffer.
 */
export type UpstreamReader = (chunk: Buffer) => boolean;

/** Bytes one read of a relayed broker connection can take (Node's own read size). */
const READ_BUFFER_BYTES = 64 * 1024;

/**
 * The read buffer of a relayed broker connection, used again for the next read unless the reader
 * still references it.
 *
 * Node allocates a new ArrayBuffer for every socket read by default. Its bytes live outside the
 * JavaScript heap, but V8 counts memory allocated outside the heap since the last full collection
 * against the old generation's limit, which for the proxy's small heap (~12 MB live) is only a
 * few MB above what it holds; relaying tens of MB a second used that up in a fraction of a second
 * and started full mark-compact collections one after another, long before the young generation
 * (where the read buffers' small JavaScript objects live) filled up and a scavenge could free them.
 */
class ReusedReadBuffer {
  private buffer: Buffer | null = null;
  private retained = false;
  private reader: UpstreamReader | null = null;
  /** Copies of what was read before a reader was set. */
  private early: Buffer[] = [];

  readonly onread = {
    buffer: (): Buffer => {
      if (this.buffer === null || this.retained) {
        this.buffer = Buffer.allocUnsafeSlow(READ_BUFFER_BYTES);
        this.retained = false;
      }
      return this.buffer;
    },
    callback: (bytes: number, buffer: Uint8Array): boolean => {
      const chunk = (buffer as Buffer).subarray(0, bytes);
      if (this.reader === null) this.early.push(Buffer.from(chunk));
      else this.retained = this.reader(chunk);
      return true;
    },
  };

  setReader(reader: UpstreamReader): void {
    this.reader = reader;
    const early = this.early;
    this.early = [];
    for (const chunk of early) reader(chunk);
  }
}

const reusedReads = new WeakMap<net.Socket, ReusedReadBuffer>();

/**
 * Connects to a broker. `reuseReadBuffer`: the connection's reads go into one buffer used again
 * while the reader does not keep its bytes (`readUpstream`), for connections that relay; TLS
 * connections read as Node does.
 */
export function connectUpstream(
  target: HostPort,
  tlsOptions: UpstreamTls | null,
  opts: { reuseReadBuffer?: boolean } = {},
): net.Socket {
  if (tlsOptions) {
    return tls.connect({
      host: target.host,
      port: target.port,
      ca: tlsOptions.ca,
      cert: tlsOptions.cert,
      key: tlsOptions.key,
      rejectUnauthorized: tlsOptions.rejectUnauthorized,
      servername: tlsOptions.servername ?? (net.isIP(target.host) ? undefined : target.host),
    });
  }
  if (!opts.reuseReadBuffer) return net.connect({ host: target.host, port: target.port });
  const reads = new ReusedReadBuffer();
  const socket = net.connect({ host: target.host, port: target.port, onread: reads.onread });
  reusedReads.set(socket, reads);
  return socket;
}

/** Hands every read of `socket` to `reader`, whether it reads into a reused buffer or as Node does. */
export function readUpstream(socket: net.Socket, reader: UpstreamReader): void {
  const reads = reusedReads.get(socket);
  if (reads) reads.setReader(reader);
  else socket.on('data', (chunk: Buffer) => reader(chunk));
}
