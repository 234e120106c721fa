/**
 * The offset store contract. Every backend (memory, embedded, redis, zookeeper) implements it and
 * passes the same contract suite (backends/contract.ts).
 *
 * The proxy never lets the broker see the group's offsets; it still lets the broker run group
 * membership (JoinGroup, SyncGroup, Heartbeat, ConsumerGroupHeartbeat). The proxy observes those
 * responses and records what it needs for fencing here, *before* it passes them on, so a commit
 * that arrives afterwards on any proxy instance is checked against them.
 *
 * A commit's guard check and its writes are one atomic step inside the store (a Lua script, an
 * LMDB transaction, a ZooKeeper multi with version checks): two proxy instances cannot race past
 * a fence or a compare-and-set.
 */
import type { CommitOrder } from './commit-order.js';
import type { Endpoint } from './connection-problem.js';

/**
 * Deadline of one store operation unless the caller gives one (--store-timeout-ms): the one
 * default the proxy's option table, the offsets CLI and every backend share.
 */
export const DEFAULT_STORE_TIMEOUT_MS = 1500;

/** One committed partition offset, as a broker keeps it. */
export interface StoredOffset {
  offset: bigint;
  /** -1 when the client sent none. */
  leaderEpoch: number;
  /** Never null: a null metadata is stored as "". */
  metadata: string;
  /** Milliseconds since the epoch (proxy clock, or the v1 CommitTimestamp). */
  commitTimestamp: bigint;
  /** -1 unless an OffsetCommit v2-4 RetentionTimeMs set an explicit expiry. */
  expireTimestamp: bigint;
}

export interface TopicPartition {
  topic: string;
  partition: number;
}

export interface PartitionOffset extends TopicPartition, StoredOffset {}

export interface OffsetWrite extends TopicPartition, StoredOffset {
  /**
   * Compare-and-set: write only if the currently stored offset equals this value
   * (-1n = "no committed offset"). Undefined = unconditional.
   */
  expectedOffset?: bigint;
}

/** Who is committing, as the OffsetCommit request says. */
export interface CommitIdentity {
  /** Classic: generation id; KIP-848: member epoch. -1 for assign() consumers and admin tools. */
  generationIdOrMemberEpoch: number;
  /** "" when absent. */
  memberId: string;
  groupInstanceId: string | null;
  /** The OffsetCommit request version: some refusals differ by version (see commit-guard.ts). */
  requestVersion: number;
}

export interface CommitRequest {
  group: string;
  /** Absent: no fencing (commit guard `off` or `cas` only). */
  identity?: CommitIdentity;
  /**
   * A client's commit without an identity (commit guard `off` or `cas`): to a group that commits
   * transactionally it is answered 'transactional' with nothing written, as every commit with an
   * identity is, since the broker holds that group's offsets. Unset for the operator's own writes
   * (`offsets set --force`), which the store takes.
   */
  deferIfTransactional?: true;
  writes: OffsetWrite[];
  /**
   * Unique per client request. A store that may execute a command twice (a resend after a
   * reconnect) uses it to answer the second execution with the first one's outcome. Any unique
   * string is valid; the proxy issues time-ordered ones (`newRequestId`, request-id.ts), which
   * the embedded store keeps in time order (fewer pages per write transaction).
   */
  requestId: string;
  /**
   * When and by which process the proxy read this commit (commit-order.ts). A partition whose
   * stored offset was written by a commit the same process read later is not written ("later
   * read wins"), and the commit is still answered ok (CommitOutcome.superseded counts them).
   * Stored with each written offset; absent (the operator's writes) clears the stored order.
   */
  order?: CommitOrder;
}

/** Kafka error codes a guard can refuse with (numeric, as on the wire). */
export const GuardError = {
  ILLEGAL_GENERATION: 22,
  UNKNOWN_MEMBER_ID: 25,
  REBALANCE_IN_PROGRESS: 27,
  UNSUPPORTED_VERSION: 35,
  GROUP_ID_NOT_FOUND: 69,
  FENCED_INSTANCE_ID: 82,
  STALE_MEMBER_EPOCH: 113,
} as const;
export type GuardErrorCode = (typeof GuardError)[keyof typeof GuardError];

export interface CasMismatch extends TopicPartition {
  expected: bigint;
  /** -1n when nothing is stored. */
  actual: bigint;
}

