/**
 * What the proxy reads off the broker's group responses (membership.ts): the update each response
 * implies and the fields each version carries, the recorder's skipping and store failures, and
 * DeleteGroups. Against a real broker the same is proven in offsets-semantics.test.ts and
 * guard-differential.test.ts; these run on a MemoryStore in milliseconds.
 */
import { describe, expect, test } from 'vitest';
import { StoreUnavailableError } from '../../backends/errors.js';
import { MemoryStore } from '../../backends/memory-store.js';
import type { GroupUpdate } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { DeleteGroupsResponse } from '../../protocol/messages/delete-groups-response.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { silentLogger } from '../common/log.js';
import type { Logger } from '../common/log.js';
import type { AnyExchange } from '../core/extension.js';
import { afterDeleteGroups, MembershipRecorder, membershipUpdate } from './membership.js';
import { storeOffset } from '../../test/harness/stored-offsets.js';

const joinReq = (memberId: string, groupInstanceId: string | null = null) => ({
  groupId: 'g',
  memberId,
  groupInstanceId,
});
const joinRes = (
  errorCode: number,
  memberId = 'm1',
  members: { memberId: string; groupInstanceId: string | null }[] = [],
) => ({
  errorCode,
  generationId: 4,
  memberId,
  members,
});

/** Hands over an exchange as the service does; the bodies carry only the fields membership.ts reads. */
const update = (apiKey: number, apiVersion: number, request: object, response: object) =>
  membershipUpdate(apiVersion, { apiKey, request, response } as unknown as AnyExchange);

