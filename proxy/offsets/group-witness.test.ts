import { describe, expect, test } from 'vitest';
import { MemoryStore } from '../../backends/memory-store.js';
import { write } from '../../backends/contract.js';
import type { CommitIdentity } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { silentLogger } from '../common/log.js';
import { AnonymousClearance } from './anonymous-clearance.js';
import type { BrokerLookups } from './broker-lookups.js';
import { CommitFence } from './commit-fence.js';
import { GroupWitness } from './group-witness.js';

const ANONYMOUS: CommitIdentity = {
  generationIdOrMemberEpoch: -1,
  memberId: '',
  groupInstanceId: null,
  requestVersion: 9,
};

/** Partition 0 of topic t at `offset` (the contract's defaults for the rest). */
const write0 = (offset: bigint) => write('t', 0, offset);

/**
 * A broker whose only group of the id is a streams group with `members` (none: no group at all),
 * answering just what the verdicts read; `asked` counts its describes.
 */
function brokerWithStreamsGroup(state: { members: string[] }): { lookups: BrokerLookups; asked: string[] } {
  const asked: string[] = [];
  const notFound = { errorCode: ErrorCode.GROUP_ID_NOT_FOUND, groupState: 'Dead', members: [] };
  // Only what the verdicts read: the whole is cast, the parts are not checked against the codec.
  const fake = {
    describeClassicGroup: async () => {
      asked.push('DescribeGroups');
      return notFound;
    },
    describeConsumerGroup: async () => {
      asked.push('ConsumerGroupDescribe');
      return notFound;
    },
    describeStreamsGroup: async () => {
      asked.push('StreamsGroupDescribe');
      if (state.members.length === 0) return notFound;
      const members = state.members.map((memberId) => ({ memberId, memberEpoch: 3 }));
      return { errorCode: ErrorCode.NONE, groupState: 'Stable', members };
    },
    classicMemberStatus: async () => ErrorCode.UNKNOWN_MEMBER_ID,
    assignmentEpochsApply: async () => true,
    newGroupCoordinator: async () => true,
    unknownGroupType: async () => null,
  };
  return { lookups: fake as unknown as BrokerLookups, asked };
}

describe('anonymous commits to a group whose members the store does not show', () => {
  test("a streams group with members this instance never saw: the broker's UNKNOWN_MEMBER_ID", async () => {
    const store = new MemoryStore();
    const { lookups, asked } = brokerWithStreamsGroup({ members: ['m-1'] });
    const witness = new GroupWitness({ store, lookups, log: silentLogger });
    const fence = new CommitFence({ store, ...witness.commitSeams() });
    expect(await fence.decide('app', ANONYMOUS, [write0(7n)])).toEqual({
      kind: 'refused',
      code: ErrorCode.UNKNOWN_MEMBER_ID,
      reason: 'fence',
    });
    expect(asked).toContain('StreamsGroupDescribe');
    expect(await store.fetch('app', null)).toEqual([]);
    // Nothing to write (every partition's metadata too large): the group is checked all the same.
    expect(await fence.decide('app', ANONYMOUS, [])).toMatchObject({ code: ErrorCode.UNKNOWN_MEMBER_ID });
  });

  test("once the broker accepted one, the next are the store's for a while, then asked again", async () => {
    const store = new MemoryStore();
    const broker = { members: [] as string[] };
    const { lookups, asked } = brokerWithStreamsGroup(broker);
    let now = 1_000_000;
    const anonymous = new AnonymousClearance(10_000, () => now);
    const witness = new GroupWitness({ store, lookups, log: silentLogger, anonymous });
    const fence = new CommitFence({ store, ...witness.commitSeams() });
    expect(await fence.decide('assigned', ANONYMOUS, [write0(1n)])).toEqual({ kind: 'accepted' });
    const asks = asked.length;
    expect(asks).toBeGreaterThan(0);
    now += 9_000;
    expect(await fence.decide('assigned', ANONYMOUS, [write0(2n)])).toEqual({ kind: 'accepted' });
    expect(asked.length, 'within the window: not asked').toBe(asks);
    // The group became a streams group with a member elsewhere; past the window the broker says so.
    broker.members = ['m-1'];
    now += 2_000;
    expect(await fence.decide('assigned', ANONYMOUS, [write0(3n)])).toMatchObject({
      code: ErrorCode.UNKNOWN_MEMBER_ID,
    });
    expect((await store.fetch('assigned', null)).map((o) => o.offset)).toEqual([2n]);
    // A refusal clears nothing: the next one is asked again.
    expect(await fence.decide('assigned', ANONYMOUS, [write0(4n)])).toMatchObject({
      code: ErrorCode.UNKNOWN_MEMBER_ID,
    });
  });
});
