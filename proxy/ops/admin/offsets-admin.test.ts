// Admin writes against a group with live members: refused as Kafka's tools are refused (the
// store's guard, with the broker asked before a refusal stands), unless forced.
import { describe, expect, it, vi } from 'vitest';
import { MemoryStore } from '../../../backends/memory-store.js';
import type { OffsetStore } from '../../../backends/store.js';
import type { OffsetLine } from './offsets-admin.js';
import {
  AdminError,
  deleteOffsets,
  getOffsets,
  GroupNotEmptyError,
  importToStore,
  setOffset,
} from './offsets-admin.js';

/** A classic group in generation 3 with one member, as the proxy records it from the broker. */
async function running(store: OffsetStore, group: string): Promise<void> {
  await store.updateGroup(group, { kind: 'joined', generationId: 3, memberId: 'm-1', groupInstanceId: null });
  await store.updateGroup(group, { kind: 'synced', generationId: 3, memberId: 'm-1' });
}

/** A store where group g has t-0 at 10 and a live member. */
async function runningAt10(): Promise<MemoryStore> {
  const store = new MemoryStore();
  await setOffset(store, set('g', 10n));
  await running(store, 'g');
  return store;
}

const set = (group: string, offset: bigint, expected?: bigint) => ({
  group,
  topic: 't',
  partition: 0,
  offset,
  ...(expected !== undefined ? { expected } : {}),
});

async function offsetOf(store: OffsetStore, group: string): Promise<string | undefined> {
  return (await getOffsets(store, group)).find((l) => l.topic === 't' && l.partition === 0)?.offset;
}

describe('setOffset', () => {
  it('writes to a group without members, and to one the store has never seen', async () => {
    const store = new MemoryStore();
    await setOffset(store, set('new', 5n));
    expect(await offsetOf(store, 'new')).toBe('5');
    await running(store, 'stopped');
    await store.updateGroup('stopped', { kind: 'left', memberIds: ['m-1'] });
    await setOffset(store, set('stopped', 6n));
    expect(await offsetOf(store, 'stopped')).toBe('6');
  });

  it('refuses a group with live members and changes nothing, when there is no broker to ask', async () => {
    const store = await runningAt10();
    const err = await setOffset(store, set('g', 0n)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GroupNotEmptyError);
    expect((err as AdminError).kind).toBe('conflict');
    expect((err as Error).message).toMatch(/group g has live members/);
    expect(await offsetOf(store, 'g')).toBe('10');
    expect((await store.getGroup('g'))?.members).toHaveLength(1);
  });

  it('asks the broker before refusing: refused while the broker sees members', async () => {
    const store = await runningAt10();
    const ask = vi.fn(async () => false);
    await expect(setOffset(store, set('g', 0n), { groupIsEmptyAtBroker: ask })).rejects.toBeInstanceOf(
      GroupNotEmptyError,
    );
    expect(ask).toHaveBeenCalledExactlyOnceWith('g');
    expect(await offsetOf(store, 'g')).toBe('10');
  });

  it('writes when the broker says the members are gone, and records the group as empty', async () => {
    const store = new MemoryStore();
    await running(store, 'g');
    await setOffset(store, set('g', 7n), { groupIsEmptyAtBroker: async () => true });
    expect(await offsetOf(store, 'g')).toBe('7');
    expect((await store.getGroup('g'))?.members).toEqual([]);
  });

  it('keeps the refusal when the broker cannot be asked', async () => {
    const store = new MemoryStore();
    await running(store, 'g');
    const down = async (): Promise<boolean> => {
      throw new Error('connection refused');
    };
    await expect(setOffset(store, set('g', 1n), { groupIsEmptyAtBroker: down })).rejects.toBeInstanceOf(
      GroupNotEmptyError,
    );
    expect(await offsetOf(store, 'g')).toBeUndefined();
  });

  it('asks the broker about a KIP-848 group too, and a running one stays refused', async () => {
    // BrokerLookups.groupIsEmpty confirms DescribeGroups' "not found" with ConsumerGroupDescribe.
    const store = new MemoryStore();
    await store.updateGroup('g', { kind: 'member-epoch', memberId: 'm-1', memberEpoch: 4 });
    const ask = vi.fn(async () => false);
    await expect(setOffset(store, set('g', 1n), { groupIsEmptyAtBroker: ask })).rejects.toBeInstanceOf(
      GroupNotEmptyError,
    );
    expect(ask).toHaveBeenCalledWith('g');
    expect((await store.getGroup('g'))?.members).toHaveLength(1);
  });

  it("refuses a group that commits transactionally (its offsets are the broker's) unless forced", async () => {
    const store = new MemoryStore();
    await setOffset(store, set('txn', 10n));
    await store.updateGroup('txn', { kind: 'transactional' });
    const err = await setOffset(store, set('txn', 0n)).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AdminError);
    expect((err as AdminError).kind).toBe('conflict');
    expect((err as Error).message).toMatch(/txn commits transactionally/);
    const lines: OffsetLine[] = [
      {
        group: 'txn',
        topic: 't',
        partition: 0,
        offset: '1',
        leaderEpoch: -1,
        metadata: '',
        commitTimestamp: '1',
      },
    ];
    await expect(importToStore(store, lines)).rejects.toThrow(/txn commits transactionally/);
    expect(await offsetOf(store, 'txn')).toBe('10');
    await setOffset(store, set('txn', 0n), { force: true });
    expect(await offsetOf(store, 'txn')).toBe('0');
  });

  it('force writes while the group runs, without asking the broker or touching its members', async () => {
    const store = await runningAt10();
    const ask = vi.fn(async () => false);
    await setOffset(store, set('g', 0n), { force: true, groupIsEmptyAtBroker: ask });
    expect(await offsetOf(store, 'g')).toBe('0');
    expect(ask).not.toHaveBeenCalled();
    expect((await store.getGroup('g'))?.members).toHaveLength(1);
  });

  it('combines compare-and-set with the guard: both must pass, in one step', async () => {
    const store = await runningAt10();
    // Right expectation, running group: refused for the members.
    await expect(setOffset(store, set('g', 20n, 10n))).rejects.toBeInstanceOf(GroupNotEmptyError);
    // Forced, wrong expectation: the compare-and-set still holds.
    const mismatch = await setOffset(store, set('g', 20n, 9n), { force: true }).catch((e: unknown) => e);
    expect(mismatch).toBeInstanceOf(AdminError);
    expect(mismatch).not.toBeInstanceOf(GroupNotEmptyError);
    expect((mismatch as Error).message).toMatch(/expected offset 9, but it is 10/);
    expect(await offsetOf(store, 'g')).toBe('10');
    // Stopped group: compare-and-set alone decides.
    await store.updateGroup('g', { kind: 'left', memberIds: ['m-1'] });
    await expect(setOffset(store, set('g', 20n, 9n))).rejects.toThrow(/expected offset 9/);
    await setOffset(store, set('g', 20n, 10n));
    expect(await offsetOf(store, 'g')).toBe('20');
  });
});

