/**
 * The broker's own answer to a commit, worked out without committing: what its group coordinator
 * would answer an OffsetCommit with this identity now (docs/design.md, "Fencing"). The offset
 * service asks for it whenever the store's record cannot be trusted to decide alone: before every
 * refusal, and before accepting a member it has no fresh evidence for (liveness.ts).
 *
 * No broker request validates exactly like OffsetCommit, so the verdict is assembled from ones
 * without side effects on offsets, in the coordinator's order of checks:
 * - classic: a Heartbeat with the member's identity validates the instance id, the member id and
 *   the generation exactly as a commit does (and, like an accepted commit, refreshes the
 *   member's session). Its NONE covers Stable and CompletingRebalance, where a commit is accepted
 *   and refused (REBALANCE_IN_PROGRESS): DescribeGroups tells them apart. Its
 *   REBALANCE_IN_PROGRESS means PreparingRebalance, where a commit is accepted. Its
 *   UNKNOWN_MEMBER_ID also stands for "no such classic group": DescribeGroups tells.
 * - KIP-848: ConsumerGroupDescribe lists the members, their epochs and the partitions they hold.
 *   A commit with an epoch older than the member's is accepted by Kafka 4.3+ (KIP-1251) when
 *   every partition it writes is held by the member since an epoch no newer than the commit's:
 *   held, ConsumerGroupDescribe says; since when, only the member's heartbeat answers told
 *   (assignment-epochs.ts gives a floor, which refuses only what the broker refuses). Kafka
 *   before 4.3 compares the epochs exactly.
 * - generation/epoch < 0: the group must be empty (DescribeGroups, ConsumerGroupDescribe).
 * - streams groups: StreamsGroupDescribe (streams-verdict.ts), first for a group seen as one.
 * - a group of a type none of these know (ListGroups names it): the broker's to fence, accepted.
 * - a group the broker does not have exists here if the store holds offsets for it (the broker
 *   would have kept it for them); otherwise GROUP_ID_NOT_FOUND (v9+, from KIP-848's group
 *   coordinator) or ILLEGAL_GENERATION (older versions, and the classic coordinator of Kafka 3.x).
 */
import type { CommitIdentity, GroupState, GroupUpdate } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { ConsumerGroupDescribeResponse } from '../../protocol/messages/consumer-group-describe-response.js';
import type { DescribeGroupsResponse } from '../../protocol/messages/describe-groups-response.js';

type ClassicDescription = DescribeGroupsResponse['groups'][number];
type ConsumerDescription = ConsumerGroupDescribeResponse['groups'][number];

/** The broker requests the verdict is made of (BrokerLookups). */
export interface GroupQueries {
  classicMemberStatus(
    group: string,
    generationId: number,
    memberId: string,
    groupInstanceId: string | null,
  ): Promise<number>;
  describeClassicGroup(group: string): Promise<ClassicDescription | null>;
  describeConsumerGroup(group: string): Promise<ConsumerDescription | null>;
  /** Whether the coordinator accepts older epochs per partition (KIP-1251, Kafka 4.3+). */
  assignmentEpochsApply(group: string): Promise<boolean>;
  /**
   * Whether the coordinator is KIP-848's group coordinator (Kafka 4.0+, or 3.7-3.9 with the
   * consumer protocol enabled), which refuses a v9+ commit to a group it does not have with
   * GROUP_ID_NOT_FOUND; the classic coordinator before it answers ILLEGAL_GENERATION.
   */
  newGroupCoordinator(group: string): Promise<boolean>;
}

export interface Verdict {
  /** Null: the broker would accept the commit; otherwise its OffsetCommit error code. */
  code: number | null;
  /** What the answers showed about the group, to bring the store up to date. */
  updates: GroupUpdate[];
  /** A classic member confirmed by a Heartbeat (its session was refreshed). */
  confirmed?: { rebalancing: boolean };
  /** The group commits transactionally: the commit is the broker's to take (not asked here). */
  transactional?: true;
  /** The broker lists the group under this type, which the guard does not know: not fenced. */
  deferredType?: string;
}

/** What the proxy itself knows of the group. */
export interface KnownGroup {
  state: GroupState | null;
  /** Whether the store holds offsets for the group (they keep a group alive at a broker). */
  hasOffsets(): Promise<boolean>;
  /**
   * The lowest epoch a commit of the member to the partition may carry, as far as this proxy saw
   * (assignment-epochs.ts); absent: 0, nothing known.
   */
  assignmentFloor?(memberId: string, topicId: string, partition: number): number;
  /**
   * The streams coordinator's answer (streams-verdict.ts), or null when the broker has no streams
   * group of that id. Asked first when `streamsSeen`, after the classic and KIP-848 checks
   * otherwise.
   */
  streams?(): Promise<Verdict | null>;
  /** This instance saw the broker answer a StreamsGroupHeartbeat of the group. */
  streamsSeen?: boolean;
  /**
   * The type the broker lists the group under (ListGroups) when it is none the guard knows (a
   * future group type), or null. Asked only for a group no known coordinator check found.
   */
  unknownType?(): Promise<string | null>;
}

