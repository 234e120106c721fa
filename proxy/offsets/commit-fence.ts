/**
 * The commit fence: the one place where an OffsetCommit's group check is decided (docs/design.md,
 * "Fencing" and "An OffsetCommit, step by step"). Built once per service, it answers one question
 * per commit: accepted (written), refused with which Kafka error, or the broker's to take (a group
 * that commits transactionally). offset-commit.ts has shaped the request into writes before it
 * asks, and turns the answer into the response.
 *
 * The store accepts on its own only a committer this instance has fresh evidence for; any other
 * commit, and every commit the store refuses, is decided by the broker's verdict, which also brings
 * the store up to date. When the broker cannot be asked, a refusal is not answered (a member's
 * fatal error for what the broker might accept) but left unconfirmed: the client gets a retriable
 * code, as when the broker itself does not answer.
 *
 * The group's record is read from the store at most once per commit (the hot path, a fresh
 * committer the store accepts, reads it not at all: the store's atomic commit step checks it):
 * the broker's verdict is given the record read for it, rather than reading it again.
 */
import { newRequestId } from '../../backends/request-id.js';
import { checkCommit } from '../../backends/commit-guard.js';
import type { CommitOrder } from '../../backends/commit-order.js';
import type {
  CommitIdentity,
  CommitOutcome,
  CommitRequest,
  GroupState,
  GuardErrorCode,
  OffsetStore,
  OffsetWrite,
} from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { CommittedPartition, Verdict } from './broker-verdict.js';
import type { ReadPosition } from './epochs-at-read.js';
import { CAS_MISMATCH, CAS_TRANSACTIONAL, storeFailureCode } from './kafka-errors.js';

/** Why a commit's partitions were refused (the metrics' reason label). */
export type CommitRefusal =
  | 'fence'
  | 'broker_unanswered'
  | 'cas'
  | 'cas_transactional'
  | 'unknown_topic'
  | 'too_large'
  | 'store_down'
  | 'unauthorized';

/** The fence's one answer per commit. */
export type FenceAnswer =
  /**
   * Written (or, with nothing to write, the group check passed). `superseded`: partitions left
   * as they were because a commit this process read later had written them (CommitOutcome).
   */
  | { kind: 'accepted'; superseded?: number }
  /** Nothing written; every partition the group check covers gets `code`. */
  | { kind: 'refused'; code: number; reason: CommitRefusal }
  /** The group commits transactionally: the commit is the broker's, sent there as the client sent it. */
  | { kind: 'broker' };

/**
 * What the fence asks besides the store. The service fills them from the broker lookups and what
 * this instance saw of the groups (group-witness.ts); unit tests pass their own. Absent
 * `brokerVerdict` (no broker): the store's record decides alone.
 */
export interface FenceSeams {
  store: OffsetStore;
  /**
   * The broker's own decision on a commit with this identity (broker-verdict.ts), given the
   * store's record as the fence read it for this commit.
   */
  brokerVerdict?: (
    group: string,
    identity: CommitIdentity,
    partitions: readonly CommittedPartition[],
    record: GroupState | null,
  ) => Promise<Verdict>;
  /** Whether this instance has fresh evidence that the broker has the committer as the record does. Absent: always. */
  committerFresh?: (group: string, identity: CommitIdentity) => boolean;
  /**
   * Whether the committer is a member of a group the record does not model (a streams group) that
   * this instance just saw the broker vouch for: written without the store's fence. Absent: never.
   */
  vouchedOutsideRecord?: (group: string, identity: CommitIdentity) => boolean;
  /**
   * Whether the broker certainly had the committer at the commit's epoch where the commit, read at
   * `at`, reached it (epochs-at-read.ts): a STALE_MEMBER_EPOCH refusal then only reflects a bump
   * by a heartbeat the member sent after the commit, which the broker handled after it. Absent: never.
   */
  heldAtRead?: (group: string, identity: CommitIdentity, at: ReadPosition) => boolean;
}

