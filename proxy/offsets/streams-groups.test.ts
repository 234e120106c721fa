import { describe, expect, it } from 'vitest';
import { ErrorCode } from '../../protocol/error-codes.js';
import { defaultStreamsGroupHeartbeatRequest } from '../../protocol/messages/streams-group-heartbeat-request.js';
import type { StreamsGroupHeartbeatRequest } from '../../protocol/messages/streams-group-heartbeat-request.js';
import { defaultStreamsGroupHeartbeatResponse } from '../../protocol/messages/streams-group-heartbeat-response.js';
import type { StreamsGroupHeartbeatResponse } from '../../protocol/messages/streams-group-heartbeat-response.js';
import { StreamsGroups } from './streams-groups.js';

function clock() {
  const c = { t: 1_000_000, now: () => c.t };
  return c;
}

/** One heartbeat of member `m` of group `app`; `active` is the answer's task list (null: unchanged). */
function beat(
  s: StreamsGroups,
  asked: Partial<StreamsGroupHeartbeatRequest>,
  answered: Partial<StreamsGroupHeartbeatResponse> & { active?: Record<string, number[]> | null },
): void {
  const { active, ...rest } = answered;
  s.observe(
    { ...defaultStreamsGroupHeartbeatRequest(), groupId: 'app', memberId: 'm', ...asked },
    {
      ...defaultStreamsGroupHeartbeatResponse(),
      memberId: 'm',
      heartbeatIntervalMs: 5000,
      activeTasks:
        active === undefined || active === null
          ? null
          : Object.entries(active).map(([subtopologyId, partitions]) => ({ subtopologyId, partitions })),
      ...rest,
    },
  );
}

describe('StreamsGroups', () => {
  it('a member is fresh with the epoch of its last answer, within the heartbeat interval', () => {
    const c = clock();
    const s = new StreamsGroups(c.now);
    expect(s.isStreamsGroup('app')).toBe(false);
    beat(s, { memberEpoch: 0 }, { memberEpoch: 3, active: { '0': [0, 1] } });
    expect(s.isStreamsGroup('app')).toBe(true);
    expect(s.fresh('app', 'm', 3)).toBe(true);
    expect(s.fresh('app', 'm', 2)).toBe(false);
    expect(s.fresh('app', 'other', 3)).toBe(false);
    c.t += 5000;
    expect(s.fresh('app', 'm', 3)).toBe(false);
  });

  it('the join answer gives the member id when the request had none', () => {
    const s = new StreamsGroups();
    beat(s, { memberId: '', memberEpoch: 0 }, { memberId: 'given', memberEpoch: 1 });
    expect(s.fresh('app', 'given', 1)).toBe(true);
  });

  it('a fenced, unknown or leaving member loses its evidence', () => {
    for (const [asked, errorCode] of [
      [{ memberEpoch: 3 }, ErrorCode.FENCED_MEMBER_EPOCH],
      [{ memberEpoch: 3 }, ErrorCode.UNKNOWN_MEMBER_ID],
      [{ memberEpoch: -1 }, ErrorCode.NONE],
      [{ memberEpoch: -2, instanceId: 'i' }, ErrorCode.NONE],
    ] as const) {
      const s = new StreamsGroups();
      beat(s, { memberEpoch: 0 }, { memberEpoch: 3, active: { '0': [0] } });
      beat(s, asked, { memberEpoch: asked.memberEpoch, errorCode });
      expect(s.fresh('app', 'm', 3)).toBe(false);
      expect(s.holdsTask('app', 'm', '0', 0)).toBe(false);
    }
  });

  it('tracks active tasks and since which epoch they are held, by subtopology', () => {
    const s = new StreamsGroups();
    beat(s, { memberEpoch: 0 }, { memberEpoch: 3, active: { '0': [0, 1] } });
    expect(s.holdsTask('app', 'm', '0', 1)).toBe(true);
    expect(s.holdsTask('app', 'm', '1', 1)).toBe(false);
    expect(s.taskFloor('app', 'm', '0', 0)).toBe(3);
    // Task 0_2 is given at epoch 5, 0_1 is revoked: held (pending revocation) until the epoch moves.
    beat(s, { memberEpoch: 3 }, { memberEpoch: 5, active: { '0': [0, 2] } });
    expect(s.taskFloor('app', 'm', '0', 0)).toBe(3);
    expect(s.taskFloor('app', 'm', '0', 2)).toBe(5);
    expect(s.holdsTask('app', 'm', '0', 1)).toBe(false);
    beat(s, { memberEpoch: 5 }, { memberEpoch: 5, active: { '0': [0] } });
    expect(s.holdsTask('app', 'm', '0', 2)).toBe(true); // being revoked within epoch 5
    beat(s, { memberEpoch: 5 }, { memberEpoch: 6, active: null });
    expect(s.holdsTask('app', 'm', '0', 2)).toBe(false);
  });

  it('forgets a group', () => {
    const s = new StreamsGroups();
    beat(s, { memberEpoch: 0 }, { memberEpoch: 3, active: { '0': [0] } });
    s.forget('app');
    expect(s.isStreamsGroup('app')).toBe(false);
    expect(s.fresh('app', 'm', 3)).toBe(false);
    expect(s.taskFloor('app', 'm', '0', 0)).toBe(0);
  });
});
