/**
 * The relay's writes to a plain TCP socket, handed straight to its libuv handle as Node's own
 * socket code does (lib/internal/stream_base_commons.js), below the socket's Writable.
 *
 * Node's Writable costs the relay more than the system call: every write() is queued as an
 * object, a corked batch is gathered again into an array of {chunk, encoding} for writev, and
 * state is kept per write and per 'drain'. The relay's writes need none of it: they are views of
 * the bytes just read, written in order, and a full socket only has to stop the side that feeds it.
 * So the writes of one read (held between `hold` and `release`) go to the handle as one system
 * call; adjacent views of one buffer (the pass-through frames of one read) go as one slice.
 *
 * The handle tries the write at once (uv_try_write) and queues what the kernel did not take
 * (uv_write), keeping the views alive through the request object until it completes. Until then
 * those bytes count as unsent (`unsent`), as Node counts a write in flight in `writableLength`,
 * and the writer answers false, and later calls `onDrain`, by Node's rule: once that reaches the
 * socket's high-water mark. Bytes never go around others: a write goes to the handle only while
 * the socket's Writable holds nothing (else it is queued behind it with socket.write), and the
 * handle keeps its own queue in order. A failed write destroys the socket with the error, as
 * Node does, so the socket's 'error' and 'close' are what its owner sees either way.
 *
 * Where the handle or the request type is not there (TLS sockets, a socket not connected yet, a
 * Node that no longer has them), every write is socket.write, corked while held. The request type
 * comes from process.binding('stream_wrap'), which Node 20 still allows without a warning (with
 * --pending-deprecation it prints DEP0111 once).
 */
import type { Socket } from 'node:net';
import { TLSSocket } from 'node:tls';
import { getSystemErrorName } from 'node:util';

/** The request object a handle's write takes (Node's WriteWrap), completed by libuv. */
interface WriteRequest {
  oncomplete: (this: WriteRequest, status: number) => void;
  /** The writer whose bytes are in flight, and their count and buffers (kept alive until done). */
  writer: SocketWriter | null;
  bytes: number;
  data: Buffer | Buffer[] | null;
}

/** A libuv stream handle's write methods (Node 18-22: src/stream_base.cc). */
interface StreamHandle {
  writeBuffer(req: WriteRequest, data: Buffer): number;
  writev(req: WriteRequest, chunks: Buffer[], allBuffers: true): number;
}

/** Node's stream binding: the request type and where a write reports how it went. */
interface StreamBinding {
  WriteWrap: new () => WriteRequest;
  streamBaseState: { [index: number]: number };
  kLastWriteWasAsync: number;
}

function loadStreamBinding(): StreamBinding | null {
  try {
    const binding = (process as unknown as { binding?: (name: string) => unknown }).binding?.(
      'stream_wrap',
    ) as Partial<StreamBinding> | undefined;
    if (
      binding === undefined ||
      typeof binding.WriteWrap !== 'function' ||
      binding.streamBaseState === undefined ||
      typeof binding.kLastWriteWasAsync !== 'number'
    )
      return null;
    return binding as StreamBinding;
  } catch {
    return null;
  }
}

const binding = loadStreamBinding();

/**
 * A request object not yet taken by libuv. A write the kernel takes whole never reaches libuv's
 * queue, so its request is used again; one that went into the queue belongs to it until done.
 */
let spare: WriteRequest | null = null;

function takeRequest(): WriteRequest {
  if (spare !== null) return spare;
  const req = new binding!.WriteWrap();
  req.oncomplete = onWriteComplete;
  req.writer = null;
  req.bytes = 0;
  req.data = null;
  spare = req;
  return req;
}

function onWriteComplete(this: WriteRequest, status: number): void {
  const writer = this.writer!;
  this.writer = null;
  this.data = null;
  writer.completed(this.bytes, status);
}

function writeError(status: number): Error {
  const name = getSystemErrorName(status);
  return Object.assign(new Error(`write ${name}`), { errno: status, code: name, syscall: 'write' });
}

interface SocketInternals {
  _handle?: Partial<StreamHandle> | null;
  /** Refreshes the socket's timeout, as every write of Node's does. */
  _unrefTimer?: () => void;
}

/** True when this Node lets the relay write to a plain TCP socket's handle (see the module comment). */
export function rawWritesAvailable(): boolean {
  return binding !== null;
}

export class SocketWriter {
  /** Bytes handed to the handle that libuv has not completed. */
  private inFlight = 0;
  /** A write answered false: `onDrain` is owed once nothing is unsent. */
  private needDrain = false;
  private holds = 0;
  /** The writes held, as slices; `run*` is the last slice, still growing while writes are adjacent. */
  private held: Buffer[] = [];
  private runOf: Buffer | null = null;
  private runStart = 0;
  private runEnd = 0;
  /** A write failed: the socket is being destroyed, and nothing more is written. */
  private failed = false;
  private readonly raw: boolean;
  private readonly afterQueued = (): void => this.maybeDrain();

