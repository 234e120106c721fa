/**
 * The store contract on fencing: each commit-guard outcome, judged by the store from the group
 * record it holds, is what the pure checkCommit says of that record.
 */
import { describe, expect, it } from 'vitest';
import { checkCommit } from './commit-guard.js';
import type { ContractStores } from './contract-support.js';
import {
  applyUpdates,
  ident,
  normalizeState,
  outcomeOf,
  rid,
  uniqueGroup,
  write,
} from './contract-support.js';
import type { CommitIdentity, GroupUpdate } from './store.js';
import { GuardError } from './store.js';

export function runFencingContract(ctx: ContractStores): void {
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
        await applyUpdates(ctx.store, g, c.updates);
        const outcome = await ctx.store.commit({
          group: g,
          identity: c.identity,
          writes: [write('t', 0, 11n)],
          requestId: rid(),
        });
        expect(outcome).toEqual(outcomeOf(c.expected));
        // The pure function agrees (what the store holds is what it judged).
        expect(checkCommit(await ctx.store.getGroup(g), c.identity)).toBe(
          c.expected === null ? null : c.expected,
        );
        expect((await ctx.store.fetch(g, null)).length).toBe(c.expected === null ? 1 : 0);
      });
    }
  });

  it('an accepted commit without group state creates the group record', async () => {
    const g = uniqueGroup('simple');
    expect(await ctx.store.getGroup(g)).toBeNull();
    await ctx.store.commit({ group: g, identity: ident(-1), writes: [write('t', 0, 1n)], requestId: rid() });
    expect(normalizeState(await ctx.store.getGroup(g))).toEqual({
      protocol: null,
      generationId: -1,
      state: 'Empty',
      members: [],
      transactional: false,
    });
    // Now the group exists: a member with a generation is unknown rather than "group not found".
    expect(
      await ctx.store.commit({
        group: g,
        identity: ident(3, 'x'),
        writes: [write('t', 0, 2n)],
        requestId: rid(),
      }),
    ).toEqual(outcomeOf(GuardError.UNKNOWN_MEMBER_ID));
  });
}
