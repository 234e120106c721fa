// Named scripts for the guard's differential runs: the membership transitions of the broker's
// group coordinator, each followed by the commits and fetches whose answers it changes. The first
// is the report of issue #18.
import type { As, Parts, Script, Step } from './guard-differential.js';

const commit = (slot: number, as: As = 'current', version = 9): Step => ({
  op: 'commit',
  slot,
  as,
  version,
});
/** A commit (v9) to some of the partitions only, by what the member holds (Step `commit`). */
const commitTo = (slot: number, as: As, parts: Parts): Step => ({
  op: 'commit',
  slot,
  as,
  version: 9,
  parts,
});
/** A commit to both partitions of the topic the group does not subscribe to. */
const commitUnsubscribed = (slot: number, version = 9): Step => ({
  op: 'commit',
  slot,
  as: 'current',
  version,
  unsubscribed: true,
});
/** A commit whose every partition's metadata is too large for the broker. */
const oversized = (slot: number, as: 'current' | 'previous', version = 9): Step => ({
  op: 'commit',
  slot,
  as,
  version,
  oversized: true,
});
const fetch = (slot: number | null = null, as: As = 'current'): Step => ({
  op: 'fetch',
  slot,
  as,
});
/** A fetch with requireStable false: pending transactional offsets are not waited for. */
const fetchUnstable = (slot: number | null = null, as: 'current' | 'previous' = 'current'): Step => ({
  op: 'fetch',
  slot,
  as,
  stable: false,
});
/** The group's transactional producer commits with the member's identity (null: none). */
const txn = (slot: number | null, as: 'current' | 'previous' = 'current'): Step => ({
  op: 'txnCommit',
  slot,
  as,
});
const txnEnd = (commit = true): Step => ({ op: 'txnEnd', commit });
/** A member's commits as every client version sends them: with and without its instance id. */
const probes = (slot: number, as: 'current' | 'previous'): Step[] => [
  commit(slot, as, 9),
  commit(slot, as, 6),
  commit(slot, as, 2),
];

/** A fetch in v10 (topic ids), naming the member (null: none, as classic consumers and admins). */
const fetchV10 = (slot: number | null = null, as: As = 'current'): Step => ({
  op: 'fetch',
  slot,
  as,
  version: 10,
});

/**
 * OffsetCommit and OffsetFetch v10 (KIP-848: topics named by id), as Kafka 4.4 clients send them:
 * the same fencing as v9, on ids mapped to the stored names. On a broker without v10 they run in v9.
 */
const TOPIC_ID_SCRIPTS: { title: string; script: Script }[] = [
  {
    title: 'KIP-848 in v10 (topic ids): current and stale epochs, a member that left, fetches by id',
    script: {
      protocol: 'consumer',
      statics: [false, false, false],
      steps: [
        { op: 'heartbeat', slot: 0 },
        commit(0, 'current', 10),
        commit(0, 'previous', 10),
        commitUnsubscribed(0, 10),
        fetchV10(0),
        fetchV10(0, 'previous'),
        fetchV10(),
        { op: 'leave', slot: 1 },
        commit(1, 'current', 10),
        fetchV10(1),
        oversized(2, 'current', 10),
        { op: 'commitAnonymous', version: 10 },
        fetch(),
      ],
    },
  },
  {
    title: 'classic in v10 (topic ids): generations fence as in v9; anonymous commits and fetches by id',
    script: {
      protocol: 'classic',
      statics: [false, false, false],
      steps: [
        commit(0, 'current', 10),
        commit(0, 'previous', 10),
        { op: 'restart', slot: 1 },
        commit(1, 'previous', 10),
        commit(1, 'current', 10),
        fetchV10(),
        { op: 'commitAnonymous', version: 10 },
        fetchV10(),
      ],
    },
  },
];

