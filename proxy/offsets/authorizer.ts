/**
 * No widening of access: a client may commit, fetch or delete offsets through the proxy only where
 * the cluster's ACLs let its principal do so at the broker (READ on the group and the topic for
 * OffsetCommit, DESCRIBE for OffsetFetch, DELETE on the group and READ on the topic for
 * OffsetDelete).
 *
 * The proxy does not evaluate ACLs itself; it asks the broker, on the client's own authenticated
 * connection, with requests that cannot change anything: an OffsetCommit or OffsetFetch naming
 * partition 2147483647 of each topic (the broker authorizes group and topics first, then finds no
 * such partition and writes nothing), and an OffsetDelete with no partitions. Answers are cached
 * per connection (one principal) for a short time. When the broker's answer does not decide the
 * question, the request is refused with a retriable error.
 */
import { ErrorCode } from '../../protocol/error-codes.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';
import { ApiKey } from '../../protocol/messages/api-info.js';
import { defaultOffsetCommitRequest } from '../../protocol/messages/offset-commit-request.js';
import { defaultOffsetDeleteRequest } from '../../protocol/messages/offset-delete-request.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import type { RequestInfo } from '../core/extension.js';

export type Operation = 'read' | 'describe' | 'delete';

/** Where the answer is a refusal: of the whole group, or of some topics. */
export interface Decision {
  /** Non-zero: every partition (or the group) is refused with this code. */
  groupError: number;
  /** Topics refused with TOPIC_AUTHORIZATION_FAILED (29). */
  deniedTopics: ReadonlySet<string>;
}

export const ALLOWED: Decision = { groupError: ErrorCode.NONE, deniedTopics: new Set() };

/** A partition no topic has: probes name it so the broker authorizes and then finds nothing to do. */
const PROBE_PARTITION = 2147483647;
/** Versions every supported broker (Kafka 3.x and 4.x) accepts. */
const COMMIT_PROBE_VERSION = 2;
const FETCH_PROBE_VERSION = 2;
const DELETE_PROBE_VERSION = 0;
/** OffsetFetch v8 (Kafka 3.0+) carries many groups; at most this many per probe. */
const BATCH_FETCH_PROBE_VERSION = 8;
const BATCH_PROBE_GROUPS = 1000;

type Verdict = 'allowed' | 'denied' | 'undecided';

interface CacheEntry {
  verdict: Verdict;
  at: number;
}

export class BrokerAuthorizer {
  /**
   * Verdicts by client connection (one principal each), so that a closed connection's are dropped
   * with it (`forget`): clients that reconnect often would otherwise fill the cache with entries
   * nobody can read again until the size bound clears it.
   */
  private readonly byConnection = new Map<string, Map<string, CacheEntry>>();
  private entries = 0;

  constructor(
    private readonly ttlMs = 30_000,
    private readonly maxEntries = 100_000,
  ) {}

  private cached(connectionId: string, key: string): Verdict | undefined {
    const verdicts = this.byConnection.get(connectionId);
    const hit = verdicts?.get(key);
    if (!hit) return undefined;
    if (Date.now() - hit.at > this.ttlMs) {
      verdicts!.delete(key);
      this.entries--;
      return undefined;
    }
    return hit.verdict;
  }

  private remember(connectionId: string, key: string, verdict: Verdict): void {
    if (verdict === 'undecided') return;
    if (this.entries >= this.maxEntries) {
      this.byConnection.clear();
      this.entries = 0;
    }
    let verdicts = this.byConnection.get(connectionId);
    if (verdicts === undefined) {
      verdicts = new Map();
      this.byConnection.set(connectionId, verdicts);
    }
    if (!verdicts.has(key)) this.entries++;
    verdicts.set(key, { verdict, at: Date.now() });
  }

  /**
   * The connection closed: its verdicts go. (One remembered from a probe that was still out when
   * it closed stays until the size bound clears the cache.)
   */
  forget(connectionId: string): void {
    const verdicts = this.byConnection.get(connectionId);
    if (verdicts === undefined) return;
    this.entries -= verdicts.size;
    this.byConnection.delete(connectionId);
  }

  /** Verdicts held (OffsetService.cachedVerdicts, tests). */
  get size(): number {
    return this.entries;
  }

