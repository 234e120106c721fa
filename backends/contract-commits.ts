/**
 * The store contract on commits: offsets round-trip exactly, a commit applies whole or not at all,
 * compare-and-set compares exact 64-bit offsets, a repeated request id (time-ordered as the proxy
 * issues them, or of any other form: the contract needs them unique only) is applied once, and two
 * instances racing on one fence let exactly one through.
 */
import { randomUUID } from 'node:crypto';
import { expect, it } from 'vitest';
import type { ContractStores } from './contract-support.js';
import {
  applyUpdates,
  ident,
  MAX_INT64,
  otherRid,
  outcomeOf,
  rid,
  sortOffsets,
  uniqueGroup,
  write,
} from './contract-support.js';
import { GuardError } from './store.js';

export function runCommitContract(ctx: ContractStores): void {
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
    expect(await ctx.store.commit({ group: g, writes, requestId: rid() })).toEqual({ status: 'ok' });
    const all = sortOffsets(await ctx.store.fetch(g, null));
    expect(all).toEqual(sortOffsets(writes.map(({ expectedOffset: _e, ...w }) => w)));
    // The other instance sees the same.
    expect(sortOffsets(await ctx.other.fetch(g, null))).toEqual(all);
    const listed = await ctx.store.fetch(g, [
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
    expect(await ctx.store.fetch(uniqueGroup('missing'), null)).toEqual([]);
    expect(await ctx.store.fetch(uniqueGroup('missing'), [{ topic: 'orders', partition: 0 }])).toEqual([]);
  });

  it('applies one commit of 6,000 partitions whole (no argument or stack limit of the store)', async () => {
    const g = uniqueGroup('wide');
    const writes = Array.from({ length: 6000 }, (_, p) =>
      write('wide', p, BigInt(p) * 3n, { metadata: `m${p}` }),
    );
    expect(await ctx.store.commit({ group: g, writes, requestId: rid() })).toEqual({ status: 'ok' });
    const stored = sortOffsets(await ctx.store.fetch(g, null));
    expect(stored).toHaveLength(6000);
    expect(stored).toEqual(sortOffsets(writes.map(({ expectedOffset: _e, ...w }) => w)));
  });

  it('overwrites a committed offset (offsets may go backwards, as on the broker)', async () => {
    const g = uniqueGroup('ow');
    await ctx.store.commit({ group: g, writes: [write('t', 0, 100n, { metadata: 'a' })], requestId: rid() });
    await ctx.store.commit({
      group: g,
      writes: [write('t', 0, 7n, { metadata: 'b', leaderEpoch: 3 })],
      requestId: rid(),
    });
    expect(await ctx.store.fetch(g, null)).toEqual([
      { ...write('t', 0, 7n, { metadata: 'b', leaderEpoch: 3 }) },
    ]);
  });

  it('a request naming one partition twice: the last write wins', async () => {
    const g = uniqueGroup('dup');
    expect(
      await ctx.store.commit({
        group: g,
        writes: [write('t', 0, 1n), write('t', 1, 5n), write('t', 0, 2n, { metadata: 'second' })],
        requestId: rid(),
      }),
    ).toEqual({
      status: 'ok',
    });
    expect(sortOffsets(await ctx.store.fetch(g, null))).toEqual([
      write('t', 0, 2n, { metadata: 'second' }),
      write('t', 1, 5n),
    ]);
    expect(
      await ctx.store.commit({
        group: g,
        writes: [write('t', 0, 3n, { expectedOffset: 2n }), write('t', 0, 4n, { expectedOffset: 2n })],
        requestId: rid(),
      }),
    ).toEqual({ status: 'ok' });
    expect((await ctx.store.fetch(g, [{ topic: 't', partition: 0 }]))[0]?.offset).toBe(4n);
  });

  it('writes all partitions or none: one CAS mismatch writes nothing', async () => {
    const g = uniqueGroup('aon');
    expect(await ctx.store.commit({ group: g, writes: [write('t', 0, 5n)], requestId: rid() })).toEqual({
      status: 'ok',
    });
    const outcome = await ctx.store.commit({
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
    expect(await ctx.store.fetch(g, null)).toEqual([write('t', 0, 5n)]);
    expect(
      await ctx.store.commit({
        group: g,
        writes: [write('t', 0, 6n, { expectedOffset: 5n }), write('t', 1, 9n, { expectedOffset: -1n })],
        requestId: rid(),
      }),
    ).toEqual({ status: 'ok' });
    expect(sortOffsets(await ctx.store.fetch(g, null)).map((o) => o.offset)).toEqual([6n, 9n]);
  });

  it('CAS with expected -1 succeeds only on an empty partition; big offsets compare exactly', async () => {
    const g = uniqueGroup('cas');
    expect(
      await ctx.store.commit({
        group: g,
        writes: [write('t', 0, MAX_INT64 - 1n, { expectedOffset: -1n })],
        requestId: rid(),
      }),
    ).toEqual({ status: 'ok' });
    expect(
      await ctx.store.commit({
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
      await ctx.store.commit({
        group: g,
        writes: [write('t', 0, 1n, { expectedOffset: MAX_INT64 })],
        requestId: rid(),
      }),
    ).toMatchObject({ status: 'cas-mismatch' });
    expect(
      await ctx.store.commit({
        group: g,
        writes: [write('t', 0, MAX_INT64, { expectedOffset: MAX_INT64 - 1n })],
        requestId: rid(),
      }),
    ).toEqual({ status: 'ok' });
    expect((await ctx.store.fetch(g, null))[0]?.offset).toBe(MAX_INT64);
  });

  it('answers a repeated requestId with the first outcome and applies it once', async () => {
    const g = uniqueGroup('idem');
    const id = rid();
    expect(
      await ctx.store.commit({
        group: g,
        writes: [write('t', 0, 5n, { expectedOffset: -1n })],
        requestId: id,
      }),
    ).toEqual({ status: 'ok' });
    // A resend (same id, even through another instance) is not applied again: CAS would fail, and offset 9 must not land.
    expect(
      await ctx.other.commit({
        group: g,
        writes: [write('t', 0, 5n, { expectedOffset: -1n })],
        requestId: id,
      }),
    ).toEqual({ status: 'ok' });
    await ctx.store.commit({ group: g, writes: [write('t', 0, 6n)], requestId: rid() });
    expect(await ctx.store.commit({ group: g, writes: [write('t', 0, 9n)], requestId: id })).toEqual({
      status: 'ok',
    });
    expect((await ctx.store.fetch(g, null))[0]?.offset).toBe(6n);
    const fencedId = rid();
    await applyUpdates(ctx.store, g, [{ kind: 'member-epoch', memberId: 'm', memberEpoch: 3 }]);
    const first = await ctx.store.commit({
      group: g,
      identity: ident(2, 'm'),
      writes: [write('t', 0, 1n)],
      requestId: fencedId,
    });
    expect(first).toEqual(outcomeOf(GuardError.STALE_MEMBER_EPOCH));
    expect(
      await ctx.store.commit({
        group: g,
        identity: ident(2, 'm'),
        writes: [write('t', 0, 1n)],
        requestId: fencedId,
      }),
    ).toEqual(first);
  });

  it('answers a repeated request id of any other form too (older releases sent v4 UUIDs)', async () => {
    const g = uniqueGroup('idem-other');
    for (const [i, id] of [otherRid(), randomUUID()].entries()) {
      const first = write('t', i, 5n, { expectedOffset: -1n });
      expect(await ctx.store.commit({ group: g, writes: [first], requestId: id })).toEqual({ status: 'ok' });
      await ctx.store.commit({ group: g, writes: [write('t', i, 6n)], requestId: rid() });
      expect(await ctx.other.commit({ group: g, writes: [first], requestId: id })).toEqual({ status: 'ok' });
    }
    expect(sortOffsets(await ctx.store.fetch(g, null)).map((o) => o.offset)).toEqual([6n, 6n]);
  });

  it('two instances racing on one fence: exactly one passes each round', async () => {
    const g = uniqueGroup('race');
    let current = -1n;
    for (let round = 0; round < 15; round++) {
      const [a, b] = await Promise.all([
        ctx.store.commit({
          group: g,
          writes: [write('t', 0, BigInt(round * 2 + 1), { expectedOffset: current }), write('t', 1, 1n)],
          requestId: rid(),
        }),
        ctx.other.commit({
          group: g,
          writes: [write('t', 0, BigInt(round * 2 + 2), { expectedOffset: current }), write('t', 1, 2n)],
          requestId: rid(),
        }),
      ]);
      expect([a.status, b.status].sort()).toEqual(['cas-mismatch', 'ok']);
      const stored = sortOffsets(await ctx.store.fetch(g, null));
      const winner = a.status === 'ok' ? 1n : 2n;
      expect(stored.map((o) => o.offset)).toEqual([BigInt(round * 2) + winner, winner]);
      current = stored[0]!.offset;
    }
    // A generation fence: the update and a commit of the old generation, from different instances.
    await ctx.store.updateGroup(g, {
      kind: 'joined',
      generationId: 1,
      memberId: 'a',
      groupInstanceId: null,
      members: [{ memberId: 'a', groupInstanceId: null }],
    });
    await ctx.store.updateGroup(g, { kind: 'synced', generationId: 1, memberId: 'a' });
    await ctx.other.updateGroup(g, {
      kind: 'joined',
      generationId: 2,
      memberId: 'b',
      groupInstanceId: null,
      members: [{ memberId: 'b', groupInstanceId: null }],
    });
    expect(
      await ctx.store.commit({
        group: g,
        identity: ident(1, 'a'),
        writes: [write('t', 0, 0n)],
        requestId: rid(),
      }),
    ).toEqual(outcomeOf(GuardError.UNKNOWN_MEMBER_ID));
  });
}
