// Group members made of raw protocol requests (the project's generated codecs), for tests that must
// drive a group's membership step by step, the same way against a broker and against the proxy:
// a classic member (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and a KIP-848 member
// (ConsumerGroupHeartbeat), each with the OffsetCommit and OffsetFetch a consumer sends, and a
// transactional producer that commits a group's offsets in its transactions (TxnOffsetCommit).
import { ErrorCode } from '../../protocol/error-codes.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';
import type { ConsumerGroupDescribeResponse } from '../../protocol/messages/consumer-group-describe-response.js';
import { defaultConsumerGroupHeartbeatRequest } from '../../protocol/messages/consumer-group-heartbeat-request.js';
import type { ConsumerGroupHeartbeatRequest } from '../../protocol/messages/consumer-group-heartbeat-request.js';
import type { ConsumerGroupHeartbeatResponse } from '../../protocol/messages/consumer-group-heartbeat-response.js';
import type { AddOffsetsToTxnResponse } from '../../protocol/messages/add-offsets-to-txn-response.js';
import type { DeleteGroupsResponse } from '../../protocol/messages/delete-groups-response.js';
import type { FindCoordinatorResponse } from '../../protocol/messages/find-coordinator-response.js';
import type { EndTxnResponse } from '../../protocol/messages/end-txn-response.js';
import type { HeartbeatResponse } from '../../protocol/messages/heartbeat-response.js';
import type { IncrementalAlterConfigsResponse } from '../../protocol/messages/incremental-alter-configs-response.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultInitProducerIdRequest } from '../../protocol/messages/init-producer-id-request.js';
import type { InitProducerIdResponse } from '../../protocol/messages/init-producer-id-response.js';
import type { JoinGroupResponse } from '../../protocol/messages/join-group-response.js';
import type { LeaveGroupResponse } from '../../protocol/messages/leave-group-response.js';
import type { MetadataResponse } from '../../protocol/messages/metadata-response.js';
import type { OffsetCommitResponse } from '../../protocol/messages/offset-commit-response.js';
import type { OffsetDeleteResponse } from '../../protocol/messages/offset-delete-response.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import type { OffsetFetchResponse } from '../../protocol/messages/offset-fetch-response.js';
import type { SyncGroupResponse } from '../../protocol/messages/sync-group-response.js';
import type { TxnOffsetCommitResponse } from '../../protocol/messages/txn-offset-commit-response.js';
import { RawClient } from './raw-client.js';

let correlation = 1;
const next = (): number => (correlation = (correlation % 2_000_000_000) + 1);

/** A connection that sends one request at a time (a member's requests are sequential). */
export class Conn {
  private queue: Promise<unknown> = Promise.resolve();
  private constructor(private readonly raw: RawClient) {}

  static async open(bootstrap: string): Promise<Conn> {
    return new Conn(await RawClient.connect(bootstrap));
  }

  request<T>(apiKey: number, version: number, body: unknown, timeoutMs = 30_000): Promise<T> {
    const run = this.queue.then(() =>
      withTimeout(this.raw.request<T>(apiKey, version, next(), body), timeoutMs, apiKey),
    );
    this.queue = run.catch(() => undefined);
    return run;
  }

  close(): void {
    this.raw.close();
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, apiKey: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no answer to api ${apiKey} within ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e as Error);
      },
    );
  });
}

/** ConsumerProtocol subscription v0 (what a Java consumer puts in JoinGroup): topics, user data. */
export function subscriptionBytes(topics: string[], userData: Buffer | null = null): Buffer {
  const parts: Buffer[] = [Buffer.from([0, 0])];
  const count = Buffer.alloc(4);
  count.writeInt32BE(topics.length);
  parts.push(count);
  for (const t of topics) {
    const len = Buffer.alloc(2);
    len.writeInt16BE(Buffer.byteLength(t));
    parts.push(len, Buffer.from(t));
  }
  const userDataLength = Buffer.alloc(4);
  userDataLength.writeInt32BE(userData === null ? -1 : userData.length);
  parts.push(userDataLength, ...(userData === null ? [] : [userData]));
  return Buffer.concat(parts);
}

