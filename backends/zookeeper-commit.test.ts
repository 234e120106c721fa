/**
 * The multis one ZooKeeper commit is applied with (commitMultis), without a ZooKeeper: what fences
 * each multi, how partitions are written, and how a commit too large for one multi is split.
 */
import type { Stat } from 'node-zookeeper-client';
import { describe, expect, test } from 'vitest';
import type { GroupState, OffsetWrite } from './store.js';
import { commitMultis } from './zookeeper-commit.js';
import type { CommitMultiInput } from './zookeeper-commit.js';
import { multiBytes } from './zookeeper-multi.js';
import type { MultiOp } from './zookeeper-multi.js';
import { metaData, ZooKeeperZnodes } from './zookeeper-znodes.js';
import type { Read } from './zookeeper-znodes.js';

const znodes = new ZooKeeperZnodes('/kop');
const G = '/kop/consumers/g';
const STATE: GroupState = {
  protocol: null,
  generationId: 3,
  state: 'Empty',
  members: [],
  transactional: false,
};

const write = (topic: string, partition: number, offset: bigint, cas?: bigint): OffsetWrite => ({
  topic,
  partition,
  offset,
  leaderEpoch: -1,
  metadata: '',
  commitTimestamp: 1000n,
  expireTimestamp: -1n,
  ...(cas === undefined ? {} : { expectedOffset: cas }),
});
const readAt = (version: number, data = '0'): Read => ({
  data: Buffer.from(data),
  stat: { version } as unknown as Stat,
});

function input(over: Partial<CommitMultiInput> & { writes: OffsetWrite[] }): CommitMultiInput {
  const n = over.writes.length;
  return {
    znodes,
    group: 'g',
    marker: `${G}/kop-requests/r1`,
    outcome: { status: 'ok' },
    newState: STATE,
    stateRead: null,
    reads: Array<Read | null>(n).fill(null),
    metaExists: Array<boolean>(n).fill(false),
    compareAndSet: Array<boolean>(n).fill(false),
    maxMultiBytes: 900_000,
    ...over,
  };
}

/** An op without its data, for readable comparisons. */
const shape = (op: MultiOp) =>
  'version' in op ? `${op.type} ${op.path} @${op.version}` : `${op.type} ${op.path}`;

describe('commitMultis', () => {
  test('a new group: state created and set, each partition created and set, its metadata created, the marker last', () => {
    const w = write('t', 0, 42n);
    const [multi, ...more] = commitMultis(input({ writes: [w] }));
    expect(more).toEqual([]);
    expect(multi!.units).toEqual([0]);
    expect(multi!.ops.map(shape)).toEqual([
      `create ${G}/kop-state`,
      `setData ${G}/kop-state @-1`,
      `create ${G}/offsets/t/0`,
      `setData ${G}/offsets/t/0 @-1`,
      `create ${G}/kop-offset-meta/t/0`,
      `create ${G}/kop-requests/r1`,
    ]);
    const data = (i: number) => (multi!.ops[i] as { data: Buffer }).data.toString();
    expect(JSON.parse(data(0))).toEqual(STATE);
    expect(data(2)).toBe('42');
    expect(data(4)).toBe(metaData(w).toString());
    expect(JSON.parse(data(5))).toEqual({ s: 'ok' });
  });

  test('an existing group is checked at the version read, and each partition set at the version read', () => {
    const [multi] = commitMultis(
      input({
        writes: [write('t', 0, 5n), write('t', 1, 6n)],
        stateRead: readAt(7),
        reads: [readAt(4), null],
        metaExists: [true, false],
      }),
    );
    expect(multi!.ops.map(shape)).toEqual([
      `check ${G}/kop-state @7`,
      `setData ${G}/offsets/t/0 @4`,
      `setData ${G}/kop-offset-meta/t/0 @-1`,
      `create ${G}/offsets/t/1`,
      `setData ${G}/offsets/t/1 @-1`,
      `create ${G}/kop-offset-meta/t/1`,
      `create ${G}/kop-requests/r1`,
    ]);
  });

  test('a commit too large for one multi: each fits, each is fenced, the marker is in the last only', () => {
    const writes = Array.from({ length: 40 }, (_, p) => write('topic', p, BigInt(p)));
    const maxMultiBytes = 2048;
    for (const stateRead of [null, readAt(9)]) {
      const multis = commitMultis(input({ writes, stateRead, maxMultiBytes }));
      expect(multis.length).toBeGreaterThan(2);
      for (const m of multis) expect(multiBytes(m.ops)).toBeLessThanOrEqual(maxMultiBytes);
      // Every partition in exactly one multi, in order.
      expect(multis.flatMap((m) => m.units)).toEqual(writes.map((_, i) => i));
      // The later multis check the state at the version read, or 1 where the first created it.
      for (const m of multis.slice(1))
        expect(shape(m.ops[0]!)).toBe(`check ${G}/kop-state @${stateRead ? 9 : 1}`);
      const markers = multis.map((m) => m.ops.filter((op) => op.path === `${G}/kop-requests/r1`).length);
      expect(markers).toEqual([...Array<number>(multis.length - 1).fill(0), 1]);
      expect(multis.at(-1)!.ops.at(-1)!.path).toBe(`${G}/kop-requests/r1`);
    }
  });

  test('compare-and-sets go into the first multi when the commit is split, the rest keep their order', () => {
    const writes = Array.from({ length: 40 }, (_, p) =>
      write('topic', p, BigInt(p), p % 10 === 9 ? 0n : undefined),
    );
    const compareAndSet = writes.map((w) => w.expectedOffset !== undefined);
    const multis = commitMultis(input({ writes, compareAndSet, maxMultiBytes: 2048 }));
    expect(multis.length).toBeGreaterThan(1);
    expect(multis[0]!.units.slice(0, 4)).toEqual([9, 19, 29, 39]);
    const plain = multis.flatMap((m) => m.units).filter((i) => !compareAndSet[i]);
    expect(plain).toEqual(writes.map((_, i) => i).filter((i) => !compareAndSet[i]));
    // Not split: the order of the writes stands, compare-and-sets or not.
    const [one] = commitMultis(
      input({ writes: writes.slice(0, 12), compareAndSet: compareAndSet.slice(0, 12) }),
    );
    expect(one!.units).toEqual([...Array(12).keys()]);
  });
});
