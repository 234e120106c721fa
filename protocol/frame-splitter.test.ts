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
});
