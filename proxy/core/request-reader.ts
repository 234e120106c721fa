/**
 * Reads a client's request stream frame by frame and lets the connection choose, per frame that
 * does not lie whole in one read, once its first bytes are known, whether to pass it to the broker
 * as its bytes arrive or to receive it whole: the mirror of response-reader.ts.
 *
 * Streaming is what keeps large pass-through requests (Produce) cheap: a frame that spans reads is
 * written to the broker piece by piece, as views of each read, instead of being gathered into
 * buffers of its own and assembled (two copies, and two allocations outside the JavaScript heap
 * that drive its full collections). Frames the proxy must read (decoded, answered here, or deciding
 * the connection's state) are received whole, with the memory semantics of FrameSplitter.
 *
 * Chunks are lent for the duration of `push` only (the socket's read buffer is used again for the
 * next read): streamed bytes and whole frames that lay in one chunk are views valid during the
 * sink's call; a frame assembled from several chunks is a buffer of its own.
 */
import { FrameSplitter } from '../../protocol/frame-splitter.js';
import { FrameTooLargeError, ProtocolError } from '../../protocol/errors.js';

/** 'more': the first bytes do not tell yet; ask again with more of them. */
export type RequestRoute = 'stream' | 'whole' | 'more';

export interface RequestReaderSink {
  /**
   * A frame that is not whole in this read begins. `head` is its first payload bytes (a view,
   * valid during the call; at least 8 unless the frame is shorter, never all of it). 'more' asks
   * again once more bytes are in, up to `maxHeadBytes`; past that the frame is received whole.
   */
  routeRequest(size: number, head: Buffer): RequestRoute;
  /**
   * Bytes of a streamed frame, its 4-byte size prefix included in the first call; `end` on its
   * last bytes. A view of the chunk being pushed (or of the reader's own head bytes): to be written
   * or copied during the call.
   */
  streamRequest(bytes: Buffer, end: boolean): void;
  /**
   * A whole frame's payload, without the size prefix: a view of the chunk being pushed (valid
   * during the call) when it lay in it, else a buffer of its own. `sized`: when it lay in the
   * chunk, the view of the frame with its size prefix (what a relay writes on), else null.
   */
  wholeRequest(payload: Buffer, sized: Buffer | null): void;
}

/** Bytes of a frame's start the reader holds while `route` answers 'more'. */
const HEAD_START = 64;

export class RequestReader {
  /** Gathers the frames received whole that span reads. */
  private readonly splitter: FrameSplitter;
  private mode: 'frame' | 'head' | 'stream' | 'whole' = 'frame';
  /** Payload size of the current frame (modes head, stream, whole). */
  private size = 0;
  /** Bytes of the current frame (size prefix included) still to come (modes stream, whole). */
  private left = 0;
  /** The size prefix and first payload bytes of a frame being routed (mode head). */
  private head: Buffer = Buffer.allocUnsafe(HEAD_START);
  private headFill = 0;

  constructor(
    private readonly maxFrameSize: number,
    /** At least 8. */
    private readonly maxHeadBytes: number,
    private readonly sink: RequestReaderSink,
  ) {
    if (maxHeadBytes < 8) throw new RangeError('maxHeadBytes must be at least 8');
    this.splitter = new FrameSplitter({ maxFrameSize, transientChunks: true });
  }

  /** Memory held for the frame being received whole, or its head (FrameSplitter.retainedBytes). */
  get retainedBytes(): number {
    return this.splitter.retainedBytes + (this.mode === 'head' ? this.head.length : 0);
  }

  /** Payload size the incomplete frame received whole declared, or -1. */
  get incompleteFrameSize(): number {
    return this.splitter.incompleteFrameSize;
  }

  /** Between frames, holding nothing: the next byte pushed starts a frame. */
  get atFrameBoundary(): boolean {
    return this.mode === 'frame';
  }

  /** A frame is part way through being streamed: nothing else may be written to its broker. */
  get streaming(): boolean {
    return this.mode === 'stream';
  }

