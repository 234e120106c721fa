import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { applyGroupUpdate, checkCommit, decideCommit, emptyGroupState } from './commit-guard.js';
import { normalizeState } from './contract.js';
import type { CommitIdentity, GroupState, GroupUpdate } from './store.js';
import { GuardError } from './store.js';

const id = (gen: number, memberId = '', instance: string | null = null, version = 9): CommitIdentity => ({
  generationIdOrMemberEpoch: gen,
  memberId,
  groupInstanceId: instance,
  requestVersion: version,
});

const classic = (over: Partial<GroupState>): GroupState => ({
  protocol: 'classic',
  generationId: 4,
  state: 'Stable',
  members: [
    { memberId: 'a', groupInstanceId: 'ia' },
    { memberId: 'b', groupInstanceId: null },
  ],
  transactional: false,
  ...over,
});

const consumer = (over: Partial<GroupState> = {}): GroupState => ({
  protocol: 'consumer',
  generationId: -1,
  state: 'Stable',
  members: [{ memberId: 'm', groupInstanceId: null, memberEpoch: 7 }],
  transactional: false,
  ...over,
});

describe('checkCommit', () => {
  it('accepts anything when fencing is off', () => {
    expect(checkCommit(classic({ state: 'CompletingRebalance' }), undefined)).toBeNull();
    expect(checkCommit(null, undefined)).toBeNull();
  });

  describe('no group state', () => {
    it('accepts generation/epoch < 0 (simple group)', () => {
      expect(checkCommit(null, id(-1))).toBeNull();
      expect(checkCommit(null, id(-5, 'x', 'i', 3))).toBeNull();
    });
    it('refuses a generation >= 0 by version: 69 from v9, 22 below', () => {
      expect(checkCommit(null, id(0, 'x', null, 9))).toBe(GuardError.GROUP_ID_NOT_FOUND);
      expect(checkCommit(null, id(3, 'x', null, 10))).toBe(GuardError.GROUP_ID_NOT_FOUND);
      expect(checkCommit(null, id(0, 'x', null, 8))).toBe(GuardError.ILLEGAL_GENERATION);
      expect(checkCommit(null, id(3, '', null, 0))).toBe(GuardError.ILLEGAL_GENERATION);
    });
  });

  describe('classic group', () => {
    it('accepts generation < 0 when the group has no members, with or without an identity', () => {
      const empty = classic({ members: [], state: 'Empty' });
      expect(checkCommit(empty, id(-1))).toBeNull();
      expect(checkCommit(empty, id(-1, 'a', 'ia'))).toBeNull();
      // A group record without protocol (created by a simple commit) is a classic group.
      expect(checkCommit(emptyGroupState(), id(-1))).toBeNull();
    });
    it('refuses a commit without identity when the group has members', () => {
      expect(checkCommit(classic({}), id(-1))).toBe(GuardError.UNKNOWN_MEMBER_ID);
      expect(checkCommit(classic({ state: 'PreparingRebalance' }), id(-1))).toBe(
        GuardError.UNKNOWN_MEMBER_ID,
      );
    });
    it('checks the instance id before the member id', () => {
      expect(checkCommit(classic({}), id(4, 'a', 'nope'))).toBe(GuardError.UNKNOWN_MEMBER_ID);
      expect(checkCommit(classic({}), id(4, 'b', 'ia'))).toBe(GuardError.FENCED_INSTANCE_ID);
      // Fenced even with a wrong generation: the instance check comes first.
      expect(checkCommit(classic({}), id(1, 'zz', 'ia'))).toBe(GuardError.FENCED_INSTANCE_ID);
    });
    it('refuses an unknown member, then a wrong generation', () => {
      expect(checkCommit(classic({}), id(4, 'zz'))).toBe(GuardError.UNKNOWN_MEMBER_ID);
      expect(checkCommit(classic({}), id(3, 'zz'))).toBe(GuardError.UNKNOWN_MEMBER_ID);
      expect(checkCommit(classic({}), id(3, 'b'))).toBe(GuardError.ILLEGAL_GENERATION);
      expect(checkCommit(classic({}), id(5, 'a', 'ia'))).toBe(GuardError.ILLEGAL_GENERATION);
      expect(checkCommit(classic({}), id(-1, 'b'))).toBe(GuardError.ILLEGAL_GENERATION);
      // An empty group and a member that claims a generation: unknown.
      expect(checkCommit(classic({ members: [], state: 'Empty' }), id(4, 'a'))).toBe(
        GuardError.UNKNOWN_MEMBER_ID,
      );
    });
    it('refuses during CompletingRebalance (after the member checks), accepts Stable and PreparingRebalance', () => {
      expect(checkCommit(classic({ state: 'CompletingRebalance' }), id(4, 'b'))).toBe(
        GuardError.REBALANCE_IN_PROGRESS,
      );
      expect(checkCommit(classic({ state: 'CompletingRebalance' }), id(3, 'b'))).toBe(
        GuardError.ILLEGAL_GENERATION,
      );
      expect(checkCommit(classic({ state: 'Stable' }), id(4, 'b'))).toBeNull();
      expect(checkCommit(classic({ state: 'PreparingRebalance' }), id(4, 'a', 'ia'))).toBeNull();
    });
    it('does not care about the request version', () => {
      expect(checkCommit(classic({}), id(4, 'b', null, 1))).toBeNull();
    });
  });

  describe('consumer (KIP-848) group', () => {
    it('accepts epoch < 0 only without members', () => {
      expect(checkCommit(consumer({ members: [], state: 'Empty' }), id(-1))).toBeNull();
      expect(checkCommit(consumer(), id(-1))).toBe(GuardError.UNKNOWN_MEMBER_ID);
    });
    it('refuses unknown members, including ""', () => {
      expect(checkCommit(consumer(), id(7, 'x'))).toBe(GuardError.UNKNOWN_MEMBER_ID);
      expect(checkCommit(consumer(), id(7, ''))).toBe(GuardError.UNKNOWN_MEMBER_ID);
    });
    it('refuses requests below v9, before the epoch check', () => {
      expect(checkCommit(consumer(), id(7, 'm', null, 8))).toBe(GuardError.UNSUPPORTED_VERSION);
      expect(checkCommit(consumer(), id(6, 'm', null, 8))).toBe(GuardError.UNSUPPORTED_VERSION);
    });
    it('refuses a different epoch, older or newer; ignores the instance id and state', () => {
      expect(checkCommit(consumer(), id(6, 'm'))).toBe(GuardError.STALE_MEMBER_EPOCH);
      expect(checkCommit(consumer(), id(8, 'm'))).toBe(GuardError.STALE_MEMBER_EPOCH);
      expect(checkCommit(consumer(), id(7, 'm', 'anything'))).toBeNull();
      expect(checkCommit(consumer({ state: 'CompletingRebalance' }), id(7, 'm'))).toBeNull();
    });
  });
});