/** A partition a commit writes (those refused before the coordinator's check are not among them). */
export interface CommittedPartition {
  topic: string;
  partition: number;
}

/** Thrown when the broker gave no usable answer: the caller keeps the store's decision. */
export class NoVerdictError extends Error {}

const RETRIABLE = new Set<number>([
  ErrorCode.COORDINATOR_NOT_AVAILABLE,
  ErrorCode.NOT_COORDINATOR,
  ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
  ErrorCode.REQUEST_TIMED_OUT,
]);

const refuse = (code: number, updates: GroupUpdate[] = []): Verdict => ({ code, updates });
const accept = (updates: GroupUpdate[], confirmed?: { rebalancing: boolean }): Verdict => ({
  code: null,
  updates,
  ...(confirmed ? { confirmed } : {}),
});

export async function commitVerdict(
  q: GroupQueries,
  group: string,
  id: CommitIdentity,
  known: KnownGroup,
  partitions: readonly CommittedPartition[],
): Promise<Verdict> {
  if (known.streamsSeen && known.streams) {
    const v = await known.streams();
    if (v) return v;
  }
  const consumerFirst = known.state?.protocol === 'consumer';
  if (consumerFirst) {
    const v = await consumerVerdict(q, group, id, known, partitions);
    if (v) return v;
  }
  const classic = await classicVerdict(q, group, id, known);
  if (classic) return classic;
  if (!consumerFirst) {
    const v = await consumerVerdict(q, group, id, known, partitions);
    if (v) return v;
  }
  if (!known.streamsSeen && known.streams) {
    const v = await known.streams();
    if (v) return v;
  }
  // A group of a type the guard does not know is the broker's to fence: never refused here.
  const type = known.unknownType ? await known.unknownType() : null;
  if (type !== null) return { code: null, updates: [], deferredType: type };
  // A group the broker does not have.
  const exists = await known.hasOffsets();
  if (id.generationIdOrMemberEpoch < 0) return accept([]);
  if (exists) return refuse(ErrorCode.UNKNOWN_MEMBER_ID);
  const notFound = id.requestVersion >= 9 && (await q.newGroupCoordinator(group));
  return refuse(notFound ? ErrorCode.GROUP_ID_NOT_FOUND : ErrorCode.ILLEGAL_GENERATION);
}

const classicFound = (d: ClassicDescription | null): d is ClassicDescription =>
  d !== null && d.errorCode === ErrorCode.NONE && d.groupState !== 'Dead';

async function describeClassic(q: GroupQueries, group: string): Promise<ClassicDescription | null> {
  const d = await q.describeClassicGroup(group);
  if (d === null) throw new NoVerdictError('no DescribeGroups answer');
  if (RETRIABLE.has(d.errorCode)) throw new NoVerdictError(`DescribeGroups: error ${d.errorCode}`);
  return classicFound(d) ? d : null;
}

/** The classic coordinator's answer, or null when the broker has no classic group of that id. */
async function classicVerdict(
  q: GroupQueries,
  group: string,
  id: CommitIdentity,
  known: KnownGroup,
): Promise<Verdict | null> {
  const gen = id.generationIdOrMemberEpoch;
  const anonymous = id.memberId === '' && id.groupInstanceId === null;
  if (gen < 0) {
    const d = await describeClassic(q, group);
    if (d === null) return null;
    if (d.groupState === 'Empty') return accept([{ kind: 'empty' }]);
    if (anonymous) return refuse(ErrorCode.UNKNOWN_MEMBER_ID);
  }
  const code = await q.classicMemberStatus(group, gen, id.memberId, id.groupInstanceId);
  if (RETRIABLE.has(code)) throw new NoVerdictError(`Heartbeat: error ${code}`);
  const member = (state: 'Stable' | 'PreparingRebalance' | 'CompletingRebalance'): GroupUpdate => ({
    kind: 'verified',
    generationId: gen,
    memberId: id.memberId,
    groupInstanceId: id.groupInstanceId,
    state,
  });
  switch (code) {
    case ErrorCode.REBALANCE_IN_PROGRESS:
      // A heartbeat is answered so only in PreparingRebalance, where commits are accepted.
      return accept([member('PreparingRebalance')], { rebalancing: true });
    case ErrorCode.NONE: {
      if (gen < 0) return refuse(ErrorCode.ILLEGAL_GENERATION); // cannot be: a generation is >= 0
      // Stable or CompletingRebalance. Within a generation the group goes CompletingRebalance →
      // Stable → PreparingRebalance, so a record of Stable (or later) of this generation decides.
      const s = known.state;
      if (
        s?.protocol === 'classic' &&
        s.generationId === gen &&
        (s.state === 'Stable' || s.state === 'PreparingRebalance')
      )
        return accept([member('Stable')], { rebalancing: false });
      const d = await describeClassic(q, group);
      // A KIP-848 group answers a classic-protocol member's heartbeat too; its commits are not
      // subject to the group's state.
      if (d === null) return accept([], { rebalancing: false });
      if (d.groupState === 'CompletingRebalance')
        return refuse(ErrorCode.REBALANCE_IN_PROGRESS, [member('CompletingRebalance')]);
      return accept([member(d.groupState === 'PreparingRebalance' ? 'PreparingRebalance' : 'Stable')], {
        rebalancing: d.groupState === 'PreparingRebalance',
      });
    }
    case ErrorCode.UNKNOWN_MEMBER_ID: {
      // Also the answer for a group the broker does not have (or that is not classic); with a
      // negative generation the group was found above.
      if (gen >= 0 && (await describeClassic(q, group)) === null) return null;
      return refuse(code, id.memberId === '' ? [] : [{ kind: 'gone', memberId: id.memberId }]);
    }
    case ErrorCode.FENCED_INSTANCE_ID:
      return refuse(code, id.memberId === '' ? [] : [{ kind: 'gone', memberId: id.memberId }]);
    default:
      // ILLEGAL_GENERATION, authorization errors, ...: a commit gets the same.
      return refuse(code);
  }
}

