/**
 * OffsetCommit answered from the store, in the broker's order of checks
 * (docs/errors.md, OffsetCommit): unknown topics (when rejected), nothing left, then the
 * group guard, metadata size per partition, and the store write. OffsetCommit has no top-level
 * error field in any version: a group-level error is copied onto every partition.
 */
import { randomUUID } from 'node:crypto';
import type {
  CommitIdentity,
  CommitOutcome,
  CommitRequest,
  OffsetStore,
  OffsetWrite,
} from '../../backends/store.js';
import type { GuardErrorCode } from '../../backends/store.js';
import { checkCommit } from '../../backends/commit-guard.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import type { CommittedPartition, Verdict } from './broker-verdict.js';
import type { GuardPolicy } from './guard-policy.js';
import { parseCasMetadata } from './guard-policy.js';
import { CAS_MISMATCH, CAS_TRANSACTIONAL, MAX_METADATA_LENGTH, storeFailureCode } from './kafka-errors.js';
import type { HandlerDeps, OffsetHandler } from './offset-handler.js';

export type CommitRefusal =
  | 'fence'
  | 'broker_unanswered'
  | 'cas'
  | 'cas_transactional'
  | 'unknown_topic'
  | 'too_large'
  | 'store_down'
  | 'unauthorized';

export interface CommitDeps extends HandlerDeps {
  guards: GuardPolicy;
  /** Undefined when unknown topics are allowed (the default, for mirroring). */
  topicExists?: (topic: string, partition: number) => Promise<boolean>;
  /**
   * The broker's own decision on a commit with this identity (broker-verdict.ts), for whenever the
   * store's record cannot decide alone. Absent without a broker (unit tests): the store decides.
   */
  brokerVerdict?: (
    group: string,
    identity: CommitIdentity,
    partitions: readonly CommittedPartition[],
  ) => Promise<Verdict>;
  /**
   * Whether this proxy instance has fresh evidence that the broker has the committer as the store
   * records it (liveness.ts). Absent: always.
   */
  committerFresh?: (group: string, identity: CommitIdentity) => boolean;
  /**
   * Whether the committer is a member of a group the store's record does not model (a streams
   * group) that this instance just saw the broker vouch for (streams-groups.ts): its commit is
   * written without the store's fence. Absent: never.
   */
  vouchedOutsideRecord?: (group: string, identity: CommitIdentity) => boolean;
  /**
   * The request sent to the broker as the client sent it, on the client's connection, and the
   * broker's answer: for a group that commits transactionally, whose offsets the broker holds
   * (CommitOutcome 'transactional'). Absent (unit tests): COORDINATOR_NOT_AVAILABLE.
   */
  commitAtBroker?: () => Promise<OffsetCommitResponse>;
  now?: () => bigint;
  /** Called once per partition refused, and once per accepted request with the partition count. */
  onRefused?: (group: string, reason: CommitRefusal, partitions: number) => void;
  onAccepted?: (group: string, writes: OffsetWrite[]) => void;
}

/** Copies each partition's code into a response shaped like the request (flattened order). */
function responseWith(req: OffsetCommitRequest, codes: Int16Array): OffsetCommitResponse {
  let k = 0;
  const topics = new Array<OffsetCommitResponse['topics'][number]>(req.topics.length);
  for (let ti = 0; ti < req.topics.length; ti++) {
    const topic = req.topics[ti]!;
    const partitions = new Array<{ partitionIndex: number; errorCode: number }>(topic.partitions.length);
    for (let pi = 0; pi < topic.partitions.length; pi++) {
      partitions[pi] = { partitionIndex: topic.partitions[pi]!.partitionIndex, errorCode: codes[k++]! };
    }
    topics[ti] = { name: topic.name, topicId: topic.topicId, partitions };
  }
  return { throttleTimeMs: 0, topics };
}

/**
 * Flat indices (request order) of the partitions the cluster does not have, for
 * `--unknown-topics reject`; partitions of denied topics are not asked about (they are refused
 * for authorization first, as the broker does).
 */
async function unknownPartitions(
  req: OffsetCommitRequest,
  topicExists: (topic: string, partition: number) => Promise<boolean>,
  denied: ReadonlySet<string> | undefined,
): Promise<Set<number>> {
  const unknown = new Set<number>();
  let k = 0;
  for (const topic of req.topics) {
    const skip = denied !== undefined && denied.has(topic.name);
    for (const p of topic.partitions) {
      const at = k++;
      if (!skip && !(await topicExists(topic.name, p.partitionIndex))) unknown.add(at);
    }
  }
  return unknown;
}

/**
 * The hot path of the proxy's commit benchmark: per partition it makes one write and, at the end,
 * one response entry; codes live in one typed array in request order (no closure or record per
 * partition: those were a visible share of the proxy's CPU and garbage on 100-partition commits).
 */
export const handleOffsetCommit: OffsetHandler<
  OffsetCommitRequest,
  OffsetCommitResponse,
  CommitDeps
