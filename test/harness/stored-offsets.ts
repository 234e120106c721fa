/** Offsets put straight into a store, for unit tests of what the offset service answers from it. */
import type { OffsetStore } from '../../backends/store.js';

/** Commits one partition's offset without any guard (leader epoch 6, metadata "meta"). */
export async function storeOffset(
  store: OffsetStore,
  group: string,
  topic: string,
  partition: number,
  offset = 1n,
): Promise<void> {
  await store.commit({
    group,
    requestId: `${group}\u0000${topic}\u0000${partition}\u0000${offset}`,
    writes: [
      {
        topic,
        partition,
        offset,
        leaderEpoch: 6,
        metadata: 'meta',
        commitTimestamp: 1n,
        expireTimestamp: -1n,
      },
    ],
  });
}
