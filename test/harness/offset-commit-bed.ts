// The requests and dependencies of the OffsetCommit unit tests (proxy/offsets/offset-commit*.test.ts):
// an OffsetCommit request built from a short description, its answer's codes in request order, and
// the handler's dependencies on a store with the broker and liveness seams a test answers itself.
import type { OffsetStore } from '../../backends/store.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import {
  defaultOffsetCommitRequest,
  defaultOffsetCommitRequestPartition,
} from '../../protocol/messages/offset-commit-request.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';
import { CommitFence } from '../../proxy/offsets/commit-fence.js';
import type { FenceSeams } from '../../proxy/offsets/commit-fence.js';
import { GuardPolicy } from '../../proxy/offsets/guard-policy.js';
import type { CommitGuardMode } from '../../proxy/offsets/guard-policy.js';
import type { handleOffsetCommit } from '../../proxy/offsets/offset-commit.js';
import type { CommitDeps, CommitRefusal } from '../../proxy/offsets/offset-commit.js';

export interface Part {
  partition: number;
  offset?: bigint;
  metadata?: string | null;
  leaderEpoch?: number;
}

export function request(
  group: string,
  topics: Record<string, Part[]>,
  identity: Partial<
    Pick<OffsetCommitRequest, 'generationIdOrMemberEpoch' | 'memberId' | 'groupInstanceId'>
  > = {},
  retentionTimeMs = -1n,
): OffsetCommitRequest {
  return {
    ...defaultOffsetCommitRequest(),
    groupId: group,
    ...identity,
    retentionTimeMs,
    topics: Object.entries(topics).map(([name, parts]) => ({
      name,
      topicId: ZERO_UUID,
      partitions: parts.map((p) => ({
        ...defaultOffsetCommitRequestPartition(),
        partitionIndex: p.partition,
        committedOffset: p.offset ?? 1n,
        committedMetadata: p.metadata === undefined ? '' : p.metadata,
        committedLeaderEpoch: p.leaderEpoch ?? -1,
      })),
    })),
  };
}

/** Every partition's code, in request order. */
export const codes = (res: Awaited<ReturnType<typeof handleOffsetCommit>>): number[] =>
  res.topics.flatMap((t) => t.partitions.map((p) => p.errorCode));

export interface Recorded {
  refused: [string, CommitRefusal, number][];
  accepted: number[];
}

/** The fence's questions to the broker and to what the instance saw, as a test answers them. */
export type Seams = Omit<FenceSeams, 'store'>;

export function deps(
  store: OffsetStore,
  mode: CommitGuardMode = 'fence',
  extra: Partial<CommitDeps> & Seams = {},
) {
  const seen: Recorded = { refused: [], accepted: [] };
  const { brokerVerdict, committerFresh, vouchedOutsideRecord, ...rest } = extra;
  const seams: Seams = {
    ...(brokerVerdict ? { brokerVerdict } : {}),
    ...(committerFresh ? { committerFresh } : {}),
    ...(vouchedOutsideRecord ? { vouchedOutsideRecord } : {}),
  };
  const d: CommitDeps = {
    guards: new GuardPolicy(mode),
    fence: new CommitFence({ store, ...seams }),
    now: () => 1_000n,
    onRefused: (g, reason, n) => seen.refused.push([g, reason, n]),
    onAccepted: (_g, writes) => seen.accepted.push(writes.length),
    ...rest,
  };
  return { d, seen };
}