describe('importToStore', () => {
  const line = (group: string, partition: number, offset: string): OffsetLine => ({
    group,
    topic: 't',
    partition,
    offset,
    leaderEpoch: -1,
    metadata: '',
    commitTimestamp: '1764430000000',
  });

  it('writes the groups without members and names the running ones, whose offsets stay', async () => {
    const store = new MemoryStore();
    await importToStore(store, [line('busy', 0, '3')]);
    await running(store, 'busy');
    const lines = [line('idle', 0, '1'), line('idle', 1, '2'), line('busy', 0, '30'), line('busy', 1, '40')];
    const err = await importToStore(store, lines).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(GroupNotEmptyError);
    expect((err as GroupNotEmptyError).groups).toEqual(['busy']);
    expect((err as Error).message).toMatch(/^imported 2 offsets; group busy has live members/);
    expect((await getOffsets(store, 'idle')).map((l) => l.offset)).toEqual(['1', '2']);
    expect((await getOffsets(store, 'busy')).map((l) => l.offset)).toEqual(['3']);

    expect(await importToStore(store, lines, { force: true })).toBe(4);
    expect((await getOffsets(store, 'busy')).map((l) => l.offset)).toEqual(['30', '40']);
  });

  it('imports a group whose members the broker says are gone', async () => {
    const store = new MemoryStore();
    await running(store, 'g');
    expect(await importToStore(store, [line('g', 0, '8')], { groupIsEmptyAtBroker: async () => true })).toBe(
      1,
    );
    expect(await offsetOf(store, 'g')).toBe('8');
  });
});

describe('deleteOffsets', () => {
  it('refuses a running group (partition or whole group) and deletes nothing', async () => {
    const store = await runningAt10();
    await expect(deleteOffsets(store, 'g', [{ topic: 't', partition: 0 }])).rejects.toBeInstanceOf(
      GroupNotEmptyError,
    );
    await expect(
      deleteOffsets(store, 'g', undefined, { groupIsEmptyAtBroker: async () => false }),
    ).rejects.toBeInstanceOf(GroupNotEmptyError);
    expect(await offsetOf(store, 'g')).toBe('10');
    expect(await store.getGroup('g')).not.toBeNull();
  });

  it('deletes once the broker says the group is empty, or when forced', async () => {
    const store = new MemoryStore();
    await setOffset(store, set('a', 1n));
    await setOffset(store, set('b', 2n));
    await running(store, 'a');
    await running(store, 'b');
    await deleteOffsets(store, 'a', [{ topic: 't', partition: 0 }], {
      groupIsEmptyAtBroker: async () => true,
    });
    expect(await offsetOf(store, 'a')).toBeUndefined();
    await deleteOffsets(store, 'b', undefined, { force: true });
    expect(await store.listGroups()).not.toContain('b');
  });

  it('deletes a group without members without asking anyone', async () => {
    const store = new MemoryStore();
    await setOffset(store, set('g', 1n));
    const ask = vi.fn(async () => false);
    await deleteOffsets(store, 'g', undefined, { groupIsEmptyAtBroker: ask });
    expect(await store.listGroups()).not.toContain('g');
    expect(ask).not.toHaveBeenCalled();
  });
});