describe('membershipUpdate', () => {
  test("JoinGroup: a follower's join, the leader's member list, the instance id from v5", () => {
    expect(update(ApiKey.JoinGroup, 9, joinReq('m1'), joinRes(0))).toEqual({
      group: 'g',
      update: { kind: 'joined', generationId: 4, memberId: 'm1', groupInstanceId: null },
    });
    const members = [
      { memberId: 'm1', groupInstanceId: 'i1' },
      { memberId: 'm2', groupInstanceId: null },
    ];
    expect(update(ApiKey.JoinGroup, 5, joinReq('m1', 'i1'), joinRes(0, 'm1', members))?.update).toEqual({
      kind: 'joined',
      generationId: 4,
      memberId: 'm1',
      groupInstanceId: 'i1',
      members,
    });
    // v4 has no instance ids: whatever the decoded objects hold is not read.
    expect(update(ApiKey.JoinGroup, 4, joinReq('m1', 'i1'), joinRes(0, 'm1', members))?.update).toEqual({
      kind: 'joined',
      generationId: 4,
      memberId: 'm1',
      groupInstanceId: null,
      members: members.map((m) => ({ ...m, groupInstanceId: null })),
    });
  });

  test('JoinGroup: a static member joining without its member id takes the instance over', () => {
    const u = update(ApiKey.JoinGroup, 5, joinReq('', 'i1'), joinRes(0, 'new'))?.update;
    expect(u).toMatchObject({ kind: 'joined', memberId: 'new', groupInstanceId: 'i1', takeover: true });
    expect(update(ApiKey.JoinGroup, 5, joinReq('old', 'i1'), joinRes(0, 'old'))?.update).not.toHaveProperty(
      'takeover',
    );
  });

  test('JoinGroup errors: a member the broker does not know is gone; other errors say nothing', () => {
    for (const code of [ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID]) {
      expect(update(ApiKey.JoinGroup, 9, joinReq('m1'), joinRes(code))).toEqual({
        group: 'g',
        update: { kind: 'gone', memberId: 'm1' },
      });
      // A member without an id was never in the group.
      expect(update(ApiKey.JoinGroup, 9, joinReq(''), joinRes(code))).toBeNull();
    }
    expect(update(ApiKey.JoinGroup, 9, joinReq('m1'), joinRes(ErrorCode.MEMBER_ID_REQUIRED))).toBeNull();
    expect(update(ApiKey.JoinGroup, 9, joinReq('m1'), joinRes(ErrorCode.REBALANCE_IN_PROGRESS))).toBeNull();
  });

  test('SyncGroup: synced (instance id from v3), rebalancing, gone', () => {
    const req = { groupId: 'g', generationId: 4, memberId: 'm1', groupInstanceId: 'i1' };
    expect(update(ApiKey.SyncGroup, 3, req, { errorCode: 0 })?.update).toEqual({
      kind: 'synced',
      generationId: 4,
      memberId: 'm1',
      groupInstanceId: 'i1',
    });
    expect(update(ApiKey.SyncGroup, 2, req, { errorCode: 0 })?.update).toMatchObject({
      groupInstanceId: null,
    });
    expect(update(ApiKey.SyncGroup, 5, req, { errorCode: ErrorCode.REBALANCE_IN_PROGRESS })?.update).toEqual({
      kind: 'rebalancing',
      generationId: 4,
    });
    expect(update(ApiKey.SyncGroup, 5, req, { errorCode: ErrorCode.UNKNOWN_MEMBER_ID })?.update).toEqual({
      kind: 'gone',
      memberId: 'm1',
    });
    expect(update(ApiKey.SyncGroup, 5, req, { errorCode: ErrorCode.ILLEGAL_GENERATION })).toBeNull();
  });

  test('Heartbeat: REBALANCE_IN_PROGRESS marks the generation rebalancing; a plain beat changes nothing', () => {
    const req = { groupId: 'g', generationId: 4, memberId: 'm1' };
    expect(update(ApiKey.Heartbeat, 4, req, { errorCode: 0 })).toBeNull();
    expect(update(ApiKey.Heartbeat, 4, req, { errorCode: ErrorCode.REBALANCE_IN_PROGRESS })?.update).toEqual({
      kind: 'rebalancing',
      generationId: 4,
    });
    expect(update(ApiKey.Heartbeat, 4, req, { errorCode: ErrorCode.FENCED_INSTANCE_ID })?.update).toEqual({
      kind: 'gone',
      memberId: 'm1',
    });
    expect(update(ApiKey.Heartbeat, 4, req, { errorCode: ErrorCode.ILLEGAL_GENERATION })).toBeNull();
  });

  test('LeaveGroup: one member below v3; from v3 the members that left, by id or by instance id alone', () => {
    expect(update(ApiKey.LeaveGroup, 2, { groupId: 'g', memberId: 'm1' }, { errorCode: 0 })?.update).toEqual({
      kind: 'left',
      memberIds: ['m1'],
    });
    const res = {
      errorCode: 0,
      members: [
        { memberId: 'm1', groupInstanceId: null, errorCode: 0 },
        { memberId: '', groupInstanceId: 'i2', errorCode: 0 },
        { memberId: 'm3', groupInstanceId: 'i3', errorCode: ErrorCode.UNKNOWN_MEMBER_ID },
      ],
    };
    expect(update(ApiKey.LeaveGroup, 3, { groupId: 'g', members: [] }, res)?.update).toEqual({
      kind: 'left',
      memberIds: ['m1'],
      groupInstanceIds: ['i2'],
    });
    const noneLeft = { errorCode: 0, members: [{ memberId: 'm3', groupInstanceId: null, errorCode: 25 }] };
    expect(update(ApiKey.LeaveGroup, 5, { groupId: 'g', members: [] }, noneLeft)).toBeNull();
    expect(update(ApiKey.LeaveGroup, 2, { groupId: 'g', memberId: 'm1' }, { errorCode: 25 })).toBeNull();
  });

  test('ConsumerGroupHeartbeat: the epoch; a join is exact and carries its instance id; a leave keeps its epoch', () => {
    const beat = (memberId: string, memberEpoch: number, instanceId: string | null = null) => ({
      groupId: 'g',
      memberId,
      memberEpoch,
      instanceId,
    });
    expect(
      update(ApiKey.ConsumerGroupHeartbeat, 0, beat('m1', 0, 'i1'), {
        errorCode: 0,
        memberId: 'm1',
        memberEpoch: 3,
      })?.update,
    ).toEqual({ kind: 'member-epoch', memberId: 'm1', memberEpoch: 3, instanceId: 'i1', exact: true });
    expect(
      update(ApiKey.ConsumerGroupHeartbeat, 0, beat('m1', 3), {
        errorCode: 0,
        memberId: null,
        memberEpoch: 4,
      })?.update,
    ).toEqual({ kind: 'member-epoch', memberId: 'm1', memberEpoch: 4 });
    for (const leave of [-1, -2]) {
      expect(
        update(ApiKey.ConsumerGroupHeartbeat, 0, beat('m1', leave), {
          errorCode: 0,
          memberId: 'm1',
          memberEpoch: 7,
        })?.update,
      ).toEqual({ kind: 'member-epoch', memberId: 'm1', memberEpoch: leave });
    }
    expect(
      update(ApiKey.ConsumerGroupHeartbeat, 0, beat('m1', 3), {
        errorCode: ErrorCode.UNKNOWN_MEMBER_ID,
      })?.update,
    ).toEqual({ kind: 'gone', memberId: 'm1' });
    expect(
      update(ApiKey.ConsumerGroupHeartbeat, 0, beat('m1', 3), {
        errorCode: ErrorCode.FENCED_MEMBER_EPOCH,
      }),
    ).toBeNull();
  });

  test('TxnOffsetCommit: one accepted partition marks the group transactional', () => {
    const res = (...codes: number[]) => ({
      topics: [{ partitions: codes.map((errorCode) => ({ errorCode })) }],
    });
    expect(update(ApiKey.TxnOffsetCommit, 3, { groupId: 'g' }, res(29, 0))).toEqual({
      group: 'g',
      update: { kind: 'transactional' },
    });
    expect(update(ApiKey.TxnOffsetCommit, 3, { groupId: 'g' }, res(29, 3))).toBeNull();
  });

  test('other APIs imply nothing', () => {
    expect(update(ApiKey.Metadata, 12, {}, {})).toBeNull();
  });
});