> = async (req, version, deps) => {
  const group = req.groupId;
  const now = deps.now?.() ?? BigInt(Date.now());
  let total = 0;
  for (const t of req.topics) total += t.partitions.length;
  // READ on the group and its topics, before anything else (as the broker's ACL check).
  const auth = deps.authorize
    ? await deps.authorize(
        group,
        req.topics.map((t) => t.name),
      )
    : null;
  if (auth !== null && auth.groupError !== ErrorCode.NONE) {
    // An undecided probe (the broker did not answer in time) is not the ACLs' refusal.
    const unauthorized = auth.groupError === ErrorCode.GROUP_AUTHORIZATION_FAILED;
    deps.onRefused?.(group, unauthorized ? 'unauthorized' : 'broker_unanswered', total);
    return responseWith(req, new Int16Array(total).fill(auth.groupError));
  }
  // Each partition's answer, in request order. Partitions refused before the group check keep
  // their code whatever the group check says; the others ("slots") are listed in `slots`, with the
  // code they get if the group check passes (NONE, or OFFSET_METADATA_TOO_LARGE) in `codes`.
  const codes = new Int16Array(total);
  const slots: number[] = [];
  const writes: OffsetWrite[] = [];
  const mode = deps.guards.modeFor(group);
  const expireTimestamp =
    version >= 2 && version <= 4 && req.retentionTimeMs !== -1n ? now + req.retentionTimeMs : -1n;
  const denied = auth?.deniedTopics;

  // Asked first, so that the loop below is plain synchronous code (it runs for every partition).
  const unknown = deps.topicExists ? await unknownPartitions(req, deps.topicExists, denied) : null;
  let k = 0;
  for (const topic of req.topics) {
    const refusedTopic = denied !== undefined && denied.has(topic.name);
    for (const p of topic.partitions) {
      const at = k++;
      if (refusedTopic) {
        codes[at] = ErrorCode.TOPIC_AUTHORIZATION_FAILED;
        deps.onRefused?.(group, 'unauthorized', 1);
        continue;
      }
      if (unknown !== null && unknown.has(at)) {
        codes[at] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION;
        deps.onRefused?.(group, 'unknown_topic', 1);
        continue;
      }
      let metadata = p.committedMetadata ?? '';
      let expectedOffset: bigint | undefined;
      if (mode === 'cas') {
        const cas = parseCasMetadata(p.committedMetadata);
        if (cas) {
          expectedOffset = cas.expected;
          metadata = cas.metadata;
        }
      }
      slots.push(at);
      // Checked after the group below, as the broker does; remembered here.
      if (metadata.length > MAX_METADATA_LENGTH) {
        codes[at] = ErrorCode.OFFSET_METADATA_TOO_LARGE;
        continue;
      }
      const write: OffsetWrite = {
        topic: topic.name,
        partition: p.partitionIndex,
        offset: p.committedOffset,
        leaderEpoch: version >= 6 ? p.committedLeaderEpoch : -1,
        metadata,
        commitTimestamp: now,
        expireTimestamp,
      };
      if (expectedOffset !== undefined) write.expectedOffset = expectedOffset;
      writes.push(write);
    }
  }
  if (slots.length === 0) return responseWith(req, codes); // nothing left: no group validation

  /** A group-level answer: every slot gets it, whatever its own check said. */
  const refuseAll = (code: number, reason: CommitRefusal): OffsetCommitResponse => {
    for (const at of slots) codes[at] = code;
    deps.onRefused?.(group, reason, slots.length);
    return responseWith(req, codes);
  };

  const identity: CommitIdentity | undefined =
    mode === 'fence'
      ? {
          generationIdOrMemberEpoch: req.generationIdOrMemberEpoch,
          memberId: req.memberId,
          groupInstanceId: version >= 7 ? req.groupInstanceId : null,
          requestVersion: version,
        }
      : undefined;

  let outcome: FenceOutcome = { status: 'ok' };
  try {
    // Every partition's metadata too large: nothing to write, but the broker checks the group
    // first, and its refusal is the answer then.
    outcome =
      writes.length > 0
        ? await commitFenced(deps, group, identity, writes)
        : await checkFenced(deps, group, identity);
  } catch (err) {
    return refuseAll(storeFailureCode(err), 'store_down');
  }
  if (outcome.status === 'transactional') {
    // The broker has no compare-and-set, and the offsets to compare with are its own: sent there,
    // `cas:<expected>` would be stored as plain metadata, whatever the offset is now.
    if (writes.some((w) => w.expectedOffset !== undefined))
      return refuseAll(CAS_TRANSACTIONAL, 'cas_transactional');
    return commitAtBroker(deps, () => refuseAll(ErrorCode.COORDINATOR_NOT_AVAILABLE, 'broker_unanswered'));
  }
  if (outcome.status === 'fenced') return refuseAll(outcome.error, 'fence');
  // Retriable: the client asks again, and gets the broker's answer once it can be had.
  if (outcome.status === 'unconfirmed')
    return refuseAll(ErrorCode.COORDINATOR_NOT_AVAILABLE, 'broker_unanswered');
  // All or nothing: the request was refused whole, so every partition says so.
  if (outcome.status === 'cas-mismatch') return refuseAll(CAS_MISMATCH, 'cas');
  const tooLarge = slots.length - writes.length;
  if (tooLarge > 0) deps.onRefused?.(group, 'too_large', tooLarge);
  if (writes.length > 0) deps.onAccepted?.(group, writes);
  return responseWith(req, codes);
};

