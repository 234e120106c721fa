/**
 * OffsetCommit and OffsetFetch v10 (KIP-848), which name topics by id, answered by the handlers
 * that work by name: the request's ids are mapped to names with the cluster's metadata
 * (topic-ids.ts), the named request is answered as any other (offset-commit.ts,
 * offset-fetch.ts: the same checks, the same store keys as v9), and the answer names its topics
 * by id again. So offsets committed in v10 are read by v9 and by `offsets get`, and the other way.
 *
 * As the broker (KafkaApis): a topic id the cluster does not know gets UNKNOWN_TOPIC_ID on each of
 * its partitions, before authorization and without the group being checked when nothing else is
 * left; an answer echoes each topic's id (v10 has no topic names on the wire). When the cluster
 * cannot be asked for an id the cache lacks, the request is answered COORDINATOR_NOT_AVAILABLE
 * (retriable): the id may well exist.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import type { OffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import type { OffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import type {
  OffsetFetchResponse,
  OffsetFetchResponsePartitions,
  OffsetFetchResponseTopics,
} from '../../protocol/messages/offset-fetch-response.js';
import type { TopicIds } from './topic-ids.js';

/** The first version of OffsetCommit and OffsetFetch that names topics by id. */
export const FIRST_TOPIC_ID_VERSION = 10;

export interface CommitByIdHooks {
  /** Answers the commit with its topics named (those the cluster knows), as a v9 commit. */
  answer: (named: OffsetCommitRequest) => Promise<OffsetCommitResponse>;
  onUnknownIds?: (partitions: number) => void;
  onUnresolved?: (partitions: number) => void;
  /**
   * The group-level authorization refusal (GROUP_AUTHORIZATION_FAILED, or COORDINATOR_NOT_AVAILABLE
   * undecided) of a commit of `partitions` partitions, or NONE; absent with `--authorize off`. The
   * broker checks it before topic ids, so a refused group's unknown ids get its code too.
   */
  groupRefusal?: (partitions: number) => Promise<number>;
}

export async function commitByTopicId(
  req: OffsetCommitRequest,
  topicIds: TopicIds,
  hooks: CommitByIdHooks,
): Promise<OffsetCommitResponse> {
  const everyPartition = (code: number): OffsetCommitResponse => ({
    throttleTimeMs: 0,
    topics: req.topics.map((t) => unknownIdTopic(t.topicId, t.partitions, code)),
  });
  let names: Map<string, string>;
  try {
    names = await topicIds.namesOf(req.topics.map((t) => t.topicId));
  } catch {
    hooks.onUnresolved?.(partitionCount(req.topics));
    return everyPartition(ErrorCode.COORDINATOR_NOT_AVAILABLE);
  }
  const known = req.topics.filter((t) => names.has(t.topicId));
  const unknown = partitionCount(req.topics) - partitionCount(known);
  if (unknown > 0 && hooks.groupRefusal) {
    // Only needed with unknown ids: otherwise the named commit is refused whole the same way.
    const refusal = await hooks.groupRefusal(partitionCount(req.topics));
    if (refusal !== ErrorCode.NONE) return everyPartition(refusal);
  }
  if (unknown > 0) hooks.onUnknownIds?.(unknown);
  // Nothing left: answered at once, the group unchecked (as the broker, and as offset-commit.ts).
  if (known.length === 0) return everyPartition(ErrorCode.UNKNOWN_TOPIC_ID);
  const named: OffsetCommitRequest = {
    ...req,
    topics: known.map((t) => ({ ...t, name: names.get(t.topicId)! })),
  };
  const res = await hooks.answer(named);
  // By id, not by position: a transactional group's commit is answered by the broker itself
  // (offset-commit.ts), which orders its topics as it likes and names them by id already.
  const byId = new Map<string, OffsetCommitResponse['topics']>();
  for (const t of res.topics) byId.set(t.topicId, [...(byId.get(t.topicId) ?? []), t]);
  return {
    throttleTimeMs: res.throttleTimeMs,
    topics: req.topics.map((t) => {
      const answered = names.has(t.topicId) ? byId.get(t.topicId)?.shift() : undefined;
      return answered
        ? { ...answered, name: '', topicId: t.topicId }
        : unknownIdTopic(t.topicId, t.partitions);
    }),
  };
}

