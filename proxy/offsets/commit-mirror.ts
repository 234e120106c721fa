// The mirror of an accepted commit to the broker (--mirror-commits, and the offsets CLI's import to
// a cluster): the same offsets committed at the group's coordinator with the committer's identity.
// The commit decision itself is the fence's (commit-fence.ts); this only copies what was decided.
import type { OffsetWrite } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';
import { ApiKey } from '../../protocol/messages/api-info.js';
import { defaultOffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import { NAMED_OFFSETS_MAX_VERSION, RETRY_COORDINATOR } from './broker-lookups.js';
import type { BrokerLookups } from './broker-lookups.js';

/** Who commits: a member's identity, or the anonymous admin-style one (generation -1, no member). */
export interface MirrorIdentity {
  generationIdOrMemberEpoch: number;
  memberId: string;
  groupInstanceId: string | null;
}

/**
 * Writes an accepted commit to the broker as well, with the committing member's identity (the
 * broker fences it the same way), so broker-based tooling keeps working and leaving the proxy
 * is instant. Resolves with the number of partitions the broker refused.
 */
export async function mirrorCommit(
  lookups: BrokerLookups,
  group: string,
  identity: MirrorIdentity,
  writes: OffsetWrite[],
): Promise<number> {
  const refused = await commitAtBroker(lookups, group, identity, writes);
  if (refused.memberGone && identity.generationIdOrMemberEpoch >= 0) {
    // The copy raced the member's departure (a consumer commits, then leaves at once): once the
    // group is empty the broker takes the same offsets as an admin-style commit.
    const anonymous = { generationIdOrMemberEpoch: -1, memberId: '', groupInstanceId: null };
    return (await commitAtBroker(lookups, group, anonymous, writes)).count;
  }
  return refused.count;
}

async function commitAtBroker(
  lookups: BrokerLookups,
  group: string,
  identity: MirrorIdentity,
  writes: OffsetWrite[],
): Promise<{ count: number; memberGone: boolean }> {
  const byTopic = new Map<string, OffsetWrite[]>();
  for (const w of writes) byTopic.set(w.topic, [...(byTopic.get(w.topic) ?? []), w]);
  const gone: number[] = [
    ErrorCode.UNKNOWN_MEMBER_ID,
    ErrorCode.ILLEGAL_GENERATION,
    ErrorCode.STALE_MEMBER_EPOCH,
  ];
  return lookups.coordinatorRequest(group, async (cluster, nodeId) => {
    const { body } = await cluster.request(
      nodeId,
      ApiKey.OffsetCommit,
      (v: number) => ({
        ...defaultOffsetCommitRequest(),
        groupId: group,
        generationIdOrMemberEpoch: identity.generationIdOrMemberEpoch,
        memberId: identity.memberId,
        groupInstanceId: v >= 7 ? identity.groupInstanceId : null,
        topics: [...byTopic.entries()].map(([name, ws]) => ({
          name,
          topicId: ZERO_UUID, // v10+ only, above the cap
          partitions: ws.map((w) => ({
            partitionIndex: w.partition,
            committedOffset: w.offset,
            committedLeaderEpoch: v >= 6 ? w.leaderEpoch : -1,
            commitTimestamp: -1n,
            committedMetadata: w.metadata,
          })),
        })),
      }),
      NAMED_OFFSETS_MAX_VERSION,
    );
    const codes = body.topics.flatMap((t) => t.partitions.map((p) => p.errorCode));
    return {
      result: {
        count: codes.filter((c) => c !== ErrorCode.NONE).length,
        memberGone: codes.length > 0 && codes.every((c) => gone.includes(c)),
      },
      retry: codes.some((c) => RETRY_COORDINATOR.has(c)),
    };
  });
}
