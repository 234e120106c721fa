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
import type { Socket } from 'node:net';

/**
 * Reads of one socket: each read's bytes, a view of a buffer that the next read may overwrite.
 * True when some of those bytes are still referenced after the call (a socket write that the
 * kernel has not taken yet): the next read then goes into a new buffer.
 */
export type ChunkReader = (chunk: Buffer) => boolean;

/** Bytes one read can take (Node's own read size). */
const READ_BUFFER_BYTES = 64 * 1024;

/** The read buffer of one socket, used again for the next read unless the reader still references it. */
export class ReusedReadBuffer {
  private buffer: Buffer | null = null;
  private retained = false;
  private reader: ChunkReader | null = null;
  /** Copies of what was read before a reader was set. */
  private early: Buffer[] = [];

  /** Node's `onread` option: where the next read goes, and what to do with it. */
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

  setReader(reader: ChunkReader): void {
    this.reader = reader;
    const early = this.early;
    this.early = [];
    for (const chunk of early) reader(chunk);
  }
}

const reusedReads = new WeakMap<Socket, ReusedReadBuffer>();

/** Records that `socket` was created with `reads.onread` (net.connect's option). */
export function registerReusedReads(socket: Socket, reads: ReusedReadBuffer): void {
  reusedReads.set(socket, reads);
}

/** True when `socket`'s reads go into a reused buffer (each chunk valid only during its read). */
export function readsIntoReusedBuffer(socket: Socket): boolean {
  return reusedReads.has(socket);
}

/**
 * Hands every read of `socket` to `reader`. True when the reads go into a reused buffer (each
 * chunk is valid only during the call); false when they are Node's own buffers, which the reader
 * may keep (its return value is then ignored).
 */
export function readSocket(socket: Socket, reader: ChunkReader): boolean {
  const reads = reusedReads.get(socket);
  if (reads) {
    reads.setReader(reader);
    return true;
  }
  socket.on('data', (chunk: Buffer) => reader(chunk));
  return false;
}

/** The socket fields behind net.connect's `onread` option (Node 18-22: lib/net.js, stream_base_commons). */
interface UserBufferFields {
  buffer: symbol;
  callback: symbol;
  generator: symbol;
}

function userBufferFields(socket: Socket): UserBufferFields | null {
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
  const fields = userBufferFields(socket);
  if (fields === null) return false;
  const fieldsOf = socket as unknown as Record<symbol, unknown>;
  if (fieldsOf[fields.buffer] !== null) return false;
  const reads = new ReusedReadBuffer();
  const first = reads.onread.buffer();
  fieldsOf[fields.buffer] = first;
  fieldsOf[fields.generator] = reads.onread.buffer;
  fieldsOf[fields.callback] = reads.onread.callback;
  handle.useUserBuffer(first);
  reusedReads.set(socket, reads);
  return true;
}
