/**
 * OffsetCommit answered from the store, in the broker's order of checks
 * (docs/errors.md, OffsetCommit): authorization, unknown topics (when rejected), nothing left,
 * then the group check (the commit fence, commit-fence.ts), metadata size per partition, and the
 * store write. OffsetCommit has no top-level error field in any version: a group-level error is
 * copied onto every partition. `OffsetCommitApi` wires the handler to a client's request: its
 * v10 topic ids, its connection to the broker, mirroring and metrics.
 */
import { newInstanceId } from '../../backends/commit-order.js';
import type { CommitOrder } from '../../backends/commit-order.js';
import type { ReadPosition } from './epochs-at-read.js';
import type { CommitIdentity, OffsetWrite } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { ApiKey } from '../../protocol/messages/api-info.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import type { RequestInfo } from '../core/extension.js';
import type { Logger } from '../common/log.js';
import type { BrokerAuthorizer } from './authorizer.js';
import type { BrokerLookups } from './broker-lookups.js';
import { cachedAnswer } from './topic-cache.js';
import type { CachedTopic } from './topic-cache.js';
import { mirrorCommit } from './commit-mirror.js';
import type { CommitFence, CommitRefusal } from './commit-fence.js';
import { COMMITS_IN_PROGRESS } from './commits-in-progress.js';
import type { GroupModes } from './group-modes.js';
import type { GuardPolicy } from './guard-policy.js';
import { parseCasMetadata } from './guard-policy.js';
import { MAX_METADATA_LENGTH } from './kafka-errors.js';
import type { HandlerDeps, OffsetHandler } from './offset-handler.js';
import { commitByTopicId, FIRST_TOPIC_ID_VERSION } from './topic-id-offsets.js';
import type { TopicIds } from './topic-ids.js';

export type { CommitRefusal } from './commit-fence.js';

/**
 * This process's instance in the read order of its commits (CommitRequest.order): random per
 * process start, as the read order's numbers start again with each process.
 */
const READ_ORDER_INSTANCE = newInstanceId();

