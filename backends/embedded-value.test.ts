import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { newInstanceId } from './commit-order.js';
import type { CommitOrder } from './commit-order.js';
import { StoreCorruptError } from './errors.js';
import * as blocks from './embedded-value.js';
import type { OffsetWrite, PartitionOffset } from './store.js';

const { blockOf, decodeBlock, encodeBlockWrites, mergeBlock, topicHeader, withoutPartitions } = blocks;

const int32 = fc.integer({ min: -(2 ** 31), max: 2 ** 31 - 1 });
const int64 = fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n });
const text = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 80 }),
  fc.string({ unit: 'grapheme', minLength: 20, maxLength: 300 }),
  fc.constantFrom('', 'orders', 'ä', '\u{1F680}'.repeat(20), 'x'.repeat(31), 'y'.repeat(255)),
);
// Few topics and partitions near block edges, so writes land on each other's blocks and partitions.
const offsetWrite = fc.record({
  topic: fc.constantFrom('orders', 'ä', ''),
  partition: fc.oneof(
    fc.integer({ min: 0, max: 300 }),
    fc.constantFrom(127, 128, 255, 256, -1, -128, -129, 2 ** 31 - 1, -(2 ** 31)),
    int32,
  ),
  offset: int64,
  leaderEpoch: int32,
  metadata: text,
  commitTimestamp: int64,
  expireTimestamp: int64,
});

const sorted = (xs: PartitionOffset[]): PartitionOffset[] =>
  [...xs].sort((a, b) => (a.topic === b.topic ? a.partition - b.partition : a.topic < b.topic ? -1 : 1));

/** Applies commits to a map of block values, as the store does; returns every decoded offset. */
function applyAll(commits: OffsetWrite[][], values: Map<string, Buffer>): void {
  for (const writes of commits)
    for (const b of encodeBlockWrites(writes)) {
      const id = `${b.topic}\u0000${b.block}`;
      values.set(id, mergeBlock(values.get(id), b, 'g'));
    }
}

function decodeAll(values: Map<string, Buffer>): PartitionOffset[] {
  const out: PartitionOffset[] = [];
  for (const [id, v] of values) {
    const topic = decodeBlock(v, 'g', out);
    expect(id.startsWith(`${topic}\u0000`)).toBe(true);
  }
  return out;
}

