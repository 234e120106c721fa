/**
 * The commit fence and the membership merge, as pure functions. Memory, embedded and ZooKeeper
 * stores call them inside their atomic step; the Redis store runs Lua transcriptions of both
 * (redis-scripts.ts), and the shared contract suite keeps them equivalent: change both together.
 *
 * The order of checks follows the broker's group coordinator (docs/errors.md, OffsetCommit).
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
      const owners = state.members.filter((m) => m.groupInstanceId === id.groupInstanceId);
      if (owners.length === 0) return GuardError.UNKNOWN_MEMBER_ID;
      // Two claimants of one instance id: the record cannot tell which one the broker has now,
      // so it refuses, and the refusal is checked with the broker (offset-commit.ts).
      if (owners.length > 1 || owners[0]!.memberId !== id.memberId) return GuardError.FENCED_INSTANCE_ID;
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
  // First: the broker holds a transactional group's offsets, and decides its commits itself.
  const fromClient = request.identity !== undefined || request.deferIfTransactional === true;
  if (fromClient && state?.transactional === true)
    return { outcome: { status: 'transactional' }, newState: null };
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

const rankOf = (m: GroupMember): number => m.rank ?? 0;

/** The rank a member taking `instance` over from its current holders gets: above all of them. */
function takeoverRank(members: GroupMember[], memberId: string, instance: string | null): number {
  let rank = 0;
  for (const m of members)
    if (instance !== null && m.groupInstanceId === instance && m.memberId !== memberId)
      rank = Math.max(rank, rankOf(m) + 1);
  return rank;
}

/**
 * Adds or merges one member of the current generation (in place). A known instance id wins over
 * null, a higher rank over a lower; of the members claiming one instance id only those of the
 * highest rank stay, so a replacement outranks the member it replaced whatever order the two
 * observations arrive in. Claimants of equal rank all stay: the guard then defers to the broker.
 */
function admit(members: GroupMember[], m: GroupMember): void {
  let self = members.find((x) => x.memberId === m.memberId);
  if (self === undefined) {
    self = { memberId: m.memberId, groupInstanceId: m.groupInstanceId };
    members.push(self);
  } else if (self.groupInstanceId === null && m.groupInstanceId !== null) {
    self.groupInstanceId = m.groupInstanceId;
  }
  if (rankOf(m) > rankOf(self)) self.rank = rankOf(m);
  const instance = self.groupInstanceId;
  if (instance === null) return;
  let top = 0;
  for (const x of members) if (x.groupInstanceId === instance) top = Math.max(top, rankOf(x));
  for (let i = members.length - 1; i >= 0; i--) {
    const x = members[i]!;
    if (x.groupInstanceId === instance && rankOf(x) < top) members.splice(i, 1);
  }
}

/** Removes the members matching `gone` (in place); a classic group without members is Empty. */
function without(base: GroupState, gone: (m: GroupMember) => boolean): GroupState {
  const members = base.members.filter((m) => !gone(m)).map((m) => ({ ...m }));
  return { ...base, members, state: members.length === 0 ? 'Empty' : base.state };
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
      // A static member given a new member id while its instance has one in this generation
      // replaced it (before the generation's join completed, there is none).
      const rank =
        update.takeover === true ? takeoverRank(next.members, update.memberId, update.groupInstanceId) : 0;
      // The leader's response lists every member of the generation; a follower's names only itself.
      for (const m of update.members ?? [])
        admit(next.members, { memberId: m.memberId, groupInstanceId: m.groupInstanceId });
      admit(next.members, {
        memberId: update.memberId,
        groupInstanceId: update.groupInstanceId,
        ...(rank > 0 ? { rank } : {}),
      });
      next.state = laterState(next.state, 'CompletingRebalance');
      return next;
    }
    case 'synced': {
      const next = atGeneration(base, update.generationId);
      if (next === null) return base;
      admit(next.members, { memberId: update.memberId, groupInstanceId: update.groupInstanceId ?? null });
      next.state = laterState(next.state, 'Stable');
      return next;
    }
    case 'verified': {
      const next = atGeneration(base, update.generationId);
      if (next === null) return base;
      const instance = update.groupInstanceId;
      const rank = takeoverRank(next.members, update.memberId, instance);
      if (instance !== null)
        next.members = next.members.filter(
          (m) => m.groupInstanceId !== instance || m.memberId === update.memberId,
        );
      admit(next.members, {
        memberId: update.memberId,
        groupInstanceId: instance,
        ...(rank > 0 ? { rank } : {}),
      });
      next.state = laterState(next.state, update.state);
      return next;
    }
    case 'rebalancing': {
      const next = atGeneration(base, update.generationId);
      if (next === null) return base;
      next.state = 'PreparingRebalance';
      return next;
    }
    case 'left': {
      const instances = update.groupInstanceIds ?? [];
      return without(
        base,
        (m) =>
          update.memberIds.includes(m.memberId) ||
          (m.groupInstanceId !== null && instances.includes(m.groupInstanceId)),
      );
    }
    case 'gone':
      return without(base, (m) => m.memberId === update.memberId);
    case 'member-epoch': {
      const epoch = update.memberEpoch;
      const instance = update.instanceId ?? null;
      let members = base.members.map((m) => ({ ...m }));
      if (update.exact === true && instance !== null)
        members = members.filter((m) => m.groupInstanceId !== instance || m.memberId === update.memberId);
      const i = members.findIndex((m) => m.memberId === update.memberId);
      if (epoch === -1) {
        if (i >= 0) members.splice(i, 1);
      } else if (i < 0) {
        members.push({ memberId: update.memberId, groupInstanceId: instance, memberEpoch: epoch });
      } else {
        const m = members[i]!;
        if (instance !== null) m.groupInstanceId = instance;
        // A member's epoch only grows (responses carry the group's target epoch), so a late, older
        // response must not roll it back; a join, a static member's leave (-2) and the broker's
        // word set it.
        m.memberEpoch = update.exact === true || epoch === -2 ? epoch : Math.max(m.memberEpoch ?? -1, epoch);
      }
      return { ...base, protocol: 'consumer', members, state: members.length === 0 ? 'Empty' : 'Stable' };
    }
    case 'empty':
      return { ...base, members: [], state: 'Empty' };
    case 'transactional':
      return { ...base, transactional: true };
    case 'streams-topology': {
      const held = base.streams;
      if (held !== undefined && held.epoch >= update.topology.epoch) return base;
      return {
        ...base,
        streams: { epoch: update.topology.epoch, subtopologies: update.topology.subtopologies },
      };
    }
  }
}
