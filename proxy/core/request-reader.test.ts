import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FrameTooLargeError } from '../../protocol/errors.js';
import { RequestReader } from './request-reader.js';
import type { RequestRoute } from './request-reader.js';

/** [int32 size][payload]; the payload's first byte says how the test's sink routes it. */
function frame(payload: Buffer): Buffer {
  const size = Buffer.alloc(4);
  size.writeInt32BE(payload.length);
  return Buffer.concat([size, payload]);
}

/** A payload of `n` bytes whose byte 0 is `kind` (0 stream, 1 whole, 2 'more' until 20 bytes are in, then stream). */
function payload(n: number, kind: number, seed: number): Buffer {
  const b = Buffer.allocUnsafe(n);
  for (let i = 0; i < n; i++) b[i] = (i * 31 + seed) & 0xff;
  if (n > 0) b[0] = kind;
  return b;
}

interface Seen {
  /** Each frame as it came out, size prefix included for streamed ones. */
  frames: { how: 'stream' | 'whole'; bytes: Buffer }[];
  routes: number;
}

/**
 * Pushes `bytes` cut at `cuts`, each piece copied into one read buffer that is overwritten after
 * every push (as a socket's reused read buffer is); the sink copies what it is given.
 */
function through(bytes: Buffer, cuts: number[], maxHeadBytes = 1_000): Seen {
  const seen: Seen = { frames: [], routes: 0 };
  let streamed: Buffer[] | null = null;
  const reader = new RequestReader(1 << 22, maxHeadBytes, {
    routeRequest(size: number, head: Buffer): RequestRoute {
      seen.routes++;
      expect(head.length).toBeGreaterThanOrEqual(Math.min(8, size));
      expect(head.length).toBeLessThan(size);
      const kind = head[0];
      if (kind === 0) return 'stream';
      if (kind === 2) return head.length >= 20 ? 'stream' : 'more';
      if (kind === 3) return 'more';
      return 'whole';
    },
    streamRequest(piece: Buffer, end: boolean): void {
      streamed ??= [];
      streamed.push(Buffer.from(piece));
      if (end) {
        seen.frames.push({ how: 'stream', bytes: Buffer.concat(streamed) });
        streamed = null;
      }
    },
    wholeRequest(p: Buffer, sized: Buffer | null): void {
      expect(streamed).toBeNull();
      if (sized !== null) {
        // The same frame, its size prefix before it, as one view of the read.
        expect(sized.buffer).toBe(p.buffer);
        expect(sized.byteOffset + 4).toBe(p.byteOffset);
        expect(sized.length).toBe(p.length + 4);
        expect(sized.readInt32BE(0)).toBe(p.length);
      }
      seen.frames.push({ how: 'whole', bytes: Buffer.from(p) });
    },
  });
  const read = Buffer.allocUnsafeSlow(65536);
  let at = 0;
  for (const cut of [...cuts, bytes.length]) {
    const end = Math.min(bytes.length, Math.max(at, cut));
    while (at < end) {
      const n = Math.min(read.length, end - at);
      bytes.copy(read, 0, at, at + n);
      reader.push(read.subarray(0, n));
      read.fill(0xee);
      at += n;
    }
  }
  expect(streamed).toBeNull();
  expect(reader.retainedBytes).toBe(0);
  expect(reader.streaming).toBe(false);
  return seen;
}

describe('RequestReader', () => {
  it('passes on every frame unchanged, streamed or whole, however the reads cut them', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(fc.integer({ min: 0, max: 150_000 }), fc.integer({ min: 0, max: 3 })), {
          minLength: 1,
          maxLength: 8,
        }),
        fc.array(fc.integer({ min: 0, max: 1_200_000 }), { maxLength: 20 }),
        (specs, cuts) => {
          const payloads = specs.map(([n, kind], i) => payload(n, kind, i));
          const bytes = Buffer.concat(payloads.map(frame));
          const seen = through(
            bytes,
            [...cuts].sort((a, b) => a - b),
          );
          expect(seen.frames.length).toBe(payloads.length);
          seen.frames.forEach((f, i) => {
            const expected = f.how === 'stream' ? frame(payloads[i]!) : payloads[i]!;
            expect(f.bytes.equals(expected), `frame ${i} (${f.how})`).toBe(true);
          });
        },
      ),
      { numRuns: 150 },
    );
  });

  it('hands a frame that lies in one read over whole, without asking', () => {
    const p = payload(5_000, 0, 1);
    const seen = through(frame(p), []);
    expect(seen.routes).toBe(0);
    expect(seen.frames).toEqual([{ how: 'whole', bytes: p }]);
  });

  it('streams a frame that spans reads when asked to, its size prefix first', () => {
    const p = payload(200_000, 0, 2);
    const seen = through(frame(p), [10_000, 70_000]);
    expect(seen.frames.map((f) => f.how)).toEqual(['stream']);
    expect(seen.frames[0]!.bytes.equals(frame(p))).toBe(true);
  });

  it('asks again as bytes arrive, and takes the frame whole past maxHeadBytes', () => {
    // Kind 3 always wants more: after 1,000 head bytes the frame is received whole.
    const p = payload(50_000, 3, 3);
    const f = frame(p);
    const cuts = Array.from({ length: 60 }, (_, i) => 6 + i * 50);
    const seen = through(f, cuts);
    expect(seen.frames).toEqual([{ how: 'whole', bytes: p }]);
    expect(seen.routes).toBeGreaterThan(10);
  });

  it('rejects a size above the limit or negative as soon as its 4 bytes are in', () => {
    const sink = {
      routeRequest: () => 'whole' as const,
      streamRequest: () => undefined,
      wholeRequest: () => undefined,
    };
    const big = Buffer.alloc(4);
    big.writeInt32BE(1 << 23);
    expect(() => new RequestReader(1 << 22, 100, sink).push(big)).toThrow(FrameTooLargeError);
    const r = new RequestReader(1 << 22, 100, sink);
    r.push(Buffer.from([0xff, 0xff]));
    expect(() => r.push(Buffer.from([0xff, 0xfe]))).toThrow(/negative/);
  });
});