/** The store is reached through the fence alone. */
export interface CommitDeps extends Omit<HandlerDeps, 'store'> {
  guards: GuardPolicy;
  /** The group check: accept, refuse with which code, or the broker's (commit-fence.ts). */
  fence: CommitFence;
  /** Undefined when unknown topics are allowed (for mirroring). */
  topicExists?: (topic: string, partition: number) => Promise<boolean>;
  /** The topic cache's view of a topic, asked once per topic before topicExists (absent: always asked). */
  cachedTopic?: (topic: string) => CachedTopic | undefined;
  /**
   * The request sent to the broker as the client sent it, on the client's connection, and the
   * broker's answer: for a group that commits transactionally, whose offsets the broker holds
   * (the fence's answer 'broker'). Absent (unit tests): COORDINATOR_NOT_AVAILABLE.
   */
  commitAtBroker?: () => Promise<OffsetCommitResponse>;
  now?: () => bigint;
  /** Called once per partition refused, and once per accepted request with the partition count. */
  onRefused?: (group: string, reason: CommitRefusal, partitions: number) => void;
  onAccepted?: (group: string, writes: OffsetWrite[]) => void;
  /** Partitions of an accepted commit a commit read later had written (left as they were). */
  onSuperseded?: (group: string, partitions: number) => void;
  /** When this process read the request (backends/commit-order.ts); absent: no order. */
  order?: CommitOrder;
  /** Where the request sits in its connection's stream (epochs-at-read.ts); absent: unknown. */
  readAt?: ReadPosition;
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
 * Flat indices (request order) of the partitions the cluster does not have (null: none), for
 * `--unknown-topics reject`; partitions of denied topics are not asked about (they are refused
 * for authorization first, as the broker does).
 */
async function unknownPartitions(
  req: OffsetCommitRequest,
  topicExists: (topic: string, partition: number) => Promise<boolean>,
  cachedTopic: CommitDeps['cachedTopic'],
  denied: ReadonlySet<string> | undefined,
): Promise<Set<number> | null> {
  let unknown: Set<number> | null = null;
  let k = 0;
  for (const topic of req.topics) {
    if (denied !== undefined && denied.has(topic.name)) {
      k += topic.partitions.length;
      continue;
    }
    const cached = cachedTopic?.(topic.name);
    for (const p of topic.partitions) {
      const at = k++;
      const exists =
        cachedAnswer(cached, p.partitionIndex) ?? (await topicExists(topic.name, p.partitionIndex));
      if (!exists) (unknown ??= new Set()).add(at);
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
  const unknown = deps.topicExists
    ? await unknownPartitions(req, deps.topicExists, deps.cachedTopic, denied)
    : null;
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

  // Every partition's metadata too large leaves nothing to write, but the broker checks the
  // group first, and its refusal is the answer then.
  const answer = await deps.fence.decide(group, identity, writes, deps.order, deps.readAt);
  if (answer.kind === 'refused') return refuseAll(answer.code, answer.reason);
  if (answer.kind === 'broker')
    return commitAtBroker(deps, () => refuseAll(ErrorCode.COORDINATOR_NOT_AVAILABLE, 'broker_unanswered'));
  const tooLarge = slots.length - writes.length;
  if (tooLarge > 0) deps.onRefused?.(group, 'too_large', tooLarge);
  if (writes.length > 0) deps.onAccepted?.(group, writes);
  if (answer.superseded !== undefined) deps.onSuperseded?.(group, answer.superseded);
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

/** What the offset service counts of commits (proxy/ops/metrics). */
export interface OffsetCommitMetrics {
  /** Superseded partitions count as accepted too: they were answered as applied. */
  commitAccepted(group: string, partitions: number): void;
  /** Optional for test doubles; the proxy's metrics count them (kop_commits_superseded_total). */
  commitSuperseded?(group: string, partitions: number): void;
  commitRefused(group: string, reason: CommitRefusal, partitions: number): void;
  mirrored(ok: boolean): void;
}

export interface OffsetCommitApiOptions {
  guards: GuardPolicy;
  fence: CommitFence;
  /** Per group: commits to topics or partitions the cluster lacks refused as a broker does, or stored. */
  unknownTopics: GroupModes<'allow' | 'reject'>;
  /** Every accepted commit also sent to the broker (`--mirror-commits`). */
  mirrorCommits: boolean;
  /** The proxy's own client of the cluster; null only in unit tests without a broker. */
  lookups: BrokerLookups | null;
  /** Null: no ACL checks (`--authorize off`). */
  authorizer: BrokerAuthorizer | null;
  topicIds: TopicIds;
  log: Logger;
  metrics?: OffsetCommitMetrics;
}

/**
 * The OffsetCommit API as the service routes it: a client's request answered by the handler,
 * with what that request needs wired once per request (its authorization, its connection to the
 * broker) and the rest once per service.
 */
export class OffsetCommitApi {
  /** What every commit needs, built once (not per request: commits are the hot path). */
  private readonly shared: CommitDeps;
  /** The same for groups whose commits to unknown topics are refused (topics are looked up). */
  private readonly rejecting: CommitDeps;

  constructor(private readonly opts: OffsetCommitApiOptions) {
    const { lookups } = opts;
    this.shared = {
      guards: opts.guards,
      fence: opts.fence,
      onRefused: (g, reason, n) => opts.metrics?.commitRefused(g, reason, n),
      onSuperseded: (g, n) => opts.metrics?.commitSuperseded?.(g, n),
    };
    // Without a cluster to ask (unit tests) nothing can be known to be missing.
    this.rejecting = lookups
      ? {
          ...this.shared,
          topicExists: (t: string, p: number) => lookups.topicExists(t, p).catch(() => true),
          cachedTopic: (t: string) => lookups.cachedTopic(t),
        }
      : this.shared;
  }

  /** The answer to a client's OffsetCommit (v10's topic ids mapped to names and back). */
  answer(info: RequestInfo, req: OffsetCommitRequest): Promise<OffsetCommitResponse> {
    if (info.apiVersion < FIRST_TOPIC_ID_VERSION) return this.commit(info, req);
    const metrics = this.opts.metrics;
    return commitByTopicId(req, this.opts.topicIds, {
      answer: (named) => this.commit(info, named),
      onUnknownIds: (n) => metrics?.commitRefused(req.groupId, 'unknown_topic', n),
      onUnresolved: (n) => metrics?.commitRefused(req.groupId, 'broker_unanswered', n),
      ...this.groupRefusalFor(info, req.groupId),
    });
  }

  /**
   * An OffsetCommit naming its topics (v10's by the names its ids map to). Its deps are one object
   * literal of a fixed shape, not spreads of the shared deps and per-request parts: built for every
   * commit, the spreads were 2.6% of the proxy's time on 100-partition commits.
   */
  private commit(info: RequestInfo, req: OffsetCommitRequest): Promise<OffsetCommitResponse> {
    const deps = this.opts.unknownTopics.modeFor(req.groupId) === 'reject' ? this.rejecting : this.shared;
    const { authorizer } = this.opts;
    const version = info.apiVersion;
    const ask = info.askBroker;
    return handleOffsetCommit(req, version, {
      guards: deps.guards,
      fence: deps.fence,
      topicExists: deps.topicExists,
      cachedTopic: deps.cachedTopic,
      onRefused: deps.onRefused,
      authorize: authorizer ? (g, topics) => authorizer.authorize(info, 'read', g, topics) : undefined,
      commitAtBroker: ask ? () => this.commitAtBroker(ask, info, req) : undefined,
      onAccepted: (g, writes) => this.accepted(g, req, version, writes),
      onSuperseded: deps.onSuperseded,
      order:
        info.readSeq === undefined
          ? undefined
          : {
              instance: READ_ORDER_INSTANCE,
              seq: info.readSeq,
              contended: COMMITS_IN_PROGRESS.contended(req.groupId, info.readSeq),
            },
      readAt: info.readSeq === undefined ? undefined : { seq: info.readSeq, connectionId: info.connectionId },
    });
  }

  /**
   * A commit sent on as the client sent it, on its own connection (same principal), in its
   * version, or in the broker's lowest where the broker no longer has the client's: Kafka 4
   * removed OffsetCommit v0-1, which the proxy serves, and closes a connection that sends them.
   * v2 carries everything v1 does but the partitions' commit timestamps (the broker takes its own
   * time, as for every later version); a v0 commit is anonymous in v2 too.
   */
  private async commitAtBroker(
    ask: NonNullable<RequestInfo['askBroker']>,
    info: RequestInfo,
    req: OffsetCommitRequest,
  ): Promise<OffsetCommitResponse> {
    const lookups = this.opts.lookups;
    const min = lookups
      ? await lookups.brokerMinVersion(info.nodeId, req.groupId, ApiKey.OffsetCommit).catch(() => undefined)
      : undefined;
    return ask(ApiKey.OffsetCommit, Math.max(info.apiVersion, min ?? 0), req);
  }

  /** A v10 commit's group-level authorization, counted as the handler counts its refusals. */
  private groupRefusalFor(
    info: RequestInfo,
    group: string,
  ): { groupRefusal?: (n: number) => Promise<number> } {
    const authorizer = this.opts.authorizer;
    if (!authorizer) return {};
    return {
      groupRefusal: async (n) => {
        const { groupError } = await authorizer.authorize(info, 'read', group, []);
        if (groupError !== ErrorCode.NONE) {
          const reason =
            groupError === ErrorCode.GROUP_AUTHORIZATION_FAILED ? 'unauthorized' : 'broker_unanswered';
          this.opts.metrics?.commitRefused(group, reason, n);
        }
        return groupError;
      },
    };
  }

  /** Counted, and with `--mirror-commits` sent to the broker too. */
  private accepted(group: string, req: OffsetCommitRequest, version: number, writes: OffsetWrite[]): void {
    const { metrics, lookups, log } = this.opts;
    metrics?.commitAccepted(group, writes.length);
    if (!this.opts.mirrorCommits || !lookups) return;
    const identity = {
      generationIdOrMemberEpoch: req.generationIdOrMemberEpoch,
      memberId: req.memberId,
      groupInstanceId: version >= 7 ? req.groupInstanceId : null,
    };
    // Asynchronous: the client's commit is acknowledged by the store, not by the broker.
    mirrorCommit(lookups, group, identity, writes).then(
      (refused) => {
        metrics?.mirrored(refused === 0);
        if (refused > 0) log.warn('broker refused a mirrored commit', { group, partitions: refused });
      },
      (err: unknown) => {
        metrics?.mirrored(false);
        log.warn('mirrored commit failed', { group, error: err });
      },
    );
  }
}
