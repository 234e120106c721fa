/**
 * Offsets values of the embedded store's layout 3: one LMDB value per group, topic and block of
 * 128 partitions (p >> 7), instead of one per partition (layout 2). A 100-partition commit was
 * 100 B-tree puts inside the write transaction, each a trip through lmdb-js on the event loop
 * while the one writer waited (~0.4 ms per commit); it is now one read and one put per block.
 * Blocks bound what a commit of a few partitions rewrites (at most 128 records, not the topic).
 *
 * Value bytes, written and read here with fixed-width fields (no MessagePack, no decimal strings):
 *   [u8 format] [u32 topic byte length] [topic, UTF-8]   the header: the name is kept to detect a
 *                                                        digest collision (read as corruption)
 *   then, sorted by partition, one per partition:
 *   [i32 partition] [i64 offset] [i32 leader epoch] [i64 commit timestamp] [i64 expire timestamp]
 *   format 4 only: [8 bytes instance] [u32 seq, high] [u32 seq, low]   the read order of the
 *                  commit that wrote the record (commit-order.ts; instance all zero: none)
 *   [u32 metadata byte length] [metadata, UTF-8]
 * Format 4 is written since layout 4; format 3 values (layout 3) are read as records without an
 * order, and a commit into such a block rewrites the whole block in format 4.
 */
import { isSuperseded } from './commit-order.js';
import type { CommitOrder } from './commit-order.js';
import { StoreCorruptError } from './errors.js';
import type { OffsetWrite, PartitionOffset } from './store.js';

/** A value holds the partitions p whose p >> BLOCK_SHIFT is its block. */
const BLOCK_SHIFT = 7;
export const blockOf = (partition: number): number => partition >> BLOCK_SHIFT;

const FORMAT = 4;
const FORMAT_3 = 3;
const HEADER_FIXED = 5;
/** A record's bytes before its metadata, by format. */
const RECORD_FIXED = 52;
const RECORD_FIXED_3 = 36;
/** Where a record's order starts (format 4), and its size. */
const ORDER_AT = 32;
const ORDER_BYTES = RECORD_FIXED - RECORD_FIXED_3;
const TWO_32 = 2 ** 32;
const MAX_INT64 = (1n << 63n) - 1n;
const MIN_INT64 = -(1n << 63n);

/** The records one commit writes into one block, encoded before the write transaction. */
export interface BlockWrite {
  topic: string;
  block: number;
  /** The value's header for this topic: an existing value must start with exactly these bytes. */
  header: Buffer;
  /** The records, sorted by partition, one per partition (a request's last write of one wins). */
  records: Buffer;
  /** partitions[i]: record i's partition; starts[i]: where it begins (starts[n] = records.length). */
  partitions: number[];
  starts: number[];
  /** The commit's read order, written into every record; undefined: none. */
  order: CommitOrder | undefined;
  /** The order's stored bytes as four big-endian u32s (instance high, low, seq high, low). */
  orderWords: readonly [number, number, number, number];
}

function header(topic: string): Buffer {
  const length = Buffer.byteLength(topic, 'utf8');
  const out = Buffer.allocUnsafe(HEADER_FIXED + length);
  out[0] = FORMAT;
  out.writeUInt32BE(length, 1);
  out.write(topic, HEADER_FIXED, 'utf8');
  return out;
}

function checkInt64(what: string, v: bigint): void {
  if (v < MIN_INT64 || v > MAX_INT64) throw new RangeError(`${what} ${v} is outside int64`);
}

/**
 * An order's stored bytes as four big-endian u32s: the instance (all zero: none), then seq.
 * Written and compared as numbers: a record's order is the same in all of a commit's records.
 */
function orderWords(order: CommitOrder | undefined): [number, number, number, number] {
  if (order === undefined) return [0, 0, 0, 0];
  return [
    parseInt(order.instance.slice(0, 8), 16),
    parseInt(order.instance.slice(8, 16), 16),
    Math.floor(order.seq / TWO_32),
    order.seq % TWO_32,
  ];
}

