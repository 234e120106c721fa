import { FrameTooLargeError, ProtocolError } from './errors.js';

/** A piece of an incomplete frame shorter than this is copied rather than kept as a view. */
const COPY_BELOW = 4096;
/** Largest buffer small pieces of an incomplete frame are gathered into. */
const TAIL_MAX = 64 * 1024;

/**
 * Splits a TCP byte stream into Kafka frames ([int32 size][payload]) and returns each payload
 * without its size prefix.
 *
 * - A frame that lies inside one chunk is returned as a view of that chunk (zero copy).
 * - A frame that spans chunks is assembled once, when its last byte arrives: large pieces are only
 *   queued, so a large frame arriving in many large chunks costs one copy, not a quadratic number.
 * - An incomplete frame holds about the bytes that really arrived: a piece that is small, or less
 *   than half of the chunk it lies in (the last 100 bytes of a 64 KiB read), is copied into a
 *   buffer of the splitter's own (growing with the bytes held, at most 64 KiB each), so it neither
 *   pins the whole chunk nor costs a Buffer per tiny read. `retainedBytes`, the memory held, stays
 *   within twice `bufferedBytes`.
 * - Chunks are never written to: views handed out stay valid (a lesson from pg-protocol's bug tracker).
 * - `transientChunks`: each chunk is valid only during its `push` (a socket read into a buffer the
 *   next read overwrites), so every byte of an incomplete frame is copied; whole frames are still
 *   handed out as views, valid only until the next push.
 * - A size prefix above maxFrameSize (or negative) throws as soon as the 4 size bytes are in, before
 *   any of the body is buffered. After a throw the splitter is unusable: close the connection.
 */
export class FrameSplitter {
  private readonly maxFrameSize: number;
  /** Payload bytes of the incomplete frame, oldest first: views of chunks, or full buffers of our own. */
  private pieces: Buffer[] = [];
  /** Our own buffer for the small pieces that follow `pieces`; never handed out half filled. */
  private tail: Buffer | null = null;
  private tailUsed = 0;
  /** Bytes of the incomplete frame received so far (size prefix included); 0 between frames. */
  private pendingBytes = 0;
  /** Memory held for the incomplete frame: the whole backing store of each view, the tail's capacity. */
  private retained = 0;
  /** Payload size of the incomplete frame once its 4 size bytes are in, else -1. */
  private expected = -1;
  /** The size prefix read so far while fewer than 4 of its bytes are in (unsigned, big-endian). */
  private sizeSoFar = 0;

  /** Chunks are valid only during their push: no view of one is kept. */
  private readonly transient: boolean;

  constructor(opts: { maxFrameSize: number; transientChunks?: boolean }) {
    this.maxFrameSize = opts.maxFrameSize;
    this.transient = opts.transientChunks ?? false;
  }

  /** Bytes received of the incomplete frame (size prefix included). */
  get bufferedBytes(): number {
    return this.pendingBytes;
  }

  /** Memory held for the incomplete frame (0 when there is none). */
  get retainedBytes(): number {
    return this.retained;
  }

  /** Payload size the incomplete frame declared, or -1 (no incomplete frame, or its size not all in). */
  get incompleteFrameSize(): number {
    return this.expected;
  }

  push(chunk: Buffer): Buffer[] {
    const out: Buffer[] = [];
    if (chunk.length === 0) return out;
    if (this.pendingBytes === 0) {
      this.splitChunk(chunk, 0, out);
      return out;
    }
    let at = 0;
    if (this.expected < 0) {
      while (this.pendingBytes < 4 && at < chunk.length) {
        this.sizeSoFar = this.sizeSoFar * 256 + chunk[at++]!;
        this.pendingBytes++;
      }
      if (this.pendingBytes < 4) return out;
      this.expected = this.checkSize(this.sizeSoFar | 0);
    }
    const end = at + 4 + this.expected - this.pendingBytes;
    if (end > chunk.length) {
      this.hold(chunk, at, chunk.length);
      return out;
    }
    out.push(this.finish(chunk, at, end));
    if (end < chunk.length) this.splitChunk(chunk, end, out);
    return out;
  }

