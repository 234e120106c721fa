/**
 * Socket reads into one buffer used again for the next read, for the relay's broker connections
 * (dialled with Node's `onread` option) and its plain TCP client connections (accepted sockets,
 * which Node gives no such option: see `reuseAcceptedReads`).
 *
 * Node allocates a new ArrayBuffer for every socket read by default. Its bytes live outside the
 * JavaScript heap, but V8 counts memory allocated outside the heap since the last full collection
 * against the old generation's limit, which for the proxy's small heap (~12 MB live) is only a
 * few MB above what it holds; relaying tens of MB a second used that up in a fraction of a second
 * and started full mark-compact collections one after another, long before the young generation
 * (where the read buffers' small JavaScript objects live) filled up and a scavenge could free them.
 */
import net from 'node:net';
import type { Socket } from 'node:net';

/**
 * What reads one socket: each read's bytes, `buffer[0, end)`, in a buffer that the next read may
 * overwrite. The read buffer itself and the read's end, not a view of just the bytes read: such a
 * view would be an object per read that no reader needs, as the readers make views of the frames
 * they find in it anyway. Bytes of `buffer` from `end` on are not the read's. `readBytes`
 * answers true when some of the bytes are still referenced after the call (a socket write that the
 * kernel has not taken yet): the next read then goes into a new buffer.
 *
 * An object with a method, not a closure: the read path is compiled once for every connection. A
 * closure per connection, called from every read, is what V8's optimized read path then inlines
 * and embeds, connection and all; once that connection is gone, V8 throws the whole compiled path
 * away, and the next connection runs unoptimized until it is compiled again (docs/benchmarks.md).
 */
export interface ChunkReader {
  readBytes(buffer: Buffer, end: number): boolean;
}

/**
 * Bytes a broker connection's first read can take. Most connections are idle most of their life,
 * and an idle one has read only an answer or two (ApiVersions: 500-900 bytes from Kafka 4): the
 * pages of its read buffer that a read wrote stay resident as long as the connection lives, one or
 * two 4 KB pages per socket in a 64 KB buffer, where small buffers share pages (docs/benchmarks.md,
 * memory per connection). A read that fills it grows the buffer to READ_BUFFER_BYTES for the next
 * one: one more read, once per connection that carries traffic.
 */
const FIRST_READ_BUFFER_BYTES = 1024;

/**
 * The same for a client connection, whose first reads are requests: ApiVersions (under 100 bytes
 * from the Java client and librdkafka) and Metadata for a few topics. Half the broker side's: the
 * buffers are malloc'ed side by side, so every byte of them is resident, and 512 fewer per
 * connection is about 0.5 MB per 1,000 idle connections.
 */
const FIRST_CLIENT_READ_BUFFER_BYTES = 512;

/** Bytes a read can take once a read filled the first buffer, and again after small reads (Node's own read size). */
const READ_BUFFER_BYTES = 64 * 1024;

/**
 * Bytes a broker connection's read can take once reads fill the buffer: a broker sends Fetch
 * responses of up to a MB per partition, and four times fewer reads (and writes of what they read)
 * per MB relayed cost measurably less CPU (docs/benchmarks.md).
 */
export const BULK_READ_BUFFER_BYTES = 256 * 1024;

/** Reads in a row that would have fitted READ_BUFFER_BYTES, after which a grown buffer shrinks back. */
const SMALL_READS_TO_SHRINK = 64;

/**
 * The read buffer of one socket, used again for the next read unless the reader still references
 * it. It starts at FIRST_READ_BUFFER_BYTES, grows to Node's read size when a read fills it and on
 * to `maxBytes` when a read fills that, and shrinks back to Node's read size after
 * SMALL_READS_TO_SHRINK small reads (Netty's adaptive receive buffers do the same): only a
 * connection that carries bulk traffic holds the larger buffer, and an idle one a small one.
 */
class ReusedReadBuffer {
  /** Where reads go now. */
  buffer: Buffer;
  private retained = false;
  /** The size the next read's buffer should have, when it is not the current one's. */
  private resizeTo = 0;
  private smallReads = 0;
  private reader: ChunkReader | null = null;
  /** Copies of what was read before a reader was set (made only when that happens). */
  private early: Buffer[] | null = null;

  constructor(
    private readonly maxBytes: number,
    firstBytes: number,
  ) {
    this.buffer = Buffer.allocUnsafeSlow(firstBytes);
  }

  /** `bytes` were read into `buffer`, the current one. */
  received(bytes: number, buffer: Uint8Array): void {
    if (this.reader === null) (this.early ??= []).push(Buffer.from(buffer.subarray(0, bytes)));
    else this.retained = this.reader.readBytes(buffer as Buffer, bytes);
    if (bytes > READ_BUFFER_BYTES) {
      this.smallReads = 0;
    } else if (bytes === buffer.length) {
      // Filled: more was probably waiting. Grow one step (the first buffer to Node's read size).
      if (bytes < this.maxBytes)
        this.resizeTo = bytes < READ_BUFFER_BYTES ? READ_BUFFER_BYTES : this.maxBytes;
    } else if (buffer.length > READ_BUFFER_BYTES && ++this.smallReads >= SMALL_READS_TO_SHRINK) {
      this.smallReads = 0;
      this.resizeTo = READ_BUFFER_BYTES;
    }
  }

  /**
   * A new buffer for the next read when the reader still references the current one or it is to
   * change size, else undefined (keep it).
   */
  next(): Buffer | undefined {
    if (!this.retained && this.resizeTo === 0) return undefined;
    const size = this.resizeTo === 0 ? this.buffer.length : this.resizeTo;
    this.retained = false;
    this.resizeTo = 0;
    this.buffer = Buffer.allocUnsafeSlow(size);
    return this.buffer;
  }

