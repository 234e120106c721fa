/**
 * The broker's answer to a streams-group member's OffsetCommit or OffsetFetch, worked out without
 * committing, from StreamsGroupDescribe: Kafka 4.4's StreamsGroup.validateOffsetCommit and
 * validateOffsetFetch, check for check (docs/design.md, "Streams groups"):
 *
 * - commit: epoch < 0 on a group without members is accepted (admin tools, assign()); otherwise
 *   an unknown member (the empty id too) is UNKNOWN_MEMBER_ID; a commit below v9 is
 *   UNSUPPORTED_VERSION; the member's epoch is accepted, a newer one is STALE_MEMBER_EPOCH; an
 *   older one (Kafka 4.3+, the streams side of KIP-1251) is accepted only when every partition
 *   it writes belongs to the subtopology of an active task the member holds (assigned or pending
 *   revocation) since an epoch no newer than the commit's, STALE_MEMBER_EPOCH otherwise. Kafka
 *   before 4.3 compares the epochs exactly. The group instance id is not checked: static
 *   membership changes which member an instance is, not how its commits are judged.
 * - fetch: no member id with epoch < 0 is accepted; an unknown member is UNKNOWN_MEMBER_ID; any
 *   epoch but the member's is STALE_MEMBER_EPOCH.
 *
 * StreamsGroupDescribe lists a member's assigned tasks, not those pending revocation, nor since
 * which epoch it holds them: what this instance saw of the member's heartbeats (streams-groups.ts)
 * adds the tasks being revoked and a floor for their epochs. A task being revoked that this
 * instance did not see is refused for an older epoch (the client retries with its current one).
 */
import type { CommitIdentity } from '../../backends/store.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import type { StreamsGroupDescribeResponse } from '../../protocol/messages/streams-group-describe-response.js';
import type { CommittedPartition, Verdict } from './broker-verdict.js';
import { NoVerdictError } from './broker-verdict.js';

export type StreamsDescription = StreamsGroupDescribeResponse['groups'][number];
type DescribedMember = StreamsDescription['members'][number];

/** The broker requests the verdict is made of (BrokerLookups). */
export interface StreamsQueries {
  /** Null when the coordinator did not answer for the group. */
  describeStreamsGroup(group: string): Promise<StreamsDescription | null>;
  /** Whether the coordinator accepts older epochs per task (Kafka 4.3+). */
  assignmentEpochsApply(group: string): Promise<boolean>;
}

/** What this proxy instance saw of the group's members (StreamsGroups). */
export interface SeenTasks {
  holdsTask(memberId: string, subtopologyId: string, partition: number): boolean;
  taskFloor(memberId: string, subtopologyId: string, partition: number): number;
}

const RETRIABLE = new Set<number>([
  ErrorCode.COORDINATOR_NOT_AVAILABLE,
  ErrorCode.NOT_COORDINATOR,
  ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
  ErrorCode.REQUEST_TIMED_OUT,
]);

const accept: Verdict = { code: null, updates: [] };
const refuse = (code: number): Verdict => ({ code, updates: [] });

/** The group as a streams group, or null when the broker has no streams group of that id. */
async function describeStreams(q: StreamsQueries, group: string): Promise<StreamsDescription | null> {
  const d = await q.describeStreamsGroup(group);
  if (d === null) throw new NoVerdictError('no StreamsGroupDescribe answer');
  if (RETRIABLE.has(d.errorCode)) throw new NoVerdictError(`StreamsGroupDescribe: error ${d.errorCode}`);
  return d.errorCode === ErrorCode.NONE ? d : null;
}

/** The streams coordinator's answer to the commit, or null when the group is no streams group. */
export async function streamsCommitVerdict(
  q: StreamsQueries,
  group: string,
  id: CommitIdentity,
  partitions: readonly CommittedPartition[],
  seen: SeenTasks,
): Promise<Verdict | null> {
  const d = await describeStreams(q, group);
  if (d === null) return null;
  const epoch = id.generationIdOrMemberEpoch;
  if (epoch < 0 && d.members.length === 0) return accept;
  const m = d.members.find((x) => x.memberId === id.memberId);
  if (!m) return refuse(ErrorCode.UNKNOWN_MEMBER_ID);
  if (id.requestVersion < 9) return refuse(ErrorCode.UNSUPPORTED_VERSION);
  if (epoch === m.memberEpoch) return accept;
  if (epoch > m.memberEpoch) return refuse(ErrorCode.STALE_MEMBER_EPOCH);
  if (!(await q.assignmentEpochsApply(group))) return refuse(ErrorCode.STALE_MEMBER_EPOCH);
  return partitions.every((p) => taskHeldSince(d, m, p, epoch, seen))
    ? accept
    : refuse(ErrorCode.STALE_MEMBER_EPOCH);
}

/**
 * Whether the member's commit with an older `epoch` is taken for the partition: the subtopology
 * reading its topic (as a source or repartition source topic) has the partition's active task
 * held by the member, given to it no later than `epoch` as far as anything seen says.
 */
function taskHeldSince(
  d: StreamsDescription,
  m: DescribedMember,
  p: CommittedPartition,
  epoch: number,
  seen: SeenTasks,
): boolean {
  const sub = d.topology?.subtopologies?.find(
    (s) => s.sourceTopics.includes(p.topic) || s.repartitionSourceTopics.some((t) => t.name === p.topic),
  );
  if (!sub) return false;
  const id = sub.subtopologyId;
  const assigned = m.assignment.activeTasks.some(
    (t) => t.subtopologyId === id && t.partitions.includes(p.partition),
  );
  if (!assigned && !seen.holdsTask(m.memberId, id, p.partition)) return false;
  return epoch >= seen.taskFloor(m.memberId, id, p.partition);
}

/** The streams coordinator's answer to an OffsetFetch naming a member, or null: no streams group. */
export async function streamsFetchVerdict(
  q: StreamsQueries,
  group: string,
  memberId: string | null,
  memberEpoch: number,
): Promise<Verdict | null> {
  const d = await describeStreams(q, group);
  if (d === null) return null;
  if (memberId === null && memberEpoch < 0) return accept;
  const m = d.members.find((x) => x.memberId === memberId);
  if (!m) return refuse(ErrorCode.UNKNOWN_MEMBER_ID);
  return m.memberEpoch === memberEpoch ? accept : refuse(ErrorCode.STALE_MEMBER_EPOCH);
}
