import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import fc from 'fast-check';
import { open } from 'lmdb';
import { afterAll, describe, expect, it } from 'vitest';
import { encodeOffsetValues } from './embedded-value.js';
import type { OffsetWrite } from './store.js';

const dir = mkdtempSync(join(tmpdir(), 'kop-embedded-value-'));
const db = open({ path: dir });
afterAll(async () => {
  await db.close();
  rmSync(dir, { recursive: true, force: true });
});

const int32 = fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });
const int64 = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });
const text = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 80 }),
  fc.string({ unit: 'grapheme', minLength: 20, maxLength: 300 }),
  fc.string({ minLength: 250, maxLength: 70_000 }),
  fc.constantFrom('', 'orders', 'ä', '\u{1F680}'.repeat(20), 'x'.repeat(31), 'x'.repeat(32), 'y'.repeat(255)),
);
const offsetWrite = fc.record({
  topic: text,
  partition: int32,
  offset: int64,
  leaderEpoch: fc.oneof(int32, fc.integer({ min: -40, max: 200 })),
  metadata: text,
  // Partitions of one commit share their timestamps (each is made into decimal once per run of
  // equal values): some equal, some not, in any order.
  commitTimestamp: fc.oneof(int64, fc.constantFrom(0n, 1_733_480_000_000n)),
  expireTimestamp: fc.oneof(int64, fc.constantFrom(-1n, 1_733_480_000_000n)),
});

describe('embedded offset values', () => {
  it('read back as the tuple lmdb-js would have encoded itself', () => {
    fc.assert(
      fc.property(fc.array(offsetWrite, { minLength: 1, maxLength: 6 }), (writes: OffsetWrite[]) => {
        const values = encodeOffsetValues(writes);
        db.transactionSync(() => {
          values.forEach((v, i) => db.putSync(`v${i}`, v));
        });
        writes.forEach((w, i) => {
          const tuple = [
            w.topic,
            String(w.offset),
            w.leaderEpoch,
            w.metadata,
            String(w.commitTimestamp),
            String(w.expireTimestamp),
          ];
          expect(db.get(`v${i}`)).toEqual(tuple);
          // And the same as what lmdb-js encodes for the tuple.
          db.putSync('ref', tuple);
          expect(db.get('ref')).toEqual(db.get(`v${i}`));
        });
      }),
      { numRuns: 200 },
    );
  });
});