/** One block's writes (at least one), any order, duplicates allowed (the last one wins). */
function encodeBlock(
  topic: string,
  topicHeader: Buffer,
  writes: OffsetWrite[],
  order: CommitOrder | undefined,
): BlockWrite {
  // Stable sort: of equal partitions the request's later write comes last, and is kept.
  let sorted = true;
  for (let i = 1; i < writes.length && sorted; i++) sorted = writes[i - 1]!.partition < writes[i]!.partition;
  const ordered = sorted ? writes : [...writes].sort((a, b) => a.partition - b.partition);
  const kept: OffsetWrite[] = [];
  const metadataBytes: number[] = [];
  let total = 0;
  for (let i = 0; i < ordered.length; i++) {
    const w = ordered[i]!;
    if (i + 1 < ordered.length && ordered[i + 1]!.partition === w.partition) continue;
    checkInt64('offset', w.offset);
    checkInt64('commit timestamp', w.commitTimestamp);
    checkInt64('expire timestamp', w.expireTimestamp);
    const m = w.metadata.length === 0 ? 0 : Buffer.byteLength(w.metadata, 'utf8');
    kept.push(w);
    metadataBytes.push(m);
    total += RECORD_FIXED + m;
  }
  const records = Buffer.allocUnsafe(total);
  // DataView's 64-bit writes are builtins; Buffer's go through bigint arithmetic per call.
  const view = new DataView(records.buffer, records.byteOffset, records.length);
  const words = orderWords(order);
  const partitions = new Array<number>(kept.length);
  const starts = new Array<number>(kept.length + 1);
  let at = 0;
  for (let i = 0; i < kept.length; i++) {
    const w = kept[i]!;
    partitions[i] = w.partition;
    starts[i] = at;
    view.setInt32(at, w.partition);
    view.setBigInt64(at + 4, w.offset);
    view.setInt32(at + 12, w.leaderEpoch);
    view.setBigInt64(at + 16, w.commitTimestamp);
    view.setBigInt64(at + 24, w.expireTimestamp);
    view.setUint32(at + ORDER_AT, words[0]);
    view.setUint32(at + ORDER_AT + 4, words[1]);
    view.setUint32(at + ORDER_AT + 8, words[2]);
    view.setUint32(at + ORDER_AT + 12, words[3]);
    view.setUint32(at + RECORD_FIXED - 4, metadataBytes[i]!);
    at += RECORD_FIXED;
    if (metadataBytes[i]! > 0) at += records.write(w.metadata, at, 'utf8');
  }
  starts[kept.length] = at;
  return {
    topic,
    block: blockOf(partitions[0]!),
    header: topicHeader,
    records,
    partitions,
    starts,
    order,
    orderWords: words,
  };
}

/**
 * A commit's writes, grouped by topic and block. Throws RangeError for a number the format cannot
 * hold (Kafka's own fields are int32 and int64, so only a caller outside the protocol can).
 */
export function encodeBlockWrites(writes: readonly OffsetWrite[], order?: CommitOrder): BlockWrite[] {
  const byTopic = new Map<string, Map<number, OffsetWrite[]>>();
  for (const w of writes) {
    if ((w.partition | 0) !== w.partition) throw new RangeError(`partition ${w.partition} is not an int32`);
    let blocks = byTopic.get(w.topic);
    if (blocks === undefined) byTopic.set(w.topic, (blocks = new Map()));
    const b = blockOf(w.partition);
    const list = blocks.get(b);
    if (list === undefined) blocks.set(b, [w]);
    else list.push(w);
  }
  const out: BlockWrite[] = [];
  for (const [topic, blocks] of byTopic) {
    const topicHeader = header(topic);
    for (const list of blocks.values()) out.push(encodeBlock(topic, topicHeader, list, order));
  }
  return out;
}

/**
 * Checks a stored value's header (its topic against `topicHeader`'s when given, whatever the
 * format): returns where its records start and their fixed size (by its format).
 */
