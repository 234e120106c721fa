import { describe, expect, test } from 'vitest';
import { MemoryStore } from '../../backends/memory-store.js';
import { write } from '../../backends/contract.js';
import type { CommitIdentity } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { ConsumerGroupHeartbeatRequest } from '../../protocol/messages/consumer-group-heartbeat-request.js';
import type { ConsumerGroupHeartbeatResponse } from '../../protocol/messages/consumer-group-heartbeat-response.js';
import { CommitFence } from './commit-fence.js';
import { EpochsAtRead, type ReadPosition } from './epochs-at-read.js';

/** A heartbeat of member m of group g sending `sent`, answered `answered` (or refused with `errorCode`). */
function heartbeat(sent: number, answered: number, errorCode: number = ErrorCode.NONE) {
  const req = { groupId: 'g', memberId: 'm', memberEpoch: sent } as ConsumerGroupHeartbeatRequest;
  const res = { errorCode, memberId: 'm', memberEpoch: answered } as ConsumerGroupHeartbeatResponse;
  return [req, res] as const;
}

const on = (seq: number, connectionId = 'c1'): ReadPosition => ({ seq, connectionId });

describe('EpochsAtRead', () => {
  test('a commit between two heartbeats of its connection meets the epoch the first was answered', () => {
    const e = new EpochsAtRead();
    e.observe(on(1), ...heartbeat(4, 5));
    // The commit (read at 2) carries 5; nothing read after it is answered yet: unknown.
    expect(e.heldAt('g', 'm', 5, on(2))).toBe(false);
    e.observe(on(3), ...heartbeat(5, 6));
    expect(e.heldAt('g', 'm', 5, on(2))).toBe(true);
    // Not for another epoch, nor for a commit read after the bump.
    expect(e.heldAt('g', 'm', 4, on(2))).toBe(false);
    expect(e.heldAt('g', 'm', 5, on(4))).toBe(false);
    expect(e.heldAt('g', 'other', 5, on(2))).toBe(false);
  });

  test('nothing is known across connections, refusals or a heartbeat sent at another epoch', () => {
    const e = new EpochsAtRead();
    e.observe(on(1), ...heartbeat(4, 5));
    e.observe(on(3, 'c2'), ...heartbeat(5, 6));
    expect(e.heldAt('g', 'm', 5, on(2))).toBe(false);
    expect(e.heldAt('g', 'm', 5, on(2, 'c2'))).toBe(false);

    const refused = new EpochsAtRead();
    refused.observe(on(1), ...heartbeat(4, 5));
    refused.observe(on(3), ...heartbeat(5, -1, ErrorCode.FENCED_MEMBER_EPOCH));
    expect(refused.heldAt('g', 'm', 5, on(2))).toBe(false);

    // The next heartbeat rejoined at epoch 0 (the member was fenced meanwhile).
    const rejoined = new EpochsAtRead();
    rejoined.observe(on(1), ...heartbeat(4, 5));
    rejoined.observe(on(3), ...heartbeat(0, 7));
    expect(rejoined.heldAt('g', 'm', 5, on(2))).toBe(false);
  });

  test('answers of different connections are kept in read order; the oldest go', () => {
    const e = new EpochsAtRead();
    e.observe(on(10), ...heartbeat(5, 6));
    e.observe(on(5), ...heartbeat(4, 5));
    expect(e.heldAt('g', 'm', 5, on(7))).toBe(true);
    for (const seq of [11, 12, 13]) e.observe(on(seq), ...heartbeat(6, 6));
    expect(e.heldAt('g', 'm', 5, on(7))).toBe(false);
    expect(e.heldAt('g', 'm', 6, on(12))).toBe(true);
    e.forget('g');
    expect(e.heldAt('g', 'm', 6, on(12))).toBe(false);
  });
});

describe('the commit fence with the read position', () => {
  const member = (epoch: number): CommitIdentity => ({
    generationIdOrMemberEpoch: epoch,
    memberId: 'm',
    groupInstanceId: null,
    requestVersion: 9,
  });

  /** A store whose record has member m at epoch 6 (the bump the commit's next heartbeat brought). */
  async function bumpedStore(): Promise<MemoryStore> {
    const store = new MemoryStore();
    await store.updateGroup('g', { kind: 'member-epoch', memberId: 'm', memberEpoch: 6, exact: true });
    return store;
  }

  test('a STALE refusal the broker would not have given is written instead', async () => {
    const store = await bumpedStore();
    const epochs = new EpochsAtRead();
    const fence = new CommitFence({
      store,
      heldAtRead: (g, id, at) => epochs.heldAt(g, id.memberId, id.generationIdOrMemberEpoch, at),
    });
    // Without the heartbeats around it, the record's word: STALE.
    expect(await fence.decide('g', member(5), [write('t', 0, 7n)], undefined, on(2))).toMatchObject({
      kind: 'refused',
      code: ErrorCode.STALE_MEMBER_EPOCH,
    });
    epochs.observe(on(1), ...heartbeat(4, 5));
    epochs.observe(on(3), ...heartbeat(5, 6));
    expect(await fence.decide('g', member(5), [write('t', 0, 7n)], undefined, on(2))).toEqual({
      kind: 'accepted',
    });
    expect((await store.fetch('g', null)).map((o) => o.offset)).toEqual([7n]);
    // Nothing to write: the group check passes the same way.
    expect(await fence.decide('g', member(5), [], undefined, on(2))).toEqual({ kind: 'accepted' });
    // A commit read after the bump is still refused.
    expect(await fence.decide('g', member(5), [write('t', 0, 8n)], undefined, on(4))).toMatchObject({
      code: ErrorCode.STALE_MEMBER_EPOCH,
    });
    // Other refusals are not the read position's to lift.
    expect(await fence.decide('g', member(7), [write('t', 0, 9n)], undefined, on(2))).toMatchObject({
      kind: 'refused',
    });
    expect((await store.fetch('g', null)).map((o) => o.offset)).toEqual([7n]);
  });
});
