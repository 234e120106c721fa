import { unpack } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { packCommitWrites } from './redis-pack.js';
import { write } from './contract.js';

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
});
