/**
 * The commit fence and the membership merge, as pure functions. Memory, embedded and ZooKeeper
 * stores call them inside their atomic step; the Redis store runs Lua transcriptions of both
 * (redis-scripts.ts), and the shared contract suite keeps them equivalent: change both together.
 *
 * The order of checks follows the broker's group coordinator (docs offset-semantics.md).
 */
import type {
  ClassicGroupState,
  CommitIdentity,
  CommitOutcome,
  CommitRequest,
  GroupMember,
  GroupState,
  GroupUpdate,
  GuardErrorCode,
  TopicPartition,
} from './store.js';
import { GuardError } from './store.js';

/** The record a group gets when it first appears (the broker creates an Empty group). */
export function emptyGroupState(): GroupState {
  return { protocol: null, generationId: -1, state: 'Empty', members: [], transactional: false };
}

/**
 * Decides whether the committer may commit. Returns null to accept, or the Kafka error code.
 * `identity` undefined means fencing is off for this request.
 */
export function checkCommit(
  state: GroupState | null,
  identity: CommitIdentity | undefined,
): GuardErrorCode | null {
  if (identity === undefined) return null;
  const gen = identity.generationIdOrMemberEpoch;
  if (state === null) {
    // The broker creates a "simple" group for assign() consumers and admin tools (generation -1).
    if (gen < 0) return null;
    return identity.requestVersion >= 9 ? GuardError.GROUP_ID_NOT_FOUND : GuardError.ILLEGAL_GENERATION;
  }
  return state.protocol === 'consumer'
    ? checkConsumerGroup(state, identity)
    : checkClassicGroup(state, identity);
}

function checkClassicGroup(state: GroupState, id: CommitIdentity): GuardErrorCode | null {
  const gen = id.generationIdOrMemberEpoch;
  // "Empty" is judged by the member list: it is what the fence is about, and the state field can
  // say PreparingRebalance for a generation whose members we have not seen yet.
  const empty = state.members.length === 0;
  if (gen < 0 && empty) return null;
  if (gen >= 0 || id.memberId !== '' || id.groupInstanceId !== null) {
    if (id.groupInstanceId !== null) {
      const owner = state.members.find((m) => m.groupInstanceId === id.groupInstanceId);
      if (owner === undefined) return GuardError.UNKNOWN_MEMBER_ID;
      if (owner.memberId !== id.memberId) return GuardError.FENCED_INSTANCE_ID;
    }
    if (!state.members.some((m) => m.memberId === id.memberId)) return GuardError.UNKNOWN_MEMBER_ID;
    if (gen !== state.generationId) return GuardError.ILLEGAL_GENERATION;
  } else {
    // No identity at all, and the group has members.
    return GuardError.UNKNOWN_MEMBER_ID;
  }
  if (state.state === 'CompletingRebalance') return GuardError.REBALANCE_IN_PROGRESS;
  return null;
}

function checkConsumerGroup(state: GroupState, id: CommitIdentity): GuardErrorCode | null {
  const epoch = id.generationIdOrMemberEpoch;
  if (epoch < 0 && state.members.length === 0) return null;
  const member = state.members.find((m) => m.memberId === id.memberId);
  if (member === undefined) return GuardError.UNKNOWN_MEMBER_ID;
  if (id.requestVersion < 9) return GuardError.UNSUPPORTED_VERSION;
  if (epoch !== member.memberEpoch) return GuardError.STALE_MEMBER_EPOCH;
  return null;
}

/**
 * The whole commit decision over a snapshot: fence, then every compare-and-set. `currentOffset`
 * returns the stored offset or -1n. `newState` is the group record to write with the offsets
 * (set when the group had none: an accepted commit creates the group, as on the broker).
 */
export function decideCommit(
  state: GroupState | null,
  request: CommitRequest,
  currentOffset: (tp: TopicPartition) => bigint,
): { outcome: CommitOutcome; newState: GroupState | null } {
  const refusal = checkCommit(state, request.identity);
  if (refusal !== null) return { outcome: { status: 'fenced', error: refusal }, newState: null };
  const mismatches = [];
  for (const w of request.writes) {
    if (w.expectedOffset === undefined) continue;
    const actual = currentOffset(w);
    if (actual !== w.expectedOffset)
      mismatches.push({ topic: w.topic, partition: w.partition, expected: w.expectedOffset, actual });
  }
  if (mismatches.length > 0) return { outcome: { status: 'cas-mismatch', mismatches }, newState: null };
  return { outcome: { status: 'ok' }, newState: state === null ? emptyGroupState() : null };
}

