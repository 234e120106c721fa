/**
 * OffsetFetch answered from the store, as a broker answers it: no committed offset gives -1,
 * leader epoch -1, metadata "" and NONE (also for a group that does not exist: OffsetFetch never
 * says GROUP_ID_NOT_FOUND); null topics means every partition with a committed offset; v9 checks
 * the member of KIP-848 groups. Errors sit where each version puts them: per group from v8, at
 * the top level in v2-7, and copied into every requested partition in v0-1.
 */
import type { GroupState, PartitionOffset, TopicPartition } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';
import type { OffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import type {
  OffsetFetchResponse,
  OffsetFetchResponseGroup,
  OffsetFetchResponseTopic,
} from '../../protocol/messages/offset-fetch-response.js';
import type { Verdict } from './broker-verdict.js';
import { storeFailureCode } from './kafka-errors.js';
import type { HandlerDeps, OffsetHandler } from './offset-handler.js';

export interface FetchedGroup {
  errorCode: number;
  topics: OffsetFetchResponseTopic[];
}

export interface FetchDeps extends HandlerDeps {
  /**
   * Offsets the broker holds for a group, for groups the proxy must not answer itself (they commit
   * transactionally) and for `--fallback upstream`. Undefined when not available.
   */
  fetchFromBroker?: (
    group: string,
    topics: TopicPartition[] | null,
    requireStable: boolean,
  ) => Promise<FetchedGroup>;
  /** With `--fallback upstream`: copy offsets the store has never seen from the broker, once. */
  fallbackUpstream?: boolean;
  /** Whether this instance has fresh evidence for a KIP-848 member's epoch (liveness.ts). */
  memberFresh?: (group: string, memberId: string | null, memberEpoch: number) => boolean;
  /** The broker's answer to a fetch naming this member (broker-verdict.ts). */
  memberVerdict?: (group: string, memberId: string | null, memberEpoch: number) => Promise<Verdict>;
}

interface GroupQuery {
  groupId: string;
  memberId: string | null;
  memberEpoch: number;
  /** Null: every partition with a committed offset. */
  topics: { name: string; partitionIndexes: number[] }[] | null;
}

function queriesOf(req: OffsetFetchRequest, version: number): GroupQuery[] {
  if (version >= 8) {
    return req.groups.map((g) => ({
      groupId: g.groupId,
      memberId: version >= 9 ? g.memberId : null,
      memberEpoch: version >= 9 ? g.memberEpoch : -1,
      topics: g.topics,
    }));
  }
  return [{ groupId: req.groupId, memberId: null, memberEpoch: -1, topics: req.topics }];
}

/** `authorize` here is DESCRIBE on the group and its topics, for the client's principal. */
export const handleOffsetFetch: OffsetHandler<OffsetFetchRequest, OffsetFetchResponse, FetchDeps> = async (
  req,
  version,
  deps,
) => {
  const requireStable = version >= 7 && req.requireStable;
  const results = await Promise.all(
    queriesOf(req, version).map((q) => fetchGroup(q, version, requireStable, deps)),
  );

  const response: OffsetFetchResponse = {
    throttleTimeMs: 0,
    topics: [],
    errorCode: ErrorCode.NONE,
    groups: [],
  };
  if (version >= 8) {
    response.groups = results.map((r, i) => groupResult(queriesOf(req, version)[i]!.groupId, r, version));
    return response;
  }
  const only = results[0]!;
  if (version >= 2) {
    response.errorCode = only.errorCode;
    response.topics =
      only.errorCode === ErrorCode.NONE ? only.topics.map((t) => trimForVersion(t, version)) : [];
    return response;
  }
  // v0-1 have no group-level error: it goes into every requested partition.
  if (only.errorCode !== ErrorCode.NONE) {
    response.topics = (req.topics ?? []).map((t) => ({
      name: t.name,
      partitions: t.partitionIndexes.map((p) => ({
        partitionIndex: p,
        committedOffset: -1n,
        committedLeaderEpoch: -1,
        metadata: '',
        errorCode: only.errorCode,
      })),
    }));
    return response;
  }
  response.topics = only.topics.map((t) => trimForVersion(t, version));
  return response;
};

function groupResult(groupId: string, r: FetchedGroup, version: number): OffsetFetchResponseGroup {
  return {
    groupId,
    errorCode: r.errorCode,
    // A group with an error comes back with no topics.
    topics:
      r.errorCode === ErrorCode.NONE
        ? r.topics.map((t) => ({ ...trimForVersion(t, version), topicId: ZERO_UUID }))
        : [],
  };
}

/** Leader epochs exist from v5; older versions must carry the default. */
function trimForVersion(t: OffsetFetchResponseTopic, version: number): OffsetFetchResponseTopic {
  if (version >= 5) return t;
  return { name: t.name, partitions: t.partitions.map((p) => ({ ...p, committedLeaderEpoch: -1 })) };
}

async function fetchGroup(
  q: GroupQuery,
  version: number,
  requireStable: boolean,
  deps: FetchDeps,
): Promise<FetchedGroup> {
  const wanted: TopicPartition[] | null =
    q.topics === null
      ? null
      : q.topics.flatMap((t) => t.partitionIndexes.map((partition) => ({ topic: t.name, partition })));
  try {
    let denied: ReadonlySet<string> = new Set();
    if (deps.authorize && q.topics !== null) {
      const decision = await deps.authorize(
        q.groupId,
        q.topics.map((t) => t.name),
      );
      if (decision.groupError !== ErrorCode.NONE) return { errorCode: decision.groupError, topics: [] };
      denied = decision.deniedTopics;
    }
    const result = await fetchAuthorized(q, version, requireStable, wanted, deps);
    if (result.errorCode !== ErrorCode.NONE) return result;
    if (deps.authorize && q.topics === null) {
      // All topics: the ones the principal may not DESCRIBE are left out, as the broker does.
      const decision = await deps.authorize(q.groupId, [...new Set(result.topics.map((t) => t.name))]);
      if (decision.groupError !== ErrorCode.NONE) return { errorCode: decision.groupError, topics: [] };
      return {
        errorCode: ErrorCode.NONE,
        topics: result.topics.filter((t) => !decision.deniedTopics.has(t.name)),
      };
    }
    for (const t of result.topics) {
      if (!denied.has(t.name)) continue;
      t.partitions = t.partitions.map((p) => ({
        ...p,
        committedOffset: -1n,
        committedLeaderEpoch: -1,
        metadata: '',
        errorCode: ErrorCode.TOPIC_AUTHORIZATION_FAILED,
      }));
    }
    return result;
  } catch (err) {
    return { errorCode: storeFailureCode(err), topics: [] };
  }
}

async function fetchAuthorized(
  q: GroupQuery,
  version: number,
  requireStable: boolean,
  wanted: TopicPartition[] | null,
  deps: FetchDeps,
): Promise<FetchedGroup> {
  const state = await deps.store.getGroup(q.groupId);
  // v9: the member of a KIP-848 group must be current; classic groups are not validated. First,
  // for transactional groups too: the broker checks the member before it reads any offset.
  if (version >= 9 && (q.memberId !== null || q.memberEpoch >= 0)) {
    const refusal = await memberRefusal(q, state, deps);
    if (refusal !== ErrorCode.NONE) return { errorCode: refusal, topics: [] };
  }
  if (state?.transactional && deps.fetchFromBroker) {
    const broker = await deps.fetchFromBroker(q.groupId, wanted, requireStable);
    return brokerOverStore(q, broker, await deps.store.fetch(q.groupId, wanted));
  }
  let stored = await deps.store.fetch(q.groupId, wanted);
  if (deps.fallbackUpstream && deps.fetchFromBroker) {
    stored = await fillFromBroker(q.groupId, wanted, stored, requireStable, deps);
  }
  return { errorCode: ErrorCode.NONE, topics: assemble(q, stored) };
}

/**
 * A transactional group's offsets: the broker's (TxnOffsetCommit writes there), over what was
 * committed through the proxy before the group turned transactional, which only the store has. So
 * an application moved to exactly-once keeps its progress on the partitions it has not committed
 * in a transaction yet, rather than falling back to its reset policy (a broker would have both).
 */
function brokerOverStore(q: GroupQuery, broker: FetchedGroup, stored: PartitionOffset[]): FetchedGroup {
  if (broker.errorCode !== ErrorCode.NONE || stored.length === 0) return broker;
  const byKey = byPartition(stored);
  const answered = new Set<string>();
  const topics = broker.topics.map((t) => ({
    name: t.name,
    partitions: t.partitions.map((p) => {
      answered.add(partitionKey(t.name, p.partitionIndex));
      const o = byKey.get(partitionKey(t.name, p.partitionIndex));
      if (o === undefined || p.errorCode !== ErrorCode.NONE || p.committedOffset >= 0n) return p;
      return { ...p, committedOffset: o.offset, committedLeaderEpoch: o.leaderEpoch, metadata: o.metadata };
    }),
  }));
  if (q.topics === null) {
    // The whole group: partitions the broker does not list at all.
    for (const o of stored) {
      if (answered.has(partitionKey(o.topic, o.partition))) continue;
      let topic = topics.find((t) => t.name === o.topic);
      if (topic === undefined) {
        topic = { name: o.topic, partitions: [] };
        topics.push(topic);
      }
      topic.partitions.push(committedEntry(o.partition, o));
    }
  }
  return { errorCode: ErrorCode.NONE, topics };
}

/**
 * The store's answer on a fetch's member, trusted alone only when it accepts a member this
 * instance has fresh evidence for; otherwise the broker's answer (its updates go to the store).
 * A refusal the broker could not confirm is COORDINATOR_NOT_AVAILABLE.
 */
async function memberRefusal(q: GroupQuery, state: GroupState | null, deps: FetchDeps): Promise<number> {
  let code: number = ErrorCode.NONE;
  if (state?.protocol === 'consumer') {
    const member = state.members.find((m) => m.memberId === q.memberId);
    if (!member) code = ErrorCode.UNKNOWN_MEMBER_ID;
    else if (member.memberEpoch !== q.memberEpoch) code = ErrorCode.STALE_MEMBER_EPOCH;
  }
  const sure =
    code === ErrorCode.NONE &&
    state?.protocol === 'consumer' &&
    (deps.memberFresh?.(q.groupId, q.memberId, q.memberEpoch) ?? true);
  if (sure || !deps.memberVerdict) return code;
  const verdict = await deps.memberVerdict(q.groupId, q.memberId, q.memberEpoch).catch(() => null);
  // Unconfirmed, a refusal is retriable (as offset-commit.ts's): the client asks again.
  if (verdict === null) return code === ErrorCode.NONE ? code : ErrorCode.COORDINATOR_NOT_AVAILABLE;
  for (const update of verdict.updates) await deps.store.updateGroup(q.groupId, update);
  return verdict.code ?? ErrorCode.NONE;
}

/** A map key for one partition (NUL cannot be in a topic name). */
function partitionKey(topic: string, partition: number): string {
  return `${topic}\u0000${partition}`;
}

function byPartition(stored: PartitionOffset[]): Map<string, PartitionOffset> {
  return new Map(stored.map((o) => [partitionKey(o.topic, o.partition), o]));
}

/** A partition's entry in the answer: its committed offset, or -1 where nothing is committed. */
function committedEntry(partition: number, o: PartitionOffset | undefined) {
  return {
    partitionIndex: partition,
    committedOffset: o ? o.offset : -1n,
    committedLeaderEpoch: o ? o.leaderEpoch : -1,
    metadata: o ? o.metadata : '',
    errorCode: ErrorCode.NONE,
  };
}

/** The requested partitions in request order (or every stored one), -1 where nothing is committed. */
function assemble(q: GroupQuery, stored: PartitionOffset[]): OffsetFetchResponseTopic[] {
  const byKey = byPartition(stored);
  const entry = (topic: string, partition: number) =>
    committedEntry(partition, byKey.get(partitionKey(topic, partition)));
  if (q.topics !== null) {
    return q.topics.map((t) => ({
      name: t.name,
      partitions: t.partitionIndexes.map((p) => entry(t.name, p)),
    }));
  }
  const topics = new Map<string, number[]>();
  for (const o of stored) {
    const list = topics.get(o.topic) ?? [];
    list.push(o.partition);
    topics.set(o.topic, list);
  }
  return [...topics.entries()]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, parts]) => ({ name, partitions: parts.sort((a, b) => a - b).map((p) => entry(name, p)) }));
}

