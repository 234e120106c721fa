import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { FrameTooLargeError, ProtocolError } from './errors.js';
import { FrameSplitter } from './frame-splitter.js';

/** Builds [int32 size][payload] by hand (no codec Writer involved). */
function frame(payload: Buffer): Buffer {
  const size = Buffer.alloc(4);
  size.writeInt32BE(payload.length);
  return Buffer.concat([size, payload]);
}
const payloads = [
  Buffer.from('hello'),
  Buffer.alloc(0),
  Buffer.from([1, 2, 3, 4, 5, 6, 7, 8, 9]),
  Buffer.alloc(300, 7),
];
const stream = Buffer.concat(payloads.map(frame));

function hexes(bufs: Buffer[]): string[] {
  return bufs.map((b) => b.toString('hex'));
}

describe('FrameSplitter', () => {
  it('returns every frame of one chunk as zero-copy views', () => {
    const s = new FrameSplitter({ maxFrameSize: 1024 });
    const out = s.push(stream);
    expect(hexes(out)).toEqual(hexes(payloads));
    expect(out[0]!.buffer).toBe(stream.buffer);
    expect(out[0]!.byteOffset).toBe(stream.byteOffset + 4);
    expect(s.bufferedBytes).toBe(0);
  });

  it('handles the stream cut at every byte position', () => {
    for (let cut = 0; cut <= stream.length; cut++) {
      const s = new FrameSplitter({ maxFrameSize: 1024 });
      const out = [...s.push(stream.subarray(0, cut)), ...s.push(stream.subarray(cut))];
      expect(hexes(out), `cut at ${cut}`).toEqual(hexes(payloads));
      expect(s.bufferedBytes).toBe(0);
    }
  });

  it('handles one byte per chunk', () => {
    const s = new FrameSplitter({ maxFrameSize: 1024 });
    const out: Buffer[] = [];
    for (let i = 0; i < stream.length; i++) out.push(...s.push(stream.subarray(i, i + 1)));
    expect(hexes(out)).toEqual(hexes(payloads));
  });

  it('keeps a partial frame buffered (frame less one byte, first 3 bytes)', () => {
    const f = frame(Buffer.from('abcdef'));
    const s = new FrameSplitter({ maxFrameSize: 1024 });
    expect(s.push(f.subarray(0, 3))).toEqual([]);
    expect(s.bufferedBytes).toBe(3);
    expect(s.push(f.subarray(3, f.length - 1))).toEqual([]);
    expect(s.bufferedBytes).toBe(f.length - 1);
    expect(hexes(s.push(f.subarray(f.length - 1)))).toEqual([Buffer.from('abcdef').toString('hex')]);
  });

  it('returns exactly two frames and keeps the start of a third', () => {
    const a = frame(Buffer.from('a'));
    const b = frame(Buffer.from('bb'));
    const c = frame(Buffer.from('ccc'));
    const s = new FrameSplitter({ maxFrameSize: 1024 });
    const out = s.push(Buffer.concat([a, b, c.subarray(0, 5)]));
    expect(hexes(out)).toEqual(['61', '6262']);
    expect(hexes(s.push(c.subarray(5)))).toEqual(['636363']);
  });

  it('does not alter frames already handed out when later chunks arrive', () => {
    const s = new FrameSplitter({ maxFrameSize: 1024 });
    const f1 = frame(Buffer.from('first'));
    const f2 = frame(Buffer.from('second'));
    const chunk = Buffer.concat([f1, f2.subarray(0, 6)]);
    const [first] = s.push(chunk);
    s.push(f2.subarray(6));
    expect(first!.toString()).toBe('first');
  });

  it('refuses an oversized frame as soon as its size arrives, before the body', () => {
    const s = new FrameSplitter({ maxFrameSize: 100 });
    const header = Buffer.alloc(4);
    header.writeInt32BE(101);
    expect(() => s.push(header.subarray(0, 2))).not.toThrow();
    expect(() => s.push(header.subarray(2))).toThrow(FrameTooLargeError);
    const s2 = new FrameSplitter({ maxFrameSize: 100 });
    expect(() => s2.push(header)).toThrow(FrameTooLargeError);
    // A frame of exactly the limit is fine.
    expect(new FrameSplitter({ maxFrameSize: 100 }).push(frame(Buffer.alloc(100)))[0]!.length).toBe(100);
  });

  it('refuses a negative size', () => {
    const s = new FrameSplitter({ maxFrameSize: 100 });
    let err: unknown;
    try {
      s.push(Buffer.from([0xff, 0xff, 0xff, 0xfe]));
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ProtocolError);
  });

  it('assembles a large frame from many chunks with one copy per frame', () => {
    const big = Buffer.alloc(1 << 20, 3);
    const f = frame(big);
    const s = new FrameSplitter({ maxFrameSize: 2 << 20 });
    const out: Buffer[] = [];
    for (let i = 0; i < f.length; i += 1000) out.push(...s.push(f.subarray(i, i + 1000)));
    expect(out).toHaveLength(1);
    expect(out[0]!.equals(big)).toBe(true);
  });

  it('any payloads cut into any chunks come out whole and in order', () => {
    fc.assert(
      fc.property(
        fc.array(fc.uint8Array({ maxLength: 40 }), { maxLength: 8 }),
        fc.array(fc.integer({ min: 1, max: 50 }), { minLength: 1, maxLength: 20 }),
        (raw, sizes) => {
          const ps = raw.map((a) => Buffer.from(a));
          const all = Buffer.concat(ps.map(frame));
          const s = new FrameSplitter({ maxFrameSize: 64 });
          const out: Buffer[] = [];
          let at = 0;
          for (let i = 0; at < all.length; i++) {
            const n = sizes[i % sizes.length]!;
            out.push(...s.push(all.subarray(at, at + n)));
            at += n;
          }
          expect(hexes(out)).toEqual(hexes(ps));
          expect(s.bufferedBytes).toBe(0);
        },
      ),
      { numRuns: 300 },
    );
  });

  describe('memory held by an incomplete frame', () => {
    /** A buffer with its own backing store, as a socket read is (not a view of a larger one). */
    const own = (b: Buffer): Buffer => {
      const copy = Buffer.allocUnsafeSlow(b.length);
      b.copy(copy);
      return copy;
    };
    /**
     * A splitter after one 64 KiB read: whole frames, then the first `sent` bytes of the frame of
     * `payload` (`f`, whose rest comes later).
     */
    function afterRead(payload: Buffer, sent: number) {
      const f = frame(payload);
      const whole: Buffer[] = [];
      let left = 65536 - sent;
      for (let i = 0; left > 0; i++) {
        const n = Math.min(left - 4, 1000);
        whole.push(Buffer.alloc(n, i % 251));
        left -= 4 + n;
      }
      const chunk = own(Buffer.concat([...whole.map(frame), f.subarray(0, sent)]));
      const s = new FrameSplitter({ maxFrameSize: 1 << 20 });
      const out = s.push(chunk);
      return { f, s, chunk, whole, out };
    }

    it('a small rest of a 64 KiB read is copied: the read is not pinned, whole frames stay views', () => {
      const { f: next, s, chunk, whole, out } = afterRead(Buffer.alloc(1000, 9), 100);
      expect(hexes(out)).toEqual(hexes(whole));
      expect(out[0]!.buffer).toBe(chunk.buffer);
      expect(s.bufferedBytes).toBe(100);
      expect(s.incompleteFrameSize).toBe(1000);
      // 96 payload bytes held in a buffer of their own (room for as many again), not the 64 KiB read.
      expect(s.retainedBytes).toBeGreaterThanOrEqual(96);
      expect(s.retainedBytes).toBeLessThanOrEqual(2 * 96);
      expect(hexes(s.push(own(next.subarray(100))))).toEqual([Buffer.alloc(1000, 9).toString('hex')]);
      expect(s.retainedBytes).toBe(0);
      expect(s.incompleteFrameSize).toBe(-1);
    });

    it('a rest of 1-3 size bytes holds no buffer at all', () => {
      const { f: next, s } = afterRead(Buffer.from('abc'), 3);
      expect(s.bufferedBytes).toBe(3);
      expect(s.retainedBytes).toBe(0);
      expect(s.incompleteFrameSize).toBe(-1);
      expect(hexes(s.push(own(next.subarray(3))))).toEqual(['616263']);
    });

    it('a rest that is most of the read stays a view (no copy before the frame is whole)', () => {
      const big = Buffer.alloc(200_000, 5);
      const { f, s } = afterRead(big, 50_000);
      expect(s.retainedBytes).toBe(65536);
      const second = own(f.subarray(50_000, 115_536));
      s.push(second);
      expect(s.retainedBytes).toBe(2 * 65536);
      const out = s.push(own(f.subarray(115_536)));
      expect(out).toHaveLength(1);
      expect(out[0]!.equals(big)).toBe(true);
      // The pieces were not altered by the assembly.
      expect(second.equals(f.subarray(50_000, 115_536))).toBe(true);
    });

    it('a frame sent one byte per read holds about its bytes, not a Buffer per read', () => {
      // Past 64 KiB, so the gathering buffers fill and new ones follow.
      const payload = Buffer.alloc(150_000);
      for (let i = 0; i < payload.length; i++) payload[i] = (i * 7) % 256;
      const f = frame(payload);
      const s = new FrameSplitter({ maxFrameSize: 1 << 20 });
      let out: Buffer[] = [];
      let worst = 0;
      for (let i = 0; i < f.length; i++) {
        out = s.push(f.subarray(i, i + 1));
        if (i >= 4 && i < f.length - 1) worst = Math.max(worst, s.retainedBytes / s.bufferedBytes);
      }
      expect(worst).toBeLessThanOrEqual(2);
      expect(out).toHaveLength(1);
      expect(out[0]!.equals(payload)).toBe(true);
    });

    it('a large frame started in the rest of a read: the first bytes become the frame when they are half of it', () => {
      const payload = Buffer.alloc(3000, 4);
      const { f, s } = afterRead(payload, 2000);
      // Sized for the whole payload (3000 <= 2 x 1996): completing it needs no second buffer.
      expect(s.retainedBytes).toBe(3000);
      const [whole] = s.push(own(f.subarray(2000)));
      expect(whole!.equals(payload)).toBe(true);
    });

    it('any cut of any frames: memory held stays within twice the bytes received', () => {
      fc.assert(
        fc.property(
          fc.array(fc.integer({ min: 0, max: 20_000 }), { minLength: 1, maxLength: 6 }),
          fc.array(fc.integer({ min: 1, max: 70_000 }), { minLength: 1, maxLength: 20 }),
          (sizes, cuts) => {
            const ps = sizes.map((n, i) => Buffer.alloc(n, i + 1));
            const all = Buffer.concat(ps.map(frame));
            const s = new FrameSplitter({ maxFrameSize: 1 << 20 });
            const out: Buffer[] = [];
            let at = 0;
            for (let i = 0; at < all.length; i++) {
              const n = cuts[i % cuts.length]!;
              out.push(...s.push(own(all.subarray(at, at + n))));
              at += n;
              expect(s.retainedBytes).toBeLessThanOrEqual(2 * s.bufferedBytes);
            }
            expect(out.map((b) => b.length)).toEqual(sizes);
            expect(out.every((b, i) => b.equals(ps[i]!))).toBe(true);
            expect(s.retainedBytes).toBe(0);
          },
        ),
        { numRuns: 200 },
      );
    });
  });
});