function recordingStore(): { store: MemoryStore; written: GroupUpdate[] } {
  const store = new MemoryStore();
  const written: GroupUpdate[] = [];
  const update = store.updateGroup.bind(store);
  store.updateGroup = (group, u) => {
    written.push(u);
    return update(group, u);
  };
  return { store, written };
}

describe('MembershipRecorder', () => {
  test('a KIP-848 heartbeat with an unchanged epoch is written once; a join always', async () => {
    const { store, written } = recordingStore();
    const r = new MembershipRecorder(store, silentLogger);
    const beat: GroupUpdate = { kind: 'member-epoch', memberId: 'm1', memberEpoch: 3 };
    expect(await r.record('g', beat)).toBe(true);
    expect(await r.record('g', beat)).toBe(true);
    expect(written).toHaveLength(1);
    await r.record('g', { ...beat, memberEpoch: 4 });
    expect(written).toHaveLength(2);
    const join: GroupUpdate = { kind: 'member-epoch', memberId: 'm1', memberEpoch: 4, exact: true };
    await r.record('g', join);
    await r.record('g', join);
    expect(written).toHaveLength(4);
  });

  test('after the member is gone, the same epoch is written again', async () => {
    const { store, written } = recordingStore();
    const r = new MembershipRecorder(store, silentLogger);
    const beat: GroupUpdate = { kind: 'member-epoch', memberId: 'm1', memberEpoch: 3 };
    await r.record('g', beat);
    await r.record('g', { kind: 'gone', memberId: 'm1' });
    await r.record('g', beat);
    expect(written.map((u) => u.kind)).toEqual(['member-epoch', 'gone', 'member-epoch']);
  });

  test('transactional is written once per group until forgotten; classic updates every time', async () => {
    const { store, written } = recordingStore();
    const r = new MembershipRecorder(store, silentLogger);
    await r.record('g', { kind: 'transactional' });
    await r.record('g', { kind: 'transactional' });
    await r.record('h', { kind: 'transactional' });
    r.forget('g');
    await r.record('g', { kind: 'transactional' });
    await r.record('g', { kind: 'rebalancing', generationId: 1 });
    await r.record('g', { kind: 'rebalancing', generationId: 1 });
    expect(written.map((u) => u.kind)).toEqual([
      'transactional',
      'transactional',
      'transactional',
      'rebalancing',
      'rebalancing',
    ]);
  });

  test('a store failure resolves false and is logged; it is not remembered as written', async () => {
    const store = new MemoryStore();
    const warnings: string[] = [];
    const log: Logger = { ...silentLogger, warn: (event) => warnings.push(event) };
    const r = new MembershipRecorder(store, log);
    const update = store.updateGroup.bind(store);
    store.updateGroup = () => Promise.reject(new StoreUnavailableError('down'));
    const beat: GroupUpdate = { kind: 'member-epoch', memberId: 'm1', memberEpoch: 3 };
    expect(await r.record('g', beat)).toBe(false);
    expect(warnings).toEqual(['could not record group membership']);
    store.updateGroup = update;
    expect(await r.record('g', beat)).toBe(true);
    expect((await store.getGroup('g'))!.members).toMatchObject([{ memberId: 'm1', memberEpoch: 3 }]);
  });
});