  /** Decides `op` on `group` and `topics` for the client of `info`. */
  async authorize(
    info: RequestInfo,
    op: Operation,
    group: string,
    topics: readonly string[],
  ): Promise<Decision> {
    const ask = info.askBroker;
    if (!ask) return ALLOWED;
    const conn = info.connectionId;
    const groupKey = `${op}\u0000g\u0000${group}`;
    // Topics: READ for commits and deletes, DESCRIBE for fetches.
    const topicOp = op === 'describe' ? 'describe' : 'read';
    const topicKey = (t: string) => `${topicOp}\u0000t\u0000${group}\u0000${t}`;

    let groupVerdict = this.cached(conn, groupKey);
    if (op === 'delete' && groupVerdict === undefined) {
      groupVerdict = await this.probeDelete(ask, group);
      this.remember(conn, groupKey, groupVerdict);
    }
    // The verdicts this decision uses, read from the cache once: an entry that expires while a
    // probe is out must not turn an answered question into "undecided" (a load run saw 7 commits
    // the broker allowed refused with COORDINATOR_NOT_AVAILABLE that way).
    const verdicts = new Map<string, Verdict>();
    const missing: string[] = [];
    for (const t of new Set(topics)) {
      const v = this.cached(conn, topicKey(t));
      if (v !== undefined) verdicts.set(t, v);
      else missing.push(t);
    }
    if (groupVerdict === undefined || missing.length > 0) {
      const probe =
        topicOp === 'describe'
          ? await this.probeFetch(ask, group, missing)
          : await this.probeCommit(ask, group, missing);
      // For a delete the group verdict is DELETE's (above), not the probe's READ.
      if (op !== 'delete') {
        groupVerdict = probe.group;
        this.remember(conn, groupKey, probe.group);
      }
      for (const [t, v] of probe.topics) {
        this.remember(conn, topicKey(t), v);
        verdicts.set(t, v);
      }
    }
    if (groupVerdict === 'denied')
      return { groupError: ErrorCode.GROUP_AUTHORIZATION_FAILED, deniedTopics: new Set() };
    if (groupVerdict !== 'allowed')
      return { groupError: ErrorCode.COORDINATOR_NOT_AVAILABLE, deniedTopics: new Set() };
    const denied = new Set<string>();
    for (const t of topics) {
      const v = verdicts.get(t);
      if (v === 'denied') denied.add(t);
      else if (v !== 'allowed')
        return { groupError: ErrorCode.COORDINATOR_NOT_AVAILABLE, deniedTopics: new Set() };
    }
    return { groupError: ErrorCode.NONE, deniedTopics: denied };
  }

  /**
   * Which of `groups` the client may DESCRIBE (group tools listing groups the broker does not
   * hold): one OffsetFetch v8 naming them all with no topics, where the broker authorizes each group
   * and answers it on its own. Cached like every verdict; an undecided group is left out.
   */
  async describableGroups(info: RequestInfo, groups: readonly string[]): Promise<Set<string>> {
    const ask = info.askBroker;
    if (!ask) return new Set(groups);
    const conn = info.connectionId;
    const key = (g: string) => `describe\u0000g\u0000${g}`;
    const allowed = new Set<string>();
    const missing: string[] = [];
    for (const g of groups) {
      const v = this.cached(conn, key(g));
      if (v === 'allowed') allowed.add(g);
      else if (v === undefined) missing.push(g);
    }
    for (let i = 0; i < missing.length; i += BATCH_PROBE_GROUPS) {
      const batch = missing.slice(i, i + BATCH_PROBE_GROUPS);
      try {
        const r = await ask(ApiKey.OffsetFetch, BATCH_FETCH_PROBE_VERSION, {
          ...defaultOffsetFetchRequest(),
          groups: batch.map((groupId) => ({ groupId, memberId: null, memberEpoch: -1, topics: [] })),
        });
        for (const g of r.groups) {
          // Anything but the refusal comes after the group was authorized (NOT_COORDINATOR, ...).
          const verdict: Verdict =
            g.errorCode === ErrorCode.GROUP_AUTHORIZATION_FAILED ? 'denied' : 'allowed';
          this.remember(conn, key(g.groupId), verdict);
          if (verdict === 'allowed') allowed.add(g.groupId);
        }
      } catch {
        // undecided: left out of this answer, asked again next time
      }
    }
    return allowed;
  }

