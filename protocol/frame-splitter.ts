import { FrameTooLargeError, ProtocolError } from './errors.js';

/**
 * Splits a TCP byte stream into Kafka frames ([int32 size][payload]) and returns each payload
 * without its size prefix.
 *
 * - A frame that lies inside one chunk is returned as a view of that chunk (zero copy).
 * - A frame that spans chunks is assembled once, when its last byte arrives: partial chunks are only
 *   queued, so a large frame arriving in many small chunks costs one copy, not a quadratic number.
 * - Chunks are never written to: views handed out stay valid (a lesson from pg-protocol's bug tracker).
 * - A size prefix above maxFrameSize (or negative) throws as soon as the 4 size bytes are in, before
 *   any of the body is buffered. After a throw the splitter is unusable: close the connection.
 */
export class FrameSplitter {
  private readonly maxFrameSize: number;
  /** Bytes of the incomplete frame (size prefix included), oldest first. */
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Payload size of the incomplete frame once its 4 size bytes are in, else -1. */
  private expected = -1;

  constructor(opts: { maxFrameSize: number }) {
    this.maxFrameSize = opts.maxFrameSize;
  }

  /** Bytes held for an incomplete frame. */
  get bufferedBytes(): number {
    return this.pendingBytes;
  }

  push(chunk: Buffer): Buffer[] {
    const out: Buffer[] = [];
    if (chunk.length === 0) return out;
    if (this.pendingBytes === 0) {
      this.splitChunk(chunk, 0, out);
      return out;
    }
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    if (this.expected < 0) {
      if (this.pendingBytes < 4) return out;
      this.expected = this.checkSize(this.peekSize());
    }
    const total = 4 + this.expected;
    if (this.pendingBytes < total) return out;
    // The frame ends inside `chunk` (earlier chunks alone were too short): copy it out once.
    const frame = Buffer.allocUnsafe(this.expected);
    let skip = 4;
    let filled = 0;
    const lastIndex = this.pending.length - 1;
    for (let i = 0; i < lastIndex; i++) {
      const c = this.pending[i]!;
      const from = Math.min(skip, c.length);
      skip -= from;
      filled += c.copy(frame, filled, from);
    }
    const usedOfLast = skip + (this.expected - filled);
    chunk.copy(frame, filled, skip, usedOfLast);
    out.push(frame);
    this.pending = [];
    this.pendingBytes = 0;
    this.expected = -1;
    if (usedOfLast < chunk.length) this.splitChunk(chunk, usedOfLast, out);
    return out;
  }

  /** Returns every whole frame of `chunk` from `offset` as views; queues the incomplete rest. */
  private splitChunk(chunk: Buffer, offset: number, out: Buffer[]): void {
    const len = chunk.length;
    while (len - offset >= 4) {
      const size = this.checkSize(chunk.readInt32BE(offset), offset);
      if (len - offset - 4 < size) {
        this.expected = size;
        break;
      }
      out.push(chunk.subarray(offset + 4, offset + 4 + size));
      offset += 4 + size;
    }
    if (offset < len) {
      const rest = chunk.subarray(offset);
      this.pending = [rest];
      this.pendingBytes = rest.length;
    }
  }

  private peekSize(): number {
    const b = Buffer.allocUnsafe(4);
    let n = 0;
    for (const c of this.pending) {
      n += c.copy(b, n, 0, Math.min(c.length, 4 - n));
      if (n === 4) break;
    }
    return b.readInt32BE(0);
  }

  private checkSize(size: number, offset = 0): number {
    if (size < 0) throw new ProtocolError('NEGATIVE_FRAME_SIZE', `negative frame size ${size}`, offset);
    if (size > this.maxFrameSize) throw new FrameTooLargeError(size, this.maxFrameSize, offset);
    return size;
  }
}