function checkedHeader(
  value: Uint8Array,
  group: string,
  topicHeader?: Buffer,
): { start: number; fixed: number } {
  if (value.length < HEADER_FIXED || (value[0] !== FORMAT && value[0] !== FORMAT_3))
    throw new StoreCorruptError(group, 'offsets value is malformed');
  const length = HEADER_FIXED + Buffer.from(value.buffer, value.byteOffset, value.length).readUInt32BE(1);
  if (length > value.length) throw new StoreCorruptError(group, 'offsets value is malformed');
  if (topicHeader !== undefined && Buffer.compare(value.subarray(1, length), topicHeader.subarray(1)) !== 0)
    throw new StoreCorruptError(
      group,
      `offsets value of topic ${JSON.stringify(topicHeader.toString('utf8', HEADER_FIXED))} names another topic`,
    );
  return { start: length, fixed: value[0] === FORMAT ? RECORD_FIXED : RECORD_FIXED_3 };
}

/** The end of the record starting at `at` (checked to lie within the value). */
function recordEnd(value: Buffer, at: number, fixed: number, group: string): number {
  if (at + fixed > value.length) throw new StoreCorruptError(group, 'offsets value is malformed');
  const end = at + fixed + value.readUInt32BE(at + fixed - 4);
  if (end > value.length) throw new StoreCorruptError(group, 'offsets value is malformed');
  return end;
}

/**
 * Whether the format-4 record at `at` of `value` supersedes a write of `w` (isSuperseded): it
 * has an order of the same instance, read later. Compares the stored bytes: the instance is
 * never all zero (checkOrder), so a record without an order never matches it.
 */
function supersedes(value: Buffer, at: number, w: BlockWrite): boolean {
  if (w.order === undefined) return false;
  const from = at + ORDER_AT;
  const [high, low] = w.orderWords;
  if (value.readUInt32BE(from) !== high || value.readUInt32BE(from + 4) !== low) return false;
  const seq = value.readUInt32BE(from + 8) * TWO_32 + value.readUInt32BE(from + 12);
  return isSuperseded(w.order, { instance: w.order.instance, seq });
}

/** Copies the record old[i, end) of `fixed` bytes into out at `at` in format 4; returns the bytes written. */
function copyRecord(old: Buffer, i: number, end: number, fixed: number, out: Buffer, at: number): number {
  if (fixed === RECORD_FIXED) return old.copy(out, at, i, end);
  // Format 3: no order (zeros) before the metadata length.
  old.copy(out, at, i, i + ORDER_AT);
  out.fill(0, at + ORDER_AT, at + ORDER_AT + ORDER_BYTES);
  return ORDER_AT + ORDER_BYTES + old.copy(out, at + ORDER_AT + ORDER_BYTES, i + ORDER_AT, end);
}

const asBuffer = (v: Uint8Array): Buffer =>
  Buffer.isBuffer(v) ? v : Buffer.from(v.buffer, v.byteOffset, v.length);

/**
 * Copies ranges of buffers one after another into `out`, a run of adjacent ranges of one buffer
 * in one copy: a commit of every partition of a block replaces consecutive records, and a copy
 * per record cost more than the rest of the merge.
 */
class RunCopier {
  at = 0;
  private source: Buffer | undefined;
  private from = 0;
  private to = 0;

  constructor(readonly out: Buffer) {}

  add(source: Buffer, from: number, to: number): void {
    if (source === this.source && from === this.to) {
      this.to = to;
      return;
    }
    this.flush();
    this.source = source;
    this.from = from;
    this.to = to;
  }

  flush(): void {
    if (this.source !== undefined) this.at += this.source.copy(this.out, this.at, this.from, this.to);
    this.source = undefined;
  }
}

/**
 * The block's new value: `stored` (undefined: none yet) with `w`'s records written over it, in
 * format 4. A record of `w` whose partition's stored record the same instance read later is not
 * written (commit-order.ts): the stored one stays, and `counts.superseded` counts it. Reads
 * `stored` before returning, so it may be a buffer the next read reuses.
 */