  setReader(reader: ChunkReader): void {
    this.reader = reader;
    const early = this.early;
    this.early = null;
    for (const chunk of early ?? []) reader.readBytes(chunk, chunk.length);
  }
}

/** A socket's reused reads, as an own property of the socket (read on every read). */
const READS = Symbol('kop.reusedReads');

interface WithReads {
  [READS]?: ReusedReadBuffer;
}

/**
 * The reads whose read was just handed over: Node asks for the next buffer right after the read
 * callback returns, in the same call (onStreamRead), without saying whose. Set only once the
 * reader has returned, so a read that threw leaves nothing for another socket's buffer request.
 */
let justRead: ReusedReadBuffer | null = null;

/** Node's read callback of every socket reading into a reused buffer: `this` is the socket. */
function onReusedRead(this: Socket, bytes: number, buffer: Uint8Array): boolean {
  justRead = null;
  const reads = (this as WithReads)[READS]!;
  reads.received(bytes, buffer);
  justRead = reads;
  return true;
}

/** Node's buffer request after each read: a new buffer, or undefined to read into the same one again. */
function nextReadBuffer(): Buffer | undefined {
  const reads = justRead;
  justRead = null;
  return reads === null ? undefined : reads.next();
}

/** True when `socket`'s reads go into a reused buffer (each chunk valid only during its read). */
export function readsIntoReusedBuffer(socket: Socket): boolean {
  return (socket as WithReads)[READS] !== undefined;
}

/**
 * Hands every read of `socket` to `reader`. True when the reads go into a reused buffer (each
 * chunk is valid only during the call); false when they are Node's own buffers, which the reader
 * may keep (its return value is then ignored).
 */
export function readSocket(socket: Socket, reader: ChunkReader): boolean {
  const reads = (socket as WithReads)[READS];
  if (reads) {
    reads.setReader(reader);
    return true;
  }
  socket.on('data', (chunk: Buffer) => reader.readBytes(chunk, chunk.length));
  return false;
}

/** The socket fields behind net.connect's `onread` option (Node 18-22: lib/net.js, stream_base_commons). */
interface UserBufferFields {
  buffer: symbol;
  callback: symbol;
  generator: symbol;
}

function findUserBufferFields(socket: Socket): UserBufferFields | null {
  const find = (name: string): symbol | undefined =>
    Object.getOwnPropertySymbols(socket).find((s) => s.description === name);
  const buffer = find('kBuffer');
  const callback = find('kBufferCb');
  const generator = find('kBufferGen');
  if (buffer === undefined || callback === undefined || generator === undefined) return null;
  return { buffer, callback, generator };
}

interface StreamHandle {
  useUserBuffer?: (buffer: Uint8Array) => void;
  reading?: boolean;
}

/** The fields above as this Node names them (the same symbols on every socket), or null: looked up once. */
let fieldsOfNode: UserBufferFields | null | undefined;

function userBufferFields(): UserBufferFields | null {
  if (fieldsOfNode === undefined) fieldsOfNode = findUserBufferFields(new net.Socket());
  return fieldsOfNode;
}

/**
 * Makes a plain TCP socket accepted by a `net.Server` created with `pauseOnConnect: true` read
 * into a reused buffer, as net.connect's `onread` option does for a socket it dials: Node offers
 * the option to dialled sockets only, so the same fields are set on the accepted one. True when
 * done; false (the socket reads as Node does) when this Node does not have those fields, the
 * socket is not a plain TCP socket, or it has started reading. Call `readSocket` next, then
 * `resume()` the socket.
 */
export function reuseAcceptedReads(socket: Socket): boolean {
  const handle = (socket as unknown as { _handle?: StreamHandle | null })._handle;
  if (!handle || typeof handle.useUserBuffer !== 'function' || handle.reading) return false;
  const fields = userBufferFields();
  if (fields === null) return false;
  const fieldsOf = socket as unknown as Record<symbol, unknown>;
  if (fieldsOf[fields.buffer] !== null) return false;
  const reads = new ReusedReadBuffer(READ_BUFFER_BYTES, FIRST_CLIENT_READ_BUFFER_BYTES);
  fieldsOf[fields.buffer] = reads.buffer;
  fieldsOf[fields.generator] = nextReadBuffer;
  fieldsOf[fields.callback] = onReusedRead;
  handle.useUserBuffer(reads.buffer);
  (socket as WithReads)[READS] = reads;
  return true;
}

/**
 * net.connect, its reads into a reused buffer (Node's `onread` option) that grows up to
 * BULK_READ_BUFFER_BYTES while reads fill it, where this Node has the fields that lets the buffer
 * be replaced after a read; else as Node reads.
 */
export function connectWithReusedReads(options: net.TcpNetConnectOpts): Socket {
  const fields = userBufferFields();
  if (fields === null) return net.connect(options);
  const reads = new ReusedReadBuffer(BULK_READ_BUFFER_BYTES, FIRST_READ_BUFFER_BYTES);
  // A buffer, not a generator, while the socket is set up (Node asks a generator for the first
  // buffer then, with no read before it); the generator is set once net.connect has returned.
  const socket = net.connect({ ...options, onread: { buffer: reads.buffer, callback: onReusedRead } });
  (socket as WithReads)[READS] = reads;
  (socket as unknown as Record<symbol, unknown>)[fields.generator] = nextReadBuffer;
  return socket;
}
