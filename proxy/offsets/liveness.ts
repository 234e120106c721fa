/**
 * What this proxy instance has seen of each member's standing at the broker, and when: the part
 * of the broker's group state that no response announces. A classic member's session expires
 * `session.timeout.ms` after its last heartbeat (or join, sync, accepted commit); a join phase
 * ends without the members that did not rejoin; a KIP-848 member is fenced when its session
 * lapses. None of that sends a response the proxy could record, so the store's record alone cannot
 * tell a live member from an expired one.
 *
 * The offset service therefore accepts a member's commit on the store's word only while this
 * instance has fresh evidence that the broker still has the member as the store records it; for
 * anything else it asks the broker first (broker-verdict.ts). Fresh means:
 * - classic: a successful JoinGroup+SyncGroup of the commit's generation, and a heartbeat, join,
 *   sync or broker check within a third of the member's session (and rebalance) timeout, and no
 *   rebalance seen since (during PreparingRebalance the join phase may end without the member at
 *   any time). The check is itself a heartbeat, so a member that only commits keeps its session at
 *   the broker, as its commits would keep it directly (the broker counts an accepted commit as a
 *   heartbeat).
 * - KIP-848: a ConsumerGroupHeartbeat response with the commit's epoch within the heartbeat
 *   interval it announced (the broker's session timeout is always longer than the interval).
 *
 * Entries are per instance and in memory: a member whose requests come through another instance
 * is simply checked with the broker. Evidence is dropped on any sign the member may be gone.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import { ApiKey } from '../../protocol/messages/api-info.js';
import type { JoinGroupRequest } from '../../protocol/messages/join-group-request.js';
import type { AnyExchange } from '../core/extension.js';

/** A classic member's session timeout when this instance did not see its JoinGroup. */
export const UNKNOWN_SESSION_TIMEOUT_MS = 3000;
/** Groups whose membership the store may have missed (a failed write) are checked for this long. */
export const UNCERTAIN_GROUP_MS = 5 * 60_000;
const MAX_ENTRIES = 200_000;

interface ClassicEntry {
  generationId: number;
  synced: boolean;
  rebalancing: boolean;
  seenAt: number;
  /** A third of the smaller of the member's session and rebalance timeouts (see classicFresh). */
  leaseMs: number;
}

interface ConsumerEntry {
  memberEpoch: number;
  seenAt: number;
  intervalMs: number;
}

const key = (group: string, memberId: string): string => `${group}\u0000${memberId}`;

/**
 * How long a classic member's last contact vouches for it. Its session lasts `sessionTimeoutMs`
 * after it; a join phase that began after it lasts at least the member's `rebalanceTimeoutMs`
 * (the group's is the largest of its members'), and the member hears REBALANCE_IN_PROGRESS at
 * its next heartbeat. A third of the smaller leaves room for heartbeats that come late.
 */
function leaseOf(req: JoinGroupRequest): number {
  const rebalance = req.rebalanceTimeoutMs > 0 ? req.rebalanceTimeoutMs : req.sessionTimeoutMs;
  return Math.min(req.sessionTimeoutMs, rebalance) / 3;
}

export class MemberLiveness {
  private readonly classic = new Map<string, ClassicEntry>();
  private readonly consumer = new Map<string, ConsumerEntry>();
  private readonly uncertain = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  /** Whether a classic member's commit of `generationId` may be judged by the store alone. */
  classicFresh(group: string, memberId: string, generationId: number): boolean {
    const e = this.classic.get(key(group, memberId));
    if (!e || e.generationId !== generationId || !e.synced || e.rebalancing) return false;
    return this.now() - e.seenAt < e.leaseMs && !this.isUncertain(group);
  }

  /** Whether a KIP-848 member's commit or fetch with `memberEpoch` may be judged by the store alone. */
  consumerFresh(group: string, memberId: string, memberEpoch: number): boolean {
    const e = this.consumer.get(key(group, memberId));
    if (!e || e.memberEpoch !== memberEpoch) return false;
    return this.now() - e.seenAt < e.intervalMs && !this.isUncertain(group);
  }

  /** The store may lack what the broker decided for this group (a write failed). */
  markUncertain(group: string): void {
    this.bounded(this.uncertain).set(group, this.now() + UNCERTAIN_GROUP_MS);
  }

