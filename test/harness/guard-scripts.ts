// The script language of the commit guard's differential runs (test/harness/guard-differential.ts):
// the steps a script is made of, the targets and timing it runs with, and fast-check arbitraries
// that generate scripts.
import fc from 'fast-check';
import type { StoreOutage } from './store-outage.js';

export type Protocol = 'classic' | 'consumer';

/**
 * Whose identity a request carries: the slot's member as it is now, as it was before its last
 * change (a zombie), or (KIP-848) now but with epoch 0, an epoch older than its join.
 */
export type As = 'current' | 'previous' | 'joining';

/** Which partitions a commit names, by what the member holds (see Step `commit`). */
export type Parts = 'kept' | 'gained' | 'other';

/** One step of a script; members are slots 0..SLOTS-1. */
export type Step =
  /** Classic: every live member rejoins and syncs until the group is Stable again. */
  | { op: 'rebalance' }
  | { op: 'heartbeat'; slot: number }
  /**
   * Commits with the member's identity (`As`). To both partitions, or (`parts`) to those the member holds now and held under that
   * identity too (`kept`), holds now only (`gained`), does not hold now (`other`). `oversized`:
   * every partition's metadata is over the broker's 4096 bytes.
   */
  | {
      op: 'commit';
      slot: number;
      as: As;
      version: number;
      parts?: Parts;
      oversized?: boolean;
      /** To both partitions of the topic the group is not subscribed to (`parts` unused). */
      unsubscribed?: true;
    }
  | { op: 'commitAnonymous'; version: number }
  /**
   * The group's transactional producer commits offsets in its transaction (opened first when none
   * is), with the member's identity as `commit` does, or none (`slot` null: generation -1, no
   * member id, as `sendOffsetsToTransaction(offsets, groupId)`).
   */
  | { op: 'txnCommit'; slot: number | null; as: As; parts?: Parts }
  /** The producer's open transaction commits or aborts (EndTxn); nothing when none is open. */
  | { op: 'txnEnd'; commit: boolean }
  /**
   * `stable` false: requireStable false (pending transactional offsets are not waited for).
   * `version` 10: by topic id (KIP-848), as a Kafka 4.4 client; otherwise v9 naming the member
   * (v8 without one).
   */
  | { op: 'fetch'; slot: number | null; as: As; stable?: boolean; version?: 10 }
  /** `storeDown`: the proxy's store is unreachable while the member leaves (its leave is not recorded). */
  | { op: 'leave'; slot: number; storeDown?: true }
  /** An admin removes a static member by its instance id. */
  | { op: 'removeInstance'; slot: number }
  /**
   * A new process of the member starts (a static one keeps the instance id); the old one is a
   * zombie. `storeDown`: the proxy's store is unreachable while it joins.
   */
  | { op: 'restart'; slot: number; storeDown?: true }
  /** These members stop (SIGKILL, or a pause) and the broker's timers run out for them. */
  | { op: 'crash'; slots: number[] }
  /**
   * Classic: the only live member rejoins and does not sync yet (it leads the new generation, which
   * stays CompletingRebalance); skipped with other live members, whose leader the broker picks.
   */
  | { op: 'joinOnly'; slot: number }
  /**
   * An admin deletes the group's committed offsets of both partitions of both topics, the one the
   * members subscribe to and the other (OffsetDelete).
   */
  | { op: 'deleteOffsets' }
  | { op: 'deleteGroup' };

export interface Script {
  protocol: Protocol;
  statics: boolean[];
  steps: Step[];
}

export const SLOTS = 3;

export interface Timing {
  /** Classic session timeout, and the KIP-848 group's consumer.session.timeout.ms. */
  sessionMs: number;
  /** Classic rebalance timeout (and the KIP-848 member's). */
  rebalanceMs: number;
  /** KIP-848 consumer.heartbeat.interval.ms of the group. */
  heartbeatIntervalMs: number;
}

export const DEFAULT_TIMING: Timing = { sessionMs: 3000, rebalanceMs: 1500, heartbeatIntervalMs: 1000 };

export interface Target {
  name: string;
  /**
   * Where members connect: several proxy instances sharing one store take turns (member i's n-th
   * process uses instance (i + n) mod count), so a static member and its replacement are seen by
   * different instances.
   */
  bootstraps: string[];
  /** The proxy's store can be made unreachable (steps with `storeDown`); absent for the broker. */
  outage?: StoreOutage;
}

export interface Env {
  /** The broker itself, for admin requests (group configs) and topic ids. */
  broker: string;
  /** The topic the members subscribe to. */
  topic: string;
  /** A topic no member subscribes to (the broker lets its offsets be deleted while the group runs). */
  otherTopic: string;
  timing: Timing;
}

/** What one target answered: one line per executed step (ticks and settles included). */
export type Trace = string[];

/** Steps the executor adds by the clock: heartbeats of the live members, and settling the group. */
export type AnyStep = Step | { op: 'tick' } | { op: 'watch' } | { op: 'settle' };

export function describe(step: AnyStep): string {
  const { op, ...rest } = step;
  const args = Object.values(rest).map((v) => (Array.isArray(v) ? `[${v.join(',')}]` : String(v)));
  return `${op}(${args.join(' ')})`;
}

// ---- generated scripts ------------------------------------------------------------------------

const anySlot = fc.integer({ min: 0, max: SLOTS - 1 });
const as = fc.constantFrom('current' as const, 'previous' as const);

