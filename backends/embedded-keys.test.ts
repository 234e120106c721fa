import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  groupKey,
  issuedBound,
  offsetKey,
  orderedRequestKey,
  partitionOf,
  prefixRange,
  requestKey,
  requestKeyOf,
  requestTimeKey,
  timeBound,
} from './embedded-keys.js';

const name = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 80 }),
  fc.string({ unit: 'binary', minLength: 60, maxLength: 400 }),
  fc.constantFrom('', 'g', 'g\u0000', 'g\u0000x', 'gg', '\uffff', '\u{1F680}'),
);
const int32 = fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });

const inRange = (key: Buffer, r: { start: Buffer; end?: Buffer }): boolean =>
  Buffer.compare(key, r.start) >= 0 && (r.end === undefined || Buffer.compare(key, r.end) < 0);

describe('embedded store keys (layout 2)', () => {
  it("a group's range holds exactly its own offsets keys, whatever the names", () => {
    fc.assert(
      fc.property(name, name, name, int32, (a, b, topic, partition) => {
        const key = offsetKey(groupKey(a), topic, partition);
        expect(inRange(key, prefixRange(groupKey(a)))).toBe(true);
        expect(inRange(key, prefixRange(groupKey(b)))).toBe(a === b);
      }),
      { numRuns: 2000 },
    );
  });

  it('partitions round-trip and sort numerically within a topic', () => {
    fc.assert(
      fc.property(name, name, int32, int32, (g, t, p, q) => {
        const kp = offsetKey(groupKey(g), t, p);
        const kq = offsetKey(groupKey(g), t, q);
        expect(partitionOf(kp)).toBe(p);
        expect(Math.sign(Buffer.compare(kp, kq))).toBe(Math.sign(p - q));
      }),
    );
  });

  it('keys stay far below LMDB’s 1,978-byte limit for names of 32,767 bytes', () => {
    const longest = 'é'.repeat(16_383);
    const key = offsetKey(groupKey(longest), longest, 0);
    expect(key.length).toBe(68);
    expect(requestTimeKey(Date.now(), requestKey(groupKey(longest), longest)).length).toBe(56);
  });

  it('a range whose prefix is all 0xff bytes has no end (nothing sorts after it)', () => {
    expect(prefixRange(Buffer.alloc(32, 0xff)).end).toBeUndefined();
    const r = prefixRange(Buffer.from([1, 0xff, 0xff]));
    expect(r.end).toEqual(Buffer.from([2]));
  });

  it('request-times keys sort by time and end a sweep at the cutoff', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 48 }),
        fc.integer({ min: 0, max: 2 ** 48 }),
        name,
        (t, cutoff, g) => {
          const rk = requestKey(groupKey(g), `r-${t}`);
          const key = requestTimeKey(t, rk);
          expect(requestKeyOf(key)).toEqual(rk);
          expect(Buffer.compare(key, timeBound(cutoff)) < 0).toBe(t < cutoff);
        },
      ),
    );
  });
});

describe('embedded store keys: requests-v3', () => {
  it('keys sort by the id’s issue time and end a sweep at the cutoff', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 0, max: 2 ** 48 - 1 }),
        fc.integer({ min: 0, max: 2 ** 48 - 1 }),
        fc.uint8Array({ minLength: 10, maxLength: 10 }),
        name,
        (t, cutoff, rest, g) => {
          const id = Buffer.alloc(16);
          id.writeUIntBE(t, 0, 6);
          Buffer.from(rest).copy(id, 6);
          const key = orderedRequestKey(id, groupKey(g));
          expect(key.subarray(0, 16)).toEqual(id);
          expect(Buffer.compare(key, issuedBound(cutoff)) < 0).toBe(t < cutoff);
        },
      ),
    );
  });
});
