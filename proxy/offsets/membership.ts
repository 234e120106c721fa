/**
 * Group membership as the broker decides it, read from its responses and written to the store
 * before the response reaches the client, so the commit that follows (on any proxy instance) is
 * checked against it. The broker keeps running the groups; the proxy only watches.
 */
import type { GroupUpdate, OffsetStore } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { ConsumerGroupHeartbeatRequest } from '../../protocol/messages/consumer-group-heartbeat-request.js';
import type { ConsumerGroupHeartbeatResponse } from '../../protocol/messages/consumer-group-heartbeat-response.js';
import type { DeleteGroupsResponse } from '../../protocol/messages/delete-groups-response.js';
import type { HeartbeatRequest } from '../../protocol/messages/heartbeat-request.js';
import type { HeartbeatResponse } from '../../protocol/messages/heartbeat-response.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { JoinGroupRequest } from '../../protocol/messages/join-group-request.js';
import type { JoinGroupResponse } from '../../protocol/messages/join-group-response.js';
import type { LeaveGroupRequest } from '../../protocol/messages/leave-group-request.js';
import type { LeaveGroupResponse } from '../../protocol/messages/leave-group-response.js';
import type { SyncGroupRequest } from '../../protocol/messages/sync-group-request.js';
import type { SyncGroupResponse } from '../../protocol/messages/sync-group-response.js';
import type { TxnOffsetCommitRequest } from '../../protocol/messages/txn-offset-commit-request.js';
import type { TxnOffsetCommitResponse } from '../../protocol/messages/txn-offset-commit-response.js';
import type { Logger } from '../logger.js';
import { storeFailureCode } from './kafka-errors.js';

export const OBSERVED_APIS: ReadonlySet<number> = new Set([
  ApiKey.JoinGroup,
  ApiKey.SyncGroup,
  ApiKey.Heartbeat,
  ApiKey.LeaveGroup,
  ApiKey.ConsumerGroupHeartbeat,
  ApiKey.TxnOffsetCommit,
  ApiKey.DeleteGroups,
]);

/** The group update a response implies, or null. */
export function membershipUpdate(
  apiKey: number,
  apiVersion: number,
  request: unknown,
  response: unknown,
): { group: string; update: GroupUpdate } | null {
  switch (apiKey) {
    case ApiKey.JoinGroup: {
      const req = request as JoinGroupRequest;
      const res = response as JoinGroupResponse;
      if (res.errorCode !== ErrorCode.NONE) return null;
      const update: GroupUpdate = {
        kind: 'joined',
        generationId: res.generationId,
        memberId: res.memberId,
        groupInstanceId: apiVersion >= 5 ? req.groupInstanceId : null,
      };
      // Only the leader's response lists the members: the whole generation.
      if (res.members.length > 0) {
        update.members = res.members.map((m) => ({
          memberId: m.memberId,
          groupInstanceId: apiVersion >= 5 ? m.groupInstanceId : null,
        }));
      }
      return { group: req.groupId, update };
    }
    case ApiKey.SyncGroup: {
      const req = request as SyncGroupRequest;
      const res = response as SyncGroupResponse;
      if (res.errorCode === ErrorCode.NONE) {
        return {
          group: req.groupId,
          update: { kind: 'synced', generationId: req.generationId, memberId: req.memberId },
        };
      }
      if (res.errorCode === ErrorCode.REBALANCE_IN_PROGRESS) {
        return { group: req.groupId, update: { kind: 'rebalancing', generationId: req.generationId } };
      }
      return null;
    }
    case ApiKey.Heartbeat: {
      const req = request as HeartbeatRequest;
      const res = response as HeartbeatResponse;
      if (res.errorCode !== ErrorCode.REBALANCE_IN_PROGRESS) return null;
      return { group: req.groupId, update: { kind: 'rebalancing', generationId: req.generationId } };
    }
    case ApiKey.LeaveGroup: {
      const req = request as LeaveGroupRequest;
      const res = response as LeaveGroupResponse;
      if (res.errorCode !== ErrorCode.NONE) return null;
      const memberIds =
        apiVersion >= 3
          ? res.members.filter((m) => m.errorCode === ErrorCode.NONE).map((m) => m.memberId)
          : [req.memberId];
      return memberIds.length > 0 ? { group: req.groupId, update: { kind: 'left', memberIds } } : null;
    }
    case ApiKey.ConsumerGroupHeartbeat: {
      const req = request as ConsumerGroupHeartbeatRequest;
      const res = response as ConsumerGroupHeartbeatResponse;
      if (res.errorCode !== ErrorCode.NONE) return null;
      const memberId = res.memberId ?? req.memberId;
      // A leave (epoch -1, or -2 for a static member) is answered with the same epoch.
      const memberEpoch = req.memberEpoch < 0 ? req.memberEpoch : res.memberEpoch;
      return { group: req.groupId, update: { kind: 'member-epoch', memberId, memberEpoch } };
    }
    case ApiKey.TxnOffsetCommit: {
      const req = request as TxnOffsetCommitRequest;
      const res = response as TxnOffsetCommitResponse;
      const anyAccepted = res.topics.some((t) => t.partitions.some((p) => p.errorCode === ErrorCode.NONE));
      return anyAccepted ? { group: req.groupId, update: { kind: 'transactional' } } : null;
    }
    default:
      return null;
  }
}

/**
 * Writes membership updates, skipping those that change nothing the proxy already wrote (a
 * KIP-848 member heartbeats every few seconds with the same epoch).
 */
export class MembershipRecorder {
  private readonly lastWritten = new Map<string, string>();

  constructor(
    private readonly store: OffsetStore,
    private readonly log: Logger,
  ) {}

  async record(group: string, update: GroupUpdate): Promise<void> {
    const key =
      update.kind === 'member-epoch'
        ? `${group}\u0000${update.memberId}`
        : update.kind === 'transactional'
          ? `${group}\u0000txn`
          : null;
    const value = update.kind === 'member-epoch' ? String(update.memberEpoch) : 'true';
    if (key !== null && this.lastWritten.get(key) === value) return;
    try {
      await this.store.updateGroup(group, update);
      if (key !== null) {
        if (this.lastWritten.size > 100_000) this.lastWritten.clear();
        this.lastWritten.set(key, value);
      }
    } catch (err) {
      // The response still goes to the client: the broker's decision stands. A later commit is
      // then checked against older state, which errs on the side of refusing (and is retried).
      this.log.warn('could not record group membership', { group, update: update.kind, error: err });
    }
  }

  forget(group: string): void {
    for (const key of this.lastWritten.keys())
      if (key.startsWith(`${group}\u0000`)) this.lastWritten.delete(key);
  }
}

/** DeleteGroups: groups the broker deleted or does not know lose their stored offsets too. */
export async function afterDeleteGroups(
  response: DeleteGroupsResponse,
  store: OffsetStore,
  recorder: MembershipRecorder,
): Promise<DeleteGroupsResponse> {
  for (const result of response.results) {
    if (result.errorCode !== ErrorCode.NONE && result.errorCode !== ErrorCode.GROUP_ID_NOT_FOUND) continue;
    try {
      const [state, offsets] = await Promise.all([
        store.getGroup(result.groupId),
        store.fetch(result.groupId, null),
      ]);
      if (state === null && offsets.length === 0) continue; // unknown here too: the broker's answer stands
      await store.deleteGroup(result.groupId);
      recorder.forget(result.groupId);
      // The group's offsets lived here: it existed, and now it is deleted.
      result.errorCode = ErrorCode.NONE;
    } catch (err) {
      result.errorCode = storeFailureCode(err);
    }
  }
  return response;
}