describe('embedded offsets values (blocks of layouts 3 and 4)', () => {
  it('commits merged into blocks read back as the last write of every partition', () => {
    fc.assert(
      fc.property(
        fc.array(fc.array(offsetWrite, { minLength: 1, maxLength: 12 }), { maxLength: 6 }),
        (commits) => {
          const model = new Map<string, PartitionOffset>();
          for (const writes of commits)
            for (const w of writes) model.set(`${w.topic}\u0000${w.partition}`, { ...w });
          const values = new Map<string, Buffer>();
          applyAll(commits, values);
          expect(sorted(decodeAll(values))).toEqual(sorted([...model.values()]));
          // Every value holds its own block's partitions only, in ascending order.
          for (const [id, v] of values) {
            const ps = decodeAll(new Map([[id, v]])).map((o) => o.partition);
            expect(ps).toEqual([...ps].sort((a, b) => a - b));
            expect(new Set(ps.map(blockOf)).size).toBe(1);
            expect(id.endsWith(`\u0000${blockOf(ps[0]!)}`)).toBe(true);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('deleting partitions leaves the others, and nothing when none is left', () => {
    fc.assert(
      fc.property(
        fc.array(offsetWrite, { minLength: 1, maxLength: 20 }),
        fc.array(fc.nat(19), { maxLength: 20 }),
        (writes, picks) => {
          const values = new Map<string, Buffer>();
          applyAll([writes], values);
          const gone = new Set(picks.filter((i) => i < writes.length).map((i) => writes[i]!.partition));
          const left = new Map<string, Buffer>();
          for (const [id, v] of values) {
            const topic = id.slice(0, id.indexOf('\u0000'));
            const rest = withoutPartitions(v, topicHeader(topic), gone, 'g');
            if (rest !== undefined) left.set(id, rest);
          }
          const all = decodeAll(values);
          expect(sorted(decodeAll(left))).toEqual(sorted(all.filter((o) => !gone.has(o.partition))));
        },
      ),
    );
  });

  it('a named topic is checked against the value, and a malformed value is corruption', () => {
    const [b] = encodeBlockWrites([
      {
        topic: 'orders',
        partition: 1,
        offset: 5n,
        leaderEpoch: 0,
        metadata: 'm',
        commitTimestamp: 1n,
        expireTimestamp: -1n,
      },
    ]);
    const value = mergeBlock(undefined, b!, 'g');
    expect(() => decodeBlock(value, 'g', [], { header: topicHeader('other') })).toThrow(StoreCorruptError);
    expect(() => mergeBlock(value, { ...b!, header: topicHeader('other') }, 'g')).toThrow(
      /names another topic/,
    );
    const headerBytes = topicHeader('orders').length;
    for (let cut = 1; cut < value.length; cut++)
      if (cut !== headerBytes)
        expect(() => decodeBlock(value.subarray(0, cut), 'g', []), `cut at ${cut}`).toThrow(
          StoreCorruptError,
        );
    expect(() => decodeBlock(Buffer.from([9, 0, 0, 0, 0]), 'g', [])).toThrow(StoreCorruptError);
  });

  it('numbers the format cannot hold are refused before anything is written', () => {
    const w = {
      topic: 't',
      partition: 0,
      offset: 0n,
      leaderEpoch: 0,
      metadata: '',
      commitTimestamp: 0n,
      expireTimestamp: 0n,
    };
    expect(() => encodeBlockWrites([{ ...w, offset: 2n ** 63n }])).toThrow(RangeError);
    expect(() => encodeBlockWrites([{ ...w, partition: 2 ** 31 }])).toThrow(RangeError);
    expect(() => encodeBlockWrites([{ ...w, partition: 1.5 }])).toThrow(RangeError);
  });

  it('a record the same instance read later stays; other instances and records without an order are overwritten', () => {
    const a = newInstanceId();
    const w = (partition: number, offset: bigint): OffsetWrite => ({
      topic: 't',
      partition,
      offset,
      leaderEpoch: -1,
      metadata: `m${offset}`,
      commitTimestamp: 1n,
      expireTimestamp: -1n,
    });
    const merge = (value: Buffer | undefined, writes: OffsetWrite[], order?: CommitOrder) => {
      const counts = { superseded: 0 };
      const [b] = encodeBlockWrites(writes, order);
      return { value: mergeBlock(value, b!, 'g', counts), superseded: counts.superseded };
    };
    const offsets = (value: Buffer) => {
      const out: PartitionOffset[] = [];
      decodeBlock(value, 'g', out);
      return out.map((o) => [o.partition, o.offset]);
    };
    let v = merge(undefined, [w(1, 50n), w(2, 60n)], { instance: a, seq: 5 }).value;
    const older = merge(v, [w(1, 10n), w(3, 11n)], { instance: a, seq: 3 });
    expect(older.superseded).toBe(1);
    expect(offsets(older.value)).toEqual([
      [1, 50n],
      [2, 60n],
      [3, 11n],
    ]);
    v = merge(v, [w(1, 12n)], { instance: newInstanceId(), seq: 1 }).value;
    expect(offsets(v)).toEqual([
      [1, 12n],
      [2, 60n],
    ]);
    // No order (the operator's write): written, and it leaves no order behind.
    v = merge(v, [w(2, 13n)]).value;
    const after = merge(v, [w(2, 14n)], { instance: a, seq: 1 });
    expect([after.superseded, offsets(after.value)]).toEqual([
      0,
      [
        [1, 12n],
        [2, 14n],
      ],
    ]);
  });

  it('format-3 values (layout 3) read as before and take format-4 writes', () => {
    fc.assert(
      fc.property(
        fc.array(offsetWrite, { minLength: 1, maxLength: 12 }),
        fc.array(offsetWrite, { maxLength: 6 }),
        (first, second) => {
          const model = new Map<string, PartitionOffset>();
          for (const x of [...first, ...second]) model.set(`${x.topic}\u0000${x.partition}`, { ...x });
          const values = new Map<string, Buffer>();
          applyAll([first], values);
          for (const [id, v] of values) values.set(id, asFormat3(v));
          applyAll([second], values);
          expect(sorted(decodeAll(values))).toEqual(sorted([...model.values()]));
        },
      ),
      { numRuns: 200 },
    );
  });
});

/** A format-4 value as layout 3 wrote it: format byte 3, records without their 16 order bytes. */
function asFormat3(v: Buffer): Buffer {
  const start = 5 + v.readUInt32BE(1);
  const parts = [Buffer.from([3]), v.subarray(1, start)];
  for (let i = start; i < v.length;) {
    const end = i + 52 + v.readUInt32BE(i + 48);
    parts.push(v.subarray(i, i + 32), v.subarray(i + 48, end));
    i = end;
  }
  return Buffer.concat(parts);
}
