import fc from 'fast-check';
import { describe, expect, test } from 'vitest';
import { ProtocolError } from '../../protocol/errors.js';
import { ResponseReader } from './response-reader.js';
import type { FrameRoute } from './response-reader.js';

/** A frame built by hand: 4-byte size, then the payload (whose first 4 bytes are the correlation id). */
function frame(correlationId: number, bodyLength: number): Buffer {
  const payload = Buffer.alloc(4 + bodyLength);
  payload.writeInt32BE(correlationId, 0);
  for (let i = 0; i < bodyLength; i++) payload[4 + i] = (i * 7 + correlationId) & 0xff;
  const size = Buffer.alloc(4);
  size.writeInt32BE(payload.length, 0);
  return Buffer.concat([size, payload]);
}

interface Seen {
  routed: [number, number | null][];
  /** Each frame as received: streamed bytes concatenated (prefix included), or the whole payload prefixed again. */
  frames: Buffer[];
}

function reader(routeOf: (i: number) => FrameRoute, max = 1 << 20): { r: ResponseReader; seen: Seen } {
  const seen: Seen = { routed: [], frames: [] };
  let streamed: Buffer[] = [];
  const r = new ResponseReader(max, {
    routeResponse: (size, correlationId) => {
      seen.routed.push([size, correlationId]);
      return routeOf(seen.routed.length - 1);
    },
    streamResponse: (bytes, end) => {
      streamed.push(Buffer.from(bytes));
      if (end) {
        seen.frames.push(Buffer.concat(streamed));
        streamed = [];
      }
    },
    wholeResponse: (payload) => {
      const size = Buffer.alloc(4);
      size.writeInt32BE(payload.length, 0);
      seen.frames.push(Buffer.concat([size, payload]));
    },
  });
  return { r, seen };
}

/**
 * Pushes `bytes` as a socket's reused read buffer lends them: valid only during the call, then
 * overwritten, so a frame that kept a view instead of a copy comes out wrong.
 */
function lend(r: ResponseReader, bytes: Buffer): void {
  const scratch = Buffer.from(bytes);
  r.push(scratch);
  scratch.fill(0xaa);
}

describe('ResponseReader', () => {
  const frames = [frame(1, 0), frame(2, 10), frame(3, 3000), frame(-5, 1)];
  const all = Buffer.concat(frames);

  test('a stream cut at every byte, streamed and whole frames alternating, comes out frame by frame', () => {
    for (let cut = 0; cut <= all.length; cut++) {
      const { r, seen } = reader((i) => (i % 2 === 0 ? 'stream' : 'whole'));
      lend(r, all.subarray(0, cut));
      lend(r, all.subarray(cut));
      // Buffer.equals: deep equality of large buffers is slow, and this runs once per cut.
      expect(seen.frames.length).toBe(frames.length);
      expect(seen.frames.every((f, i) => f.equals(frames[i]!))).toBe(true);
      expect(seen.routed).toEqual(frames.map((f) => [f.length - 4, f.readInt32BE(4)]));
    }
  });

  test('one byte per chunk, and everything in one chunk', () => {
    for (const route of ['stream', 'whole'] as const) {
      const one = reader(() => route);
      for (let i = 0; i < all.length; i++) lend(one.r, all.subarray(i, i + 1));
      expect(one.seen.frames).toEqual(frames);
      const single = reader(() => route);
      single.r.push(all);
      expect(single.seen.frames).toEqual(frames);
    }
  });

  test('random chunkings (property)', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 2000 }), { minLength: 1, maxLength: 8 }),
        fc.array(fc.integer({ min: 1, max: 700 }), { minLength: 1, maxLength: 30 }),
        fc.array(fc.boolean(), { minLength: 8, maxLength: 8 }),
        (lengths, cuts, routes) => {
          const input = lengths.map((n, i) => frame(i + 1, n));
          const bytes = Buffer.concat(input);
          const { r, seen } = reader((i) => (routes[i % routes.length] ? 'stream' : 'whole'));
          let off = 0;
          for (let i = 0; off < bytes.length; i++) {
            const n = cuts[i % cuts.length]!;
            lend(r, bytes.subarray(off, off + n));
            off += n;
          }
          expect(seen.frames.length).toBe(input.length);
          expect(seen.frames.every((f, i) => f.equals(input[i]!))).toBe(true);
        },
      ),
      { numRuns: 200 },
    );
  });

  test('frames shorter than a correlation id are routed with null', () => {
    const tiny = Buffer.from([0, 0, 0, 0, 0, 0, 0, 2, 9, 9]);
    const { r, seen } = reader(() => 'whole');
    r.push(tiny.subarray(0, 3));
    r.push(tiny.subarray(3));
    expect(seen.routed).toEqual([
      [0, null],
      [2, null],
    ]);
    expect(seen.frames).toEqual([tiny.subarray(0, 4), tiny.subarray(4)]);
  });

  test('an oversized or negative size is refused before the body arrives', () => {
    const big = Buffer.alloc(4);
    big.writeInt32BE(1025, 0);
    expect(() => reader(() => 'whole', 1024).r.push(big)).toThrow(ProtocolError);
    const negative = Buffer.alloc(4);
    negative.writeInt32BE(-1, 0);
    expect(() => reader(() => 'whole').r.push(negative)).toThrow(ProtocolError);
  });
});

describe('the payload at hand when a frame begins', () => {
  test('is the whole payload when the frame is in the chunk, null when it spans chunks', () => {
    const atHand: (Buffer | null)[] = [];
    const r = new ResponseReader(1 << 20, {
      routeResponse: (_size, _correlationId, payload) => {
        atHand.push(payload === null ? null : Buffer.from(payload));
        return 'whole';
      },
      streamResponse: () => {},
      wholeResponse: () => {},
    });
    const a = frame(1, 10);
    const b = frame(2, 20);
    r.push(Buffer.concat([a, b.subarray(0, 12)]));
    r.push(b.subarray(12));
    expect(atHand).toEqual([a.subarray(4), null]);
  });
});