/**
 * A transactional group's commit is the broker's: TxnOffsetCommit wrote its offsets there, and the
 * broker orders plain and transactional commits of a partition by when it received them (the
 * later one wins when the transaction commits). Stored here, a plain commit after a transaction
 * would be hidden by the broker's older offset; sent there, the broker also fences it itself.
 * Unanswered, the client is told to retry.
 */
async function commitAtBroker(
  deps: CommitDeps,
  unanswered: () => OffsetCommitResponse,
): Promise<OffsetCommitResponse> {
  if (!deps.commitAtBroker) return unanswered();
  try {
    return await deps.commitAtBroker();
  } catch {
    return unanswered();
  }
}

/**
 * A refusal of the store that the broker could not confirm (unreachable, frozen past the request
 * timeout, its coordinator moving): the store's record may have missed what the broker saw.
 */
type FenceOutcome = CommitOutcome | { status: 'unconfirmed' };

/**
 * The fence: the store accepts on its own only a committer this instance has fresh evidence for;
 * any other commit, and every commit the store refuses, is decided by the broker's verdict, which
 * also brings the store up to date. When the broker cannot be asked, a refusal is not answered
 * (a member's fatal error for what the broker might accept) but left unconfirmed: the client gets
 * a retriable code, as when the broker itself does not answer.
 */
async function commitFenced(
  deps: CommitDeps,
  group: string,
  identity: CommitIdentity | undefined,
  writes: OffsetWrite[],
): Promise<FenceOutcome> {
  const request: CommitRequest = {
    group,
    writes,
    requestId: randomUUID(),
    ...(identity ? { identity } : { deferIfTransactional: true }),
  };
  if (identity === undefined || !deps.brokerVerdict) return deps.store.commit(request);
  if (deps.vouchedOutsideRecord?.(group, identity))
    return deps.store.commit({ group, writes, requestId: request.requestId, deferIfTransactional: true });
  let unanswered = false;
  if (deps.committerFresh && !deps.committerFresh(group, identity)) {
    const verdict = await askBroker(deps.brokerVerdict, group, identity, writes);
    if (verdict !== null) return settle(deps.store, request, verdict);
    unanswered = true;
  }
  const outcome = await deps.store.commit(request);
  if (outcome.status !== 'fenced') return outcome;
  // Asked once already, without an answer: a second wait would pass the client's deadline.
  if (unanswered) return { status: 'unconfirmed' };
  const verdict = await askBroker(deps.brokerVerdict, group, identity, writes);
  return verdict === null ? { status: 'unconfirmed' } : settle(deps.store, request, verdict);
}

/**
 * The fence alone, for a commit with nothing to write: the store's record is read, not written;
 * a refusal (or a committer without fresh evidence) is the broker's to decide, as for a write.
 */
async function checkFenced(
  deps: CommitDeps,
  group: string,
  identity: CommitIdentity | undefined,
): Promise<FenceOutcome> {
  if (identity === undefined) return { status: 'ok' };
  const state = await deps.store.getGroup(group);
  if (state?.transactional) return { status: 'transactional' };
  if (deps.vouchedOutsideRecord?.(group, identity)) return { status: 'ok' };
  const refusal = checkCommit(state, identity);
  const fresh = deps.committerFresh?.(group, identity) ?? true;
  if ((refusal === null && fresh) || !deps.brokerVerdict) {
    return refusal === null ? { status: 'ok' } : { status: 'fenced', error: refusal };
  }
  const verdict = await askBroker(deps.brokerVerdict, group, identity, []);
  // Unanswered: an acceptance stands, a refusal is left unconfirmed (as for a write).
  if (verdict === null) return refusal === null ? { status: 'ok' } : { status: 'unconfirmed' };
  for (const update of verdict.updates) await deps.store.updateGroup(group, update);
  return verdict.code === null
    ? { status: 'ok' }
    : { status: 'fenced', error: verdict.code as GuardErrorCode };
}

function askBroker(
  brokerVerdict: NonNullable<CommitDeps['brokerVerdict']>,
  group: string,
  identity: CommitIdentity,
  partitions: readonly CommittedPartition[],
): Promise<Verdict | null> {
  return brokerVerdict(group, identity, partitions).catch(() => null);
}

/**
 * Applies the broker's verdict: the store learns what it showed; a refusal is the broker's code;
 * an accepted commit is written without the store's fence, since the broker has decided.
 */
async function settle(store: OffsetStore, request: CommitRequest, verdict: Verdict): Promise<CommitOutcome> {
  if (verdict.transactional) return { status: 'transactional' };
  for (const update of verdict.updates) await store.updateGroup(request.group, update);
  if (verdict.code !== null) return { status: 'fenced', error: verdict.code as GuardErrorCode };
  const { identity: _decided, ...unfenced } = request;
  return store.commit({ ...unfenced, requestId: randomUUID() });
}
