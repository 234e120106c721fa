import { describe, expect, it } from 'vitest';
import type { CommitIdentity, GroupState } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { commitVerdict as verdictOf, fetchVerdict, NoVerdictError } from './broker-verdict.js';
import type { CommittedPartition, GroupQueries, KnownGroup } from './broker-verdict.js';

/** A commit's verdict; by default one writing no partition. */
const commitVerdict = (
  q: GroupQueries,
  group: string,
  identity: CommitIdentity,
  known: KnownGroup,
  partitions: CommittedPartition[] = [],
) => verdictOf(q, group, identity, known, partitions);

const id = (gen: number, memberId = '', instance: string | null = null, v = 9): CommitIdentity => ({
  generationIdOrMemberEpoch: gen,
  memberId,
  groupInstanceId: instance,
  requestVersion: v,
});

/** A broker whose answers are given: the heartbeat code, the classic and the KIP-848 description. */
function broker(opts: {
  heartbeat?: number;
  classic?: { state: string; members?: string[] } | 'not found';
  consumer?:
    | {
        members: {
          memberId: string;
          memberEpoch: number;
          /** Held partitions of topic `t` (id `T`). */
          holds?: number[];
        }[];
      }
    | 'not found';
  /** Whether the coordinator is Kafka 4.3+ (assignment epochs); default: an older one. */
  assignmentEpochs?: boolean;
  /** Whether the coordinator is KIP-848's (Kafka 4); default: yes. */
  newCoordinator?: boolean;
}): GroupQueries & { asked: string[] } {
  const asked: string[] = [];
  return {
    asked,
    classicMemberStatus: async () => {
      asked.push('Heartbeat');
      return opts.heartbeat ?? ErrorCode.UNKNOWN_MEMBER_ID;
    },
    describeClassicGroup: async (group) => {
      asked.push('DescribeGroups');
      const c = opts.classic ?? 'not found';
      return {
        errorCode: c === 'not found' ? ErrorCode.GROUP_ID_NOT_FOUND : ErrorCode.NONE,
        errorMessage: null,
        groupId: group,
        groupState: c === 'not found' ? 'Dead' : c.state,
        protocolType: 'consumer',
        protocolData: '',
        members: (c === 'not found' ? [] : (c.members ?? [])).map((memberId) => ({
          memberId,
          groupInstanceId: null,
          clientId: '',
          clientHost: '',
          memberMetadata: Buffer.alloc(0),
          memberAssignment: Buffer.alloc(0),
        })),
        authorizedOperations: 0,
      };
    },
    describeConsumerGroup: async (group) => {
      asked.push('ConsumerGroupDescribe');
      const c = opts.consumer ?? 'not found';
      return {
        errorCode: c === 'not found' ? ErrorCode.GROUP_ID_NOT_FOUND : ErrorCode.NONE,
        errorMessage: null,
        groupId: group,
        groupState: 'Stable',
        groupEpoch: 1,
        assignmentEpoch: 1,
        assignorName: 'uniform',
        members: (c === 'not found' ? [] : c.members).map(({ holds, ...m }) => ({
          ...m,
          instanceId: null,
          rackId: null,
          clientId: '',
          clientHost: '',
          subscribedTopicNames: [],
          subscribedTopicRegex: null,
          memberType: -1,
          assignment: {
            topicPartitions: holds ? [{ topicId: 'T', topicName: 't', partitions: holds }] : [],
          },
          targetAssignment: { topicPartitions: [] },
        })),
        authorizedOperations: 0,
      };
    },
    assignmentEpochsApply: async () => {
      asked.push('ApiVersions');
      return opts.assignmentEpochs ?? false;
    },
    newGroupCoordinator: async () => {
      asked.push('ApiVersions');
      return opts.newCoordinator ?? true;
    },
  };
}

const known = (state: GroupState | null = null, offsets = false): KnownGroup => ({
  state,
  hasOffsets: async () => offsets,
});
const stable = (gen: number): GroupState => ({
  protocol: 'classic',
  generationId: gen,
  state: 'Stable',
  members: [],
  transactional: false,
});