/**
 * `--fallback upstream`: partitions the store has never seen are read once from the broker and
 * copied into the store (only where the store still has nothing, so a racing commit wins), so a
 * group moves onto the proxy without losing its position.
 */
async function fillFromBroker(
  group: string,
  wanted: TopicPartition[] | null,
  stored: PartitionOffset[],
  requireStable: boolean,
  deps: FetchDeps,
): Promise<PartitionOffset[]> {
  const have = byPartition(stored);
  let missing: TopicPartition[] | null;
  if (wanted === null) {
    if (stored.length > 0) return stored; // the group is known to the store already
    missing = null;
  } else {
    missing = wanted.filter((tp) => !have.has(partitionKey(tp.topic, tp.partition)));
    if (missing.length === 0) return stored;
  }
  const upstream = await deps.fetchFromBroker!(group, missing, requireStable);
  if (upstream.errorCode !== ErrorCode.NONE) return stored;
  const now = BigInt(Date.now());
  const copies = upstream.topics.flatMap((t) =>
    t.partitions
      .filter((p) => p.errorCode === ErrorCode.NONE && p.committedOffset >= 0n)
      .map((p) => ({
        topic: t.name,
        partition: p.partitionIndex,
        offset: p.committedOffset,
        leaderEpoch: p.committedLeaderEpoch,
        metadata: p.metadata ?? '',
        commitTimestamp: now,
        expireTimestamp: -1n,
        expectedOffset: -1n,
      })),
  );
  if (copies.length === 0) return stored;
  // One partition at a time: a partition committed meanwhile keeps its newer value.
  for (const c of copies) {
    await deps.store.commit({
      group,
      writes: [c],
      requestId: `fallback-${group}-${c.topic}-${c.partition}-${now}`,
    });
  }
  return deps.store.fetch(group, wanted);
}
