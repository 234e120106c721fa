/**
 * A KIP-848 member's epoch at the broker at the point where one of its commits sits in its
 * connection's request stream, as this instance can tell from the heartbeats around it.
 *
 * A broker handles a connection's requests in order, and a member's epoch moves only when the
 * coordinator handles one of the member's ConsumerGroupHeartbeats. So a commit the member sent
 * between two heartbeats on one connection meets, directly, the epoch the earlier heartbeat was
 * answered with. The proxy answers the commit itself, later than it read it: meanwhile the member
 * may have sent its next heartbeat, the broker bumped the epoch, and the answer passed through here
 * and into the store's record, so that the fence, judging by the record or by ConsumerGroupDescribe,
 * would refuse with STALE_MEMBER_EPOCH a commit the broker accepted (Kafka before 4.3 compares epochs
 * exactly; 4.3+ too for a commit whose partitions moved). This records, per member, the last few
 * heartbeat answers with their read position, so the fence can tell that case apart.
 *
 * It speaks only when it saw the whole stretch: an answered heartbeat read before the commit on the
 * commit's connection (the last such one), and one read after it on the same connection that the
 * broker accepted with the member still at that epoch. The second one's answer proves that every
 * heartbeat read before the commit was answered (a connection's answers come in order) and that the
 * member was neither fenced nor bumped in between. Anything else (a heartbeat through another
 * connection or instance, an answer not back yet, an error) leaves the fence to decide as before.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import type { ConsumerGroupHeartbeatRequest } from '../../protocol/messages/consumer-group-heartbeat-request.js';
import type { ConsumerGroupHeartbeatResponse } from '../../protocol/messages/consumer-group-heartbeat-response.js';

/** Where a request sits: its read order (RequestInfo.readSeq) and its client connection. */
export interface ReadPosition {
  seq: number;
  connectionId: string;
}

interface HeartbeatAnswer extends ReadPosition {
  /** The epoch the request carried. */
  sent: number;
  /** The epoch answered; null: refused (the member's standing is unknown from then on). */
  answered: number | null;
}

/** Answers kept per member: a commit is judged well before a member sends four more heartbeats. */
const KEPT = 4;
/** The most members remembered; forgetting one only leaves its commits to the fence as before. */
const MAX_MEMBERS = 100_000;

const key = (group: string, memberId: string): string => `${group}\u0000${memberId}`;

export class EpochsAtRead {
  private readonly members = new Map<string, HeartbeatAnswer[]>();

  /** Takes a ConsumerGroupHeartbeat answer (before the client sees it) and where its request was read. */
  observe(at: ReadPosition, req: ConsumerGroupHeartbeatRequest, res: ConsumerGroupHeartbeatResponse): void {
    const memberId = res.memberId ?? req.memberId;
    if (memberId === '') return;
    const k = key(req.groupId, memberId);
    let answers = this.members.get(k);
    if (answers === undefined) {
      if (this.members.size >= MAX_MEMBERS) this.members.clear();
      answers = [];
      this.members.set(k, answers);
    }
    const answer: HeartbeatAnswer = {
      ...at,
      sent: req.memberEpoch,
      answered: res.errorCode === ErrorCode.NONE && req.memberEpoch >= 0 ? res.memberEpoch : null,
    };
    // Answers of one connection arrive in read order; of different connections, in any order.
    let i = answers.length;
    while (i > 0 && answers[i - 1]!.seq > at.seq) i--;
    answers.splice(i, 0, answer);
    if (answers.length > KEPT) answers.shift();
  }

  /**
   * Whether the broker certainly had the member at `epoch` where the commit read at `at` reached it:
   * the last heartbeat read before the commit was answered with `epoch`, and the next one, read after
   * it on the same connection, was accepted at that epoch.
   */
  heldAt(group: string, memberId: string, epoch: number, at: ReadPosition): boolean {
    const answers = this.members.get(key(group, memberId));
    if (answers === undefined) return false;
    const next = answers.findIndex((a) => a.seq > at.seq);
    if (next <= 0) return false;
    const before = answers[next - 1]!;
    const after = answers[next]!;
    return (
      before.connectionId === at.connectionId &&
      after.connectionId === at.connectionId &&
      before.answered === epoch &&
      after.sent === epoch &&
      after.answered !== null
    );
  }

  forget(group: string): void {
    const prefix = `${group}\u0000`;
    for (const k of this.members.keys()) if (k.startsWith(prefix)) this.members.delete(k);
  }
}