  private async probeCommit(
    ask: NonNullable<RequestInfo['askBroker']>,
    group: string,
    topics: string[],
  ): Promise<{ group: Verdict; topics: Map<string, Verdict> }> {
    // With no topic the broker answers at once without looking at the group: probe with a name
    // no ACL is likely to grant, only to learn the group's verdict.
    const probeTopics = topics.length > 0 ? topics : ['__kafka_offset_proxy_probe'];
    try {
      const r = await ask(ApiKey.OffsetCommit, COMMIT_PROBE_VERSION, {
        ...defaultOffsetCommitRequest(),
        groupId: group,
        generationIdOrMemberEpoch: -1,
        memberId: '',
        retentionTimeMs: -1n,
        topics: probeTopics.map((name) => ({
          name,
          topicId: ZERO_UUID,
          partitions: [
            {
              partitionIndex: PROBE_PARTITION,
              committedOffset: 0n,
              committedLeaderEpoch: -1,
              committedMetadata: '',
            },
          ],
        })),
      });
      const codes = new Map(r.topics.map((t) => [t.name, t.partitions[0]?.errorCode ?? -1]));
      if ([...codes.values()].some((c) => c === ErrorCode.GROUP_AUTHORIZATION_FAILED)) {
        return { group: 'denied', topics: new Map() };
      }
      const verdicts = new Map<string, Verdict>();
      for (const t of topics) {
        const c = codes.get(t);
        verdicts.set(
          t,
          c === ErrorCode.TOPIC_AUTHORIZATION_FAILED
            ? 'denied'
            : c === ErrorCode.UNKNOWN_TOPIC_OR_PARTITION || c === ErrorCode.NONE
              ? 'allowed'
              : 'undecided',
        );
      }
      return { group: 'allowed', topics: verdicts };
    } catch {
      return { group: 'undecided', topics: new Map() };
    }
  }

  private async probeFetch(
    ask: NonNullable<RequestInfo['askBroker']>,
    group: string,
    topics: string[],
  ): Promise<{ group: Verdict; topics: Map<string, Verdict> }> {
    try {
      const r = await ask(ApiKey.OffsetFetch, FETCH_PROBE_VERSION, {
        ...defaultOffsetFetchRequest(),
        groupId: group,
        topics: topics.map((name) => ({ name, partitionIndexes: [PROBE_PARTITION] })),
      });
      if (r.errorCode === ErrorCode.GROUP_AUTHORIZATION_FAILED) return { group: 'denied', topics: new Map() };
      // Any other group-level error comes after the group was authorized (e.g. NOT_COORDINATOR),
      // but then the broker lists no topics: their verdict stays open.
      if (r.errorCode !== ErrorCode.NONE) return { group: 'allowed', topics: new Map() };
      const codes = new Map(r.topics.map((t) => [t.name, t.partitions[0]?.errorCode ?? -1]));
      const verdicts = new Map<string, Verdict>();
      for (const t of topics) {
        const c = codes.get(t);
        verdicts.set(
          t,
          c === ErrorCode.TOPIC_AUTHORIZATION_FAILED
            ? 'denied'
            : c === ErrorCode.NONE
              ? 'allowed'
              : 'undecided',
        );
      }
      return { group: 'allowed', topics: verdicts };
    } catch {
      return { group: 'undecided', topics: new Map() };
    }
  }

  private async probeDelete(ask: NonNullable<RequestInfo['askBroker']>, group: string): Promise<Verdict> {
    try {
      const r = await ask(ApiKey.OffsetDelete, DELETE_PROBE_VERSION, {
        ...defaultOffsetDeleteRequest(),
        groupId: group,
        topics: [],
      });
      // The broker checks DELETE on the group before anything else: any other answer (NONE,
      // GROUP_ID_NOT_FOUND, NOT_COORDINATOR, ...) comes after the group was authorized.
      return r.errorCode === ErrorCode.GROUP_AUTHORIZATION_FAILED ? 'denied' : 'allowed';
    } catch {
      return 'undecided';
    }
  }
}
