/**
 * Streams groups (KIP-1071, `group.protocol=streams`) as this proxy instance saw them in the
 * broker's StreamsGroupHeartbeat answers, in memory: which groups are streams groups, each
 * member's epoch and when the broker last vouched for it, and the active tasks it holds.
 *
 * Kafka's coordinator fences a streams member's OffsetCommit and OffsetFetch much as a KIP-848
 * member's (StreamsGroup.validateOffsetCommit / validateOffsetFetch; docs/design.md, "Streams
 * groups"), but the member is described by StreamsGroupDescribe and holds tasks (a subtopology
 * and a partition number), not topic partitions. The store's record models classic and KIP-848
 * members only (of a streams group it keeps the topology, for group tools: streams-topologies.ts); a streams member's commit is therefore accepted on this module's word alone
 * (`fresh`), and anything else is the broker's verdict (streams-verdict.ts).
 *
 * Only active tasks matter for commits: a commit of an older epoch is checked against the
 * assignment epoch of the active task whose subtopology reads the committed topic (Kafka 4.3+).
 * Since when a member holds a task is tracked as for KIP-848 partitions (assignment-epochs.ts),
 * keyed by subtopology id.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import type { StreamsGroupHeartbeatRequest } from '../../protocol/messages/streams-group-heartbeat-request.js';
import type { StreamsGroupHeartbeatResponse } from '../../protocol/messages/streams-group-heartbeat-response.js';
import { AssignmentEpochs } from './assignment-epochs.js';

interface MemberEvidence {
  memberEpoch: number;
  seenAt: number;
  intervalMs: number;
}

/** The most members and groups remembered; forgetting one only costs a broker check. */
const MAX_ENTRIES = 200_000;

const key = (group: string, memberId: string): string => `${group}\u0000${memberId}`;

export class StreamsGroups {
  private readonly members = new Map<string, MemberEvidence>();
  /** Groups a StreamsGroupHeartbeat was answered for here. */
  private readonly groups = new Set<string>();
  private readonly tasks = new AssignmentEpochs();

  constructor(private readonly now: () => number = Date.now) {}

  /** Whether this instance saw the broker answer a StreamsGroupHeartbeat of the group. */
  isStreamsGroup(group: string): boolean {
    return this.groups.has(group);
  }

  /**
   * Whether a commit or fetch of the member with `memberEpoch` may be accepted on what this
   * instance saw: an answer with that epoch within the heartbeat interval the broker announced
   * (the broker's session timeout is longer, so the member cannot have been fenced since).
   */
  fresh(group: string, memberId: string, memberEpoch: number): boolean {
    const e = this.members.get(key(group, memberId));
    return e !== undefined && e.memberEpoch === memberEpoch && this.now() - e.seenAt < e.intervalMs;
  }

  /**
   * The lowest epoch a commit of the member to the task's partition may carry, as far as is
   * certain (0: nothing known; see AssignmentEpochs.floor).
   */
  taskFloor(group: string, memberId: string, subtopologyId: string, partition: number): number {
    return this.tasks.floor(group, memberId, subtopologyId, partition);
  }

  /**
   * Whether the member held the active task, assigned or being revoked, in the last answer seen
   * here. StreamsGroupDescribe lists assigned tasks only, not those pending revocation.
   */
  holdsTask(group: string, memberId: string, subtopologyId: string, partition: number): boolean {
    return this.tasks.holds(group, memberId, subtopologyId, partition);
  }

  /** Takes a StreamsGroupHeartbeat answer (before the client sees it). */
  observe(request: StreamsGroupHeartbeatRequest, response: StreamsGroupHeartbeatResponse): void {
    const group = request.groupId;
    // A join's answer carries the member id the broker gave; later ones repeat it.
    const memberId = response.memberId === '' ? request.memberId : response.memberId;
    const k = key(group, memberId);
    if (response.errorCode === ErrorCode.NONE) this.bounded(this.groups).add(group);
    this.tasks.observe(
      {
        groupId: group,
        memberId: request.memberId,
        memberEpoch: request.memberEpoch,
        instanceId: request.instanceId,
      },
      {
        errorCode: response.errorCode,
        memberId,
        memberEpoch: response.memberEpoch,
        assignment:
          response.activeTasks === null
            ? null
            : {
                topicPartitions: response.activeTasks.map((t) => ({
                  topicId: t.subtopologyId,
                  partitions: t.partitions,
                })),
              },
      },
    );
    if (response.errorCode !== ErrorCode.NONE || request.memberEpoch < 0) {
      this.members.delete(k);
      return;
    }
    this.bounded(this.members).set(k, {
      memberEpoch: response.memberEpoch,
      seenAt: this.now(),
      intervalMs: response.heartbeatIntervalMs,
    });
  }

  forget(group: string): void {
    this.groups.delete(group);
    const prefix = `${group}\u0000`;
    for (const k of this.members.keys()) if (k.startsWith(prefix)) this.members.delete(k);
    this.tasks.forget(group);
  }

  private bounded<T extends Map<string, unknown> | Set<string>>(c: T): T {
    if (c.size >= MAX_ENTRIES) c.clear();
    return c;
  }
}