/**
 * Requests whose answers the guard decides or sees: what each membership change is probed with,
 * mostly by the member it changed (`focus`), whose standing the change is about.
 */
function probeArb(protocol: Protocol, focus: number | null = null): fc.Arbitrary<Step> {
  const slot =
    focus === null
      ? anySlot
      : fc.oneof({ weight: 3, arbitrary: fc.constant(focus) }, { weight: 1, arbitrary: anySlot });
  // KIP-848 commits name the partitions by what the member holds (assignment epochs decide an
  // older epoch's commit per partition); a few of every protocol carry too much metadata, and a
  // few go to the topic the group is not subscribed to (whose offsets OffsetDelete may delete).
  const parts: fc.Arbitrary<Parts | null> =
    protocol === 'consumer' ? fc.constantFrom(null, null, 'kept', 'gained', 'other') : fc.constant(null);
  const commit = fc
    .tuple(
      fc.record({
        op: fc.constant('commit' as const),
        slot,
        as,
        // v10 (topic ids) as Kafka 4.4 clients send it; older versions as older clients do.
        version: protocol === 'classic' ? fc.constantFrom(10, 9, 6, 2) : fc.constantFrom(10, 10, 9, 8),
      }),
      parts,
      fc.integer({ min: 0, max: 9 }),
    )
    .map(([c, p, roll]): Step => ({
      ...c,
      ...(p ? { parts: p } : {}),
      ...(roll === 0 ? { oversized: true } : {}),
      ...(roll === 1 ? { unsubscribed: true } : {}),
    }));
  // The group's transactional producer commits with a member's identity (as a consume-transform-
  // produce loop does), now and then with none.
  const txnCommit = fc
    .tuple(fc.option(slot, { nil: null, freq: 5 }), as, parts)
    .map(([s, a, p]): Step => ({ op: 'txnCommit', slot: s, as: a, ...(p ? { parts: p } : {}) }));
  const fetch = fc
    .tuple(fc.option(slot, { nil: null }), as, fc.boolean(), fc.boolean())
    .map(([s, a, stable, v10]): Step => ({
      op: 'fetch',
      slot: s,
      as: a,
      ...(stable ? {} : { stable: false }),
      ...(v10 ? { version: 10 as const } : {}),
    }));
  return fc.oneof(
    { weight: 6, arbitrary: commit },
    {
      weight: 1,
      arbitrary: fc.record({
        op: fc.constant('commitAnonymous' as const),
        version: fc.constantFrom(10, 9, 2),
      }),
    },
    { weight: 2, arbitrary: fetch },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('heartbeat' as const), slot }) },
    { weight: 2, arbitrary: txnCommit },
    { weight: 1, arbitrary: txnEnd },
  );
}

/** The transaction ends, committed more often than aborted. */
const txnEnd: fc.Arbitrary<Step> = fc
  .constantFrom(true, true, false)
  .map((commit): Step => ({ op: 'txnEnd', commit }));

/** The membership transitions a script is made of. */
function changeArb(protocol: Protocol): fc.Arbitrary<Step> {
  const slot = anySlot;
  const changes: fc.WeightedArbitrary<Step>[] = [
    { weight: 2, arbitrary: fc.record({ op: fc.constant('leave' as const), slot }) },
    { weight: 3, arbitrary: fc.record({ op: fc.constant('restart' as const), slot }) },
    {
      weight: 1,
      arbitrary: fc.record({
        op: fc.constant('crash' as const),
        slots: fc.uniqueArray(slot, { minLength: 1, maxLength: 2 }),
      }),
    },
    { weight: 1, arbitrary: fc.constant({ op: 'deleteGroup' as const }) },
    { weight: 1, arbitrary: fc.constant({ op: 'deleteOffsets' as const }) },
    { weight: 1, arbitrary: fc.record({ op: fc.constant('heartbeat' as const), slot }) },
    { weight: 1, arbitrary: txnEnd },
  ];
  if (protocol === 'classic') {
    // A member rejoining alone is not offered (but see joinOnly): whether it starts a rebalance
    // depends on whether it is the leader, which the broker picks differently on each target.
    changes.push(
      { weight: 2, arbitrary: fc.constant({ op: 'rebalance' as const }) },
      { weight: 1, arbitrary: fc.record({ op: fc.constant('removeInstance' as const), slot }) },
      { weight: 1, arbitrary: fc.record({ op: fc.constant('joinOnly' as const), slot }) },
    );
  }
  return fc.oneof(...changes);
}

/** The member a change is about (a crash's first), or null. */
function changedSlot(change: Step): number | null {
  if ('slot' in change && typeof change.slot === 'number') return change.slot;
  if (change.op === 'crash') return change.slots[0] ?? null;
  return null;
}

/** Scripts of membership changes, each followed by one to three probes. */
export function scriptArb(protocol: Protocol, maxChanges = 5): fc.Arbitrary<Script> {
  const episode = changeArb(protocol).chain((change) =>
    fc
      .array(probeArb(protocol, changedSlot(change)), { minLength: 1, maxLength: 3 })
      .map((probes) => [change, ...probes]),
  );
  return fc.record({
    protocol: fc.constant(protocol),
    statics: fc.array(fc.boolean(), { minLength: SLOTS, maxLength: SLOTS }),
    steps: fc
      .tuple(
        fc.array(probeArb(protocol), { maxLength: 2 }),
        fc.array(episode, { minLength: 1, maxLength: maxChanges }),
      )
      .map(([first, episodes]) => [...first, ...episodes.flat()]),
  });
}