export const GUARD_REGRESSIONS: { title: string; script: Script }[] = [
  {
    title:
      'classic: a static member is replaced within the generation (issue #18): its successor commits, it is fenced',
    script: {
      protocol: 'classic',
      statics: [true, false, true],
      steps: [
        commit(0),
        { op: 'restart', slot: 0 },
        ...probes(0, 'current'),
        ...probes(0, 'previous'),
        { op: 'restart', slot: 0 },
        ...probes(0, 'current'),
        ...probes(0, 'previous'),
        fetch(),
      ],
    },
  },
  {
    title:
      'classic: a static member restarts after its session expired (a new generation) and before (a rebalance running)',
    script: {
      protocol: 'classic',
      statics: [true, true, false],
      steps: [
        { op: 'crash', slots: [0] },
        ...probes(0, 'current'),
        { op: 'restart', slot: 0 },
        ...probes(0, 'previous'),
        { op: 'rebalance' },
        ...probes(0, 'current'),
        { op: 'leave', slot: 2 },
        { op: 'restart', slot: 1 },
        ...probes(1, 'current'),
        ...probes(1, 'previous'),
        { op: 'rebalance' },
        commit(1),
        fetch(),
      ],
    },
  },
  {
    title:
      'classic: commits during PreparingRebalance are accepted, during CompletingRebalance refused; an old generation is ILLEGAL_GENERATION',
    script: {
      protocol: 'classic',
      statics: [false, false, false],
      steps: [
        { op: 'leave', slot: 2 },
        commit(0),
        commit(1),
        { op: 'rebalance' },
        ...probes(0, 'previous'),
        { op: 'leave', slot: 1 },
        { op: 'joinOnly', slot: 0 },
        ...probes(0, 'current'),
        ...probes(0, 'previous'),
        { op: 'rebalance' },
        commit(0),
      ],
    },
  },
  {
    title:
      'classic: members leave, one is removed by its instance id, the group empties; then generation -1 and old members',
    script: {
      protocol: 'classic',
      statics: [true, true, false],
      steps: [
        { op: 'removeInstance', slot: 0 },
        ...probes(0, 'current'),
        { op: 'commitAnonymous', version: 9 },
        { op: 'leave', slot: 1 },
        { op: 'leave', slot: 2 },
        { op: 'rebalance' },
        { op: 'commitAnonymous', version: 9 },
        { op: 'commitAnonymous', version: 2 },
        ...probes(1, 'current'),
        ...probes(2, 'previous'),
        fetch(),
      ],
    },
  },
  {
    title:
      'classic: killed members time out; their zombies are unknown after the survivors rebalance; the group is deleted',
    script: {
      protocol: 'classic',
      statics: [false, true, false],
      steps: [
        { op: 'crash', slots: [1, 2] },
        ...probes(1, 'current'),
        ...probes(2, 'current'),
        ...probes(0, 'previous'),
        commit(0),
        { op: 'crash', slots: [0] },
        ...probes(0, 'current'),
        { op: 'commitAnonymous', version: 9 },
        { op: 'deleteGroup' },
        ...probes(0, 'current'),
        { op: 'commitAnonymous', version: 2 },
        fetch(),
      ],
    },
  },
  {
    title: 'KIP-848: epochs move on; stale epochs, older request versions, members that left with -1',
    script: {
      protocol: 'consumer',
      statics: [false, false, false],
      steps: [
        { op: 'heartbeat', slot: 0 },
        commit(0),
        commit(0, 'previous'),
        commit(0, 'current', 8),
        fetch(0),
        fetch(0, 'previous'),
        { op: 'leave', slot: 1 },
        commit(1),
        commit(1, 'previous'),
        fetch(1),
        { op: 'heartbeat', slot: 2 },
        commit(2),
        { op: 'commitAnonymous', version: 9 },
      ],
    },
  },
  {
    title:
      'KIP-848: a static member leaves with -2 and is replaced; one restarted without leaving waits for its old session',
    script: {
      protocol: 'consumer',
      statics: [true, true, false],
      steps: [
        { op: 'leave', slot: 0 },
        commit(0),
        commit(0, 'previous'),
        fetch(0, 'previous'),
        { op: 'restart', slot: 0 },
        commit(0),
        commit(0, 'previous'),
        fetch(0, 'previous'),
        { op: 'restart', slot: 1 },
        commit(1),
        commit(1, 'previous'),
        { op: 'crash', slots: [2] },
        commit(1),
        commit(1, 'previous'),
        fetch(1),
      ],
    },
  },
  {
    title: 'KIP-848: killed members are fenced by their session timeout; the group empties and is deleted',
    script: {
      protocol: 'consumer',
      statics: [false, true, false],
      steps: [
        { op: 'crash', slots: [1, 2] },
        commit(1),
        commit(2),
        fetch(1),
        commit(0),
        { op: 'leave', slot: 0 },
        { op: 'commitAnonymous', version: 9 },
        { op: 'deleteGroup' },
        commit(0, 'previous'),
        commit(0, 'previous', 8),
        fetch(),
      ],
    },
  },
  {
    title:
      "KIP-848: a member leaves, the others' epochs move on; commits with their epochs from before the bump",
    script: {
      protocol: 'consumer',
      statics: [false, false, false],
      steps: [
        { op: 'leave', slot: 2 },
        { op: 'heartbeat', slot: 0 },
        { op: 'heartbeat', slot: 1 },
        commit(0, 'previous'),
        commit(1, 'previous'),
        fetch(0, 'previous'),
        commit(0),
        fetch(),
      ],
    },
  },
  {
    title:
      'KIP-848: commits with the epoch before the last bump, to partitions held since then, newly assigned, or mixed',
    script: {
      protocol: 'consumer',
      statics: [false, false, false],
      steps: [
        // Member 0 alone gets both partitions; a new member 1 makes it give one up: it keeps the
        // other across the epoch bump.
        { op: 'leave', slot: 1 },
        { op: 'leave', slot: 2 },
        { op: 'heartbeat', slot: 0 },
        { op: 'heartbeat', slot: 0 },
        { op: 'restart', slot: 1 },
        { op: 'heartbeat', slot: 0 },
        { op: 'heartbeat', slot: 0 },
        { op: 'heartbeat', slot: 1 },
        commitTo(0, 'previous', 'kept'),
        commitTo(0, 'previous', 'other'),
        commit(0, 'previous'),
        fetch(0, 'previous'),
        commitTo(0, 'current', 'kept'),
        // Member 1 leaves: member 0 gets the partition back in a new epoch.
        { op: 'leave', slot: 1 },
        { op: 'heartbeat', slot: 0 },
        { op: 'heartbeat', slot: 0 },
        commitTo(0, 'previous', 'gained'),
        commitTo(0, 'previous', 'kept'),
        commit(0, 'previous'),
        fetch(0, 'previous'),
        commit(0),
        fetch(),
      ],
    },
  },
  {
    title: 'classic: a commit whose every partition has too much metadata is still checked against the group',
    script: {
      protocol: 'classic',
      statics: [false, true, false],
      steps: [
        oversized(0, 'current'),
        { op: 'restart', slot: 2 },
        oversized(0, 'previous'),
        oversized(2, 'previous'),
        oversized(0, 'current', 6),
        { op: 'restart', slot: 1 },
        oversized(1, 'previous'),
        { op: 'joinOnly', slot: 0 },
        oversized(0, 'current'),
        fetch(),
      ],
    },
  },
  {
    title:
      'KIP-848: a commit whose every partition has too much metadata is still checked against the member',
    script: {
      protocol: 'consumer',
      statics: [false, false, false],
      steps: [
        oversized(0, 'current'),
        { op: 'leave', slot: 2 },
        { op: 'heartbeat', slot: 0 },
        oversized(0, 'previous'),
        oversized(2, 'previous'),
        oversized(0, 'current', 8),
        fetch(),
      ],
    },
  },
  {
    title:
      'KIP-848: a static member takes over through another proxy instance; commits with an epoch older than its join',
    script: {
      protocol: 'consumer',
      // With two proxy instances (redis×2), the member's -2 leave and its successor's join go
      // through different ones.
      statics: [true, false, false],
      steps: [
        { op: 'heartbeat', slot: 0 },
        { op: 'leave', slot: 0 },
        { op: 'restart', slot: 0 },
        { op: 'heartbeat', slot: 0 },
        commit(0, 'joining'),
        commitTo(0, 'joining', 'kept'),
        commit(0),
        { op: 'heartbeat', slot: 1 },
        { op: 'heartbeat', slot: 0 },
        commit(0, 'joining'),
        commit(0, 'previous'),
        fetch(0, 'joining'),
        fetch(),
      ],
    },
  },
  {
    title:
      'KIP-848: a static member leaves with -2 while the store is down; it is taken over, through the other instance, with the store down and up',
    script: {
      protocol: 'consumer',
      // The leave is not recorded anywhere but in the memory of the instance that passed it on;
      // the successor joins through the other instance (redis×2), once with the store back, once
      // with it down too.
      statics: [true, true, false],
      steps: [
        { op: 'heartbeat', slot: 0 },
        { op: 'leave', slot: 0, storeDown: true },
        { op: 'restart', slot: 0 },
        { op: 'heartbeat', slot: 0 },
        commit(0, 'joining'),
        commitTo(0, 'joining', 'kept'),
        commit(0),
        fetch(0, 'joining'),
        { op: 'heartbeat', slot: 1 },
        { op: 'leave', slot: 1, storeDown: true },
        { op: 'restart', slot: 1, storeDown: true },
        { op: 'heartbeat', slot: 1 },
        commit(1, 'joining'),
        commitTo(1, 'joining', 'kept'),
        commit(1),
        commit(1, 'previous'),
        fetch(),
      ],
    },
  },
  {
    title:
      'classic: transactional commits between plain ones, pending, committed, aborted; zombies of replaced members',
    script: {
      protocol: 'classic',
      statics: [true, false, false],
      steps: [
        commit(0),
        txn(0),
        fetch(),
        fetchUnstable(),
        txnEnd(),
        fetch(),
        // A plain commit after a committed transaction is the newer offset, on the broker.
        commit(1),
        fetch(),
        txn(1),
        commit(0),
        txnEnd(),
        fetch(),
        txn(0),
        txnEnd(false),
        fetch(),
        { op: 'restart', slot: 0 },
        txn(0, 'previous'),
        txn(0),
        txnEnd(),
        { op: 'rebalance' },
        txn(1, 'previous'),
        txn(null),
        txnEnd(),
        commit(2),
        fetch(),
      ],
    },
  },
  {
    title:
      'KIP-848: transactional commits with current and older epochs; fetches of a transactional group by members',
    script: {
      protocol: 'consumer',
      statics: [false, true, false],
      steps: [
        commit(0),
        txn(0),
        fetch(0),
        fetchUnstable(0),
        txnEnd(),
        fetch(0),
        commit(1),
        fetch(1),
        { op: 'leave', slot: 2 },
        { op: 'heartbeat', slot: 0 },
        { op: 'heartbeat', slot: 1 },
        fetch(0, 'previous'),
        fetch(2, 'previous'),
        txn(0, 'previous'),
        txn(2, 'previous'),
        txn(0),
        txnEnd(false),
        fetch(0),
        { op: 'leave', slot: 1 },
        txn(1, 'previous'),
        txn(null),
        txnEnd(),
        fetch(),
      ],
    },
  },
  ...(['classic', 'consumer'] as const).map((protocol) => ({
    title: `${protocol === 'classic' ? 'classic' : 'KIP-848'}: every member killed, their sessions expire; the offsets are deleted`,
    script: {
      protocol,
      statics: [false, true, false],
      steps: [
        commit(0),
        { op: 'deleteOffsets' } as const,
        { op: 'crash', slots: [0, 1, 2] } as Step,
        { op: 'deleteOffsets' } as const,
        fetch(),
      ],
    },
  })),
  {
    title:
      'classic: OffsetDelete of a live group deletes the topics it is not subscribed to, also when its join was not recorded',
    script: {
      protocol: 'classic',
      statics: [false, true, false],
      steps: [
        commit(0),
        commitUnsubscribed(0),
        commitUnsubscribed(1, 6),
        { op: 'deleteOffsets' },
        fetch(),
        commit(1),
        commitUnsubscribed(2),
        { op: 'leave', slot: 0 },
        { op: 'leave', slot: 1 },
        { op: 'leave', slot: 2 },
        { op: 'rebalance' },
        { op: 'deleteOffsets' },
        { op: 'commitAnonymous', version: 9 },
        // The new member's join and sync are not recorded (the store down): only the broker
        // knows the group is not empty.
        { op: 'restart', slot: 2, storeDown: true },
        { op: 'deleteOffsets' },
        fetch(),
        commitUnsubscribed(2),
        { op: 'deleteOffsets' },
        fetch(),
      ],
    },
  },
  {
    title:
      'KIP-848: OffsetDelete of a live group deletes the topics it is not subscribed to; a static member away with -2; a join not recorded',
    script: {
      protocol: 'consumer',
      statics: [false, true, false],
      steps: [
        commit(0),
        commitUnsubscribed(0),
        { op: 'deleteOffsets' },
        fetch(0),
        { op: 'leave', slot: 2 },
        commit(1),
        commitUnsubscribed(1),
        { op: 'deleteOffsets' },
        { op: 'leave', slot: 1 },
        commitUnsubscribed(0),
        { op: 'deleteOffsets' },
        { op: 'leave', slot: 0 },
        { op: 'commitAnonymous', version: 9 },
        { op: 'restart', slot: 0, storeDown: true },
        { op: 'deleteOffsets' },
        fetch(0),
        commitUnsubscribed(0),
        { op: 'deleteOffsets' },
        fetch(),
      ],
    },
  },
  {
    title:
      "a transactional group's offsets are deleted; it empties and is deleted: its next life commits plainly",
    script: {
      protocol: 'classic',
      statics: [false, false, false],
      steps: [
        commit(1),
        txn(0),
        txnEnd(),
        { op: 'deleteOffsets' },
        { op: 'leave', slot: 0 },
        { op: 'leave', slot: 1 },
        { op: 'leave', slot: 2 },
        fetch(),
        { op: 'deleteOffsets' },
        fetch(),
        { op: 'commitAnonymous', version: 9 },
        txn(null),
        txnEnd(),
        { op: 'deleteOffsets' },
        fetch(),
        { op: 'deleteGroup' },
        { op: 'commitAnonymous', version: 9 },
        fetch(),
        txn(null),
        fetchUnstable(),
        txnEnd(),
        { op: 'commitAnonymous', version: 2 },
        fetch(),
      ],
    },
  },
  ...TOPIC_ID_SCRIPTS,
];