describe('decideCommit', () => {
  const w = (partition: number, expectedOffset?: bigint) => ({
    topic: 't',
    partition,
    offset: 10n,
    leaderEpoch: -1,
    metadata: '',
    commitTimestamp: 0n,
    expireTimestamp: -1n,
    ...(expectedOffset === undefined ? {} : { expectedOffset }),
  });
  it('fences before comparing offsets', () => {
    const r = decideCommit(
      null,
      { group: 'g', identity: id(3), writes: [w(0, 99n)], requestId: 'r' },
      () => -1n,
    );
    expect(r.outcome).toEqual({ status: 'fenced', error: GuardError.GROUP_ID_NOT_FOUND });
  });
  it('lists every mismatch, and creates the group record on an accepted first commit', () => {
    const stored = new Map([[1, 5n]]);
    const cur = (tp: { partition: number }) => stored.get(tp.partition) ?? -1n;
    expect(
      decideCommit(null, { group: 'g', writes: [w(0, -1n), w(1, 4n), w(2, 0n), w(3)], requestId: 'r' }, cur)
        .outcome,
    ).toEqual({
      status: 'cas-mismatch',
      mismatches: [
        { topic: 't', partition: 1, expected: 4n, actual: 5n },
        { topic: 't', partition: 2, expected: 0n, actual: -1n },
      ],
    });
    const ok = decideCommit(null, { group: 'g', writes: [w(0, -1n), w(1, 5n), w(3)], requestId: 'r' }, cur);
    expect(ok).toEqual({ outcome: { status: 'ok' }, newState: emptyGroupState() });
    expect(
      decideCommit(classic({}), { group: 'g', writes: [w(0)], requestId: 'r' }, cur).newState,
    ).toBeNull();
  });
});

