import { describe, expect, it } from 'vitest';
import type { CommitIdentity } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { NoVerdictError } from './broker-verdict.js';
import { streamsCommitVerdict, streamsFetchVerdict } from './streams-verdict.js';
import type { SeenTasks, StreamsDescription, StreamsQueries } from './streams-verdict.js';

const id = (epoch: number, memberId = 'm', v = 9): CommitIdentity => ({
  generationIdOrMemberEpoch: epoch,
  memberId,
  groupInstanceId: null,
  requestVersion: v,
});

/** Subtopology 0 reads `words` (and the repartition topic `rep`); subtopology 1 reads `other`. */
function described(
  members: { memberId: string; memberEpoch: number; active?: number[] }[],
  errorCode: number = ErrorCode.NONE,
): StreamsDescription {
  return {
    errorCode,
    errorMessage: null,
    groupId: 'app',
    groupState: members.length === 0 ? 'Empty' : 'Stable',
    groupEpoch: 5,
    assignmentEpoch: 5,
    topology: {
      epoch: 0,
      subtopologies: [
        {
          subtopologyId: '0',
          sourceTopics: ['words'],
          repartitionSinkTopics: [],
          stateChangelogTopics: [],
          repartitionSourceTopics: [{ name: 'rep', partitions: 2, replicationFactor: 1, topicConfigs: [] }],
        },
        {
          subtopologyId: '1',
          sourceTopics: ['other'],
          repartitionSinkTopics: [],
          stateChangelogTopics: [],
          repartitionSourceTopics: [],
        },
      ],
    },
    members: members.map((m) => ({
      memberId: m.memberId,
      memberEpoch: m.memberEpoch,
      instanceId: null,
      rackId: null,
      clientId: 'c',
      clientHost: 'h',
      topologyEpoch: 0,
      processId: 'p',
      userEndpoint: null,
      clientTags: [],
      taskOffsets: [],
      taskEndOffsets: [],
      assignment: {
        activeTasks: [{ subtopologyId: '0', partitions: m.active ?? [] }],
        standbyTasks: [{ subtopologyId: '1', partitions: [0, 1] }],
        warmupTasks: [],
      },
      targetAssignment: { activeTasks: [], standbyTasks: [], warmupTasks: [] },
      isClassic: false,
    })),
    authorizedOperations: 0,
    topologyDescription: null,
    topologyDescriptionStatus: 0,
    assignorName: null,
  };
}

const broker = (d: StreamsDescription | null, assignmentEpochs = true): StreamsQueries => ({
  describeStreamsGroup: async () => d,
  assignmentEpochsApply: async () => assignmentEpochs,
});

const nothingSeen: SeenTasks = { holdsTask: () => false, taskFloor: () => 0 };
const code = async (p: ReturnType<typeof streamsCommitVerdict>) => (await p)?.code;

