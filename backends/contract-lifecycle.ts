/**
 * The store contract on what is not a commit: deleting offsets and groups, listing groups, leases
 * and counts across instances, and a closed store failing with StoreUnavailableError.
 */
import { expect, it } from 'vitest';
import type { ContractStores } from './contract-support.js';
import { rid, uniqueGroup, write } from './contract-support.js';
import { StoreUnavailableError } from './errors.js';

export function runLifecycleContract(ctx: ContractStores): void {
  it('deletes offsets and groups, and lists groups', async () => {
    const g1 = uniqueGroup('del');
    const g2 = uniqueGroup('del');
    const g3 = uniqueGroup('del');
    await ctx.store.commit({
      group: g1,
      writes: [write('t', 0, 1n), write('t', 1, 2n), write('u', 0, 3n)],
      requestId: rid(),
    });
    await ctx.store.commit({ group: g2, writes: [write('t', 0, 1n)], requestId: rid() });
    await ctx.store.updateGroup(g3, { kind: 'member-epoch', memberId: 'm', memberEpoch: 1 });
    const listed = await ctx.store.listGroups();
    expect(listed).toEqual(expect.arrayContaining([g1, g2, g3]));
    expect(new Set(listed).size).toBe(listed.length);
    await ctx.store.deleteOffsets(g1, [
      { topic: 't', partition: 1 },
      { topic: 'u', partition: 0 },
      { topic: 'zz', partition: 0 },
    ]);
    expect(await ctx.store.fetch(g1, null)).toEqual([write('t', 0, 1n)]);
    await ctx.store.deleteGroup(g1);
    await ctx.store.deleteGroup(g3);
    expect(await ctx.store.fetch(g1, null)).toEqual([]);
    expect(await ctx.store.getGroup(g1)).toBeNull();
    expect(await ctx.store.getGroup(g3)).toBeNull();
    const after = await ctx.other.listGroups();
    expect(after).toContain(g2);
    expect(after).not.toContain(g1);
    expect(after).not.toContain(g3);
    await ctx.store.deleteGroup(uniqueGroup('never-existed'));
  });

  it('a lease has one holder at a time across instances; released or lapsed, another takes it', async () => {
    const name = `lease-${uniqueGroup('l')}`;
    expect(await ctx.store.lease(name, 'a', 10_000)).toBe(true);
    expect(await ctx.other.lease(name, 'b', 10_000)).toBe(false);
    expect(await ctx.store.lease(name, 'a', 10_000)).toBe(true); // renewed
    await ctx.other.releaseLease(name, 'b'); // not b's to release
    expect(await ctx.other.lease(name, 'b', 10_000)).toBe(false);
    await ctx.store.releaseLease(name, 'a');
    // b's lease must outlast the next call even on a starved machine (300 ms did not, at load 28),
    // and then lapse: a timing bound, so generous.
    expect(await ctx.other.lease(name, 'b', 3_000)).toBe(true);
    expect(await ctx.store.lease(name, 'a', 10_000)).toBe(false);
    await new Promise((r) => setTimeout(r, 3_500)); // b stopped renewing: its lease lapses
    expect(await ctx.store.lease(name, 'a', 10_000)).toBe(true);
    await ctx.store.releaseLease(name, 'a');
  });

  it('counts what every instance adds, from 0, and reads them all back', async () => {
    const name = `count-${uniqueGroup('c')}`;
    const other1 = `${name}:other`;
    expect((await ctx.store.readCounts!()).get(name)).toBeUndefined();
    await ctx.store.addToCount!(name);
    await Promise.all([
      ctx.other.addToCount!(name),
      ctx.store.addToCount!(name),
      ctx.other.addToCount!(other1),
    ]);
    // Read where it was last written (the embedded store's second instance in this process may
    // still hold the read snapshot of this event-loop turn).
    const counts = await ctx.other.readCounts!();
    expect(counts.get(name)).toBe(3);
    expect(counts.get(other1)).toBe(1);
  });

  it('pings, and fails with StoreUnavailableError once closed', async () => {
    const s = await ctx.makeStore();
    await s.ping();
    await s.close();
    await expect(s.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
    await expect(s.fetch('g', null)).rejects.toBeInstanceOf(StoreUnavailableError);
  });
}
