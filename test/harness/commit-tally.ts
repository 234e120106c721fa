// What the members of KIP-848 groups were told about their commits, read from a RequestTap's
// decoded OffsetCommit and ConsumerGroupHeartbeat exchanges: how many commits were answered with
// each error code, and how many STALE_MEMBER_EPOCH answers the broker's rule cannot have given.
//
// The broker (Kafka 4.3+, KIP-1251; 4.4's ConsumerGroup.validateOffsetCommit) accepts a member's
// commit at epoch e when e is its current epoch, or older and every partition written is assigned
// to the member (or pending revocation from it) since an epoch no newer than e. So a commit meets
// the rule whatever the broker did since, when its epoch is no newer than the latest the member was
// told and each of its partitions is in the latest assignment the member was told and has been in
// every one told since an answer of epoch e or older: a partition leaves the member only after the
// member saw an assignment without it and said so, a bump keeps the partitions' assignment epochs,
// and a partition first told in an answer of epoch x was assigned at x or before. Such a commit
// refused with STALE_MEMBER_EPOCH is "unexplained": not the broker's rule.
//
// A broker before 4.3 compares epochs exactly (rule 'exact'): there a commit can meet an epoch bump
// the member was not told yet, but only one its own heartbeat brought, handled before the commit.
// A member's epoch moves only when the coordinator handles one of its heartbeats, and a broker
// handles a connection's requests in order and answers them in order; so when a commit's answer
// arrives, the member has been told the answers of exactly the heartbeats it sent before the
// commit, and the last of them is the epoch the commit met. A commit at that epoch refused STALE
// is unexplained too.

import { ErrorCode } from '../../protocol/error-codes.js';
import type { ConsumerGroupHeartbeatRequest } from '../../protocol/messages/consumer-group-heartbeat-request.js';
import type { ConsumerGroupHeartbeatResponse } from '../../protocol/messages/consumer-group-heartbeat-response.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import type { RequestTap, TappedAnswer, TappedRequest } from './request-tap.js';

interface Told {
  epoch: number;
  /**
   * The partitions of the latest assignment told, by index (the tally is for groups reading one
   * topic), each with the epoch of the first answer that told it and every one since.
   */
  assigned: Map<number, number>;
}

/** The coordinator's rule for a commit at an older epoch (see above). */
export type EpochRule = 'assignment-epochs' | 'exact';

export interface CommitTallyReport {
  /** OffsetCommit answers by the first error code among their partitions (0: all accepted). */
  byCode: Record<number, number>;
  commits: number;
  /** ConsumerGroupHeartbeat answers seen: none means the members did not run KIP-848 groups. */
  heartbeats: number;
  stale: number;
  /**
   * Commits the rule does not accept whatever the broker did meanwhile (an older epoch than told;
   * under 'exact', than the epoch the commit met): the only ones STALE may answer.
   */
  atRisk: number;
  /** STALE_MEMBER_EPOCH answers to commits the broker's rule accepts (see above). */
  unexplainedStale: number;
  /** Examples of those, for the failure message. */
  examples: string[];
}

export class CommitTally {
  private readonly told = new Map<string, Told>();
  /** The verdict the rule gives each pending commit, by the request object. */
  private readonly expected = new WeakMap<object, boolean>();
  private readonly byCode = new Map<number, number>();
  private commits = 0;
  private atRisk = 0;
  private heartbeats = 0;
  private unexplained = 0;
  private readonly examples: string[] = [];

  /** Reads the exchanges of the tap's connections labelled `label` (all when undefined). */
  constructor(
    tap: RequestTap,
    private readonly rule: EpochRule,
    label?: string,
  ) {
    tap.decodeAnswers = new Set([...tap.decodeAnswers, ApiKey.OffsetCommit, ApiKey.ConsumerGroupHeartbeat]);
    const onRequest = tap.onRequest;
    const onAnswer = tap.onAnswer;
    const onUnanswered = tap.onUnanswered;
    tap.onUnanswered = (r) => {
      onUnanswered(r);
      if (label === undefined || r.label === label) this.unanswered(r);
    };
    tap.onRequest = (r) => {
      onRequest(r);
      if (label === undefined || r.label === label) this.request(r);
    };
    tap.onAnswer = (a) => {
      onAnswer(a);
      if (label === undefined || a.label === label) this.answer(a);
    };
  }