describe('streamsCommitVerdict (StreamsGroup.validateOffsetCommit)', () => {
  const group = broker(described([{ memberId: 'm', memberEpoch: 5, active: [0, 1] }]));
  const words = (partition: number) => ({ topic: 'words', partition });

  it('is null for a group the broker has no streams group of', async () => {
    const q = broker(described([], ErrorCode.GROUP_ID_NOT_FOUND));
    expect(await streamsCommitVerdict(q, 'app', id(5), [], nothingSeen)).toBeNull();
  });

  it('has no verdict when the coordinator does not answer or moves', async () => {
    await expect(streamsCommitVerdict(broker(null), 'app', id(5), [], nothingSeen)).rejects.toThrow(
      NoVerdictError,
    );
    const moving = broker(described([], ErrorCode.NOT_COORDINATOR));
    await expect(streamsCommitVerdict(moving, 'app', id(5), [], nothingSeen)).rejects.toThrow(NoVerdictError);
  });

  it('accepts the member epoch, refuses a newer one and an unknown member', async () => {
    expect(await code(streamsCommitVerdict(group, 'app', id(5), [words(0)], nothingSeen))).toBeNull();
    expect(await code(streamsCommitVerdict(group, 'app', id(6), [words(0)], nothingSeen))).toBe(
      ErrorCode.STALE_MEMBER_EPOCH,
    );
    expect(await code(streamsCommitVerdict(group, 'app', id(5, 'x'), [words(0)], nothingSeen))).toBe(
      ErrorCode.UNKNOWN_MEMBER_ID,
    );
  });

  it('refuses a member commit below v9 after the member check', async () => {
    expect(await code(streamsCommitVerdict(group, 'app', id(5, 'm', 8), [], nothingSeen))).toBe(
      ErrorCode.UNSUPPORTED_VERSION,
    );
    expect(await code(streamsCommitVerdict(group, 'app', id(5, 'x', 8), [], nothingSeen))).toBe(
      ErrorCode.UNKNOWN_MEMBER_ID,
    );
  });

  it('takes epoch -1 from admin tools only while the group is empty', async () => {
    const empty = broker(described([]));
    expect(await code(streamsCommitVerdict(empty, 'app', id(-1, ''), [words(0)], nothingSeen))).toBeNull();
    expect(await code(streamsCommitVerdict(group, 'app', id(-1, ''), [words(0)], nothingSeen))).toBe(
      ErrorCode.UNKNOWN_MEMBER_ID,
    );
  });

  it('takes an older epoch on Kafka 4.3+ only for active tasks the member holds since then', async () => {
    const at = (epoch: number, partitions: { topic: string; partition: number }[], seen = nothingSeen) =>
      code(streamsCommitVerdict(group, 'app', id(epoch), partitions, seen));
    expect(await at(4, [words(0), words(1), { topic: 'rep', partition: 1 }])).toBeNull();
    // Task 0_2 is not the member's; `other` is read by subtopology 1, where it has standbys only.
    expect(await at(4, [words(0), words(2)])).toBe(ErrorCode.STALE_MEMBER_EPOCH);
    expect(await at(4, [{ topic: 'other', partition: 0 }])).toBe(ErrorCode.STALE_MEMBER_EPOCH);
    expect(await at(4, [{ topic: 'not-in-topology', partition: 0 }])).toBe(ErrorCode.STALE_MEMBER_EPOCH);
    // Given at epoch 5, as seen here: an epoch-4 commit is a zombie's.
    const givenAt5: SeenTasks = { holdsTask: () => false, taskFloor: (_m, _s, p) => (p === 1 ? 5 : 0) };
    expect(await at(4, [words(0)], givenAt5)).toBeNull();
    expect(await at(4, [words(1)], givenAt5)).toBe(ErrorCode.STALE_MEMBER_EPOCH);
    // Being revoked (seen here; StreamsGroupDescribe does not list it): still the member's.
    const revoking: SeenTasks = { holdsTask: (_m, s, p) => s === '0' && p === 2, taskFloor: () => 3 };
    expect(await at(4, [words(2)], revoking)).toBeNull();
    expect(await at(2, [words(2)], revoking)).toBe(ErrorCode.STALE_MEMBER_EPOCH);
  });

  it('compares epochs exactly before Kafka 4.3', async () => {
    const old = broker(described([{ memberId: 'm', memberEpoch: 5, active: [0] }]), false);
    expect(await code(streamsCommitVerdict(old, 'app', id(4), [words(0)], nothingSeen))).toBe(
      ErrorCode.STALE_MEMBER_EPOCH,
    );
  });
});

describe('streamsFetchVerdict (StreamsGroup.validateOffsetFetch)', () => {
  const group = broker(described([{ memberId: 'm', memberEpoch: 5, active: [0] }]));
  it('checks the member and its exact epoch; no member with epoch -1 passes', async () => {
    expect((await streamsFetchVerdict(group, 'app', 'm', 5))?.code).toBeNull();
    expect((await streamsFetchVerdict(group, 'app', 'm', 4))?.code).toBe(ErrorCode.STALE_MEMBER_EPOCH);
    expect((await streamsFetchVerdict(group, 'app', 'x', 5))?.code).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect((await streamsFetchVerdict(group, 'app', null, -1))?.code).toBeNull();
    const none = broker(described([], ErrorCode.GROUP_ID_NOT_FOUND));
    expect(await streamsFetchVerdict(none, 'app', 'm', 5)).toBeNull();
  });
});
