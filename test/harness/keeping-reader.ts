/**
 * A socket reader for tests of reused read buffers: it copies every chunk, and keeps every
 * `keepEvery`-th one as the view it was given (as a socket write that waits keeps the bytes it was
 * handed), so a test can check that no kept view was overwritten by a later read.
 */
import { expect } from 'vitest';
import type { ChunkReader } from '../../proxy/core/reused-reads.js';

export class KeepingReader implements ChunkReader {
  readonly copies: Buffer[] = [];
  readonly kept: { view: Buffer; copy: Buffer }[] = [];
  /** The ArrayBuffers the chunks were views of. */
  readonly buffers = new Set<ArrayBufferLike>();

  constructor(private readonly keepEvery = 3) {}

  readBytes(buffer: Buffer, end: number): boolean {
    const chunk = buffer.subarray(0, end);
    this.copies.push(Buffer.from(chunk));
    this.buffers.add(chunk.buffer);
    if (this.copies.length % this.keepEvery !== 0) return false;
    this.kept.push({ view: chunk, copy: Buffer.from(chunk) });
    return true;
  }

  /** Every byte of `data` came in order, and every kept view still holds what it held when read. */
  expectIntact(data: Buffer): void {
    expect(Buffer.concat(this.copies).equals(data)).toBe(true);
    expect(this.kept.length).toBeGreaterThan(0);
    for (const k of this.kept) expect(k.view.equals(k.copy)).toBe(true);
  }

  /**
   * A buffer was used again while nothing in it was kept: about one per kept chunk, plus the first
   * of each size (a buffer that grows or shrinks is a new one).
   */
  expectReused(): void {
    const sizes = new Set([...this.buffers].map((b) => b.byteLength));
    expect(this.buffers.size).toBeLessThanOrEqual(this.kept.length + sizes.size);
    expect(this.buffers.size).toBeLessThan(this.copies.length);
  }
}