describe('afterDeleteGroups', () => {
  const response = (...results: [string, number][]): DeleteGroupsResponse => ({
    throttleTimeMs: 0,
    results: results.map(([groupId, errorCode]) => ({ groupId, errorCode, errorMessage: null })),
  });

  test('deleted or unknown at the broker: removed from the store, NONE when the store had it', async () => {
    const store = new MemoryStore();
    await storeOffset(store, 'deleted', 't', 0);
    await storeOffset(store, 'proxied', 't', 0);
    await storeOffset(store, 'busy', 't', 0);
    const res = await afterDeleteGroups(
      response(
        ['deleted', ErrorCode.NONE],
        ['proxied', ErrorCode.GROUP_ID_NOT_FOUND],
        ['nowhere', ErrorCode.GROUP_ID_NOT_FOUND],
        ['busy', ErrorCode.NON_EMPTY_GROUP],
      ),
      store,
      new MembershipRecorder(store, silentLogger),
    );
    expect(res.results.map((r) => [r.groupId, r.errorCode])).toEqual([
      ['deleted', ErrorCode.NONE],
      ['proxied', ErrorCode.NONE],
      ['nowhere', ErrorCode.GROUP_ID_NOT_FOUND],
      ['busy', ErrorCode.NON_EMPTY_GROUP],
    ]);
    expect(await store.listGroups()).toEqual(['busy']);
  });

  test('a transactional group the broker does not have: NONE only while the store holds offsets of it', async () => {
    const store = new MemoryStore();
    await store.updateGroup('txn-empty', { kind: 'transactional' });
    await storeOffset(store, 'txn-older', 't', 0);
    await store.updateGroup('txn-older', { kind: 'transactional' });
    const res = await afterDeleteGroups(
      response(['txn-empty', ErrorCode.GROUP_ID_NOT_FOUND], ['txn-older', ErrorCode.GROUP_ID_NOT_FOUND]),
      store,
      new MembershipRecorder(store, silentLogger),
    );
    expect(res.results.map((r) => [r.groupId, r.errorCode])).toEqual([
      ['txn-empty', ErrorCode.GROUP_ID_NOT_FOUND],
      ['txn-older', ErrorCode.NONE],
    ]);
    // Both records go: the groups' next lives start afresh, as at the broker.
    expect(await store.listGroups()).toEqual([]);
  });

  test('a store failure gives that group a retriable code', async () => {
    const store = new MemoryStore();
    await storeOffset(store, 'g', 't', 0);
    store.deleteGroup = () => Promise.reject(new StoreUnavailableError('down'));
    const res = await afterDeleteGroups(
      response(['g', ErrorCode.NONE]),
      store,
      new MembershipRecorder(store, silentLogger),
    );
    expect(res.results[0]!.errorCode).toBe(ErrorCode.COORDINATOR_NOT_AVAILABLE);
  });
});
