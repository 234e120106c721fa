/**
 * The one contract every OffsetStore passes. `makeStore` is called more than once per suite; all
 * its stores must share one backend (two proxy instances over one Redis/ZooKeeper/data dir).
 */
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { applyGroupUpdate, checkCommit, decideCommit } from './commit-guard.js';
import { runNameContract } from './contract-names.js';
import { StoreUnavailableError } from './errors.js';
import type {
  CommitIdentity,
  CommitOutcome,
  GroupState,
  GroupUpdate,
  OffsetStore,
  OffsetWrite,
  PartitionOffset,
} from './store.js';
import { GuardError } from './store.js';

const MAX_INT64 = 2n ** 63n - 1n;
let seq = 0;
const uniqueGroup = (label: string): string =>
  `ct-${label}-${process.pid}-${Date.now().toString(36)}-${seq++}`;
const rid = (): string =>
  `r-${process.pid}-${Date.now().toString(36)}-${seq++}-${Math.random().toString(36).slice(2)}`;

/** One partition write with the contract's defaults (commit time 1_700_000_000_000). */
export function write(
  topic: string,
  partition: number,
  offset: bigint,
  extra: Partial<OffsetWrite> = {},
): OffsetWrite {
  return {
    topic,
    partition,
    offset,
    leaderEpoch: -1,
    metadata: '',
    commitTimestamp: 1_700_000_000_000n,
    expireTimestamp: -1n,
    ...extra,
  };
}

const ident = (
  generationIdOrMemberEpoch: number,
  memberId = '',
  groupInstanceId: string | null = null,
  requestVersion = 9,
): CommitIdentity => ({
  generationIdOrMemberEpoch,
  memberId,
  groupInstanceId,
  requestVersion,
});

const sortOffsets = (xs: PartitionOffset[]): PartitionOffset[] =>
  [...xs].sort((a, b) => (a.topic === b.topic ? a.partition - b.partition : a.topic < b.topic ? -1 : 1));

/** Member order and absent-vs-undefined fields are not part of the contract. */
export function normalizeState(s: GroupState | null): GroupState | null {
  if (s === null) return null;
  const members = s.members
    .map((m) => ({
      memberId: m.memberId,
      groupInstanceId: m.groupInstanceId,
      ...(m.memberEpoch === undefined ? {} : { memberEpoch: m.memberEpoch }),
      ...(m.rank === undefined ? {} : { rank: m.rank }),
    }))
    .sort((a, b) => (a.memberId < b.memberId ? -1 : a.memberId > b.memberId ? 1 : 0));
  return { ...s, members };
}

const outcomeOf = (code: number | null): CommitOutcome =>
  code === null ? { status: 'ok' } : { status: 'fenced', error: code as never };

