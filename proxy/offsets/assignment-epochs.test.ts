import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../protocol/error-codes.js';
import { defaultConsumerGroupHeartbeatRequest } from '../../protocol/messages/consumer-group-heartbeat-request.js';
import { defaultConsumerGroupHeartbeatResponse } from '../../protocol/messages/consumer-group-heartbeat-response.js';
import { applyGroupUpdate } from '../../backends/commit-guard.js';
import { AssignmentEpochs, takesOverStaticLeave } from './assignment-epochs.js';

/** One heartbeat of member m: sent with `sent`, answered with `epoch` and (if given) the partitions of topic T. */
function beat(
  e: AssignmentEpochs,
  sent: number,
  epoch: number,
  partitions?: number[],
  opts: { instanceId?: string; errorCode?: number } = {},
): void {
  e.observe(
    {
      ...defaultConsumerGroupHeartbeatRequest(),
      groupId: 'g',
      memberId: 'm',
      memberEpoch: sent,
      instanceId: opts.instanceId ?? null,
    },
    {
      ...defaultConsumerGroupHeartbeatResponse(),
      errorCode: opts.errorCode ?? ErrorCode.NONE,
      memberId: 'm',
      memberEpoch: epoch,
      assignment: partitions ? { topicPartitions: [{ topicId: 'T', partitions }] } : null,
    },
  );
}

const floors = (e: AssignmentEpochs, ...ps: number[]) => ps.map((p) => e.floor('g', 'm', 'T', p));

describe('AssignmentEpochs: since when a KIP-848 member holds each partition', () => {
  it('a partition keeps the epoch it was given at across bumps; one given later has the later epoch', () => {
    const e = new AssignmentEpochs();
    beat(e, 0, 2, [0]);
    beat(e, 2, 5, [0, 1]);
    beat(e, 5, 9);
    expect(floors(e, 0, 1)).toEqual([2, 5]);
    // Partition 2 is not held: if the broker says it is, it was given at 9 or later.
    expect(floors(e, 2)).toEqual([9]);
  });

  it('a partition being revoked keeps its epoch until the member epoch moves', () => {
    const e = new AssignmentEpochs();
    beat(e, 0, 2, [0, 1]);
    beat(e, 2, 2, [0]); // revoke 1, same epoch
    expect(floors(e, 1)).toEqual([2]);
    beat(e, 2, 4, [0]); // revocation done
    expect(floors(e, 0, 1)).toEqual([2, 4]);
    beat(e, 4, 4, [0, 1]); // given back within epoch 4
    expect(floors(e, 1)).toEqual([4]);
  });

  it('answers this instance may have missed lower the floors to what is certain', () => {
    const e = new AssignmentEpochs();
    beat(e, 0, 2, [0]);
    // The member sent epoch 6: it had answers this instance did not see; partition 1 came at 2..8.
    beat(e, 6, 8, [0, 1]);
    expect(floors(e, 0, 1)).toEqual([2, 2]);
  });

  it('nothing certain for a member first seen mid-life, nor for what a static member takes over at its join', () => {
    const e = new AssignmentEpochs();
    beat(e, 4, 5, [0]);
    expect(floors(e, 0, 1)).toEqual([0, 0]);
    // After a bump with an assignment, what is given later is known again.
    beat(e, 5, 7, [0]);
    expect(floors(e, 0, 1)).toEqual([0, 7]);
    const s = new AssignmentEpochs();
    beat(s, 0, 2, [0], { instanceId: 'i' });
    expect(floors(s, 0)).toEqual([2]); // a new static member: as a dynamic one
    beat(s, -2, -2, undefined, { instanceId: 'i' });
    beat(s, 0, 3, [0], { instanceId: 'i' });
    // Partition 0 may be its instance's from before (epoch 0); one it gets later comes at 3+.
    expect(floors(s, 0, 1)).toEqual([0, 3]);
    beat(s, 3, 5, [0, 1], { instanceId: 'i' });
    expect(floors(s, 0, 1)).toEqual([0, 5]);
  });

  it("a static member's takeover seen by another instance: the store's record of the -2 leave tells", () => {
    // Instance A saw member o of instance i leave with -2 and recorded it; B sees m's join.
    let state = applyGroupUpdate(null, {
      kind: 'member-epoch',
      memberId: 'o',
      memberEpoch: 2,
      instanceId: 'i',
      exact: true,
    });
    state = applyGroupUpdate(state, { kind: 'member-epoch', memberId: 'o', memberEpoch: -2 });
    const join = (memberEpoch: number, instanceId: string | null, errorCode: number = ErrorCode.NONE) =>
      [
        { ...defaultConsumerGroupHeartbeatRequest(), groupId: 'g', memberId: 'm', memberEpoch, instanceId },
        { ...defaultConsumerGroupHeartbeatResponse(), errorCode, memberId: 'm', memberEpoch: 3 },
      ] as const;
    expect(takesOverStaticLeave(state, ...join(0, 'i'))).toBe(true);
    // Not a join, another instance, a refused join, or a group without a record.
    expect(takesOverStaticLeave(state, ...join(3, 'i'))).toBe(false);
    expect(takesOverStaticLeave(state, ...join(0, 'j'))).toBe(false);
    expect(takesOverStaticLeave(state, ...join(0, 'i', ErrorCode.UNRELEASED_INSTANCE_ID))).toBe(false);
    expect(takesOverStaticLeave(null, ...join(0, 'i'))).toBe(false);
    // The leave's write failed: the record still has o at its epoch. The broker accepted m's join,
    // so o is not active there: m may have taken its partitions over. So may it when the record
    // cannot be read.
    const leaveMissed = applyGroupUpdate(null, {
      kind: 'member-epoch',
      memberId: 'o',
      memberEpoch: 2,
      instanceId: 'i',
      exact: true,
    });
    expect(takesOverStaticLeave(leaveMissed, ...join(0, 'i'))).toBe(true);
    expect(takesOverStaticLeave('unreadable', ...join(0, 'i'))).toBe(true);
    expect(takesOverStaticLeave('unreadable', ...join(0, null))).toBe(false);
    // The joiner itself in the record (a rejoin after being fenced) is no takeover.
    const rejoin = applyGroupUpdate(null, {
      kind: 'member-epoch',
      memberId: 'm',
      memberEpoch: 2,
      instanceId: 'i',
      exact: true,
    });
    expect(takesOverStaticLeave(rejoin, ...join(0, 'i'))).toBe(false);
    // Told so, B's record takes the join as a takeover: nothing certain for what m was given.
    const b = new AssignmentEpochs();
    expect(b.knowsStaticLeave('g', 'i')).toBe(false);
    b.staticLeftElsewhere('g', 'i');
    expect(b.knowsStaticLeave('g', 'i')).toBe(true);
    beat(b, 0, 3, [0], { instanceId: 'i' });
    expect(floors(b, 0, 1)).toEqual([0, 3]);
  });

  it('a fenced member, one that left, and a join start afresh', () => {
    const e = new AssignmentEpochs();
    beat(e, 0, 2, [0]);
    beat(e, 2, 2, undefined, { errorCode: ErrorCode.FENCED_MEMBER_EPOCH });
    expect(floors(e, 0)).toEqual([0]);
    beat(e, 0, 6, [0]);
    expect(floors(e, 0)).toEqual([6]);
    beat(e, -1, -1);
    expect(floors(e, 0)).toEqual([0]);
    beat(e, 0, 3, [1]);
    e.forget('g');
    expect(floors(e, 1)).toEqual([0]);
  });
});