  private request(r: TappedRequest): void {
    if (r.apiKey !== ApiKey.OffsetCommit || this.rule === 'exact') return;
    const req = r.body as OffsetCommitRequest;
    const told = this.told.get(`${req.groupId}\u0000${req.memberId}`);
    const accepts =
      told !== undefined &&
      req.generationIdOrMemberEpoch <= told.epoch &&
      req.topics.every((t) =>
        t.partitions.every(
          (p) => (told.assigned.get(p.partitionIndex) ?? Infinity) <= req.generationIdOrMemberEpoch,
        ),
      );
    this.decided(req, accepts);
  }

  private decided(req: OffsetCommitRequest, accepts: boolean): void {
    this.expected.set(req, accepts);
    if (!accepts) this.atRisk++;
  }

  /**
   * A heartbeat whose answer was lost with its connection may have moved the member's epoch at the
   * broker without the member being told: what it was told no longer says what its commits meet.
   */
  private unanswered(r: TappedRequest): void {
    if (r.apiKey !== ApiKey.ConsumerGroupHeartbeat) return;
    const req = r.body as ConsumerGroupHeartbeatRequest;
    this.told.delete(`${req.groupId}\u0000${req.memberId}`);
  }

  private answer(a: TappedAnswer): void {
    if (a.apiKey === ApiKey.ConsumerGroupHeartbeat) {
      this.heartbeats++;
      const req = a.request as ConsumerGroupHeartbeatRequest;
      const res = a.body as ConsumerGroupHeartbeatResponse;
      const memberId = res.memberId ?? req.memberId;
      const key = `${req.groupId}\u0000${memberId}`;
      if (res.errorCode !== ErrorCode.NONE || req.memberEpoch < 0) {
        this.told.delete(key);
        return;
      }
      const prev = this.told.get(key);
      let assigned = prev?.assigned ?? new Map<number, number>();
      if (res.assignment) {
        assigned = new Map();
        for (const t of res.assignment.topicPartitions)
          for (const p of t.partitions) assigned.set(p, prev?.assigned.get(p) ?? res.memberEpoch);
      }
      this.told.set(key, { epoch: res.memberEpoch, assigned });
      return;
    }
    if (a.apiKey !== ApiKey.OffsetCommit) return;
    const req = a.request as OffsetCommitRequest;
    const res = a.body as OffsetCommitResponse;
    if (this.rule === 'exact') {
      const told = this.told.get(`${req.groupId}\u0000${req.memberId}`);
      this.decided(req, told !== undefined && told.epoch === req.generationIdOrMemberEpoch);
    }
    const code =
      res.topics.flatMap((t) => t.partitions.map((p) => p.errorCode)).find((c) => c !== ErrorCode.NONE) ??
      ErrorCode.NONE;
    this.commits++;
    this.byCode.set(code, (this.byCode.get(code) ?? 0) + 1);
    if (code === ErrorCode.STALE_MEMBER_EPOCH && this.expected.get(req) === true) {
      this.unexplained++;
      if (this.examples.length < 10)
        this.examples.push(
          `member ${req.memberId} epoch ${req.generationIdOrMemberEpoch} partitions ` +
            req.topics.flatMap((t) => t.partitions.map((p) => p.partitionIndex)).join(','),
        );
    }
  }

  report(): CommitTallyReport {
    return {
      byCode: Object.fromEntries(this.byCode),
      commits: this.commits,
      heartbeats: this.heartbeats,
      stale: this.byCode.get(ErrorCode.STALE_MEMBER_EPOCH) ?? 0,
      atRisk: this.atRisk,
      unexplainedStale: this.unexplained,
      examples: [...this.examples],
    };
  }
}