  isUncertain(group: string): boolean {
    const until = this.uncertain.get(group);
    if (until === undefined) return false;
    if (until > this.now()) return true;
    this.uncertain.delete(group);
    return false;
  }

  /**
   * The broker confirmed a classic member (a Heartbeat with its identity, which also refreshes its
   * session). `rebalancing`: the broker answered REBALANCE_IN_PROGRESS.
   */
  classicConfirmed(group: string, memberId: string, generationId: number, rebalancing: boolean): void {
    const k = key(group, memberId);
    const prev = this.classic.get(k);
    this.bounded(this.classic).set(k, {
      generationId,
      // A member first seen by this check is taken as synced: its SyncGroup went elsewhere.
      synced: prev?.generationId === generationId ? prev.synced : true,
      rebalancing,
      seenAt: this.now(),
      leaseMs: prev?.leaseMs ?? UNKNOWN_SESSION_TIMEOUT_MS / 3,
    });
  }

  forget(group: string): void {
    const prefix = `${group}\u0000`;
    for (const map of [this.classic, this.consumer])
      for (const k of map.keys()) if (k.startsWith(prefix)) map.delete(k);
  }

  /** Takes what a group response says about its member (called before the client sees it). */
  observe(apiVersion: number, exchange: AnyExchange): void {
    switch (exchange.apiKey) {
      case ApiKey.JoinGroup: {
        const req = exchange.request;
        const res = exchange.response;
        if (res.errorCode !== ErrorCode.NONE) {
          this.classic.delete(key(req.groupId, req.memberId));
          return;
        }
        this.bounded(this.classic).set(key(req.groupId, res.memberId), {
          generationId: res.generationId,
          synced: false,
          rebalancing: false,
          seenAt: this.now(),
          leaseMs: leaseOf(req),
        });
        return;
      }
      case ApiKey.SyncGroup: {
        const req = exchange.request;
        const res = exchange.response;
        const e = this.classic.get(key(req.groupId, req.memberId));
        if (!e) return;
        if (res.errorCode === ErrorCode.NONE && e.generationId === req.generationId) {
          e.synced = true;
          e.seenAt = this.now();
        } else if (res.errorCode === ErrorCode.REBALANCE_IN_PROGRESS) {
          e.rebalancing = true;
        } else {
          this.classic.delete(key(req.groupId, req.memberId));
        }
        return;
      }
      case ApiKey.Heartbeat: {
        const req = exchange.request;
        const res = exchange.response;
        const k = key(req.groupId, req.memberId);
        const e = this.classic.get(k);
        if (!e) return;
        if (e.generationId !== req.generationId) return;
        if (res.errorCode === ErrorCode.NONE || res.errorCode === ErrorCode.REBALANCE_IN_PROGRESS) {
          e.seenAt = this.now();
          if (res.errorCode === ErrorCode.REBALANCE_IN_PROGRESS) e.rebalancing = true;
        } else {
          this.classic.delete(k);
        }
        return;
      }
      case ApiKey.LeaveGroup: {
        const req = exchange.request;
        // Whatever the answer: the member meant to go. Instance-only removals name no member, so
        // the whole group's evidence goes.
        const ids = apiVersion >= 3 ? req.members.map((m) => m.memberId) : [req.memberId];
        if (ids.includes('')) this.forget(req.groupId);
        for (const id of ids) this.classic.delete(key(req.groupId, id));
        return;
      }
      case ApiKey.ConsumerGroupHeartbeat: {
        const req = exchange.request;
        const res = exchange.response;
        const memberId = res.memberId ?? req.memberId;
        const k = key(req.groupId, memberId);
        if (res.errorCode !== ErrorCode.NONE || req.memberEpoch < 0) {
          this.consumer.delete(k);
          return;
        }
        this.bounded(this.consumer).set(k, {
          memberEpoch: res.memberEpoch,
          seenAt: this.now(),
          intervalMs: res.heartbeatIntervalMs,
        });
        return;
      }
      case ApiKey.DeleteGroups:
        return;
      default:
        return;
    }
  }

  private bounded<V>(map: Map<string, V>): Map<string, V> {
    // Forgetting only costs a broker check on the next commit.
    if (map.size >= MAX_ENTRIES) map.clear();
    return map;
  }
}