/** ConsumerProtocol assignment v0 with no partitions (the leader's answer for every member). */
export const EMPTY_ASSIGNMENT = Buffer.from([0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);

export interface CommitIdentity {
  generationIdOrMemberEpoch: number;
  memberId: string;
  groupInstanceId: string | null;
}

export const ANONYMOUS: CommitIdentity = {
  generationIdOrMemberEpoch: -1,
  memberId: '',
  groupInstanceId: null,
};

/** A topic's partitions at `offset`, as OffsetCommit and TxnOffsetCommit name them. */
/**
 * A topic as OffsetCommit and OffsetFetch name it: by name up to v9, by id from v10 (KIP-848),
 * whose requests need the id (`topicIds`).
 */
export type TopicRef = string | { name: string; id: string };

function topicFields(topic: TopicRef, version: number): { name: string; topicId: string } {
  if (typeof topic === 'string') {
    if (version >= 10) throw new Error(`v${version} names topics by id: ${topic} has none here`);
    return { name: topic, topicId: ZERO_UUID };
  }
  return { name: topic.name, topicId: topic.id };
}

function committedTopic(
  topic: TopicRef,
  version: number,
  partitions: number[],
  offset: bigint,
  metadata = '',
) {
  return {
    ...topicFields(topic, version),
    partitions: partitions.map((p) => ({
      partitionIndex: p,
      committedOffset: offset,
      committedLeaderEpoch: -1,
      committedMetadata: metadata,
    })),
  };
}

/** OffsetCommit of `offset` to every listed partition; the error codes in partition order. */
export async function commitOffsets(
  conn: Conn,
  group: string,
  id: CommitIdentity,
  topic: TopicRef,
  partitions: number[],
  offset: bigint,
  version = 9,
  metadata = '',
): Promise<number[]> {
  const res = await conn.request<OffsetCommitResponse>(ApiKey.OffsetCommit, version, {
    groupId: group,
    generationIdOrMemberEpoch: id.generationIdOrMemberEpoch,
    memberId: id.memberId,
    groupInstanceId: version >= 7 ? id.groupInstanceId : null,
    retentionTimeMs: -1n,
    topics: [committedTopic(topic, version, partitions, offset, metadata)],
  });
  return res.topics.flatMap((t) => t.partitions.map((p) => p.errorCode));
}

export interface FetchResult {
  errorCode: number;
  offsets: bigint[];
  /** Each partition's own code (UNSTABLE_OFFSET_COMMIT while a transaction is pending on it). */
  partitionCodes: number[];
}

/** OffsetFetch (v8+: as one group; v9 with the member's id and epoch, or none). */
export async function fetchOffsets(
  conn: Conn,
  group: string,
  topic: TopicRef,
  partitions: number[],
  member: { memberId: string | null; memberEpoch: number } = { memberId: null, memberEpoch: -1 },
  version = 9,
  requireStable = true,
): Promise<FetchResult> {
  const res = await conn.request<OffsetFetchResponse>(ApiKey.OffsetFetch, version, {
    ...defaultOffsetFetchRequest(),
    groups: [
      {
        groupId: group,
        memberId: version >= 9 ? member.memberId : null,
        memberEpoch: version >= 9 ? member.memberEpoch : -1,
        topics: [{ ...topicFields(topic, version), partitionIndexes: partitions }],
      },
    ],
    requireStable,
  });
  const g = res.groups[0]!;
  return {
    errorCode: g.errorCode,
    offsets: g.topics.flatMap((t) => t.partitions.map((p) => p.committedOffset)),
    partitionCodes: g.topics.flatMap((t) => t.partitions.map((p) => p.errorCode)),
  };
}

/**
 * OffsetDelete of the listed partitions of each topic (as kafka-consumer-groups --delete-offsets):
 * `top [codes]`, the codes in request order.
 */
export async function deleteOffsets(
  conn: Conn,
  group: string,
  topics: string | string[],
  partitions: number[],
): Promise<string> {
  const res = await conn.request<OffsetDeleteResponse>(ApiKey.OffsetDelete, 0, {
    groupId: group,
    topics: (Array.isArray(topics) ? topics : [topics]).map((name) => ({
      name,
      partitions: partitions.map((partitionIndex) => ({ partitionIndex })),
    })),
  });
  return `${res.errorCode} [${res.topics.flatMap((t) => t.partitions.map((p) => p.errorCode)).join(',')}]`;
}

export async function deleteGroup(conn: Conn, group: string): Promise<number> {
  const res = await conn.request<DeleteGroupsResponse>(ApiKey.DeleteGroups, 2, { groupsNames: [group] });
  return res.results[0]?.errorCode ?? ErrorCode.UNKNOWN_SERVER_ERROR;
}

/** Removes a static member by its instance id, as AdminClient.removeMembersFromConsumerGroup does. */
export async function removeByInstanceId(conn: Conn, group: string, instanceId: string): Promise<number> {
  const res = await conn.request<LeaveGroupResponse>(ApiKey.LeaveGroup, 5, {
    groupId: group,
    memberId: '',
    members: [{ memberId: '', groupInstanceId: instanceId, reason: 'admin' }],
  });
  return res.errorCode !== ErrorCode.NONE ? res.errorCode : (res.members[0]?.errorCode ?? res.errorCode);
}

/** Topic ids by name (KIP-848 heartbeats name partitions by topic id). */
export async function topicIds(conn: Conn, topics: string[]): Promise<Map<string, string>> {
  const res = await conn.request<MetadataResponse>(ApiKey.Metadata, 12, {
    topics: topics.map((name) => ({ topicId: 'AAAAAAAAAAAAAAAAAAAAAA', name })),
    allowAutoTopicCreation: false,
    includeClusterAuthorizedOperations: false,
    includeTopicAuthorizedOperations: false,
  });
  return new Map(res.topics.map((t) => [t.name ?? '', t.topicId]));
}

/** Sets a group's dynamic configs (Kafka 4.0+ group configs: consumer.session.timeout.ms, ...). */
export async function setGroupConfigs(
  conn: Conn,
  group: string,
  configs: Record<string, string>,
): Promise<number> {
  const res = await conn.request<IncrementalAlterConfigsResponse>(ApiKey.IncrementalAlterConfigs, 1, {
    resources: [
      {
        resourceType: 32, // GROUP
        resourceName: group,
        configs: Object.entries(configs).map(([name, value]) => ({ name, configOperation: 0, value })),
      },
    ],
    validateOnly: false,
  });
  return res.responses[0]?.errorCode ?? ErrorCode.UNKNOWN_SERVER_ERROR;
}

/**
 * Sets a KIP-848 group's session on the broker at `bootstrap` (its consumer.session.timeout.ms,
 * within the broker's group.consumer.min/max.session.timeout.ms), before its members join: under
 * KIP-848 the session is the broker's, a client cannot choose it.
 */
export async function setConsumerGroupSession(
  bootstrap: string,
  group: string,
  sessionMs: number,
): Promise<void> {
  const admin = await Conn.open(bootstrap);
  try {
    const code = await setGroupConfigs(admin, group, { 'consumer.session.timeout.ms': String(sessionMs) });
    if (code !== ErrorCode.NONE)
      throw new Error(`the broker refused ${group}'s consumer.session.timeout.ms: error ${code}`);
  } finally {
    admin.close();
  }
}

export async function describeConsumerGroup(
  conn: Conn,
  group: string,
): Promise<ConsumerGroupDescribeResponse> {
  return conn.request<ConsumerGroupDescribeResponse>(ApiKey.ConsumerGroupDescribe, 0, {
    groupIds: [group],
    includeAuthorizedOperations: false,
  });
}

export interface ClassicOptions {
  groupInstanceId: string | null;
  sessionTimeoutMs: number;
  rebalanceTimeoutMs: number;
  topics: string[];
}

/** A classic-protocol member: the requests a Java consumer sends, one at a time. */
export class ClassicMember {
  memberId = '';
  generationId = -1;
  isLeader = false;
  /** Members listed in the last JoinGroup response (the leader's only). */
  private members: string[] = [];

  constructor(
    readonly conn: Conn,
    readonly group: string,
    readonly opts: ClassicOptions,
  ) {}

  get identity(): CommitIdentity {
    return {
      generationIdOrMemberEpoch: this.generationId,
      memberId: this.memberId,
      groupInstanceId: this.opts.groupInstanceId,
    };
  }

  /** User data of the subscription: changing it makes any join start a rebalance (see join). */
  userData: Buffer | null = null;

  /**
   * JoinGroup (v9). A dynamic member's first request is answered MEMBER_ID_REQUIRED with its id;
   * it joins again with it, as the Java consumer does. Resolves when the join phase completes.
   * A member of a Stable group that joins with the metadata it joined with before is answered at
   * once with the current generation unless it is the leader; new `userData` makes every join
   * start (or wait for) a rebalance.
   */
  async join(): Promise<number> {
    for (let attempt = 0; attempt < 2; attempt++) {
      const res = await this.conn.request<JoinGroupResponse>(ApiKey.JoinGroup, 9, {
        groupId: this.group,
        sessionTimeoutMs: this.opts.sessionTimeoutMs,
        rebalanceTimeoutMs: this.opts.rebalanceTimeoutMs,
        memberId: this.memberId,
        groupInstanceId: this.opts.groupInstanceId,
        protocolType: 'consumer',
        protocols: [{ name: 'range', metadata: subscriptionBytes(this.opts.topics, this.userData) }],
        reason: null,
      });
      if (res.errorCode === ErrorCode.MEMBER_ID_REQUIRED) {
        this.memberId = res.memberId;
        continue;
      }
      if (res.errorCode === ErrorCode.NONE) {
        this.memberId = res.memberId;
        this.generationId = res.generationId;
        this.isLeader = res.leader === res.memberId;
        this.members = res.members.map((m) => m.memberId);
      } else if (res.errorCode === ErrorCode.UNKNOWN_MEMBER_ID) {
        // As the Java consumer: forget the member id and generation, join as new next time.
        this.memberId = '';
        this.generationId = -1;
      }
      return res.errorCode;
    }
    return ErrorCode.MEMBER_ID_REQUIRED;
  }

  /** SyncGroup (v5); the leader hands every member an empty assignment. */
  async sync(): Promise<number> {
    const res = await this.conn.request<SyncGroupResponse>(ApiKey.SyncGroup, 5, {
      groupId: this.group,
      generationId: this.generationId,
      memberId: this.memberId,
      groupInstanceId: this.opts.groupInstanceId,
      protocolType: 'consumer',
      protocolName: 'range',
      assignments: this.isLeader
        ? this.members.map((m) => ({ memberId: m, assignment: EMPTY_ASSIGNMENT }))
        : [],
    });
    return res.errorCode;
  }

  async heartbeat(): Promise<number> {
    const res = await this.conn.request<HeartbeatResponse>(ApiKey.Heartbeat, 4, {
      groupId: this.group,
      generationId: this.generationId,
      memberId: this.memberId,
      groupInstanceId: this.opts.groupInstanceId,
    });
    return res.errorCode;
  }

  async leave(): Promise<number> {
    const res = await this.conn.request<LeaveGroupResponse>(ApiKey.LeaveGroup, 5, {
      groupId: this.group,
      memberId: '',
      members: [{ memberId: this.memberId, groupInstanceId: this.opts.groupInstanceId, reason: 'test' }],
    });
    const code = res.errorCode !== ErrorCode.NONE ? res.errorCode : (res.members[0]?.errorCode ?? 0);
    if (code === ErrorCode.NONE) {
      this.memberId = '';
      this.generationId = -1;
    }
    return code;
  }
}

export interface ConsumerOptions {
  /** KIP-848 (ConsumerGroupHeartbeat v1): the client chooses its member id. */
  memberId: string;
  instanceId: string | null;
  rebalanceTimeoutMs: number;
  topics: string[];
  topicIds: Map<string, string>;
}

/** A KIP-848 (`group.protocol=consumer`) member: ConsumerGroupHeartbeat v1, one at a time. */
export class ConsumerMember {
  memberEpoch = 0;
  /** The partitions the coordinator assigned, which the next heartbeat reports as owned. */
  private assigned: { topicId: string; partitions: number[] }[] = [];
  private joined = false;

  constructor(
    readonly conn: Conn,
    readonly group: string,
    readonly opts: ConsumerOptions,
  ) {}

  get memberId(): string {
    return this.opts.memberId;
  }

  /** The partitions of `topicId` the coordinator last assigned (sorted). */
  partitionsOf(topicId: string): number[] {
    return this.assigned.flatMap((t) => (t.topicId === topicId ? t.partitions : [])).sort((a, b) => a - b);
  }

  get identity(): CommitIdentity {
    return {
      generationIdOrMemberEpoch: this.memberEpoch,
      memberId: this.memberId,
      groupInstanceId: this.opts.instanceId,
    };
  }

  /** Joins (epoch 0, the full request) or heartbeats with the current epoch, owning what was assigned. */
  async heartbeat(): Promise<number> {
    const full = !this.joined;
    const res = await this.send(
      full
        ? {
            memberEpoch: 0,
            rebalanceTimeoutMs: this.opts.rebalanceTimeoutMs,
            subscribedTopicNames: this.opts.topics,
            topicPartitions: [],
          }
        : { memberEpoch: this.memberEpoch, topicPartitions: this.assigned },
    );
    if (res.errorCode === ErrorCode.NONE) {
      this.joined = true;
      this.memberEpoch = res.memberEpoch;
      if (res.assignment) this.assigned = res.assignment.topicPartitions.map((t) => ({ ...t }));
    } else if (
      res.errorCode === ErrorCode.FENCED_MEMBER_EPOCH ||
      res.errorCode === ErrorCode.UNKNOWN_MEMBER_ID
    ) {
      // As the Java consumer: give up the partitions and join again with epoch 0.
      this.joined = false;
      this.memberEpoch = 0;
      this.assigned = [];
    }
    return res.errorCode;
  }

  /** Leaves: epoch -1, or -2 for a static member that will come back (it keeps its assignment). */
  async leave(temporary = this.opts.instanceId !== null): Promise<number> {
    const epoch = temporary ? -2 : -1;
    const res = await this.send({ memberEpoch: epoch });
    if (res.errorCode === ErrorCode.NONE) {
      this.joined = false;
      this.memberEpoch = epoch;
    }
    return res.errorCode;
  }

  private send(fields: Partial<ConsumerGroupHeartbeatRequest>): Promise<ConsumerGroupHeartbeatResponse> {
    return this.conn.request<ConsumerGroupHeartbeatResponse>(ApiKey.ConsumerGroupHeartbeat, 1, {
      ...defaultConsumerGroupHeartbeatRequest(),
      groupId: this.group,
      memberId: this.memberId,
      instanceId: this.opts.instanceId,
      ...fields,
    });
  }
}

/**
 * A transactional producer (InitProducerId with a transactional id) that commits a consumer
 * group's offsets in its transactions, as `KafkaProducer.sendOffsetsToTransaction` does:
 * AddOffsetsToTxn once per transaction, TxnOffsetCommit with the group member's identity
 * (classic generation or KIP-848 member epoch), then EndTxn. Single-broker clusters only: every
 * request goes to the one connection (the transaction and group coordinators are that broker).
 */
export class TxnProducer {
  private producerId = -1n;
  private producerEpoch = -1;
  /** A transaction is open: offsets were added to it and it has not ended. */
  open = false;

  constructor(
    readonly conn: Conn,
    readonly transactionalId: string,
  ) {}

  /** Retries what a producer retries: the coordinator loading, a previous transaction completing. */
  private async retrying<T extends { errorCode: number }>(send: () => Promise<T>): Promise<T> {
    const retriable: number[] = [
      ErrorCode.CONCURRENT_TRANSACTIONS,
      ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
      ErrorCode.COORDINATOR_NOT_AVAILABLE,
      ErrorCode.NOT_COORDINATOR,
    ];
    const deadline = Date.now() + 15_000;
    for (;;) {
      const res = await send();
      if (!retriable.includes(res.errorCode) || Date.now() > deadline) return res;
      await new Promise((r) => setTimeout(r, 50));
    }
  }

  /** FindCoordinator (its first use creates the transaction log), then InitProducerId. */
  async init(): Promise<number> {
    const found = await this.retrying(async () => {
      const r = await this.conn.request<FindCoordinatorResponse>(ApiKey.FindCoordinator, 4, {
        key: '',
        keyType: 1, // TRANSACTION
        coordinatorKeys: [this.transactionalId],
      });
      return { errorCode: r.coordinators[0]?.errorCode ?? ErrorCode.UNKNOWN_SERVER_ERROR };
    });
    if (found.errorCode !== ErrorCode.NONE) return found.errorCode;
    const res = await this.retrying(() =>
      this.conn.request<InitProducerIdResponse>(ApiKey.InitProducerId, 4, {
        // Kafka 4.4's fields (enable2Pc, keepPreparedTxn) at their defaults, which v4 leaves out.
        ...defaultInitProducerIdRequest(),
        transactionalId: this.transactionalId,
        transactionTimeoutMs: 60_000,
        producerId: -1n,
        producerEpoch: -1,
      }),
    );
    if (res.errorCode === ErrorCode.NONE) {
      this.producerId = res.producerId;
      this.producerEpoch = res.producerEpoch;
    }
    return res.errorCode;
  }

  /**
   * TxnOffsetCommit (v3) of `offset` to every listed partition with the member's identity, in the
   * open transaction (AddOffsetsToTxn first when none is). The codes in partition order. Throws
   * when the producer cannot start a transaction: a test of the commits would prove nothing.
   */
  async commit(
    group: string,
    id: CommitIdentity,
    topic: string,
    partitions: number[],
    offset: bigint,
  ): Promise<number[]> {
    if (this.producerId < 0n) {
      const code = await this.init();
      if (code !== ErrorCode.NONE) throw new Error(`InitProducerId of ${this.transactionalId}: ${code}`);
    }
    if (!this.open) {
      const added = await this.retrying(() =>
        this.conn.request<AddOffsetsToTxnResponse>(ApiKey.AddOffsetsToTxn, 3, {
          transactionalId: this.transactionalId,
          producerId: this.producerId,
          producerEpoch: this.producerEpoch,
          groupId: group,
        }),
      );
      if (added.errorCode !== ErrorCode.NONE)
        throw new Error(`AddOffsetsToTxn of ${this.transactionalId}: ${added.errorCode}`);
      this.open = true;
    }
    const res = await this.conn.request<TxnOffsetCommitResponse>(ApiKey.TxnOffsetCommit, 3, {
      transactionalId: this.transactionalId,
      groupId: group,
      producerId: this.producerId,
      producerEpoch: this.producerEpoch,
      generationIdOrMemberEpoch: id.generationIdOrMemberEpoch,
      memberId: id.memberId,
      groupInstanceId: id.groupInstanceId,
      topics: [committedTopic(topic, 3, partitions, offset)],
    });
    return res.topics.flatMap((t) => t.partitions.map((p) => p.errorCode));
  }

  /** EndTxn: commits or aborts the open transaction. */
  async end(commit: boolean): Promise<number> {
    const res = await this.retrying(() =>
      this.conn.request<EndTxnResponse>(ApiKey.EndTxn, 3, {
        transactionalId: this.transactionalId,
        producerId: this.producerId,
        producerEpoch: this.producerEpoch,
        committed: commit,
      }),
    );
    this.open = false;
    return res.errorCode;
  }
}