describe('FrameSplitter with transient chunks (a read buffer the next read overwrites)', () => {
  /**
   * Pushes `bytes` in pieces cut by `cuts`, each copied into the same buffer, which is overwritten
   * with garbage after every push; frames are copied out as soon as they are returned.
   */
  function through(bytes: Buffer, cuts: number[]): Buffer[] {
    const s = new FrameSplitter({ maxFrameSize: 1 << 22, transientChunks: true });
    const read = Buffer.allocUnsafeSlow(65536);
    const out: Buffer[] = [];
    let at = 0;
    for (const n of [...cuts, bytes.length]) {
      const end = Math.min(bytes.length, Math.max(at, n));
      for (let from = at; from < end;) {
        const len = Math.min(read.length, end - from);
        bytes.copy(read, 0, from, from + len);
        for (const f of s.push(read.subarray(0, len))) out.push(Buffer.from(f));
        read.fill(0xee);
        from += len;
      }
      at = end;
    }
    expect(s.bufferedBytes).toBe(0);
    return out;
  }

  it('assembles frames of every size whatever the cuts, keeping no view of a read', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 200_000 }), { minLength: 1, maxLength: 6 }),
        fc.array(fc.integer({ min: 0, max: 700_000 }), { maxLength: 12 }),
        (sizes, cuts) => {
          const payloadsIn = sizes.map((n, i) => {
            const b = Buffer.allocUnsafe(n);
            for (let j = 0; j < n; j++) b[j] = (j * 7 + i) & 0xff;
            return b;
          });
          const bytes = Buffer.concat(payloadsIn.map(frame));
          const out = through(
            bytes,
            [...cuts].sort((a, b) => a - b),
          );
          expect(out.length).toBe(payloadsIn.length);
          out.forEach((f, i) => expect(f.equals(payloadsIn[i]!)).toBe(true));
        },
      ),
      { numRuns: 60 },
    );
  });

  it('copies a large rest of a read that a splitter of owned chunks would keep as a view', () => {
    const big = Buffer.alloc(200_000, 5);
    const f = frame(big);
    const chunk = Buffer.from(f.subarray(0, 50_000));
    const s = new FrameSplitter({ maxFrameSize: 1 << 20, transientChunks: true });
    expect(s.push(chunk)).toEqual([]);
    chunk.fill(0);
    const out = s.push(Buffer.from(f.subarray(50_000)));
    expect(out).toHaveLength(1);
    expect(out[0]!.equals(big)).toBe(true);
  });
});