/** The KIP-848 coordinator's answer, or null when the broker has no consumer group of that id. */
async function describeConsumer(q: GroupQueries, group: string): Promise<ConsumerDescription | null> {
  const d = await q.describeConsumerGroup(group);
  if (d === null) throw new NoVerdictError('no ConsumerGroupDescribe answer');
  if (RETRIABLE.has(d.errorCode)) throw new NoVerdictError(`ConsumerGroupDescribe: error ${d.errorCode}`);
  return d.errorCode === ErrorCode.NONE ? d : null;
}

async function consumerVerdict(
  q: GroupQueries,
  group: string,
  id: CommitIdentity,
  known: KnownGroup,
  partitions: readonly CommittedPartition[],
): Promise<Verdict | null> {
  const d = await describeConsumer(q, group);
  if (d === null) return null;
  const epoch = id.generationIdOrMemberEpoch;
  if (epoch < 0 && d.members.length === 0) return accept([{ kind: 'empty' }]);
  const versionError = id.requestVersion < 9 ? ErrorCode.UNSUPPORTED_VERSION : null;
  return judgeMember(d, id.memberId, epoch, versionError, async (m) => {
    if (!(await q.assignmentEpochsApply(group))) return false;
    return partitions.every((p) => heldSince(m, p, epoch, known));
  });
}

type DescribedMember = ConsumerDescription['members'][number];

/**
 * Whether the broker would take the member's commit with `epoch` (older than its current one) for
 * the partition: the member holds it (assigned or being revoked, which ConsumerGroupDescribe lists
 * together), and nothing seen says it was given to the member after `epoch`.
 */
function heldSince(m: DescribedMember, p: CommittedPartition, epoch: number, known: KnownGroup): boolean {
  const topic = m.assignment.topicPartitions.find((t) => t.topicName === p.topic);
  if (!topic || !topic.partitions.includes(p.partition)) return false;
  return epoch >= (known.assignmentFloor?.(m.memberId, topic.topicId, p.partition) ?? 0);
}

/**
 * A KIP-848 member's check: unknown → UNKNOWN_MEMBER_ID; then `versionError` (a commit older
 * than v9); then an epoch newer than its current one → STALE_MEMBER_EPOCH, an older one too
 * unless `olderAccepted` says the broker takes it.
 */
async function judgeMember(
  d: ConsumerDescription,
  memberId: string | null,
  epoch: number,
  versionError: number | null,
  olderAccepted: (m: DescribedMember) => Promise<boolean> = () => Promise.resolve(false),
): Promise<Verdict> {
  const m = d.members.find((x) => x.memberId === memberId);
  if (!m) return refuse(ErrorCode.UNKNOWN_MEMBER_ID, memberId ? [{ kind: 'gone', memberId }] : []);
  const updates: GroupUpdate[] = [
    {
      kind: 'member-epoch',
      memberId: m.memberId,
      memberEpoch: m.memberEpoch,
      instanceId: m.instanceId,
      exact: true,
    },
  ];
  if (versionError !== null) return refuse(versionError, updates);
  if (m.memberEpoch === epoch) return accept(updates);
  if (epoch < m.memberEpoch && (await olderAccepted(m))) return accept(updates);
  return refuse(ErrorCode.STALE_MEMBER_EPOCH, updates);
}

/**
 * The broker's answer to an OffsetFetch v9 naming a member: only KIP-848 and streams groups check
 * it (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH); NONE otherwise. The epoch must be the member's
 * current one, in every Kafka version: assignment epochs relax commits only.
 */
export async function fetchVerdict(
  q: GroupQueries,
  group: string,
  memberId: string | null,
  memberEpoch: number,
  notConsumer?: () => Promise<Verdict | null>,
): Promise<Verdict> {
  const d = await describeConsumer(q, group);
  // Not a KIP-848 group: a streams group's members are checked too (streams-verdict.ts).
  if (d === null) return (await notConsumer?.()) ?? accept([]);
  if (memberId === null && memberEpoch < 0) return accept([]);
  return judgeMember(d, memberId, memberEpoch, null);
}