function unknownIdTopic(
  topicId: string,
  partitions: readonly { partitionIndex: number }[],
  code: number = ErrorCode.UNKNOWN_TOPIC_ID,
): OffsetCommitResponse['topics'][number] {
  return {
    name: '',
    topicId,
    partitions: partitions.map((p) => ({ partitionIndex: p.partitionIndex, errorCode: code })),
  };
}

export interface FetchByIdHooks {
  /** Answers the fetch with its topics named (those the cluster knows), as a v9 fetch. */
  answer: (named: OffsetFetchRequest) => Promise<OffsetFetchResponse>;
}

/** The entry of a partition of a topic id the cluster does not know (as the broker's). */
const unknownIdPartition = (partitionIndex: number): OffsetFetchResponsePartitions => ({
  partitionIndex,
  committedOffset: -1n,
  committedLeaderEpoch: -1,
  metadata: '',
  errorCode: ErrorCode.UNKNOWN_TOPIC_ID,
});

export async function fetchByTopicId(
  req: OffsetFetchRequest,
  topicIds: TopicIds,
  hooks: FetchByIdHooks,
): Promise<OffsetFetchResponse> {
  const requested = req.groups.flatMap((g) => (g.topics ?? []).map((t) => t.topicId));
  let names: Map<string, string>;
  try {
    names = await topicIds.namesOf(requested);
  } catch {
    return {
      throttleTimeMs: 0,
      topics: [],
      errorCode: ErrorCode.NONE,
      groups: req.groups.map((g) => ({
        groupId: g.groupId,
        topics: [],
        errorCode: ErrorCode.COORDINATOR_NOT_AVAILABLE,
      })),
    };
  }
  const named: OffsetFetchRequest = {
    ...req,
    groups: req.groups.map((g) => ({
      ...g,
      topics:
        g.topics === null
          ? null
          : g.topics.filter((t) => names.has(t.topicId)).map((t) => ({ ...t, name: names.get(t.topicId)! })),
    })),
  };
  const res = await hooks.answer(named);
  const groups = await Promise.all(
    res.groups.map(async (g, i) => {
      const asked = req.groups[i]!;
      if (g.errorCode !== ErrorCode.NONE) return g;
      if (asked.topics !== null) return { ...g, topics: requestedById(asked.topics, g.topics, names) };
      try {
        return { ...g, topics: await allTopicsById(g.topics, topicIds) };
      } catch {
        return { ...g, topics: [], errorCode: ErrorCode.COORDINATOR_NOT_AVAILABLE };
      }
    }),
  );
  return { ...res, groups };
}

/** The requested topics in request order, each under its id; unknown ids as the broker answers them. */
function requestedById(
  asked: readonly { topicId: string; partitionIndexes: number[] }[],
  answered: readonly OffsetFetchResponseTopics[],
  names: ReadonlyMap<string, string>,
): OffsetFetchResponseTopics[] {
  const byName = new Map(answered.map((t) => [t.name, t]));
  return asked.map((t) => {
    const name = names.get(t.topicId);
    const found = name === undefined ? undefined : byName.get(name);
    if (found) return { ...found, name: '', topicId: t.topicId };
    return { name: '', topicId: t.topicId, partitions: t.partitionIndexes.map(unknownIdPartition) };
  });
}

/**
 * Every stored topic of the group under its id. A stored name the cluster no longer has (the
 * topic deleted) has no id to be named by, and is left out, as the broker leaves it out.
 */
async function allTopicsById(
  answered: readonly OffsetFetchResponseTopics[],
  topicIds: TopicIds,
): Promise<OffsetFetchResponseTopics[]> {
  if (answered.length === 0) return [];
  const ids = await topicIds.idsOf(answered.map((t) => t.name));
  return answered.flatMap((t) => {
    const id = ids.get(t.name);
    return id === undefined ? [] : [{ ...t, name: '', topicId: id }];
  });
}

function partitionCount(topics: readonly { partitions: readonly unknown[] }[]): number {
  let n = 0;
  for (const t of topics) n += t.partitions.length;
  return n;
}
