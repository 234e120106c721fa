/** Offsets and group records put straight into a store, for unit tests of what the offset service answers from it. */
import type { OffsetStore, OffsetWrite } from '../../backends/store.js';

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

/** A classic group with one stable member `m1` in generation 3, as its JoinGroup and SyncGroup record it. */
export async function classicGroup(store: OffsetStore, group: string): Promise<void> {
  await store.updateGroup(group, {
    kind: 'joined',
    generationId: 3,
    memberId: 'm1',
    groupInstanceId: null,
    members: [{ memberId: 'm1', groupInstanceId: null }],
  });
  await store.updateGroup(group, { kind: 'synced', generationId: 3, memberId: 'm1' });
}

/** One write of topic "t": leader epoch 1, metadata "m", commit time 1, no expiry. */
export const writeOf = (partition: number, offset: bigint): OffsetWrite => ({
  topic: 't',
  partition,
  offset,
  leaderEpoch: 1,
  metadata: 'm',
  commitTimestamp: 1n,
  expireTimestamp: -1n,
});