export function runStoreContract(name: string, makeStore: () => Promise<OffsetStore>): void {
  describe(`OffsetStore contract: ${name}`, () => {
    let store: OffsetStore;
    let other: OffsetStore;
    beforeAll(async () => {
      store = await makeStore();
      other = await makeStore();
    });
    afterAll(async () => {
      await store?.close();
      await other?.close();
    });

    async function setUp(group: string, updates: GroupUpdate[]): Promise<void> {
      for (const u of updates) await store.updateGroup(group, u);
    }

    it('round-trips offsets, leader epochs, metadata and timestamps', async () => {
      const g = uniqueGroup('rt');
      const writes = [
        write('orders', 0, 0n, {
          metadata: 'héllo ✓ 🚀 | : \u0000x',
          leaderEpoch: 7,
          expireTimestamp: 1_800_000_000_123n,
        }),
        write('orders', 1, MAX_INT64, { metadata: '' }),
        write('orders', 2, MAX_INT64 - 1n, { leaderEpoch: 2_147_483_647, commitTimestamp: 1n }),
        write('pay.ments-x_1', 0, 42n, { metadata: 'x'.repeat(4096) }),
      ];
      expect(await store.commit({ group: g, writes, requestId: rid() })).toEqual({ status: 'ok' });
      const all = sortOffsets(await store.fetch(g, null));
      expect(all).toEqual(sortOffsets(writes.map(({ expectedOffset: _e, ...w }) => w)));
      // The other instance sees the same.
      expect(sortOffsets(await other.fetch(g, null))).toEqual(all);
      const listed = await store.fetch(g, [
        { topic: 'orders', partition: 1 },
        { topic: 'orders', partition: 9 },
        { topic: 'nope', partition: 0 },
      ]);
      expect(listed).toEqual([
        {
          topic: 'orders',
          partition: 1,
          offset: MAX_INT64,
          leaderEpoch: -1,
          metadata: '',
          commitTimestamp: 1_700_000_000_000n,
          expireTimestamp: -1n,
        },
      ]);
      expect(await store.fetch(uniqueGroup('missing'), null)).toEqual([]);
      expect(await store.fetch(uniqueGroup('missing'), [{ topic: 'orders', partition: 0 }])).toEqual([]);
    });

    it('applies one commit of 6,000 partitions whole (no argument or stack limit of the store)', async () => {
      const g = uniqueGroup('wide');
      const writes = Array.from({ length: 6000 }, (_, p) =>
        write('wide', p, BigInt(p) * 3n, { metadata: `m${p}` }),
      );
      expect(await store.commit({ group: g, writes, requestId: rid() })).toEqual({ status: 'ok' });
      const stored = sortOffsets(await store.fetch(g, null));
      expect(stored).toHaveLength(6000);
      expect(stored).toEqual(sortOffsets(writes.map(({ expectedOffset: _e, ...w }) => w)));
    });

    it('overwrites a committed offset (offsets may go backwards, as on the broker)', async () => {
      const g = uniqueGroup('ow');
      await store.commit({ group: g, writes: [write('t', 0, 100n, { metadata: 'a' })], requestId: rid() });
      await store.commit({
        group: g,
        writes: [write('t', 0, 7n, { metadata: 'b', leaderEpoch: 3 })],
        requestId: rid(),
      });
      expect(await store.fetch(g, null)).toEqual([
        { ...write('t', 0, 7n, { metadata: 'b', leaderEpoch: 3 }) },
      ]);
    });

    it('a request naming one partition twice: the last write wins', async () => {
      const g = uniqueGroup('dup');
      expect(
        await store.commit({
          group: g,
          writes: [write('t', 0, 1n), write('t', 1, 5n), write('t', 0, 2n, { metadata: 'second' })],
          requestId: rid(),
        }),
      ).toEqual({
        status: 'ok',
      });
      expect(sortOffsets(await store.fetch(g, null))).toEqual([
        write('t', 0, 2n, { metadata: 'second' }),
        write('t', 1, 5n),
      ]);
      expect(
        await store.commit({
          group: g,
          writes: [write('t', 0, 3n, { expectedOffset: 2n }), write('t', 0, 4n, { expectedOffset: 2n })],
          requestId: rid(),
        }),
      ).toEqual({ status: 'ok' });
      expect((await store.fetch(g, [{ topic: 't', partition: 0 }]))[0]?.offset).toBe(4n);
    });

    it('writes all partitions or none: one CAS mismatch writes nothing', async () => {
      const g = uniqueGroup('aon');
      expect(await store.commit({ group: g, writes: [write('t', 0, 5n)], requestId: rid() })).toEqual({
        status: 'ok',
      });
      const outcome = await store.commit({
        group: g,
        writes: [
          write('t', 0, 6n, { expectedOffset: 5n }),
          write('t', 1, 9n, { expectedOffset: 3n }),
          write('t', 2, 1n),
        ],
        requestId: rid(),
      });
      expect(outcome).toEqual({
        status: 'cas-mismatch',
        mismatches: [{ topic: 't', partition: 1, expected: 3n, actual: -1n }],
      });
      expect(await store.fetch(g, null)).toEqual([write('t', 0, 5n)]);
      expect(
        await store.commit({
          group: g,
          writes: [write('t', 0, 6n, { expectedOffset: 5n }), write('t', 1, 9n, { expectedOffset: -1n })],
          requestId: rid(),
        }),
      ).toEqual({ status: 'ok' });
      expect(sortOffsets(await store.fetch(g, null)).map((o) => o.offset)).toEqual([6n, 9n]);
    });

    it('CAS with expected -1 succeeds only on an empty partition; big offsets compare exactly', async () => {
      const g = uniqueGroup('cas');
      expect(
        await store.commit({
          group: g,
          writes: [write('t', 0, MAX_INT64 - 1n, { expectedOffset: -1n })],
          requestId: rid(),
        }),
      ).toEqual({ status: 'ok' });
      expect(
        await store.commit({
          group: g,
          writes: [write('t', 0, 1n, { expectedOffset: -1n })],
          requestId: rid(),
        }),
      ).toEqual({
        status: 'cas-mismatch',
        mismatches: [{ topic: 't', partition: 0, expected: -1n, actual: MAX_INT64 - 1n }],
      });
      // MAX-1 and MAX are the same double: a store comparing numbers would wrongly accept this.
      expect(
        await store.commit({
          group: g,
          writes: [write('t', 0, 1n, { expectedOffset: MAX_INT64 })],
          requestId: rid(),
        }),
      ).toMatchObject({ status: 'cas-mismatch' });
      expect(
        await store.commit({
          group: g,
          writes: [write('t', 0, MAX_INT64, { expectedOffset: MAX_INT64 - 1n })],
          requestId: rid(),
        }),
      ).toEqual({ status: 'ok' });
      expect((await store.fetch(g, null))[0]?.offset).toBe(MAX_INT64);
    });

    describe('guard outcomes through the store', () => {
      const classicStable: GroupUpdate[] = [
        {
          kind: 'joined',
          generationId: 1,
          memberId: 'a',
          groupInstanceId: 'i1',
          members: [
            { memberId: 'a', groupInstanceId: 'i1' },
            { memberId: 'b', groupInstanceId: null },
          ],
        },
        { kind: 'synced', generationId: 1, memberId: 'a' },
      ];
      const cases: {
        title: string;
        updates: GroupUpdate[];
        identity: CommitIdentity | undefined;
        expected: number | null;
      }[] = [
        { title: 'no group, generation -1: accept', updates: [], identity: ident(-1), expected: null },
        {
          title: 'no group, generation 3, v9: GROUP_ID_NOT_FOUND',
          updates: [],
          identity: ident(3, 'a', null, 9),
          expected: GuardError.GROUP_ID_NOT_FOUND,
        },
        {
          title: 'no group, generation 3, v8: ILLEGAL_GENERATION',
          updates: [],
          identity: ident(3, 'a', null, 8),
          expected: GuardError.ILLEGAL_GENERATION,
        },
        { title: 'fencing off: accept', updates: classicStable, identity: undefined, expected: null },
        {
          title: 'classic, no identity, members: UNKNOWN_MEMBER_ID',
          updates: classicStable,
          identity: ident(-1),
          expected: GuardError.UNKNOWN_MEMBER_ID,
        },
        {
          title: 'classic, unknown instance: UNKNOWN_MEMBER_ID',
          updates: classicStable,
          identity: ident(1, 'a', 'ix'),
          expected: GuardError.UNKNOWN_MEMBER_ID,
        },
        {
          title: 'classic, instance of another member: FENCED_INSTANCE_ID',
          updates: classicStable,
          identity: ident(1, 'b', 'i1'),
          expected: GuardError.FENCED_INSTANCE_ID,
        },
        {
          title: 'classic, unknown member: UNKNOWN_MEMBER_ID',
          updates: classicStable,
          identity: ident(1, 'zz'),
          expected: GuardError.UNKNOWN_MEMBER_ID,
        },
        {
          title: 'classic, old generation: ILLEGAL_GENERATION',
          updates: classicStable,
          identity: ident(0, 'a', 'i1'),
          expected: GuardError.ILLEGAL_GENERATION,
        },
        {
          title: 'classic, member with generation -1: ILLEGAL_GENERATION',
          updates: classicStable,
          identity: ident(-1, 'b'),
          expected: GuardError.ILLEGAL_GENERATION,
        },
        {
          title: 'classic, Stable static member: accept',
          updates: classicStable,
          identity: ident(1, 'a', 'i1'),
          expected: null,
        },
        {
          title: 'classic, Stable dynamic member: accept',
          updates: classicStable,
          identity: ident(1, 'b'),
          expected: null,
        },
        {
          title: 'classic, CompletingRebalance: REBALANCE_IN_PROGRESS',
          updates: classicStable.slice(0, 1),
          identity: ident(1, 'b'),
          expected: GuardError.REBALANCE_IN_PROGRESS,
        },
        {
          title: 'classic, PreparingRebalance: accept',
          updates: [...classicStable, { kind: 'rebalancing', generationId: 1 }],
          identity: ident(1, 'b'),
          expected: null,
        },
        {
          title: 'classic, all left: Empty accepts generation -1',
          updates: [...classicStable, { kind: 'left', memberIds: ['a', 'b'] }],
          identity: ident(-1),
          expected: null,
        },
        {
          title: 'classic, Empty: a member id with generation -1 is accepted',
          updates: [...classicStable, { kind: 'empty' }],
          identity: ident(-1, 'a'),
          expected: null,
        },
        {
          title: 'classic, Empty: generation 1 is UNKNOWN_MEMBER_ID',
          updates: [...classicStable, { kind: 'empty' }],
          identity: ident(1, 'a'),
          expected: GuardError.UNKNOWN_MEMBER_ID,
        },
        {
          title: 'consumer, epoch -1, members: UNKNOWN_MEMBER_ID',
          updates: [{ kind: 'member-epoch', memberId: 'm1', memberEpoch: 5 }],
          identity: ident(-1),
          expected: GuardError.UNKNOWN_MEMBER_ID,
        },
        {
          title: 'consumer, unknown member: UNKNOWN_MEMBER_ID',
          updates: [{ kind: 'member-epoch', memberId: 'm1', memberEpoch: 5 }],
          identity: ident(5, 'm2'),
          expected: GuardError.UNKNOWN_MEMBER_ID,
        },
        {
          title: 'consumer, v8: UNSUPPORTED_VERSION',
          updates: [{ kind: 'member-epoch', memberId: 'm1', memberEpoch: 5 }],
          identity: ident(5, 'm1', null, 8),
          expected: GuardError.UNSUPPORTED_VERSION,
        },
        {
          title: 'consumer, stale epoch: STALE_MEMBER_EPOCH',
          updates: [{ kind: 'member-epoch', memberId: 'm1', memberEpoch: 5 }],
          identity: ident(4, 'm1'),
          expected: GuardError.STALE_MEMBER_EPOCH,
        },
        {
          title: 'consumer, current epoch: accept (instance id ignored)',
          updates: [{ kind: 'member-epoch', memberId: 'm1', memberEpoch: 5 }],
          identity: ident(5, 'm1', 'whatever'),
          expected: null,
        },
        {
          title: 'consumer, member gone, epoch -1: accept',
          updates: [
            { kind: 'member-epoch', memberId: 'm1', memberEpoch: 5 },
            { kind: 'member-epoch', memberId: 'm1', memberEpoch: -1 },
          ],
          identity: ident(-1),
          expected: null,
        },
      ];
      for (const c of cases) {
        it(c.title, async () => {
          const g = uniqueGroup('guard');
          await setUp(g, c.updates);
          const outcome = await store.commit({
            group: g,
            identity: c.identity,
            writes: [write('t', 0, 11n)],
            requestId: rid(),
          });
          expect(outcome).toEqual(outcomeOf(c.expected));
          // The pure function agrees (what the store holds is what it judged).
          expect(checkCommit(await store.getGroup(g), c.identity)).toBe(
            c.expected === null ? null : c.expected,
          );
          expect((await store.fetch(g, null)).length).toBe(c.expected === null ? 1 : 0);
        });
      }
    });

    it('an accepted commit without group state creates the group record', async () => {
      const g = uniqueGroup('simple');
      expect(await store.getGroup(g)).toBeNull();
      await store.commit({ group: g, identity: ident(-1), writes: [write('t', 0, 1n)], requestId: rid() });
      expect(normalizeState(await store.getGroup(g))).toEqual({
        protocol: null,
        generationId: -1,
        state: 'Empty',
        members: [],
        transactional: false,
      });
      // Now the group exists: a member with a generation is unknown rather than "group not found".
      expect(
        await store.commit({
          group: g,
          identity: ident(3, 'x'),
          writes: [write('t', 0, 2n)],
          requestId: rid(),
        }),
      ).toEqual(outcomeOf(GuardError.UNKNOWN_MEMBER_ID));
    });

    it('stores group state as applyGroupUpdate computes it, and judges commits as decideCommit does', async () => {
      const memberId = fc.constantFrom('a', 'b', 'c', '');
      const instance = fc.constantFrom(null, 'i1', 'i2');
      const update: fc.Arbitrary<GroupUpdate> = fc.oneof(
        fc.record(
          {
            kind: fc.constant('joined' as const),
            generationId: fc.integer({ min: 0, max: 3 }),
            memberId,
            groupInstanceId: instance,
            members: fc.array(fc.record({ memberId, groupInstanceId: instance }), { maxLength: 3 }),
            takeover: fc.boolean(),
          },
          { requiredKeys: ['kind', 'generationId', 'memberId', 'groupInstanceId'] },
        ),
        fc.record(
          {
            kind: fc.constant('synced' as const),
            generationId: fc.integer({ min: 0, max: 3 }),
            memberId,
            groupInstanceId: instance,
          },
          { requiredKeys: ['kind', 'generationId', 'memberId'] },
        ),
        fc.record({
          kind: fc.constant('verified' as const),
          generationId: fc.integer({ min: 0, max: 3 }),
          memberId,
          groupInstanceId: instance,
          state: fc.constantFrom(
            'Empty' as const,
            'CompletingRebalance' as const,
            'Stable' as const,
            'PreparingRebalance' as const,
          ),
        }),
        fc.record({
          kind: fc.constant('rebalancing' as const),
          generationId: fc.integer({ min: 0, max: 3 }),
        }),
        fc.record(
          {
            kind: fc.constant('left' as const),
            memberIds: fc.array(memberId, { maxLength: 2 }),
            groupInstanceIds: fc.array(fc.constantFrom('i1', 'i2'), { maxLength: 2 }),
          },
          { requiredKeys: ['kind', 'memberIds'] },
        ),
        fc.record({ kind: fc.constant('gone' as const), memberId }),
        fc.record(
          {
            kind: fc.constant('member-epoch' as const),
            memberId,
            memberEpoch: fc.integer({ min: -2, max: 4 }),
            instanceId: instance,
            exact: fc.boolean(),
          },
          { requiredKeys: ['kind', 'memberId', 'memberEpoch'] },
        ),
        fc.constant({ kind: 'empty' as const }),
        fc.constant({ kind: 'transactional' as const }),
      );
      const identity = fc.option(
        fc.record({
          generationIdOrMemberEpoch: fc.integer({ min: -1, max: 4 }),
          memberId,
          groupInstanceId: fc.constantFrom(null, 'i1', 'i2'),
          requestVersion: fc.constantFrom(1, 8, 9),
        }),
        { nil: undefined },
      );
      await fc.assert(
        fc.asyncProperty(fc.array(update, { maxLength: 6 }), identity, async (updates, id) => {
          const g = uniqueGroup('prop');
          let expectedState: GroupState | null = null;
          for (const u of updates) {
            await store.updateGroup(g, u);
            expectedState = applyGroupUpdate(expectedState, u);
          }
          expect(normalizeState(await store.getGroup(g))).toEqual(normalizeState(expectedState));
          const request = { group: g, identity: id, writes: [write('t', 0, 1n)], requestId: rid() };
          const outcome = await store.commit(request);
          expect(outcome).toEqual(decideCommit(expectedState, request, () => -1n).outcome);
        }),
        { numRuns: 100 },
      );
    });

    it('membership updates converge whatever order they arrive in', async () => {
      const updates: GroupUpdate[] = [
        {
          kind: 'joined',
          generationId: 1,
          memberId: 'a',
          groupInstanceId: null,
          members: [
            { memberId: 'a', groupInstanceId: null },
            { memberId: 'b', groupInstanceId: 's' },
          ],
        },
        { kind: 'synced', generationId: 1, memberId: 'a' },
        { kind: 'joined', generationId: 2, memberId: 'b', groupInstanceId: 's' },
        {
          kind: 'joined',
          generationId: 2,
          memberId: 'a',
          groupInstanceId: null,
          members: [
            { memberId: 'a', groupInstanceId: null },
            { memberId: 'b', groupInstanceId: 's' },
          ],
        },
        { kind: 'synced', generationId: 2, memberId: 'b' },
        { kind: 'synced', generationId: 2, memberId: 'a' },
        { kind: 'rebalancing', generationId: 1 },
        { kind: 'transactional' },
      ];
      const orders = [
        updates,
        [...updates].reverse(),
        [4, 0, 6, 2, 7, 5, 1, 3].map((i) => updates[i]!),
        [2, 5, 3, 1, 0, 7, 4, 6].map((i) => updates[i]!),
      ];
      const results = [];
      for (const order of orders) {
        const g = uniqueGroup('conv');
        // Two instances interleave the updates.
        await Promise.all(order.map((u, i) => (i % 2 === 0 ? store : other).updateGroup(g, u)));
        results.push(normalizeState(await store.getGroup(g)));
      }
      expect(results[0]).toEqual({
        protocol: 'classic',
        generationId: 2,
        state: 'Stable',
        members: [
          { memberId: 'a', groupInstanceId: null },
          { memberId: 'b', groupInstanceId: 's' },
        ],
        transactional: true,
      });
      for (const r of results) expect(r).toEqual(results[0]);
    });

    it('answers a repeated requestId with the first outcome and applies it once', async () => {
      const g = uniqueGroup('idem');
      const id = rid();
      expect(
        await store.commit({ group: g, writes: [write('t', 0, 5n, { expectedOffset: -1n })], requestId: id }),
      ).toEqual({ status: 'ok' });
      // A resend (same id, even through another instance) is not applied again: CAS would fail, and offset 9 must not land.
      expect(
        await other.commit({ group: g, writes: [write('t', 0, 5n, { expectedOffset: -1n })], requestId: id }),
      ).toEqual({ status: 'ok' });
      await store.commit({ group: g, writes: [write('t', 0, 6n)], requestId: rid() });
      expect(await store.commit({ group: g, writes: [write('t', 0, 9n)], requestId: id })).toEqual({
        status: 'ok',
      });
      expect((await store.fetch(g, null))[0]?.offset).toBe(6n);
      const fencedId = rid();
      await setUp(g, [{ kind: 'member-epoch', memberId: 'm', memberEpoch: 3 }]);
      const first = await store.commit({
        group: g,
        identity: ident(2, 'm'),
        writes: [write('t', 0, 1n)],
        requestId: fencedId,
      });
      expect(first).toEqual(outcomeOf(GuardError.STALE_MEMBER_EPOCH));
      expect(
        await store.commit({
          group: g,
          identity: ident(2, 'm'),
          writes: [write('t', 0, 1n)],
          requestId: fencedId,
        }),
      ).toEqual(first);
    });

    it('deletes offsets and groups, and lists groups', async () => {
      const g1 = uniqueGroup('del');
      const g2 = uniqueGroup('del');
      const g3 = uniqueGroup('del');
      await store.commit({
        group: g1,
        writes: [write('t', 0, 1n), write('t', 1, 2n), write('u', 0, 3n)],
        requestId: rid(),
      });
      await store.commit({ group: g2, writes: [write('t', 0, 1n)], requestId: rid() });
      await store.updateGroup(g3, { kind: 'member-epoch', memberId: 'm', memberEpoch: 1 });
      const listed = await store.listGroups();
      expect(listed).toEqual(expect.arrayContaining([g1, g2, g3]));
      expect(new Set(listed).size).toBe(listed.length);
      await store.deleteOffsets(g1, [
        { topic: 't', partition: 1 },
        { topic: 'u', partition: 0 },
        { topic: 'zz', partition: 0 },
      ]);
      expect(await store.fetch(g1, null)).toEqual([write('t', 0, 1n)]);
      await store.deleteGroup(g1);
      await store.deleteGroup(g3);
      expect(await store.fetch(g1, null)).toEqual([]);
      expect(await store.getGroup(g1)).toBeNull();
      expect(await store.getGroup(g3)).toBeNull();
      const after = await other.listGroups();
      expect(after).toContain(g2);
      expect(after).not.toContain(g1);
      expect(after).not.toContain(g3);
      await store.deleteGroup(uniqueGroup('never-existed'));
    });

    it('two instances racing on one fence: exactly one passes each round', async () => {
      const g = uniqueGroup('race');
      let current = -1n;
      for (let round = 0; round < 15; round++) {
        const [a, b] = await Promise.all([
          store.commit({
            group: g,
            writes: [write('t', 0, BigInt(round * 2 + 1), { expectedOffset: current }), write('t', 1, 1n)],
            requestId: rid(),
          }),
          other.commit({
            group: g,
            writes: [write('t', 0, BigInt(round * 2 + 2), { expectedOffset: current }), write('t', 1, 2n)],
            requestId: rid(),
          }),
        ]);
        expect([a.status, b.status].sort()).toEqual(['cas-mismatch', 'ok']);
        const stored = sortOffsets(await store.fetch(g, null));
        const winner = a.status === 'ok' ? 1n : 2n;
        expect(stored.map((o) => o.offset)).toEqual([BigInt(round * 2) + winner, winner]);
        current = stored[0]!.offset;
      }
      // A generation fence: the update and a commit of the old generation, from different instances.
      await store.updateGroup(g, {
        kind: 'joined',
        generationId: 1,
        memberId: 'a',
        groupInstanceId: null,
        members: [{ memberId: 'a', groupInstanceId: null }],
      });
      await store.updateGroup(g, { kind: 'synced', generationId: 1, memberId: 'a' });
      await other.updateGroup(g, {
        kind: 'joined',
        generationId: 2,
        memberId: 'b',
        groupInstanceId: null,
        members: [{ memberId: 'b', groupInstanceId: null }],
      });
      expect(
        await store.commit({
          group: g,
          identity: ident(1, 'a'),
          writes: [write('t', 0, 0n)],
          requestId: rid(),
        }),
      ).toEqual(outcomeOf(GuardError.UNKNOWN_MEMBER_ID));
    });

    it('never moves a member epoch back, nor a generation', async () => {
      const g = uniqueGroup('epoch');
      await store.updateGroup(g, { kind: 'member-epoch', memberId: 'm', memberEpoch: 5 });
      await other.updateGroup(g, { kind: 'member-epoch', memberId: 'm', memberEpoch: 3 });
      expect((await store.getGroup(g))?.members).toEqual([
        { memberId: 'm', groupInstanceId: null, memberEpoch: 5 },
      ]);
      const c = uniqueGroup('gen');
      await store.updateGroup(c, { kind: 'joined', generationId: 4, memberId: 'a', groupInstanceId: null });
      await other.updateGroup(c, { kind: 'joined', generationId: 3, memberId: 'b', groupInstanceId: null });
      await other.updateGroup(c, { kind: 'synced', generationId: 3, memberId: 'b' });
      expect(normalizeState(await store.getGroup(c))).toMatchObject({
        generationId: 4,
        state: 'CompletingRebalance',
        members: [{ memberId: 'a' }],
      });
    });

    it('records the transactional flag', async () => {
      const g = uniqueGroup('txn');
      await store.updateGroup(g, { kind: 'transactional' });
      expect((await other.getGroup(g))?.transactional).toBe(true);
    });

    it("leaves a transactional group's client commits to the broker: nothing written", async () => {
      const g = uniqueGroup('txn-commit');
      await store.commit({ group: g, writes: [write('t', 0, 1n)], requestId: rid() });
      await store.updateGroup(g, { kind: 'transactional' });
      // With an identity (fencing on), accepted or not by the fence: the broker's to decide.
      for (const identity of [ident(-1), ident(3, 'a')]) {
        expect(
          await other.commit({ group: g, identity, writes: [write('t', 0, 7n)], requestId: rid() }),
        ).toEqual({ status: 'transactional' });
      }
      // A client's commit without one (fencing off, compare-and-set, a `cas:` write included).
      const cas = { ...write('t', 0, 8n), expectedOffset: 1n };
      for (const writes of [[write('t', 0, 7n)], [cas]]) {
        expect(
          await other.commit({ group: g, writes, deferIfTransactional: true, requestId: rid() }),
        ).toEqual({ status: 'transactional' });
      }
      expect((await store.fetch(g, null)).map((o) => o.offset)).toEqual([1n]);
      // The operator's own write (`offsets set --force`) the store still takes.
      expect(await other.commit({ group: g, writes: [write('t', 0, 9n)], requestId: rid() })).toEqual({
        status: 'ok',
      });
      // Read where it was written: the embedded store's second instance in this process may still
      // hold the read snapshot of this event-loop turn (LMDB renews it on the next one).
      expect((await other.fetch(g, null)).map((o) => o.offset)).toEqual([9n]);
    });

    it('a lease has one holder at a time across instances; released or lapsed, another takes it', async () => {
      const name = `lease-${uniqueGroup('l')}`;
      expect(await store.lease(name, 'a', 10_000)).toBe(true);
      expect(await other.lease(name, 'b', 10_000)).toBe(false);
      expect(await store.lease(name, 'a', 10_000)).toBe(true); // renewed
      await other.releaseLease(name, 'b'); // not b's to release
      expect(await other.lease(name, 'b', 10_000)).toBe(false);
      await store.releaseLease(name, 'a');
      expect(await other.lease(name, 'b', 300)).toBe(true);
      expect(await store.lease(name, 'a', 10_000)).toBe(false);
      await new Promise((r) => setTimeout(r, 600)); // b stopped renewing: its lease lapses
      expect(await store.lease(name, 'a', 10_000)).toBe(true);
      await store.releaseLease(name, 'a');
    });

    it('pings, and fails with StoreUnavailableError once closed', async () => {
      const s = await makeStore();
      await s.ping();
      await s.close();
      await expect(s.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(s.fetch('g', null)).rejects.toBeInstanceOf(StoreUnavailableError);
    });
  });
  runNameContract(name, makeStore);
}