export function mergeBlock(
  stored: Uint8Array | undefined,
  w: BlockWrite,
  group: string,
  counts?: { superseded: number },
): Buffer {
  if (stored === undefined) return Buffer.concat([w.header, w.records]);
  const old = asBuffer(stored);
  const found = checkedHeader(old, group, w.header);
  const fixed = found.fixed;
  let i = found.start;
  // Room for format-3 records growing by their order.
  const grows = fixed === RECORD_FIXED ? 0 : ORDER_BYTES * Math.ceil(old.length / RECORD_FIXED_3);
  const out = new RunCopier(Buffer.allocUnsafe(old.length + grows + w.header.length + w.records.length));
  out.add(w.header, 0, w.header.length);
  let j = 0;
  const n = w.partitions.length;
  while (i < old.length) {
    const end = recordEnd(old, i, fixed, group);
    const p = old.readInt32BE(i);
    // The new records of smaller partitions come first.
    while (j < n && w.partitions[j]! < p) out.add(w.records, w.starts[j]!, w.starts[++j]!);
    if (j < n && w.partitions[j]! === p) {
      if (fixed === RECORD_FIXED && supersedes(old, i, w)) {
        out.add(old, i, end);
        if (counts !== undefined) counts.superseded++;
      } else {
        out.add(w.records, w.starts[j]!, w.starts[j + 1]!);
      }
      j++;
    } else if (fixed === RECORD_FIXED) {
      out.add(old, i, end);
    } else {
      out.flush();
      out.at += copyRecord(old, i, end, fixed, out.out, out.at);
    }
    i = end;
  }
  if (j < n) out.add(w.records, w.starts[j]!, w.starts[n]!);
  out.flush();
  return out.out.subarray(0, out.at);
}

/** A copy of the value without the records of `partitions`; undefined when none is left. */
export function withoutPartitions(
  stored: Uint8Array,
  topicHeader: Buffer,
  partitions: ReadonlySet<number>,
  group: string,
): Buffer | undefined {
  const old = asBuffer(stored);
  const found = checkedHeader(old, group, topicHeader);
  const fixed = found.fixed;
  let i = found.start;
  const out = Buffer.allocUnsafe(old.length);
  let at = old.copy(out, 0, 0, i);
  let left = 0;
  while (i < old.length) {
    const end = recordEnd(old, i, fixed, group);
    if (!partitions.has(old.readInt32BE(i))) {
      at += old.copy(out, at, i, end);
      left++;
    }
    i = end;
  }
  return left === 0 ? undefined : out.subarray(0, at);
}

/** The header of `topic`'s values, to find and check its blocks. */
export const topicHeader = header;

/**
 * Decodes a stored value into `into` (every record, or those `wanted` accepts), checking it names
 * `topic` when given. Returns the topic the value names.
 */
export function decodeBlock(
  stored: Uint8Array,
  group: string,
  into: PartitionOffset[],
  expect?: { header: Buffer; wanted?: (partition: number) => boolean },
): string {
  const value = asBuffer(stored);
  const found = checkedHeader(value, group, expect?.header);
  const fixed = found.fixed;
  let i = found.start;
  const topic = value.toString('utf8', HEADER_FIXED, i);
  while (i < value.length) {
    const end = recordEnd(value, i, fixed, group);
    const partition = value.readInt32BE(i);
    if (expect?.wanted === undefined || expect.wanted(partition)) {
      const metadataBytes = value.readUInt32BE(i + fixed - 4);
      into.push({
        topic,
        partition,
        offset: value.readBigInt64BE(i + 4),
        leaderEpoch: value.readInt32BE(i + 12),
        metadata: metadataBytes === 0 ? '' : value.toString('utf8', i + fixed, end),
        commitTimestamp: value.readBigInt64BE(i + 16),
        expireTimestamp: value.readBigInt64BE(i + 24),
      });
    }
    i = end;
  }
  return topic;
}
