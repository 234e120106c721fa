/**
 * Since which epoch each KIP-848 member has held each of its partitions, as far as this proxy
 * instance saw it in the member's ConsumerGroupHeartbeat answers (in memory, like liveness.ts).
 *
 * Kafka 4.3 and later (KIP-1251) accept a member's OffsetCommit with an epoch older than its
 * current one, partition by partition: a partition must be assigned to the member (or pending
 * revocation from it) since an epoch no newer than the commit's. Every partition the member was
 * given carries the member epoch it was given at; partitions it keeps across an epoch bump keep
 * theirs; one being revoked keeps its epoch until the member's epoch next moves, which ends the
 * revocation. ConsumerGroupDescribe shows which partitions a member holds, not since when: that is
 * what this records.
 *
 * What it gives is a floor: the broker's assignment epoch of the partition is certainly at least
 * that, so a commit older than the floor is refused exactly as the broker refuses it. A floor is
 * exact when this instance saw every answer the member got since it joined; where it may have
 * missed some (the member heartbeats through another instance, the proxy started later, a static
 * member took over its instance's partitions) the floor only falls, to what is certain, and a
 * commit at or above it is left to be accepted: the proxy then never refuses what the broker
 * accepts. A static member that takes over its instance from a member that left with -2 takes
 * over its partitions, which the broker keeps at epoch 0: when the leave went through another
 * proxy instance, the store's record still holding another member of the instance says it may
 * (`takesOverStaticLeave`, asked at the join); the service then tells this record
 * (`staticLeftElsewhere`) before it takes the join's answer.
 */
import type { GroupState } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { ConsumerGroupHeartbeatRequest } from '../../protocol/messages/consumer-group-heartbeat-request.js';
import type { ConsumerGroupHeartbeatResponse } from '../../protocol/messages/consumer-group-heartbeat-response.js';

interface HeldPartition {
  /** The broker's assignment epoch of the partition is at least this. */
  floor: number;
  /** Dropped from the member's assignment within the current epoch: being revoked, still held. */
  revoking: boolean;
}

interface MemberRecord {
  /** The member epoch of the last answer seen. */
  epoch: number;
  /**
   * Whether `held` lists every partition the broker had for the member at `epoch`: then one it
   * gains later was given at `epoch` or later.
   */
  complete: boolean;
  /** By `${topicId}:${partition}`. */
  held: Map<string, HeldPartition>;
}

/** The most members remembered; forgetting one only lowers its floors to 0 (defers to the broker). */
const MAX_MEMBERS = 100_000;

const key = (group: string, memberId: string): string => `${group}\u0000${memberId}`;
const partitionKey = (topicId: string, partition: number): string => `${topicId}:${partition}`;

/** The member epoch of a static member's temporary leave. */
const STATIC_LEAVE = -2;

/**
 * What a heartbeat answer says of a member's assignment, in the form ConsumerGroupHeartbeat gives
 * it. StreamsGroupHeartbeat answers are read the same way (streams-groups.ts), with a subtopology
 * id in place of the topic id: a streams member holds active tasks, not partitions.
 */
export type HeartbeatAsked = Pick<
  ConsumerGroupHeartbeatRequest,
  'groupId' | 'memberId' | 'memberEpoch' | 'instanceId'
>;
export interface HeartbeatAnswered {
  errorCode: number;
  memberId: string | null;
  memberEpoch: number;
  assignment: { topicPartitions: readonly { topicId: string; partitions: readonly number[] }[] } | null;
}

export class AssignmentEpochs {
  private readonly members = new Map<string, MemberRecord>();
  /** Instances (`group\0instanceId`) whose static member left with -2, seen here. */
  private readonly staticLeaves = new Set<string>();

  /**
   * The lowest epoch a commit of `memberId` to the partition may carry for the broker to accept
   * it, as far as is certain (0 when nothing is known). The partition must also be held at the
   * broker now, which only the broker can say (ConsumerGroupDescribe).
   */
  floor(group: string, memberId: string, topicId: string, partition: number): number {
    const m = this.members.get(key(group, memberId));
    if (!m) return 0;
    const p = m.held.get(partitionKey(topicId, partition));
    if (p) return p.floor;
    // Not held when last seen: if held now, it was given since.
    return m.complete ? m.epoch : 0;
  }

  /**
   * Whether the member held the partition (assigned, or being revoked) when its last answer was
   * seen here; false when nothing is known of it.
   */
  holds(group: string, memberId: string, topicId: string, partition: number): boolean {
    return this.members.get(key(group, memberId))?.held.has(partitionKey(topicId, partition)) ?? false;
  }