/** A refusal of the store that the broker could not confirm (unreachable, frozen, its coordinator moving). */
type FenceOutcome = CommitOutcome | { status: 'unconfirmed' };

const ACCEPTED: FenceAnswer = { kind: 'accepted' };
const TO_BROKER: FenceAnswer = { kind: 'broker' };
const TRANSACTIONAL: Verdict = { code: null, updates: [], transactional: true };
const refused = (code: number, reason: CommitRefusal): FenceAnswer => ({ kind: 'refused', code, reason });

export class CommitFence {
  constructor(private readonly seams: FenceSeams) {}

  /**
   * The fence's answer on a commit of `writes` (none: every partition's metadata too large, when
   * the broker still checks the group first). `identity` undefined: a guard that does not fence
   * (`off`, `cas`), whose commits the store takes unless the group commits transactionally.
   */
  async decide(
    group: string,
    identity: CommitIdentity | undefined,
    writes: OffsetWrite[],
    order?: CommitOrder,
    at?: ReadPosition,
  ): Promise<FenceAnswer> {
    let outcome: FenceOutcome;
    try {
      outcome =
        writes.length > 0
          ? await this.write(group, identity, writes, order)
          : await this.check(group, identity);
      if (this.staleOnlyAfterRead(outcome, group, identity, at))
        outcome = writes.length > 0 ? await this.unfenced(group, writes, order) : { status: 'ok' };
    } catch (err) {
      return refused(storeFailureCode(err), 'store_down');
    }
    switch (outcome.status) {
      case 'ok':
        return outcome.superseded === undefined
          ? ACCEPTED
          : { kind: 'accepted', superseded: outcome.superseded };
      case 'transactional':
        // The broker has no compare-and-set, and the offsets to compare with are its own: sent there,
        // `cas:<expected>` would be stored as plain metadata, whatever the offset is now.
        return writes.some((w) => w.expectedOffset !== undefined)
          ? refused(CAS_TRANSACTIONAL, 'cas_transactional')
          : TO_BROKER;
      case 'fenced':
        return refused(outcome.error, 'fence');
      case 'unconfirmed':
        // Retriable: the client asks again, and gets the broker's answer once it can be had.
        return refused(ErrorCode.COORDINATOR_NOT_AVAILABLE, 'broker_unanswered');
      case 'cas-mismatch':
        // All or nothing: the request was refused whole, so every partition says so.
        return refused(CAS_MISMATCH, 'cas');
    }
  }

  /**
   * A STALE_MEMBER_EPOCH refusal of a commit the broker had already accepted when the bump reached
   * it (FenceSeams.heldAtRead). Asked after the refusal, not before: the heartbeat that bumped the
   * epoch is usually answered only while the commit is being decided.
   */
  private staleOnlyAfterRead(
    outcome: FenceOutcome,
    group: string,
    identity: CommitIdentity | undefined,
    at: ReadPosition | undefined,
  ): boolean {
    return (
      outcome.status === 'fenced' &&
      outcome.error === ErrorCode.STALE_MEMBER_EPOCH &&
      identity !== undefined &&
      at !== undefined &&
      this.seams.heldAtRead?.(group, identity, at) === true
    );
  }

  /** Written without the store's fence: the broker's decision is known (still deferred if transactional). */
  private unfenced(
    group: string,
    writes: OffsetWrite[],
    order: CommitOrder | undefined,
  ): Promise<CommitOutcome> {
    return this.seams.store.commit({
      group,
      writes,
      requestId: newRequestId(),
      deferIfTransactional: true,
      ...(order === undefined ? {} : { order }),
    });
  }