  /** Feeds one read, `chunk[0, len)`; returns how many whole frames it completed. */
  push(chunk: Buffer, len = chunk.length): number {
    let completed = 0;
    let off = 0;
    while (off < len) {
      if (this.mode === 'stream' || this.mode === 'whole') {
        const n = Math.min(this.left, len - off);
        const piece = chunk.subarray(off, off + n);
        off += n;
        this.left -= n;
        const end = this.left === 0;
        if (this.mode === 'stream') {
          if (end) this.mode = 'frame';
          this.sink.streamRequest(piece, end);
          continue;
        }
        const frames = this.splitter.push(piece);
        if (end) {
          this.mode = 'frame';
          for (const f of frames) this.sink.wholeRequest(f, null);
          completed += frames.length;
        }
        continue;
      }
      if (this.mode === 'frame') {
        if (len - off >= 4) {
          const size = this.checkSize(chunk.readInt32BE(off));
          if (len - off - 4 >= size) {
            this.sink.wholeRequest(
              chunk.subarray(off + 4, off + 4 + size),
              chunk.subarray(off, off + 4 + size),
            );
            completed++;
            off += 4 + size;
            continue;
          }
          this.size = size;
          const route = this.route(chunk.subarray(off + 4, len));
          if (route !== 'more') {
            this.begin(route, chunk.subarray(off, len));
            return completed;
          }
        }
        this.mode = 'head';
        this.headFill = 0;
      }
      // Mode head: the frame's start, held until it can be routed (or is whole after all).
      off = this.addToHead(chunk, off, len);
      if (this.headFill < 4 || this.headFill - 4 < Math.min(8, this.size)) continue;
      if (this.headFill === 4 + this.size) {
        this.mode = 'frame';
        // A copy: the head buffer holds the next frame's start, and the sink may keep this one.
        this.sink.wholeRequest(Buffer.from(this.head.subarray(4, this.headFill)), null);
        completed++;
        continue;
      }
      const route = this.route(this.head.subarray(4, this.headFill));
      if (route === 'more') continue;
      const held = this.head.subarray(0, this.headFill);
      this.head = Buffer.allocUnsafe(HEAD_START);
      this.headFill = 0;
      this.begin(route, held);
    }
    return completed;
  }

  /**
   * The sink's choice for the frame starting with `head` (payload bytes), or 'more' while it
   * wants more and may have them: the frame is received whole once `maxHeadBytes` are in.
   */
  private route(head: Buffer): RequestRoute {
    if (head.length < Math.min(8, this.size)) return 'more';
    const route = this.sink.routeRequest(this.size, head);
    return route === 'more' && head.length >= this.maxHeadBytes ? 'whole' : route;
  }

  /** Starts the routed frame with `first`, its first bytes (size prefix included). */
  private begin(route: 'stream' | 'whole', first: Buffer): void {
    this.mode = route;
    this.left = 4 + this.size - first.length;
    if (route === 'stream') this.sink.streamRequest(first, false);
    else this.splitter.push(first);
  }

  /**
   * Adds to the held start of a frame what `chunk[from, to)` has of it: its size prefix, then
   * payload bytes up to the frame's end and `maxHeadBytes`. Returns the offset reached.
   */
  private addToHead(chunk: Buffer, from: number, to: number): number {
    let at = from;
    if (this.headFill < 4) {
      const n = Math.min(4 - this.headFill, to - at);
      chunk.copy(this.head, this.headFill, at, at + n);
      this.headFill += n;
      at += n;
      if (this.headFill < 4) return at;
      this.size = this.checkSize(this.head.readInt32BE(0));
    }
    const cap = 4 + Math.min(this.size, this.maxHeadBytes);
    const n = Math.min(cap - this.headFill, to - at);
    if (n <= 0) return at;
    if (this.headFill + n > this.head.length) {
      const grown = Buffer.allocUnsafe(Math.min(cap, Math.max(2 * this.head.length, this.headFill + n)));
      this.head.copy(grown, 0, 0, this.headFill);
      this.head = grown;
    }
    chunk.copy(this.head, this.headFill, at, at + n);
    this.headFill += n;
    return at + n;
  }

  private checkSize(size: number): number {
    if (size < 0) throw new ProtocolError('NEGATIVE_FRAME_SIZE', `negative frame size ${size}`, 0);
    if (size > this.maxFrameSize) throw new FrameTooLargeError(size, this.maxFrameSize, 0);
    return size;
  }
}