  /** Takes a ConsumerGroupHeartbeat answer (before the client sees it). */
  observe(request: HeartbeatAsked, response: HeartbeatAnswered): void {
    const memberId = response.memberId ?? request.memberId;
    const k = key(request.groupId, memberId);
    if (response.errorCode !== ErrorCode.NONE) {
      // Fenced or gone: the member joins again with epoch 0 and is given its partitions anew.
      if (
        response.errorCode === ErrorCode.UNKNOWN_MEMBER_ID ||
        response.errorCode === ErrorCode.FENCED_MEMBER_EPOCH
      )
        this.members.delete(k);
      return;
    }
    if (request.memberEpoch < 0) {
      this.members.delete(k);
      // A static member's temporary leave: the broker keeps its partitions, at epoch 0, for the
      // instance's next member.
      if (request.memberEpoch === STATIC_LEAVE && request.instanceId !== null)
        this.bounded(this.staticLeaves).add(key(request.groupId, request.instanceId));
      return;
    }
    const epoch = response.memberEpoch;
    const assigned = response.assignment?.topicPartitions.flatMap((t) =>
      t.partitions.map((p) => partitionKey(t.topicId, p)),
    );
    const prev = this.members.get(k);
    if (request.memberEpoch === 0 || !prev) {
      // A join starts the member afresh: it holds what it is given now, at this epoch. Not so a
      // static member replacing one that left with -2 (seen here): it takes over the partitions
      // its instance held, which the broker keeps at epoch 0. A member first seen in the middle
      // of its life may hold more than this answer says, since any epoch.
      const join = request.memberEpoch === 0;
      const instance = request.instanceId === null ? null : key(request.groupId, request.instanceId);
      const takesOver = instance !== null && this.staticLeaves.delete(instance);
      const exact = join && !takesOver;
      const held = new Map<string, HeldPartition>();
      for (const p of assigned ?? []) held.set(p, { floor: exact ? epoch : 0, revoking: false });
      this.remember(k, { epoch, complete: join, held });
      return;
    }
    // The member's epoch as it knew it: another answer seen elsewhere would have moved it.
    const continuous = request.memberEpoch === prev.epoch;
    const bumped = epoch > prev.epoch;
    const gainedFloor = prev.complete ? (continuous ? epoch : prev.epoch) : 0;
    const held = new Map<string, HeldPartition>();
    if (assigned) {
      for (const p of assigned) {
        const before = prev.held.get(p);
        held.set(p, { floor: before ? before.floor : gainedFloor, revoking: false });
      }
      // Revoked within the epoch: held until the epoch moves.
      if (!bumped)
        for (const [p, h] of prev.held) if (!held.has(p)) held.set(p, { floor: h.floor, revoking: true });
    } else {
      for (const [p, h] of prev.held) if (!(bumped && h.revoking)) held.set(p, h);
    }
    // After an epoch bump nothing is being revoked: an assignment then is all the member holds.
    const complete = prev.complete || (bumped && assigned !== undefined);
    this.remember(k, { epoch: Math.max(epoch, prev.epoch), complete, held });
  }

  /** Whether a static leave of the instance was seen here (no need to ask the store then). */
  knowsStaticLeave(group: string, instanceId: string): boolean {
    return this.staticLeaves.has(key(group, instanceId));
  }

  /** The instance's member left with -2 through another proxy instance (the store's record says so). */
  staticLeftElsewhere(group: string, instanceId: string): void {
    this.bounded(this.staticLeaves).add(key(group, instanceId));
  }

  forget(group: string): void {
    const prefix = `${group}\u0000`;
    for (const k of this.members.keys()) if (k.startsWith(prefix)) this.members.delete(k);
    for (const k of this.staticLeaves) if (k.startsWith(prefix)) this.staticLeaves.delete(k);
  }

  private remember(k: string, record: MemberRecord): void {
    if (!this.members.has(k) && this.members.size >= MAX_MEMBERS) this.members.clear();
    this.members.set(k, record);
  }

  private bounded(set: Set<string>): Set<string> {
    if (set.size >= MAX_MEMBERS) set.clear();
    return set;
  }
}

/**
 * Whether a ConsumerGroupHeartbeat join (epoch 0) of a static member, answered NONE, may take over
 * partitions its instance's previous member left with -2, by the store's record of the group
 * before the join is written (null: the store could not be read). The record keeps such a member
 * at -2 until the instance's next join, whichever proxy instance saw the leave; but the leave's
 * write may have failed (the store down then), leaving the member at the epoch it had. The broker
 * answers a static join NONE only when the instance has no active member, so any other member of
 * the instance in the record is one that left with -2, left with -1 or expired without the record
 * hearing of it: the join may be a takeover. So may any join the record cannot tell about. Taking
 * a new member for a takeover only lowers floors (an epoch older than its join, which the member
 * never had, is then left to be accepted for the partitions it holds); the reverse would refuse
 * what the broker accepts.
 */
export function takesOverStaticLeave(
  state: GroupState | null | 'unreadable',
  request: ConsumerGroupHeartbeatRequest,
  response: ConsumerGroupHeartbeatResponse,
): boolean {
  if (response.errorCode !== ErrorCode.NONE || request.memberEpoch !== 0 || request.instanceId === null)
    return false;
  if (state === 'unreadable') return true;
  const memberId = response.memberId ?? request.memberId;
  return (
    state?.protocol === 'consumer' &&
    state.members.some((m) => m.groupInstanceId === request.instanceId && m.memberId !== memberId)
  );
}
