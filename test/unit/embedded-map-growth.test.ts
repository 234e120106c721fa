// Issue 40 asks for readiness 503 with the store's reason on an LMDB "map full" (MDB_MAP_FULL).
// In this configuration the map cannot fill before the disk: the embedded store sets no map size,
// and lmdb-js's own LMDB (node_modules/lmdb/dependencies/lmdb/libraries/liblmdb/mdb.c,
// mdb_page_alloc, "<lmdb-js addition>") enlarges the map whenever a transaction needs a page past
// its end, starting from 128 KB; `mapSize` is only the initial size (lmdb-js README). So the store
// runs out where its file does: ENOSPC, the disk-full case (reliability-disk-full.test.ts,
// reliability-store-outage*.test.ts). This test holds lmdb-js to that: an upgrade that brought a
// fixed map back would answer MDB_MAP_FULL here, at 128 KB, long before 16 MB.
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, expect, test } from 'vitest';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import type { OffsetWrite } from '../../backends/store.js';
import { removeScratch, scratchDir } from '../harness/scratch.js';

/** lmdb-js's initial map (open.js: 0x20000 unless mapSize is given, which the store never does). */
const INITIAL_MAP_BYTES = 0x20000;
const PARTITIONS = 100;
const COMMITS = 40;
/** Kafka's largest offset metadata (offset.metadata.max.bytes): 4 KB per partition commit. */
const METADATA = 'm'.repeat(4096);

let dir: string | undefined;
afterEach(() => {
  if (dir !== undefined) removeScratch(dir);
  dir = undefined;
});

function writes(commit: number): OffsetWrite[] {
  return Array.from({ length: PARTITIONS }, (_, partition) => ({
    topic: `t${commit}`,
    partition,
    offset: BigInt(commit * 1000 + partition),
    leaderEpoch: -1,
    metadata: METADATA,
    commitTimestamp: 0n,
    expireTimestamp: -1n,
  }));
}

test('the embedded store grows past LMDB map sizes instead of answering MDB_MAP_FULL', async () => {
  dir = scratchDir('kop-map-growth');
  // A generous deadline: 400 KB transactions on a loaded machine; the point is the size, not speed.
  const store = new EmbeddedStore({ dataDir: dir, operationTimeoutMs: 60_000 });
  try {
    for (let c = 0; c < COMMITS; c++) {
      const outcome = await store.commit({ group: `g${c % 4}`, writes: writes(c), requestId: `r${c}` });
      expect(outcome).toEqual({ status: 'ok' });
    }
    // 16 MB of metadata stored and read back whole: 128 times the initial map.
    const stored = await store.fetch('g3', null);
    expect(stored).toHaveLength((COMMITS / 4) * PARTITIONS);
    expect(stored.every((s) => s.metadata === METADATA)).toBe(true);
  } finally {
    await store.close();
  }
  const bytes = statSync(join(dir, 'data.mdb')).size;
  expect(bytes).toBeGreaterThan(COMMITS * PARTITIONS * METADATA.length);
  expect(bytes).toBeGreaterThan(100 * INITIAL_MAP_BYTES);
});
