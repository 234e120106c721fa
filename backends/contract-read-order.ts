/**
 * The store contract on read order (CommitRequest.order, commit-order.ts): a commit the same
 * process read before the one whose offset is stored writes nothing for that partition and is
 * answered ok, counted in `superseded`; orders of different processes are not compared; the
 * fence and compare-and-set answer as without an order.
 */
import { expect, it } from 'vitest';
import { newInstanceId } from './commit-order.js';
import type { ContractStores } from './contract-support.js';
import { applyUpdates, ident, outcomeOf, rid, sortOffsets, uniqueGroup, write } from './contract-support.js';
import { GuardError } from './store.js';

export function runReadOrderContract(ctx: ContractStores): void {
  const a = newInstanceId();
  const b = newInstanceId();
  const at = (instance: string, seq: number) => ({ instance, seq });
  const offsetsOf = async (g: string) => sortOffsets(await ctx.store.fetch(g, null)).map((o) => o.offset);

  it('a commit read earlier by the same instance is superseded where a later one wrote', async () => {
    const g = uniqueGroup('order');
    const newer = [write('t', 0, 120n, { metadata: 'newer' }), write('t', 1, 121n)];
    expect(await ctx.store.commit({ group: g, writes: newer, requestId: rid(), order: at(a, 2) })).toEqual({
      status: 'ok',
    });
    // Through the other store instance: the order is the reading process's, not the store client's.
    const older = [write('t', 0, 5n, { metadata: 'older' }), write('t', 2, 7n)];
    const id = rid();
    expect(await ctx.other.commit({ group: g, writes: older, requestId: id, order: at(a, 1) })).toEqual({
      status: 'ok',
      superseded: 1,
    });
    expect(sortOffsets(await ctx.store.fetch(g, null))).toEqual([newer[0], newer[1], older[1]]);
    // A resend of it is answered as it was first.
    expect(await ctx.store.commit({ group: g, writes: older, requestId: id, order: at(a, 1) })).toEqual({
      status: 'ok',
      superseded: 1,
    });
    // Equal orders (a request naming a partition twice, or its retry after the fence asked the
    // broker) are not superseded; a later one writes.
    expect(
      await ctx.store.commit({ group: g, writes: [write('t', 0, 130n)], requestId: rid(), order: at(a, 2) }),
    ).toEqual({ status: 'ok' });
    expect(
      await ctx.store.commit({ group: g, writes: [write('t', 0, 140n)], requestId: rid(), order: at(a, 9) }),
    ).toEqual({ status: 'ok' });
    expect(await offsetsOf(g)).toEqual([140n, 121n, 7n]);
  });

  it("another instance's commit is not superseded by its sequence number alone", async () => {
    const g = uniqueGroup('order-other');
    await ctx.store.commit({ group: g, writes: [write('t', 0, 50n)], requestId: rid(), order: at(a, 1000) });
    expect(
      await ctx.other.commit({ group: g, writes: [write('t', 0, 10n)], requestId: rid(), order: at(b, 1) }),
    ).toEqual({ status: 'ok' });
    // The stored order is now b's: a's older commit is compared with nothing of its own.
    expect(
      await ctx.store.commit({ group: g, writes: [write('t', 0, 20n)], requestId: rid(), order: at(a, 999) }),
    ).toEqual({ status: 'ok' });
    expect(await offsetsOf(g)).toEqual([20n]);
    // A write without an order (the operator's) is never superseded, and clears the stored order.
    await ctx.store.commit({ group: g, writes: [write('t', 0, 30n)], requestId: rid(), order: at(a, 2000) });
    expect(await ctx.store.commit({ group: g, writes: [write('t', 0, 31n)], requestId: rid() })).toEqual({
      status: 'ok',
    });
    expect(
      await ctx.store.commit({ group: g, writes: [write('t', 0, 32n)], requestId: rid(), order: at(a, 3) }),
    ).toEqual({ status: 'ok' });
    // Deleted offsets take their order with them.
    await ctx.store.commit({ group: g, writes: [write('t', 0, 40n)], requestId: rid(), order: at(a, 3000) });
    await ctx.store.deleteOffsets(g, [{ topic: 't', partition: 0 }]);
    expect(
      await ctx.store.commit({ group: g, writes: [write('t', 0, 41n)], requestId: rid(), order: at(a, 4) }),
    ).toEqual({ status: 'ok' });
    expect(await offsetsOf(g)).toEqual([41n]);
  });

  it('the fence and compare-and-set keep their answers; a wide commit is superseded whole', async () => {
    const g = uniqueGroup('order-guard');
    await ctx.store.commit({
      group: g,
      writes: [write('t', 0, 10n, { expectedOffset: -1n })],
      requestId: rid(),
      order: at(a, 2),
    });
    expect(
      await ctx.store.commit({
        group: g,
        writes: [write('t', 0, 3n, { expectedOffset: -1n })],
        requestId: rid(),
        order: at(a, 1),
      }),
    ).toEqual({
      status: 'cas-mismatch',
      mismatches: [{ topic: 't', partition: 0, expected: -1n, actual: 10n }],
    });
    await applyUpdates(ctx.store, g, [{ kind: 'member-epoch', memberId: 'm', memberEpoch: 3 }]);
    expect(
      await ctx.store.commit({
        group: g,
        identity: ident(2, 'm'),
        writes: [write('t', 0, 4n)],
        requestId: rid(),
        order: at(a, 1),
      }),
    ).toEqual(outcomeOf(GuardError.STALE_MEMBER_EPOCH));
    expect(await offsetsOf(g)).toEqual([10n]);
    // 2,000 partitions: no argument or stack limit in the check (the Redis script reads them all).
    const wide = (offset: bigint) =>
      Array.from({ length: 2000 }, (_, p) => write('w', p, offset + BigInt(p)));
    const g2 = uniqueGroup('order-wide');
    await ctx.store.commit({ group: g2, writes: wide(1000n), requestId: rid(), order: at(a, 20) });
    expect(
      await ctx.store.commit({
        group: g2,
        writes: [...wide(0n), write('w', 2000, 1n)],
        requestId: rid(),
        order: at(a, 10),
      }),
    ).toEqual({ status: 'ok', superseded: 2000 });
    const stored = sortOffsets(await ctx.store.fetch(g2, null));
    expect(stored).toHaveLength(2001);
    expect(stored.every((o) => o.offset === (o.partition === 2000 ? 1n : 1000n + BigInt(o.partition)))).toBe(
      true,
    );
  });

  it('an uncontended commit is judged by the stored orders whether or not its own is recorded', async () => {
    const g = uniqueGroup('order-contended');
    const alone = (seq: number) => ({ instance: a, seq, contended: false });
    const commit = (offset: bigint, order: { instance: string; seq: number; contended?: boolean }) =>
      ctx.store.commit({
        group: g,
        writes: [write('t', 0, offset), write('t', 1, offset)],
        requestId: rid(),
        order,
      });
    expect(await commit(100n, alone(10))).toEqual({ status: 'ok' });
    // 12 was handled while 11 was still in progress: contended, its order is recorded.
    expect(await commit(120n, { ...at(a, 12), contended: true })).toEqual({ status: 'ok' });
    // 11 arrives late; it supersedes nothing of 12 even if it is not contended itself.
    expect(await commit(110n, alone(11))).toEqual({ status: 'ok', superseded: 2 });
    expect(await offsetsOf(g)).toEqual([120n, 120n]);
    // Commits after it write over the order 12 left behind, recorded or not.
    expect(await commit(130n, alone(13))).toEqual({ status: 'ok' });
    expect(
      await ctx.store.commit({ group: g, writes: [write('t', 1, 140n)], requestId: rid(), order: alone(14) }),
    ).toEqual({ status: 'ok' });
    expect(await offsetsOf(g)).toEqual([130n, 140n]);
  });
}