  /** A commit with writes: the store's atomic step, with the broker's verdict where it may be stale. */
  private async write(
    group: string,
    identity: CommitIdentity | undefined,
    writes: OffsetWrite[],
    order: CommitOrder | undefined,
  ): Promise<FenceOutcome> {
    const { store, brokerVerdict, committerFresh, vouchedOutsideRecord } = this.seams;
    const requestId = newRequestId();
    // Every store write of this commit, a retry after the broker's verdict too, carries its read
    // order: a commit read before the one stored is superseded (backends/commit-order.ts).
    const ordered = order === undefined ? {} : { order };
    const request: CommitRequest = identity
      ? { group, writes, requestId, identity, ...ordered }
      : { group, writes, requestId, deferIfTransactional: true, ...ordered };
    if (identity === undefined || !brokerVerdict) return store.commit(request);
    if (vouchedOutsideRecord?.(group, identity)) return this.unfenced(group, writes, order);
    let unanswered = false;
    if (committerFresh && !committerFresh(group, identity)) {
      const verdict = await this.verdict(group, identity, writes);
      if (verdict !== null) return this.settle(request, verdict);
      unanswered = true;
    }
    const outcome = await store.commit(request);
    if (outcome.status !== 'fenced') return outcome;
    // Asked once already, without an answer: a second wait would pass the client's deadline.
    if (unanswered) return { status: 'unconfirmed' };
    const verdict = await this.verdict(group, identity, writes);
    return verdict === null ? { status: 'unconfirmed' } : this.settle(request, verdict);
  }

  /**
   * A commit with nothing to write: the record is read, not written; a refusal (or a committer
   * without fresh evidence) is the broker's to decide, as for a write.
   */
  private async check(group: string, identity: CommitIdentity | undefined): Promise<FenceOutcome> {
    if (identity === undefined) return { status: 'ok' };
    const { store, brokerVerdict, committerFresh, vouchedOutsideRecord } = this.seams;
    const record = await store.getGroup(group);
    if (record?.transactional) return { status: 'transactional' };
    if (vouchedOutsideRecord?.(group, identity)) return { status: 'ok' };
    const refusal = checkCommit(record, identity);
    const fresh = committerFresh?.(group, identity) ?? true;
    if ((refusal === null && fresh) || !brokerVerdict)
      return refusal === null ? { status: 'ok' } : { status: 'fenced', error: refusal };
    const verdict = await this.verdict(group, identity, [], record);
    // Unanswered: an acceptance stands, a refusal is left unconfirmed (as for a write).
    if (verdict === null) return refusal === null ? { status: 'ok' } : { status: 'unconfirmed' };
    for (const update of verdict.updates) await store.updateGroup(group, update);
    return verdict.code === null
      ? { status: 'ok' }
      : { status: 'fenced', error: verdict.code as GuardErrorCode };
  }

  /**
   * The broker's verdict, with the record read here unless the caller read it already; a group that
   * commits transactionally is the broker's to take, with nothing to ask first. Null when no
   * verdict could be had: the broker (or, reading the record, the store) did not answer.
   */
  private async verdict(
    group: string,
    identity: CommitIdentity,
    partitions: readonly CommittedPartition[],
    read?: GroupState | null,
  ): Promise<Verdict | null> {
    const { store, brokerVerdict } = this.seams;
    try {
      const record = read === undefined ? await store.getGroup(group) : read;
      if (record?.transactional) return TRANSACTIONAL;
      return await brokerVerdict!(group, identity, partitions, record);
    } catch {
      return null;
    }
  }

  /**
   * Applies the broker's verdict: the store learns what it showed; a refusal is the broker's code;
   * an accepted commit is written without the store's fence, since the broker has decided.
   */
  private async settle(request: CommitRequest, verdict: Verdict): Promise<CommitOutcome> {
    const { store } = this.seams;
    if (verdict.transactional) return { status: 'transactional' };
    for (const update of verdict.updates) await store.updateGroup(request.group, update);
    if (verdict.code !== null) return { status: 'fenced', error: verdict.code as GuardErrorCode };
    const { identity: _decided, ...unfenced } = request;
    return store.commit({ ...unfenced, requestId: newRequestId() });
  }
}
