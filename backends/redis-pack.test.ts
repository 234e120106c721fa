import fc from 'fast-check';
import { unpack } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { fieldOf, packCommitWrites, storedValue } from './redis-pack.js';
import { write } from './contract.js';
import type { OffsetWrite } from './store.js';

// msgpackr (a dependency of lmdb) is an independent MessagePack decoder.
describe('packCommitWrites', () => {
  it('packs [hset, cas] as MessagePack strings, with byte lengths for non-ASCII metadata', () => {
    const writes = [
      write('t', 0, 5n, { metadata: 'héllo ✓ 🚀 | : \u0000x', leaderEpoch: 3 }),
      write('t', 1, 9223372036854775807n, { expectedOffset: -1n }),
    ];
    expect(unpack(packCommitWrites({ group: 'g', writes, requestId: 'r' }))).toEqual([
      [
        't:0',
        '5|3|1700000000000|-1|héllo ✓ 🚀 | : \u0000x',
        't:1',
        '9223372036854775807|-1|1700000000000|-1|',
      ],
      ['t:1', '-1'],
    ]);
  });

  it('uses every string and array size class (fixstr/str8/16/32, fixarray/array16/32)', () => {
    for (const len of [0, 31, 32, 255, 256, 65535, 65536, 70000]) {
      const metadata = 'x'.repeat(Math.max(0, len - '0|-1|1700000000000|-1|'.length));
      const [hset] = unpack(
        packCommitWrites({ group: 'g', writes: [write('t', 0, 0n, { metadata })], requestId: 'r' }),
      ) as [string[]];
      expect(hset[1]).toBe(`0|-1|1700000000000|-1|${metadata}`);
    }
    // Multi-byte text whose byte length crosses a header size that its character count does not.
    for (const chars of [10, 11, 20, 85, 86, 21845, 21846]) {
      const metadata = 'é'.repeat(chars) + '✓';
      const [hset] = unpack(
        packCommitWrites({ group: 'g', writes: [write('t', 0, 0n, { metadata })], requestId: 'r' }),
      ) as [string[]];
      expect(hset[1]).toBe(`0|-1|1700000000000|-1|${metadata}`);
    }
    for (const n of [7, 8, 40_000]) {
      const writes = Array.from({ length: n }, (_, p) => write('t', p, BigInt(p)));
      const [hset, cas] = unpack(packCommitWrites({ group: 'g', writes, requestId: 'r' })) as [
        string[],
        string[],
      ];
      expect(hset).toHaveLength(2 * n);
      expect(hset[2 * n - 2]).toBe(`t:${n - 1}`);
      expect(cas).toEqual([]);
    }
  });

  it('writes the timestamps of a first write whatever their values', () => {
    const first = { ...write('t', 0, 0n), commitTimestamp: -2n, expireTimestamp: -2n };
    const [hset] = unpack(packCommitWrites({ group: 'g', writes: [first], requestId: 'r' })) as [string[]];
    expect(hset).toEqual(['t:0', '0|-1|-2|-2|']);
  });

  it('writes exactly the fields and values the string forms give, for any write (property)', () => {
    const int64 = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });
    const near53 = fc.bigInt({ min: -(2n ** 53n) - 3n, max: 2n ** 53n + 3n });
    const text = fc.oneof(
      fc.string({ maxLength: 80 }),
      fc.string({ unit: 'grapheme', maxLength: 80 }),
      fc.constant(''),
    );
    const oneWrite: fc.Arbitrary<OffsetWrite> = fc
      .record({
        topic: fc.oneof(text, fc.constantFrom('t', 'orders', 'x'.repeat(64), 'y'.repeat(65))),
        partition: fc.oneof(fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }), fc.nat(20)),
        offset: fc.oneof(int64, near53, fc.constantFrom(-1n, 0n, 9n, 10n, 99n, 100n)),
        leaderEpoch: fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 }),
        metadata: text,
        commitTimestamp: fc.oneof(int64, fc.constant(1_700_000_000_000n)),
        expireTimestamp: fc.oneof(int64, fc.constant(-1n)),
        expectedOffset: fc.option(int64, { nil: undefined }),
      })
      .map((w) => {
        const out: OffsetWrite = { ...w };
        if (w.expectedOffset === undefined) delete out.expectedOffset;
        return out;
      });
    fc.assert(
      fc.property(fc.array(oneWrite, { maxLength: 40 }), (writes) => {
        const [hset, cas] = unpack(packCommitWrites({ group: 'g', writes, requestId: 'r' })) as [
          string[],
          string[],
        ];
        expect(hset).toEqual(writes.flatMap((w) => [fieldOf(w), storedValue(w)]));
        expect(cas).toEqual(
          writes.flatMap((w) =>
            w.expectedOffset === undefined ? [] : [fieldOf(w), String(w.expectedOffset)],
          ),
        );
      }),
      { numRuns: 500 },
    );
  });
});