/** Within one generation a classic group only moves forward through these states. */
const STATE_RANK: Record<ClassicGroupState, number> = {
  Empty: 0,
  CompletingRebalance: 1,
  Stable: 2,
  PreparingRebalance: 3,
};

function laterState(a: ClassicGroupState, b: ClassicGroupState): ClassicGroupState {
  return STATE_RANK[a] >= STATE_RANK[b] ? a : b;
}

/** Adds or merges members; a known instance id wins over null so the merge is order-independent. */
function unionMembers(into: GroupMember[], add: GroupMember[]): GroupMember[] {
  const out = into.map((m) => ({ ...m }));
  for (const m of add) {
    const existing = out.find((x) => x.memberId === m.memberId);
    if (existing === undefined) out.push({ ...m });
    else if (existing.groupInstanceId === null && m.groupInstanceId !== null)
      existing.groupInstanceId = m.groupInstanceId;
  }
  return out;
}

/**
 * Classic updates carry a generation. An older one is ignored; a newer one starts the generation
 * afresh (members of the old generation are gone); within one generation members are unioned and
 * the state only advances (STATE_RANK). That makes joined/synced/rebalancing commutative.
 */
function atGeneration(base: GroupState, generationId: number): GroupState | null {
  if (generationId < base.generationId) return null;
  if (generationId > base.generationId)
    return { ...base, protocol: 'classic', generationId, state: 'Empty', members: [] };
  return { ...base, protocol: 'classic', members: base.members.map((m) => ({ ...m })) };
}

/** Applies one membership observation. Never mutates `state`. */
export function applyGroupUpdate(state: GroupState | null, update: GroupUpdate): GroupState {
  const base: GroupState = state ?? emptyGroupState();
  switch (update.kind) {
    case 'joined': {
      const next = atGeneration(base, update.generationId);
      if (next === null) return base;
      const joiner: GroupMember = { memberId: update.memberId, groupInstanceId: update.groupInstanceId };
      // The leader's response lists every member of the generation; a follower's names only itself.
      next.members = unionMembers(next.members, update.members ? [...update.members, joiner] : [joiner]);
      next.state = laterState(next.state, 'CompletingRebalance');
      return next;
    }
    case 'synced': {
      const next = atGeneration(base, update.generationId);
      if (next === null) return base;
      next.members = unionMembers(next.members, [{ memberId: update.memberId, groupInstanceId: null }]);
      next.state = laterState(next.state, 'Stable');
      return next;
    }
    case 'rebalancing': {
      const next = atGeneration(base, update.generationId);
      if (next === null) return base;
      next.state = 'PreparingRebalance';
      return next;
    }
    case 'left': {
      const members = base.members.filter((m) => !update.memberIds.includes(m.memberId));
      return { ...base, members, state: members.length === 0 ? 'Empty' : base.state };
    }
    case 'member-epoch': {
      const members = base.members.map((m) => ({ ...m }));
      const i = members.findIndex((m) => m.memberId === update.memberId);
      if (update.memberEpoch < 0) {
        if (i >= 0) members.splice(i, 1);
      } else if (i < 0) {
        members.push({ memberId: update.memberId, groupInstanceId: null, memberEpoch: update.memberEpoch });
      } else {
        // A member's epoch only grows (responses carry the group's target epoch): a late,
        // older response must not roll it back.
        const m = members[i]!;
        m.memberEpoch = Math.max(m.memberEpoch ?? -1, update.memberEpoch);
      }
      return { ...base, protocol: 'consumer', members, state: members.length === 0 ? 'Empty' : 'Stable' };
    }
    case 'empty':
      return { ...base, members: [], state: 'Empty' };
    case 'transactional':
      return { ...base, transactional: true };
  }
}