export type CommitOutcome =
  /**
   * Accepted. `superseded`: how many of the request's partitions were not written because a
   * commit read later by the same process had written them (CommitRequest.order); absent: none.
   */
  | { status: 'ok'; superseded?: number }
  /** The fence refused the whole request; nothing was written. */
  | { status: 'fenced'; error: GuardErrorCode }
  /** At least one compare-and-set did not match; nothing was written. */
  | { status: 'cas-mismatch'; mismatches: CasMismatch[] }
  /**
   * A client's commit (with an identity, or deferIfTransactional) to a group seen committing
   * transactionally: its offsets are the broker's (GroupState.transactional), so the broker must
   * take this commit too; nothing was written, not even checked against the fence.
   */
  | { status: 'transactional' };

export type GroupProtocol = 'classic' | 'consumer';
export type ClassicGroupState = 'Empty' | 'PreparingRebalance' | 'CompletingRebalance' | 'Stable';

export interface GroupMember {
  memberId: string;
  groupInstanceId: string | null;
  /** KIP-848 only: the member's current epoch (-2: a static member that left and may come back). */
  memberEpoch?: number;
  /**
   * Classic only: how many times the member's instance id changed hands within the generation
   * before it got it (absent: 0, it joined with the generation). A static member's replacement
   * outranks the member it replaced, so that the record keeps the newer one whatever order two
   * proxy instances record the two in.
   */
  rank?: number;
}

/** What the store knows about a group's membership and mode. */
export interface GroupState {
  protocol: GroupProtocol | null;
  /** Classic groups: the current generation (-1 before any). */
  generationId: number;
  state: ClassicGroupState;
  members: GroupMember[];
  /**
   * Set once the group was seen committing transactionally: its OffsetFetch then goes to the
   * broker, and so do its clients' commits (CommitOutcome 'transactional').
   */
  transactional: boolean;
  /**
   * A streams group (KIP-1071): the topology its members declared, at the highest topology epoch
   * the broker accepted. Absent: not known as a streams group (records written before it existed
   * have none). Group tools need it once the broker forgot the group (streams-topologies.ts).
   */
  streams?: StreamsTopology;
}

/** A streams group's topology as the store keeps it. */
export interface StreamsTopology {
  epoch: number;
  /**
   * The subtopologies, as JSON (streams-topologies.ts encodes and decodes them): one opaque
   * string, so that every store keeps it as it is, the Redis store's Lua included.
   */
  subtopologies: string;
}

/**
 * Membership observations, taken from broker responses. Applying them must be monotonic, so
 * that two proxy instances observing the same group in any order converge: an update for an
 * older generation than the stored one is ignored.
 */
export type GroupUpdate =
  /**
   * A JoinGroup response. `members` is present only in the leader's response (the full list).
   * `takeover`: the request had no member id but an instance id. If the instance already has a
   * member in the answer's generation, the broker replaced it (static membership): the joiner
   * outranks it.
   */
  | {
      kind: 'joined';
      generationId: number;
      memberId: string;
      groupInstanceId: string | null;
      members?: GroupMember[];
      takeover?: boolean;
    }
  /** A successful SyncGroup response: the generation is Stable. */
  | { kind: 'synced'; generationId: number; memberId: string; groupInstanceId?: string | null }
  /** A Heartbeat/commit answered REBALANCE_IN_PROGRESS by the broker. */
  | { kind: 'rebalancing'; generationId: number }
  /** LeaveGroup (classic) of these members, and of the members holding these instance ids. */
  | { kind: 'left'; memberIds: string[]; groupInstanceIds?: string[] }
  /**
   * A ConsumerGroupHeartbeat response: the member's epoch. -1 removes the member; -2 keeps a
   * static member that left to come back. `exact`: a join (epoch 0 in the request) or the
   * broker's word: the epoch is set, not raised, and other members of its instance id are gone.
   */
  | {
      kind: 'member-epoch';
      memberId: string;
      memberEpoch: number;
      instanceId?: string | null;
      exact?: boolean;
    }
  /**
   * The broker's word that a classic member is current in this generation and the group in this
   * state: it holds its instance id alone from now on.
   */
  | {
      kind: 'verified';
      generationId: number;
      memberId: string;
      groupInstanceId: string | null;
      state: ClassicGroupState;
    }
  /** The broker does not know this member (UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID): it is gone. */
  | { kind: 'gone'; memberId: string }
  /** The broker says the group has no members (DescribeGroups Empty/Dead, or GROUP_ID_NOT_FOUND). */
  | { kind: 'empty' }
  /** The group committed through TxnOffsetCommit. */
  | { kind: 'transactional' }
  /**
   * A streams member's topology the broker accepted: kept when the group has none or an older
   * epoch's. At an equal epoch the stored one stays, as the broker keeps its group's topology
   * while the group lives (and, with its offsets at the broker, an idle streams group lives on).
   */
  | { kind: 'streams-topology'; topology: StreamsTopology };

