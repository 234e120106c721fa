/**
 * The OffsetCommit request the load tools and reliability checkers send: an admin-style commit
 * (generation -1, no member, as tools and assign() consumers send) of one offset on partitions
 * 0..n-1 of one topic.
 */
import { ZERO_UUID } from '../../protocol/generated-support.js';
import { defaultOffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';

export function commitBody(
  group: string,
  topic: string,
  partitions: number,
  offset: bigint,
): OffsetCommitRequest {
  return {
    ...defaultOffsetCommitRequest(),
    groupId: group,
    generationIdOrMemberEpoch: -1,
    memberId: '',
    topics: [
      {
        name: topic,
        // v10 names the topic by id only; the zero id (UNKNOWN_TOPIC_ID) where none is given.
        topicId: ZERO_UUID,
        partitions: Array.from({ length: partitions }, (_, p) => ({
          partitionIndex: p,
          committedOffset: offset,
          committedLeaderEpoch: -1,
          committedMetadata: '',
        })),
      },
    ],
  };
}