  /** Returns every whole frame of `chunk` from `offset` as views; keeps the incomplete rest. */
  private splitChunk(chunk: Buffer, offset: number, out: Buffer[]): void {
    const len = chunk.length;
    while (len - offset >= 4) {
      const size = this.checkSize(chunk.readInt32BE(offset), offset);
      if (len - offset - 4 < size) {
        this.expected = size;
        this.pendingBytes = 4;
        this.hold(chunk, offset + 4, len);
        return;
      }
      out.push(chunk.subarray(offset + 4, offset + 4 + size));
      offset += 4 + size;
    }
    // 0-3 bytes of the next size prefix.
    while (offset < len) {
      this.sizeSoFar = this.sizeSoFar * 256 + chunk[offset++]!;
      this.pendingBytes++;
    }
  }

  /** Keeps payload bytes `chunk[from, to)` of the incomplete frame (they do not complete it). */
  private hold(chunk: Buffer, from: number, to: number): void {
    const len = to - from;
    if (len === 0) return;
    let stored = this.pendingBytes - 4;
    this.pendingBytes += len;
    const backing = chunk.buffer.byteLength;
    if (!this.transient && len >= COPY_BELOW && len * 2 > backing) {
      // At least half of the memory it pins: kept as a view, copied once when the frame is whole.
      this.sealTail();
      this.pieces.push(from === 0 && to === chunk.length ? chunk : chunk.subarray(from, to));
      this.retained += backing;
      return;
    }
    let at = from;
    while (at < to) {
      if (this.tail === null || this.tailUsed === this.tail.length) {
        this.sealTail();
        const rest = to - at;
        // Grows with the bytes held, keeping the memory held within twice of them (an announced
        // size alone reserves nothing), and never past the frame's end; when the first bytes are
        // half the payload or more, sized for all of it.
        let capacity = Math.max(rest, Math.min(TAIL_MAX, 2 * (stored + rest) - this.retained));
        if (stored === 0 && 2 * rest >= this.expected) capacity = this.expected;
        capacity = Math.min(capacity, this.expected - stored);
        this.tail = Buffer.allocUnsafeSlow(capacity);
        this.tailUsed = 0;
        this.retained += capacity;
      }
      const n = Math.min(this.tail.length - this.tailUsed, to - at);
      chunk.copy(this.tail, this.tailUsed, at, at + n);
      this.tailUsed += n;
      at += n;
      stored += n;
    }
  }

  /** Moves the tail to `pieces`, cut down to its bytes when not full (a large piece follows). */
  private sealTail(): void {
    const tail = this.tail;
    if (tail === null) return;
    this.tail = null;
    if (this.tailUsed === tail.length) {
      this.pieces.push(tail);
      return;
    }
    const cut = Buffer.allocUnsafeSlow(this.tailUsed);
    tail.copy(cut, 0, 0, this.tailUsed);
    this.retained -= tail.length - cut.length;
    this.pieces.push(cut);
  }

  /** The payload of the incomplete frame, whose last bytes are `chunk[from, to)`; resets. */
  private finish(chunk: Buffer, from: number, to: number): Buffer {
    const size = this.expected;
    const tail = this.tail;
    let frame: Buffer;
    if (this.pieces.length === 0 && tail === null) {
      // Only the size prefix came before.
      frame = chunk.subarray(from, to);
    } else if (this.pieces.length === 0 && tail !== null && tail.length === size) {
      // The tail was sized for the whole payload: it becomes the frame.
      chunk.copy(tail, this.tailUsed, from, to);
      frame = tail;
    } else {
      frame = Buffer.allocUnsafe(size);
      let filled = 0;
      for (const p of this.pieces) filled += p.copy(frame, filled);
      if (tail !== null) filled += tail.copy(frame, filled, 0, this.tailUsed);
      chunk.copy(frame, filled, from, to);
    }
    this.pieces.length = 0;
    this.tail = null;
    this.tailUsed = 0;
    this.pendingBytes = 0;
    this.retained = 0;
    this.expected = -1;
    this.sizeSoFar = 0;
    return frame;
  }

  private checkSize(size: number, offset = 0): number {
    if (size < 0) throw new ProtocolError('NEGATIVE_FRAME_SIZE', `negative frame size ${size}`, offset);
    if (size > this.maxFrameSize) throw new FrameTooLargeError(size, this.maxFrameSize, offset);
    return size;
  }
}