describe('commitVerdict: what the broker would answer a commit', () => {
  it('classic member confirmed by its heartbeat in a generation the record has Stable: accepted, without DescribeGroups', async () => {
    const b = broker({ heartbeat: ErrorCode.NONE });
    const v = await commitVerdict(b, 'g', id(3, 'm', 'i'), known(stable(3)));
    expect(v.code).toBeNull();
    expect(v.confirmed).toEqual({ rebalancing: false });
    expect(v.updates).toEqual([
      { kind: 'verified', generationId: 3, memberId: 'm', groupInstanceId: 'i', state: 'Stable' },
    ]);
    expect(b.asked).toEqual(['Heartbeat']);
  });

  it('heartbeat NONE is Stable or CompletingRebalance: DescribeGroups decides (REBALANCE_IN_PROGRESS for the latter)', async () => {
    expect(
      (
        await commitVerdict(
          broker({ heartbeat: 0, classic: { state: 'CompletingRebalance' } }),
          'g',
          id(3, 'm'),
          known(),
        )
      ).code,
    ).toBe(ErrorCode.REBALANCE_IN_PROGRESS);
    expect(
      (await commitVerdict(broker({ heartbeat: 0, classic: { state: 'Stable' } }), 'g', id(3, 'm'), known()))
        .code,
    ).toBeNull();
  });

  it('heartbeat REBALANCE_IN_PROGRESS is PreparingRebalance, where commits are accepted', async () => {
    const v = await commitVerdict(
      broker({ heartbeat: ErrorCode.REBALANCE_IN_PROGRESS }),
      'g',
      id(3, 'm'),
      known(),
    );
    expect(v.code).toBeNull();
    expect(v.confirmed).toEqual({ rebalancing: true });
  });

  it('the identity errors of the heartbeat are the commit answer; a fenced or unknown member is recorded gone', async () => {
    for (const code of [
      ErrorCode.ILLEGAL_GENERATION,
      ErrorCode.FENCED_INSTANCE_ID,
      ErrorCode.GROUP_AUTHORIZATION_FAILED,
    ]) {
      expect((await commitVerdict(broker({ heartbeat: code }), 'g', id(3, 'm', 'i'), known())).code).toBe(
        code,
      );
    }
    const fenced = await commitVerdict(
      broker({ heartbeat: ErrorCode.FENCED_INSTANCE_ID }),
      'g',
      id(3, 'm', 'i'),
      known(),
    );
    expect(fenced.updates).toEqual([{ kind: 'gone', memberId: 'm' }]);
    const unknown = await commitVerdict(
      broker({ heartbeat: ErrorCode.UNKNOWN_MEMBER_ID, classic: { state: 'Stable' } }),
      'g',
      id(3, 'm'),
      known(),
    );
    expect(unknown).toEqual({
      code: ErrorCode.UNKNOWN_MEMBER_ID,
      updates: [{ kind: 'gone', memberId: 'm' }],
    });
  });

  it('a streams group is judged by its own coordinator: first when seen as one, else after classic and KIP-848', async () => {
    const streamsVerdict = { code: ErrorCode.STALE_MEMBER_EPOCH, updates: [] };
    const seen = broker({});
    const v = await commitVerdict(seen, 'g', id(3, 'm'), {
      ...known(),
      streamsSeen: true,
      streams: async () => streamsVerdict,
    });
    expect(v).toEqual(streamsVerdict);
    expect(seen.asked).toEqual([]);
    const unseen = broker({});
    const asked: string[] = [];
    const w = await commitVerdict(unseen, 'g', id(3, 'm'), {
      ...known(),
      streams: async () => {
        asked.push(...unseen.asked);
        return { code: null, updates: [] };
      },
    });
    expect(w.code).toBeNull();
    expect(asked).toContain('ConsumerGroupDescribe');
  });

  it('a group of a type the guard does not know is never refused: deferred to the broker', async () => {
    const b = broker({});
    const v = await commitVerdict(b, 'g', id(3, 'm'), {
      ...known(),
      streams: async () => null,
      unknownType: async () => 'future',
    });
    expect(v).toEqual({ code: null, updates: [], deferredType: 'future' });
    const none = await commitVerdict(b, 'g', id(3, 'm'), { ...known(), unknownType: async () => null });
    expect(none.code).toBe(ErrorCode.GROUP_ID_NOT_FOUND);
  });

  it('a group the broker does not have: GROUP_ID_NOT_FOUND from v9, ILLEGAL_GENERATION below, UNKNOWN_MEMBER_ID when the store holds its offsets', async () => {
    const b = broker({});
    expect((await commitVerdict(b, 'g', id(3, 'm', null, 9), known())).code).toBe(
      ErrorCode.GROUP_ID_NOT_FOUND,
    );
    expect((await commitVerdict(b, 'g', id(3, 'm', null, 8), known())).code).toBe(
      ErrorCode.ILLEGAL_GENERATION,
    );
    expect((await commitVerdict(b, 'g', id(3, 'm'), known(null, true))).code).toBe(
      ErrorCode.UNKNOWN_MEMBER_ID,
    );
    expect((await commitVerdict(b, 'g', id(-1), known())).code).toBeNull();
    // Kafka 3.x's classic coordinator answers ILLEGAL_GENERATION in every version.
    expect(
      (await commitVerdict(broker({ newCoordinator: false }), 'g', id(3, 'm', null, 9), known())).code,
    ).toBe(ErrorCode.ILLEGAL_GENERATION);
  });

  it('generation -1: accepted only by an empty group, classic or KIP-848', async () => {
    expect(
      (await commitVerdict(broker({ classic: { state: 'Empty' } }), 'g', id(-1), known())).code,
    ).toBeNull();
    expect(
      (await commitVerdict(broker({ classic: { state: 'Stable', members: ['a'] } }), 'g', id(-1), known()))
        .code,
    ).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    // With a member id, the heartbeat's checks apply (a generation of -1 is never current).
    expect(
      (
        await commitVerdict(
          broker({ classic: { state: 'Stable' }, heartbeat: ErrorCode.ILLEGAL_GENERATION }),
          'g',
          id(-1, 'a'),
          known(),
        )
      ).code,
    ).toBe(ErrorCode.ILLEGAL_GENERATION);
    expect(
      (await commitVerdict(broker({ consumer: { members: [] } }), 'g', id(-1), known())).code,
    ).toBeNull();
    expect(
      (
        await commitVerdict(
          broker({ consumer: { members: [{ memberId: 'x', memberEpoch: 2 }] } }),
          'g',
          id(-1),
          known(),
        )
      ).code,
    ).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
  });

  it('KIP-848: unknown member, version below 9, epoch other than the current one; the epoch is recorded exactly', async () => {
    const b = broker({ consumer: { members: [{ memberId: 'm', memberEpoch: 7 }] } });
    const k = known({ ...stable(-1), protocol: 'consumer' });
    expect((await commitVerdict(b, 'g', id(7, 'x'), k)).code).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect((await commitVerdict(b, 'g', id(7, 'm', null, 8), k)).code).toBe(ErrorCode.UNSUPPORTED_VERSION);
    expect((await commitVerdict(b, 'g', id(6, 'm'), k)).code).toBe(ErrorCode.STALE_MEMBER_EPOCH);
    const ok = await commitVerdict(b, 'g', id(7, 'm'), k);
    expect(ok.code).toBeNull();
    expect(ok.updates).toEqual([
      { kind: 'member-epoch', memberId: 'm', memberEpoch: 7, instanceId: null, exact: true },
    ]);
    // The record said "consumer": the classic questions are not asked.
    expect(b.asked.every((a) => a === 'ConsumerGroupDescribe' || a === 'ApiVersions')).toBe(true);
  });

  it('KIP-848 on Kafka 4.3+: an older epoch is accepted when every partition written is held since then', async () => {
    const b = broker({
      consumer: { members: [{ memberId: 'm', memberEpoch: 7, holds: [0, 1] }] },
      assignmentEpochs: true,
    });
    // Partition 0 given at epoch 3, partition 1 at 7 (as the member's heartbeats showed).
    const k: KnownGroup = {
      ...known({ ...stable(-1), protocol: 'consumer' }),
      assignmentFloor: (_m, topicId, p) => (topicId === 'T' && p === 0 ? 3 : 7),
    };
    const p = (...ps: number[]) => ps.map((partition) => ({ topic: 't', partition }));
    expect((await commitVerdict(b, 'g', id(5, 'm'), k, p(0))).code).toBeNull();
    expect((await commitVerdict(b, 'g', id(3, 'm'), k, p(0))).code).toBeNull();
    expect((await commitVerdict(b, 'g', id(2, 'm'), k, p(0))).code).toBe(ErrorCode.STALE_MEMBER_EPOCH);
    expect((await commitVerdict(b, 'g', id(5, 'm'), k, p(1))).code).toBe(ErrorCode.STALE_MEMBER_EPOCH);
    // One partition refused refuses the request, as the broker does.
    expect((await commitVerdict(b, 'g', id(5, 'm'), k, p(0, 1))).code).toBe(ErrorCode.STALE_MEMBER_EPOCH);
    // Not held (partition 2), or another topic: refused.
    expect((await commitVerdict(b, 'g', id(5, 'm'), k, p(2))).code).toBe(ErrorCode.STALE_MEMBER_EPOCH);
    expect((await commitVerdict(b, 'g', id(5, 'm'), k, [{ topic: 'u', partition: 0 }])).code).toBe(
      ErrorCode.STALE_MEMBER_EPOCH,
    );
    // Newer than the member's epoch: refused whatever is held.
    expect((await commitVerdict(b, 'g', id(8, 'm'), k, p(0))).code).toBe(ErrorCode.STALE_MEMBER_EPOCH);
    // Nothing seen of the member: held partitions are taken (the broker may have them from any epoch).
    expect((await commitVerdict(b, 'g', id(1, 'm'), known(), p(0, 1))).code).toBeNull();
    // Before 4.3 the epochs are compared exactly.
    const old = broker({ consumer: { members: [{ memberId: 'm', memberEpoch: 7, holds: [0, 1] }] } });
    expect((await commitVerdict(old, 'g', id(5, 'm'), k, p(0))).code).toBe(ErrorCode.STALE_MEMBER_EPOCH);
  });

  it('a classic heartbeat UNKNOWN_MEMBER_ID on a group DescribeGroups does not know is checked as a KIP-848 group', async () => {
    const b = broker({ consumer: { members: [{ memberId: 'm', memberEpoch: 4 }] } });
    expect((await commitVerdict(b, 'g', id(4, 'm'), known())).code).toBeNull();
  });

  it('no usable answer (coordinator moving) is an error: the caller keeps the store decision', async () => {
    await expect(
      commitVerdict(broker({ heartbeat: ErrorCode.NOT_COORDINATOR }), 'g', id(1, 'm'), known()),
    ).rejects.toBeInstanceOf(NoVerdictError);
  });
});

describe('fetchVerdict', () => {
  it('checks the member of a KIP-848 group only', async () => {
    const b = broker({ consumer: { members: [{ memberId: 'm', memberEpoch: 3 }] } });
    expect((await fetchVerdict(b, 'g', 'm', 3)).code).toBeNull();
    expect((await fetchVerdict(b, 'g', 'm', 2)).code).toBe(ErrorCode.STALE_MEMBER_EPOCH);
    expect((await fetchVerdict(b, 'g', 'x', 3)).code).toBe(ErrorCode.UNKNOWN_MEMBER_ID);
    expect((await fetchVerdict(b, 'g', null, -1)).code).toBeNull();
    expect((await fetchVerdict(broker({}), 'g', 'm', 3)).code).toBeNull();
  });
});
