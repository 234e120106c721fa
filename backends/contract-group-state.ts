/**
 * The store contract on group records: updates are applied as applyGroupUpdate computes them and
 * converge in any order, epochs and generations never move back, and a transactional group's
 * client commits are left to the broker.
 */
import fc from 'fast-check';
import { expect, it } from 'vitest';
import { applyGroupUpdate, decideCommit } from './commit-guard.js';
import type { ContractStores } from './contract-support.js';
import { ident, normalizeState, rid, uniqueGroup, write } from './contract-support.js';
import type { GroupState, GroupUpdate } from './store.js';

export function runGroupStateContract(ctx: ContractStores): void {
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
      fc.record({
        kind: fc.constant('streams-topology' as const),
        topology: fc.record({
          epoch: fc.integer({ min: 0, max: 2 }),
          subtopologies: fc.constantFrom('[]', '[{"subtopologyId":"0"}]', '[{"x":"a/b \\"é\\""}]'),
        }),
      }),
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
          await ctx.store.updateGroup(g, u);
          expectedState = applyGroupUpdate(expectedState, u);
        }
        expect(normalizeState(await ctx.store.getGroup(g))).toEqual(normalizeState(expectedState));
        const request = { group: g, identity: id, writes: [write('t', 0, 1n)], requestId: rid() };
        const outcome = await ctx.store.commit(request);
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
      await Promise.all(order.map((u, i) => (i % 2 === 0 ? ctx.store : ctx.other).updateGroup(g, u)));
      results.push(normalizeState(await ctx.store.getGroup(g)));
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

  it('never moves a member epoch back, nor a generation', async () => {
    const g = uniqueGroup('epoch');
    await ctx.store.updateGroup(g, { kind: 'member-epoch', memberId: 'm', memberEpoch: 5 });
    await ctx.other.updateGroup(g, { kind: 'member-epoch', memberId: 'm', memberEpoch: 3 });
    expect((await ctx.store.getGroup(g))?.members).toEqual([
      { memberId: 'm', groupInstanceId: null, memberEpoch: 5 },
    ]);
    const c = uniqueGroup('gen');
    await ctx.store.updateGroup(c, { kind: 'joined', generationId: 4, memberId: 'a', groupInstanceId: null });
    await ctx.other.updateGroup(c, { kind: 'joined', generationId: 3, memberId: 'b', groupInstanceId: null });
    await ctx.other.updateGroup(c, { kind: 'synced', generationId: 3, memberId: 'b' });
    expect(normalizeState(await ctx.store.getGroup(c))).toMatchObject({
      generationId: 4,
      state: 'CompletingRebalance',
      members: [{ memberId: 'a' }],
    });
  });

  it("keeps a streams group's topology of the highest epoch, the first one of an epoch, as it was given", async () => {
    const g = uniqueGroup('streams');
    // Characters a store's encoding could alter: quotes, backslashes, '/', non-ASCII, an empty list.
    const odd = JSON.stringify([
      { subtopologyId: '0/1', sourceTopics: ['t"é\\x'], repartitionSinkTopics: [] },
    ]);
    await ctx.store.updateGroup(g, { kind: 'member-epoch', memberId: 'm', memberEpoch: 2 });
    await ctx.store.updateGroup(g, { kind: 'streams-topology', topology: { epoch: 1, subtopologies: odd } });
    await ctx.other.updateGroup(g, { kind: 'streams-topology', topology: { epoch: 1, subtopologies: '[]' } });
    await ctx.other.updateGroup(g, { kind: 'streams-topology', topology: { epoch: 0, subtopologies: '[]' } });
    expect((await ctx.other.getGroup(g))?.streams).toEqual({ epoch: 1, subtopologies: odd });
    // Later membership updates keep it.
    await ctx.other.updateGroup(g, { kind: 'member-epoch', memberId: 'm', memberEpoch: -1 });
    await ctx.other.updateGroup(g, { kind: 'empty' });
    expect((await ctx.store.getGroup(g))?.streams).toEqual({ epoch: 1, subtopologies: odd });
    await ctx.store.updateGroup(g, { kind: 'streams-topology', topology: { epoch: 2, subtopologies: '[]' } });
    expect((await ctx.other.getGroup(g))?.streams).toEqual({ epoch: 2, subtopologies: '[]' });
    // A record without one (every record before streams groups were recorded) has none.
    const plain = uniqueGroup('plain');
    await ctx.store.updateGroup(plain, {
      kind: 'joined',
      generationId: 1,
      memberId: 'a',
      groupInstanceId: null,
    });
    expect((await ctx.store.getGroup(plain))?.streams).toBeUndefined();
    // And it goes with the group.
    await ctx.store.deleteGroup(g);
    expect(await ctx.other.getGroup(g)).toBeNull();
  });

  it('records the transactional flag', async () => {
    const g = uniqueGroup('txn');
    await ctx.store.updateGroup(g, { kind: 'transactional' });
    expect((await ctx.other.getGroup(g))?.transactional).toBe(true);
  });

  it("leaves a transactional group's client commits to the broker: nothing written", async () => {
    const g = uniqueGroup('txn-commit');
    await ctx.store.commit({ group: g, writes: [write('t', 0, 1n)], requestId: rid() });
    await ctx.store.updateGroup(g, { kind: 'transactional' });
    // With an identity (fencing on), accepted or not by the fence: the broker's to decide.
    for (const identity of [ident(-1), ident(3, 'a')]) {
      expect(
        await ctx.other.commit({ group: g, identity, writes: [write('t', 0, 7n)], requestId: rid() }),
      ).toEqual({ status: 'transactional' });
    }
    // A client's commit without one (fencing off, compare-and-set, a `cas:` write included).
    const cas = { ...write('t', 0, 8n), expectedOffset: 1n };
    for (const writes of [[write('t', 0, 7n)], [cas]]) {
      expect(
        await ctx.other.commit({ group: g, writes, deferIfTransactional: true, requestId: rid() }),
      ).toEqual({ status: 'transactional' });
    }
    expect((await ctx.store.fetch(g, null)).map((o) => o.offset)).toEqual([1n]);
    // The operator's own write (`offsets set --force`) the store still takes.
    expect(await ctx.other.commit({ group: g, writes: [write('t', 0, 9n)], requestId: rid() })).toEqual({
      status: 'ok',
    });
    // Read where it was written: the embedded store's second instance in this process may still
    // hold the read snapshot of this event-loop turn (LMDB renews it on the next one).
    expect((await ctx.other.fetch(g, null)).map((o) => o.offset)).toEqual([9n]);
  });
}