describe('applyGroupUpdate', () => {
  const leaderJoin = (gen: number, members: string[]): GroupUpdate => ({
    kind: 'joined',
    generationId: gen,
    memberId: members[0]!,
    groupInstanceId: null,
    members: members.map((m) => ({ memberId: m, groupInstanceId: null })),
  });

  it('starts from an empty record', () => {
    expect(applyGroupUpdate(null, { kind: 'transactional' })).toEqual({
      ...emptyGroupState(),
      transactional: true,
    });
  });
  it("a newer generation's leader join replaces the members and means CompletingRebalance", () => {
    const s1 = applyGroupUpdate(null, leaderJoin(1, ['a', 'b']));
    expect(s1).toMatchObject({ protocol: 'classic', generationId: 1, state: 'CompletingRebalance' });
    const s2 = applyGroupUpdate({ ...s1, state: 'Stable' }, leaderJoin(2, ['c']));
    expect(s2).toMatchObject({
      generationId: 2,
      state: 'CompletingRebalance',
      members: [{ memberId: 'c', groupInstanceId: null }],
    });
  });
  it("a follower's join adds that member", () => {
    const s = applyGroupUpdate(applyGroupUpdate(null, leaderJoin(1, ['a'])), {
      kind: 'joined',
      generationId: 1,
      memberId: 'f',
      groupInstanceId: 'if',
    });
    expect(s.members).toEqual([
      { memberId: 'a', groupInstanceId: null },
      { memberId: 'f', groupInstanceId: 'if' },
    ]);
  });
  it('ignores updates of an older generation', () => {
    const s = applyGroupUpdate(applyGroupUpdate(null, leaderJoin(3, ['a'])), {
      kind: 'synced',
      generationId: 3,
      memberId: 'a',
    });
    expect(applyGroupUpdate(s, leaderJoin(2, ['z']))).toEqual(s);
    expect(applyGroupUpdate(s, { kind: 'synced', generationId: 2, memberId: 'z' })).toEqual(s);
    expect(applyGroupUpdate(s, { kind: 'rebalancing', generationId: 1 })).toEqual(s);
  });
  it('synced → Stable, rebalancing → PreparingRebalance, and a generation never moves back', () => {
    let s = applyGroupUpdate(null, leaderJoin(1, ['a']));
    s = applyGroupUpdate(s, { kind: 'synced', generationId: 1, memberId: 'a' });
    expect(s.state).toBe('Stable');
    s = applyGroupUpdate(s, { kind: 'rebalancing', generationId: 1 });
    expect(s.state).toBe('PreparingRebalance');
    // A late SyncGroup response of the same generation does not undo the rebalance.
    expect(applyGroupUpdate(s, { kind: 'synced', generationId: 1, memberId: 'a' }).state).toBe(
      'PreparingRebalance',
    );
    expect(applyGroupUpdate(s, leaderJoin(1, ['a'])).state).toBe('PreparingRebalance');
  });
  it('left removes members and empties the group when none remain', () => {
    let s = applyGroupUpdate(null, leaderJoin(1, ['a', 'b']));
    s = applyGroupUpdate(s, { kind: 'left', memberIds: ['a'] });
    expect(s).toMatchObject({ state: 'CompletingRebalance', members: [{ memberId: 'b' }] });
    s = applyGroupUpdate(s, { kind: 'left', memberIds: ['b', 'nobody'] });
    expect(s).toMatchObject({ state: 'Empty', members: [], generationId: 1 });
  });
  it('member-epoch adds, raises and removes KIP-848 members and sets protocol consumer', () => {
    let s = applyGroupUpdate(null, { kind: 'member-epoch', memberId: 'm', memberEpoch: 2 });
    expect(s).toMatchObject({
      protocol: 'consumer',
      state: 'Stable',
      members: [{ memberId: 'm', memberEpoch: 2 }],
    });
    s = applyGroupUpdate(s, { kind: 'member-epoch', memberId: 'm', memberEpoch: 5 });
    s = applyGroupUpdate(s, { kind: 'member-epoch', memberId: 'm', memberEpoch: 4 });
    expect(s.members).toEqual([{ memberId: 'm', groupInstanceId: null, memberEpoch: 5 }]);
    s = applyGroupUpdate(s, { kind: 'member-epoch', memberId: 'm', memberEpoch: -1 });
    expect(s).toMatchObject({ protocol: 'consumer', state: 'Empty', members: [] });
  });
  it('empty clears the members; transactional sets the flag and keeps the rest', () => {
    const s = applyGroupUpdate(applyGroupUpdate(null, leaderJoin(1, ['a'])), { kind: 'transactional' });
    expect(s).toMatchObject({ transactional: true, generationId: 1, members: [{ memberId: 'a' }] });
    expect(applyGroupUpdate(s, { kind: 'empty' })).toMatchObject({
      transactional: true,
      generationId: 1,
      state: 'Empty',
      members: [],
    });
  });
  it('never mutates its input', () => {
    const s = applyGroupUpdate(null, leaderJoin(1, ['a']));
    const copy = structuredClone(s);
    applyGroupUpdate(s, { kind: 'joined', generationId: 1, memberId: 'x', groupInstanceId: 'i' });
    applyGroupUpdate(s, { kind: 'member-epoch', memberId: 'a', memberEpoch: 1 });
    applyGroupUpdate(s, { kind: 'left', memberIds: ['a'] });
    expect(s).toEqual(copy);
  });

  it('generation-tagged updates commute: any order gives the same state', () => {
    const member = fc.constantFrom('a', 'b', 'c');
    // Within one generation, the instance id of a member is fixed (the broker assigns it).
    const instanceOf = (m: string): string | null => (m === 'a' ? 'i1' : null);
    const update: fc.Arbitrary<GroupUpdate> = fc.oneof(
      fc
        .record({
          generationId: fc.integer({ min: 0, max: 3 }),
          memberId: member,
          withList: fc.boolean(),
          list: fc.uniqueArray(member, { maxLength: 3 }),
        })
        .map(({ generationId, memberId, withList, list }): GroupUpdate => ({
          kind: 'joined',
          generationId,
          memberId,
          groupInstanceId: instanceOf(memberId),
          ...(withList
            ? { members: list.map((m) => ({ memberId: m, groupInstanceId: instanceOf(m) })) }
            : {}),
        })),
      fc.record({
        kind: fc.constant('synced' as const),
        generationId: fc.integer({ min: 0, max: 3 }),
        memberId: member,
      }),
      fc.record({ kind: fc.constant('rebalancing' as const), generationId: fc.integer({ min: 0, max: 3 }) }),
      fc.constant({ kind: 'transactional' as const }),
    );
    fc.assert(
      fc.property(
        fc
          .array(update, { maxLength: 8 })
          .chain((us) =>
            fc.tuple(
              fc.constant(us),
              fc.shuffledSubarray(us, { minLength: us.length, maxLength: us.length }),
            ),
          ),
        ([a, b]) => {
          const fold = (us: GroupUpdate[]) =>
            normalizeState(us.reduce<GroupState | null>((s, u) => applyGroupUpdate(s, u), null));
          expect(fold(b)).toEqual(fold(a));
        },
      ),
      { numRuns: 500 },
    );
  });

  describe('static membership (group.instance.id)', () => {
    const join = (gen: number, memberId: string, instance: string | null, extra: Partial<GroupUpdate> = {}) =>
      ({ kind: 'joined', generationId: gen, memberId, groupInstanceId: instance, ...extra }) as GroupUpdate;
    const leaderList: GroupUpdate = {
      kind: 'joined',
      generationId: 1,
      memberId: 'a1',
      groupInstanceId: 'ia',
      members: [
        { memberId: 'a1', groupInstanceId: 'ia' },
        { memberId: 'b1', groupInstanceId: 'ib' },
      ],
    };
    const fold = (us: GroupUpdate[]) => us.reduce<GroupState | null>((s, u) => applyGroupUpdate(s, u), null)!;

    it('a replacement within the generation takes the instance over: the new member commits, the old one is fenced', () => {
      const s = fold([
        leaderList,
        { kind: 'synced', generationId: 1, memberId: 'a1', groupInstanceId: 'ia' },
        join(1, 'a2', 'ia', { takeover: true }),
        { kind: 'synced', generationId: 1, memberId: 'a2', groupInstanceId: 'ia' },
      ]);
      expect(s.members.map((m) => m.memberId).sort()).toEqual(['a2', 'b1']);
      expect(checkCommit(s, id(1, 'a2', 'ia'))).toBeNull();
      expect(checkCommit(s, id(1, 'a1', 'ia'))).toBe(GuardError.FENCED_INSTANCE_ID);
      // Without its instance id (v6 and older) the replaced member is unknown, as on the broker.
      expect(checkCommit(s, id(1, 'a1', null, 6))).toBe(GuardError.UNKNOWN_MEMBER_ID);
    });

    it('in any order of the observations (two proxy instances) the replaced member is refused; the live one is accepted or left to the broker', () => {
      const updates: GroupUpdate[] = [
        leaderList,
        { kind: 'synced', generationId: 1, memberId: 'a1', groupInstanceId: 'ia' },
        join(1, 'a2', 'ia', { takeover: true }),
        { kind: 'synced', generationId: 1, memberId: 'a2', groupInstanceId: 'ia' },
      ];
      fc.assert(
        fc.property(fc.shuffledSubarray(updates, { minLength: 4, maxLength: 4 }), (order) => {
          const s = fold(order);
          expect(checkCommit(s, id(1, 'a1', 'ia'))).not.toBeNull();
          // FENCED_INSTANCE_ID from the record is checked with the broker before it is answered.
          expect([null, GuardError.FENCED_INSTANCE_ID]).toContain(checkCommit(s, id(1, 'a2', 'ia')));
        }),
      );
      // Recorded in the order the broker made them, the replacement alone holds the instance.
      expect(checkCommit(fold(updates), id(1, 'a2', 'ia'))).toBeNull();
    });

    it('replacements in a row: each outranks the one before', () => {
      const s = fold([
        leaderList,
        { kind: 'synced', generationId: 1, memberId: 'a1', groupInstanceId: 'ia' },
        join(1, 'a2', 'ia', { takeover: true }),
        join(1, 'a3', 'ia', { takeover: true }),
      ]);
      expect(s.members.find((m) => m.groupInstanceId === 'ia')).toMatchObject({ memberId: 'a3', rank: 2 });
      expect(checkCommit(s, id(1, 'a3', 'ia'))).toBeNull();
      expect(checkCommit(s, id(1, 'a2', 'ia'))).toBe(GuardError.FENCED_INSTANCE_ID);
      // A static member's first join also names no member id: with no holder it is no replacement.
      expect(fold([join(1, 'x1', 'ix', { takeover: true })]).members).toEqual([
        { memberId: 'x1', groupInstanceId: 'ix' },
      ]);
    });

    it('two claimants of one instance the record cannot rank: it refuses both (the broker decides)', () => {
      // The replacement's join was not recorded (the store was down), its sync was.
      const s = fold([
        leaderList,
        { kind: 'synced', generationId: 1, memberId: 'a2', groupInstanceId: 'ia' },
      ]);
      expect(checkCommit(s, id(1, 'a1', 'ia'))).toBe(GuardError.FENCED_INSTANCE_ID);
      expect(checkCommit(s, id(1, 'a2', 'ia'))).toBe(GuardError.FENCED_INSTANCE_ID);
      // The broker's word settles it.
      const settled = applyGroupUpdate(s, {
        kind: 'verified',
        generationId: 1,
        memberId: 'a2',
        groupInstanceId: 'ia',
        state: 'Stable',
      });
      expect(checkCommit(settled, id(1, 'a2', 'ia'))).toBeNull();
      expect(checkCommit(settled, id(1, 'a1', 'ia'))).toBe(GuardError.FENCED_INSTANCE_ID);
      // ... and a late observation of the replaced member does not bring it back.
      expect(checkCommit(applyGroupUpdate(settled, leaderList), id(1, 'a1', 'ia'))).toBe(
        GuardError.FENCED_INSTANCE_ID,
      );
    });

    it('a static rejoin after a restart with a new generation starts from the leader list', () => {
      const s = fold([
        leaderList,
        join(2, 'a2', 'ia', { takeover: true }),
        {
          ...leaderList,
          generationId: 2,
          members: [
            { memberId: 'a2', groupInstanceId: 'ia' },
            { memberId: 'b1', groupInstanceId: 'ib' },
          ],
        },
      ]);
      expect(s.generationId).toBe(2);
      expect(checkCommit(s, id(1, 'a1', 'ia'))).toBe(GuardError.FENCED_INSTANCE_ID);
      expect(checkCommit(s, id(2, 'b1', 'ib'))).toBe(GuardError.REBALANCE_IN_PROGRESS);
    });

    it('a member removed by its instance id alone (admin LeaveGroup) is gone', () => {
      const s = fold([leaderList, { kind: 'left', memberIds: [], groupInstanceIds: ['ib'] }]);
      expect(s.members.map((m) => m.memberId)).toEqual(['a1']);
    });

    it('the broker saying a member is unknown removes it', () => {
      const s = fold([leaderList, { kind: 'gone', memberId: 'b1' }]);
      expect(checkCommit(s, id(1, 'b1', 'ib'))).toBe(GuardError.UNKNOWN_MEMBER_ID);
      expect(
        fold([leaderList, { kind: 'gone', memberId: 'a1' }, { kind: 'gone', memberId: 'b1' }]).state,
      ).toBe('Empty');
    });
  });

  describe('KIP-848 static members and leaves', () => {
    const epoch = (memberId: string, memberEpoch: number, extra: Partial<GroupUpdate> = {}) =>
      ({ kind: 'member-epoch', memberId, memberEpoch, ...extra }) as GroupUpdate;
    const fold = (us: GroupUpdate[]) => us.reduce<GroupState | null>((s, u) => applyGroupUpdate(s, u), null)!;

    it('a static member that leaves with -2 stays a member with epoch -2 (its commits are stale, not unknown)', () => {
      const s = fold([
        epoch('m1', 5, { instanceId: 'i', exact: true }),
        epoch('m1', -2, { instanceId: 'i' }),
      ]);
      expect(s.members).toEqual([{ memberId: 'm1', groupInstanceId: 'i', memberEpoch: -2 }]);
      expect(checkCommit(s, id(5, 'm1'))).toBe(GuardError.STALE_MEMBER_EPOCH);
      expect(checkCommit(s, id(-1))).toBe(GuardError.UNKNOWN_MEMBER_ID);
    });

    it('its replacement (a join with the instance id) removes it; the epoch of a join is set, not raised', () => {
      const s = fold([
        epoch('m1', 5, { instanceId: 'i', exact: true }),
        epoch('m1', -2, { instanceId: 'i' }),
        epoch('m2', 5, { instanceId: 'i', exact: true }),
      ]);
      expect(s.members).toEqual([{ memberId: 'm2', groupInstanceId: 'i', memberEpoch: 5 }]);
      expect(checkCommit(s, id(5, 'm1'))).toBe(GuardError.UNKNOWN_MEMBER_ID);
      // A member of a re-created group rejoins with its old id and a lower epoch.
      expect(fold([epoch('m', 9), epoch('m', 1, { exact: true })]).members[0]?.memberEpoch).toBe(1);
      expect(fold([epoch('m', 9), epoch('m', 1)]).members[0]?.memberEpoch).toBe(9);
    });

    it('a leave with -1 removes the member', () => {
      expect(fold([epoch('m1', 3), epoch('m1', -1)]).members).toEqual([]);
    });
  });
});
