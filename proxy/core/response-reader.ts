/**
 * Reads the broker's response stream frame by frame and lets the connection choose, per frame,
 * once its size and correlation id are known, whether to stream it to the client as its bytes
 * arrive or to receive it whole.
 *
 * Streaming is what keeps large Fetch responses fast and memory flat: a multi-megabyte response
 * that the proxy does not need to read is passed on chunk by chunk (views of the chunk, no copy)
 * instead of being assembled first. Frames the proxy must decode are assembled once.
 *
 * A chunk is only lent for the duration of `push` (the socket's read buffer is used again for
 * the next read): streamed bytes are views valid during the `stream` call, and a whole frame is
 * always a copy of the reader's own, since it may wait for earlier responses or a decoder.
 */
import { FrameTooLargeError, ProtocolError } from '../../protocol/errors.js';

export type FrameRoute = 'stream' | 'whole';

export interface ResponseReaderSink {
  /**
   * A frame begins. `correlationId` is null when the frame is shorter than 4 bytes. `payload`: the
   * whole frame (without its size prefix) when it is all in the chunk being pushed, a view valid
   * during the call (else null).
   */
  routeResponse(size: number, correlationId: number | null, payload: Buffer | null): FrameRoute;
  /**
   * Bytes of a streamed frame, its 4-byte size prefix included; `end` on its last bytes. A view of
   * the chunk being pushed: to be written or copied during the call.
   */
  streamResponse(bytes: Buffer, end: boolean): void;
  /** A whole frame's payload (without the size prefix), a buffer of its own. */
  wholeResponse(payload: Buffer): void;
}

export class ResponseReader {
  /** Size prefix and first 4 payload bytes of the frame being started. */
  private readonly head = Buffer.allocUnsafe(8);
  private headFill = 0;
  private mode: 'head' | 'stream' | 'whole' = 'head';
  /** Payload size of the current frame. */
  private size = 0;
  /** Payload bytes of the current frame still to come. */
  private left = 0;
  private parts: Buffer[] = [];

  constructor(
    private readonly maxFrameSize: number,
    private readonly sink: ResponseReaderSink,
  ) {}

  /** Between frames, holding nothing: the next byte pushed starts a frame. */
  get atFrameBoundary(): boolean {
    return this.mode === 'head' && this.headFill === 0;
  }

  /** Bytes held for a frame being assembled. */
  get bufferedBytes(): number {
    return this.mode === 'whole' ? this.size - this.left : 0;
  }

  /** Feeds one read, `chunk[0, len)`. */
  push(chunk: Buffer, len = chunk.length): void {
    let off = 0;
    while (off < len) {
      if (this.mode === 'head') {
        if (this.headFill === 0 && len - off >= 8) {
          // Fast path: the size and correlation id are in this chunk.
          const size = this.checkSize(chunk.readInt32BE(off));
          if (len - off - 4 >= size) {
            // The whole frame is here: streamed as a view, or copied once.
            const payload = chunk.subarray(off + 4, off + 4 + size);
            const route = this.sink.routeResponse(
              size,
              size >= 4 ? chunk.readInt32BE(off + 4) : null,
              payload,
            );
            if (route === 'stream') this.sink.streamResponse(chunk.subarray(off, off + 4 + size), true);
            else this.sink.wholeResponse(Buffer.from(payload));
            off += 4 + size;
            continue;
          }
        }
        // Collect the size, then up to 4 payload bytes.
        const need = this.headFill < 4 ? 4 : 4 + Math.min(4, this.size);
        const n = Math.min(need - this.headFill, len - off);
        chunk.copy(this.head, this.headFill, off, off + n);
        this.headFill += n;
        off += n;
        if (this.headFill === 4) {
          this.size = this.checkSize(this.head.readInt32BE(0));
          if (this.size > 0) continue;
        }
        if (this.headFill < 4 + Math.min(4, this.size)) continue;
        this.startFrame();
        continue;
      }
      const n = Math.min(this.left, len - off);
      const piece = chunk.subarray(off, off + n);
      off += n;
      this.left -= n;
      if (this.mode === 'stream') {
        const end = this.left === 0;
        if (end) this.mode = 'head';
        this.sink.streamResponse(piece, end);
      } else {
        this.parts.push(Buffer.from(piece));
        if (this.left === 0) this.finishWhole();
      }
    }
  }

  private startFrame(): void {
    const headBytes = 4 + Math.min(4, this.size);
    const correlationId = this.size >= 4 ? this.head.readInt32BE(4) : null;
    this.headFill = 0;
    this.left = this.size - (headBytes - 4);
    const route = this.sink.routeResponse(this.size, correlationId, null);
    // The head buffer is reused for the next frame: what leaves the reader is a copy.
    const head = Buffer.from(this.head.subarray(0, headBytes));
    if (route === 'stream') {
      this.mode = this.left > 0 ? 'stream' : 'head';
      this.sink.streamResponse(head, this.left === 0);
      return;
    }
    this.parts = [head.subarray(4)];
    this.mode = 'whole';
    if (this.left === 0) this.finishWhole();
  }

  private finishWhole(): void {
    const payload = this.parts.length === 1 ? this.parts[0]! : Buffer.concat(this.parts, this.size);
    this.parts = [];
    this.mode = 'head';
    this.sink.wholeResponse(payload);
  }

  private checkSize(size: number): number {
    if (size < 0) throw new ProtocolError('NEGATIVE_FRAME_SIZE', `negative response frame size ${size}`, 0);
    if (size > this.maxFrameSize) {
      throw new FrameTooLargeError(size, this.maxFrameSize);
    }
    return size;
  }
}
