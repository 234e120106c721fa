/**
 * Group membership as the broker decides it, read from its responses and written to the store
 * before the response reaches the client, so the commit that follows (on any proxy instance) is
 * checked against it. The broker keeps running the groups; the proxy only watches.
 */
import type { GroupUpdate, OffsetStore } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { DeleteGroupsResponse } from '../../protocol/messages/delete-groups-response.js';
import { ApiKey } from '../../protocol/messages/api-info.js';
import type { Logger } from '../common/log.js';
import { storeFailureCode } from './kafka-errors.js';
import type { AnyExchange } from '../core/extension.js';

export const OBSERVED_APIS: ReadonlySet<number> = new Set([
  ApiKey.JoinGroup,
  ApiKey.SyncGroup,
  ApiKey.Heartbeat,
  ApiKey.LeaveGroup,
  ApiKey.ConsumerGroupHeartbeat,
  // Read into memory (streams-groups.ts), and a join's topology into the record (streams-topologies.ts).
  ApiKey.StreamsGroupHeartbeat,
  ApiKey.TxnOffsetCommit,
  ApiKey.DeleteGroups,
]);

/** Codes by which the broker says a member (of this id) is not in the group. */
const MEMBER_GONE = new Set<number>([ErrorCode.UNKNOWN_MEMBER_ID, ErrorCode.FENCED_INSTANCE_ID]);

const gone = (group: string, memberId: string): { group: string; update: GroupUpdate } | null =>
  memberId === '' ? null : { group, update: { kind: 'gone', memberId } };

/** The group update a response implies, or null. */
export function membershipUpdate(
  apiVersion: number,
  exchange: AnyExchange,
): { group: string; update: GroupUpdate } | null {
  switch (exchange.apiKey) {
    case ApiKey.JoinGroup: {
      const req = exchange.request;
      const res = exchange.response;
      if (MEMBER_GONE.has(res.errorCode)) return gone(req.groupId, req.memberId);
      if (res.errorCode !== ErrorCode.NONE) return null;
      const instance = apiVersion >= 5 ? req.groupInstanceId : null;
      const update: GroupUpdate = {
        kind: 'joined',
        generationId: res.generationId,
        memberId: res.memberId,
        groupInstanceId: instance,
      };
      // A static member joining without its member id is given a new one; when that happens within
      // the generation, the broker replaced the instance's previous member (a new generation makes
      // the flag moot: it starts from the leader's list).
      if (instance !== null && req.memberId === '') update.takeover = true;
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
      const req = exchange.request;
      const res = exchange.response;
      if (res.errorCode === ErrorCode.NONE) {
        return {
          group: req.groupId,
          update: {
            kind: 'synced',
            generationId: req.generationId,
            memberId: req.memberId,
            groupInstanceId: apiVersion >= 3 ? req.groupInstanceId : null,
          },
        };
      }
      if (res.errorCode === ErrorCode.REBALANCE_IN_PROGRESS) {
        return { group: req.groupId, update: { kind: 'rebalancing', generationId: req.generationId } };
      }
      if (MEMBER_GONE.has(res.errorCode)) return gone(req.groupId, req.memberId);
      return null;
    }
    case ApiKey.Heartbeat: {
      const req = exchange.request;
      const res = exchange.response;
      if (MEMBER_GONE.has(res.errorCode)) return gone(req.groupId, req.memberId);
      if (res.errorCode !== ErrorCode.REBALANCE_IN_PROGRESS) return null;
      return { group: req.groupId, update: { kind: 'rebalancing', generationId: req.generationId } };
    }
    case ApiKey.LeaveGroup: {
      const req = exchange.request;
      const res = exchange.response;
      if (res.errorCode !== ErrorCode.NONE) return null;
      if (apiVersion < 3) return { group: req.groupId, update: { kind: 'left', memberIds: [req.memberId] } };
      const left = res.members.filter((m) => m.errorCode === ErrorCode.NONE);
      // An admin removes a static member by its instance id alone (member id "").
      const memberIds = left.filter((m) => m.memberId !== '').map((m) => m.memberId);
      const groupInstanceIds = left.flatMap((m) => (m.groupInstanceId === null ? [] : [m.groupInstanceId]));
      if (memberIds.length === 0 && groupInstanceIds.length === 0) return null;
      return {
        group: req.groupId,
        update: { kind: 'left', memberIds, ...(groupInstanceIds.length > 0 ? { groupInstanceIds } : {}) },
      };
    }
    case ApiKey.ConsumerGroupHeartbeat: {
      const req = exchange.request;
      const res = exchange.response;
      if (res.errorCode === ErrorCode.UNKNOWN_MEMBER_ID) return gone(req.groupId, req.memberId);
      if (res.errorCode !== ErrorCode.NONE) return null;
      const memberId = res.memberId ?? req.memberId;
      // A leave (epoch -1, or -2 for a static member) is answered with the same epoch.
      const memberEpoch = req.memberEpoch < 0 ? req.memberEpoch : res.memberEpoch;
      const update: GroupUpdate = { kind: 'member-epoch', memberId, memberEpoch };
      // The instance id is only sent when it changed (a join); a join also resets the member's
      // epoch and, for a static member, replaces the instance's previous member.
      if (req.instanceId !== null) update.instanceId = req.instanceId;
      if (req.memberEpoch === 0) update.exact = true;
      return { group: req.groupId, update };
    }
    case ApiKey.TxnOffsetCommit: {
      const req = exchange.request;
      const res = exchange.response;
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

  /** Resolves false when the store could not take the update (it is logged). */
  async record(group: string, update: GroupUpdate): Promise<boolean> {
    // Only plain heartbeats are skipped: a join (`exact`) is always written, as it may replace
    // another member of the instance id.
    const key =
      update.kind === 'member-epoch' && update.exact !== true
        ? `${group}\u0000${update.memberId}`
        : update.kind === 'transactional'
          ? `${group}\u0000txn`
          : update.kind === 'streams-topology'
            ? `${group}\u0000topology`
            : null;
    // A streams group's topology is written once per epoch (each member's join carries it).
    const value =
      update.kind === 'member-epoch'
        ? String(update.memberEpoch)
        : update.kind === 'streams-topology'
          ? String(update.topology.epoch)
          : 'true';
    if (key !== null && this.lastWritten.get(key) === value) return true;
    if (update.kind === 'gone' || update.kind === 'member-epoch')
      this.lastWritten.delete(`${group}\u0000${update.memberId}`);
    try {
      await this.store.updateGroup(group, update);
      if (key !== null) {
        if (this.lastWritten.size > 100_000) this.lastWritten.clear();
        this.lastWritten.set(key, value);
      }
      return true;
    } catch (err) {
      // The response still goes to the client: the broker's decision stands. The store may now
      // lack what the broker decided; the service then asks the broker (see MemberLiveness).
      this.log.warn('could not record group membership', { group, update: update.kind, error: err });
      return false;
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
      // A transactional group's offsets are the broker's: with none left here either, the group
      // the broker does not have does not exist (its record goes, its next life starts afresh).
      if (result.errorCode === ErrorCode.GROUP_ID_NOT_FOUND && state?.transactional && offsets.length === 0)
        continue;
      // The group's offsets lived here: it existed, and now it is deleted.
      result.errorCode = ErrorCode.NONE;
    } catch (err) {
      result.errorCode = storeFailureCode(err);
    }
  }
  return response;
}