export interface OffsetStore {
  /** A short name for metrics and logs: "embedded", "redis", "zookeeper", "memory". */
  readonly kind: string;

  /**
   * Checks the guard and writes all partitions, atomically (all or none); the one exception is a
   * ZooKeeper commit too large for one multi, applied in several fenced multis (docs/stores.md).
   */
  commit(request: CommitRequest): Promise<CommitOutcome>;

  /** The stored offsets of the listed partitions (missing ones are absent), or all when null. */
  fetch(group: string, partitions: TopicPartition[] | null): Promise<PartitionOffset[]>;

  /** Removes the listed partitions' offsets. */
  deleteOffsets(group: string, partitions: TopicPartition[]): Promise<void>;

  /** Removes every offset and the membership record of the group. */
  deleteGroup(group: string): Promise<void>;

  /** Groups that have offsets or a membership record. */
  listGroups(): Promise<string[]>;

  /**
   * Takes or renews the lease `name` for `holder` for `ttlMs`: true when `holder` holds it now,
   * false while another holder's lease runs. Atomic across every proxy sharing the store, so one
   * proxy at a time does what must happen once per cluster (exporting lag series). A lease not
   * renewed lapses after its TTL (a proxy that died), one released goes at once.
   */
  lease(name: string, holder: string, ttlMs: number): Promise<boolean>;
  /** Gives the lease up if `holder` holds it. */
  releaseLease(name: string, holder: string): Promise<void>;

  getGroup(group: string): Promise<GroupState | null>;
  updateGroup(group: string, update: GroupUpdate): Promise<void>;

  /**
   * For an exception thrown where no caller could catch it (inside a client library's socket
   * handler): true when it came from this store's client and the store recovered (a new client),
   * so the process can carry on; false when it is not the store's.
   */
  recoverFromFault?(err: unknown): boolean;

  /**
   * The client's last connection failure, in words naming the server ("connection refused to
   * h:p", connection-problem.ts), while it has no working connection; null when connected. For
   * networked stores whose client reports it; the health watcher uses it for error texts.
   */
  connectionProblem?(): string | null;

  /**
   * The servers the store's operations go to now, when they are not the configured endpoints
   * (behind Sentinel: the master the sentinels named, not the sentinels). The health watcher
   * probes these to say why a ping failed; absent or null: the configured endpoints.
   */
  probeEndpoints?(): Endpoint[] | null;

  /**
   * The store's marker, for noticing a store that lost its data (a flush, a restart without
   * persistence, a deleted chroot or data file: proxy/data-loss-watch.ts). Writes `candidate`
   * wherever the store has no marker yet (set-if-absent: the first proxy to open a store writes
   * it, later ones find it) and returns what the store holds, by place (a Redis Cluster has one
   * marker per primary). Absent on stores that cannot lose their data behind the proxy's back.
   */
  ensureMarker?(candidate: string): Promise<Map<string, string>>;
  /** The marker at the places ensureMarker used: its value, or null where it is gone. */
  readMarker?(): Promise<Map<string, string | null>>;
  /**
   * Adds 1 to the shared count `name` (created at 0), for what a short-lived process does to the
   * store and the long-running proxies report: the offsets CLI's admin changes, exported by every
   * proxy on the store as kop_admin_cli_changes_total. At least once: a retried write whose first
   * reply was lost may count twice.
   */
  addToCount?(name: string): Promise<void>;
  /** Every count addToCount made on this store, by name. */
  readCounts?(): Promise<Map<string, number>>;
  /** Calls `listener` whenever the store's client has (re)connected to a server. */
  onReconnect?(listener: () => void): void;

  /** Resolves when the store answers; rejects otherwise (readiness). */
  ping(): Promise<void>;
  close(): Promise<void>;
}