  /**
   * `onWritten`: called when libuv completes a write the kernel did not take at once (the peer
   * read some of what it was sent), for an owner that tracks activity itself.
   */
  constructor(
    private readonly socket: Socket,
    private readonly onDrain: () => void,
    private readonly onWritten?: () => void,
  ) {
    this.raw = binding !== null && !(socket instanceof TLSSocket);
    socket.on('drain', this.afterQueued);
  }

  /** Written and not taken by the kernel yet: in the socket's Writable or in flight in libuv. */
  get unsent(): number {
    return this.socket.writableLength + this.inFlight;
  }

  /** A write answered false and `onDrain` has not been called yet. */
  get full(): boolean {
    return this.needDrain;
  }

  /** The writes until the matching `release` go to the kernel together. */
  hold(): void {
    if (this.holds++ === 0 && !this.raw) this.socket.cork();
  }

  /** Ends a `hold`; the last one writes what was held. False: stop producing until `onDrain`. */
  release(): boolean {
    if (--this.holds > 0) return !this.needDrain;
    if (!this.raw) {
      this.socket.uncork();
      return !this.needDrain;
    }
    const run = this.takeRun();
    if (this.held.length === 0) return run === null ? !this.needDrain : this.send(run);
    const held = this.held;
    this.held = [];
    if (run !== null) held.push(run);
    return this.send(held);
  }

  /** Writes `buf` (now, or at the last `release` while held). False: stop producing until `onDrain`. */
  write(buf: Buffer): boolean {
    if (buf.length === 0) return !this.needDrain;
    if (!this.raw) {
      if (!this.socket.write(buf)) this.needDrain = true;
      return !this.needDrain;
    }
    if (this.holds === 0) return this.send(buf);
    const run = this.runOf;
    if (run !== null && run.buffer === buf.buffer && this.runEnd === buf.byteOffset) {
      this.runEnd += buf.length;
      return !this.needDrain;
    }
    const ended = this.takeRun();
    if (ended !== null) this.held.push(ended);
    this.runOf = buf;
    this.runStart = buf.byteOffset;
    this.runEnd = buf.byteOffset + buf.length;
    return !this.needDrain;
  }

  /** The last slice held, ended (null when none). */
  private takeRun(): Buffer | null {
    const run = this.runOf;
    if (run === null) return null;
    this.runOf = null;
    return this.runEnd === run.byteOffset + run.length
      ? run
      : Buffer.from(run.buffer, this.runStart, this.runEnd - this.runStart);
  }

  private send(data: Buffer | Buffer[]): boolean {
    if (this.failed) return false;
    const socket = this.socket;
    const handle = (socket as unknown as SocketInternals)._handle;
    // Behind bytes the Writable still holds, or on a socket not (or no longer) connected: Node's path.
    if (
      socket.writableLength > 0 ||
      socket.connecting ||
      socket.destroyed ||
      typeof handle?.writeBuffer !== 'function' ||
      typeof handle.writev !== 'function'
    ) {
      return this.queue(data);
    }
    const req = takeRequest();
    let bytes: number;
    let err: number;
    if (Array.isArray(data)) {
      bytes = 0;
      for (const b of data) bytes += b.length;
      err = (handle as StreamHandle).writev(req, data, true);
    } else {
      bytes = data.length;
      err = (handle as StreamHandle).writeBuffer(req, data);
    }
    if (socket.timeout) (socket as unknown as SocketInternals)._unrefTimer?.();
    if (err !== 0) {
      // As Node's Writable does with a failed write: the socket is destroyed on the next tick.
      this.failed = true;
      process.nextTick(() => socket.destroy(writeError(err)));
      return false;
    }
    if (binding!.streamBaseState[binding!.kLastWriteWasAsync]) {
      spare = null;
      req.writer = this;
      req.bytes = bytes;
      req.data = data;
      this.inFlight += bytes;
      if (this.unsent >= socket.writableHighWaterMark) this.needDrain = true;
    }
    return !this.needDrain;
  }

  /** Behind what the Writable holds: it goes to the handle after it, in order. */
  private queue(data: Buffer | Buffer[]): boolean {
    const socket = this.socket;
    if (Array.isArray(data)) {
      socket.cork();
      for (const b of data) socket.write(b, this.afterQueued);
      socket.uncork();
    } else {
      socket.write(data, this.afterQueued);
    }
    if (this.unsent >= socket.writableHighWaterMark) this.needDrain = true;
    return !this.needDrain;
  }

  /** libuv completed a write of `bytes` (status < 0: it failed). */
  completed(bytes: number, status: number): void {
    this.inFlight -= bytes;
    const socket = this.socket;
    if (socket.destroyed) return;
    if (status < 0) {
      this.failed = true;
      socket.destroy(writeError(status));
      return;
    }
    if (socket.timeout) (socket as unknown as SocketInternals)._unrefTimer?.();
    this.onWritten?.();
    this.maybeDrain();
  }

  private maybeDrain(): void {
    if (!this.needDrain || this.unsent > 0 || this.socket.destroyed) return;
    this.needDrain = false;
    this.onDrain();
  }
}
