/**
 * Offsets values of the embedded store's layout 3: one LMDB value per group, topic and block of
 * 128 partitions (p >> 7), instead of one per partition (layout 2). A 100-partition commit was
 * 100 B-tree puts inside the write transaction, each a trip through lmdb-js on the event loop
 * while the one writer waited (~0.4 ms per commit); it is now one read and one put per block.
 * Blocks bound what a commit of a few partitions rewrites (at most 128 records, not the topic).
 *
 * Value bytes, written and read here with fixed-width fields (no MessagePack, no decimal strings):
 *   [u8 3] [u32 topic byte length] [topic, UTF-8]   the header: the name is kept to detect a
 *                                                   digest collision (read as corruption)
 *   then, sorted by partition, one per partition:
 *   [i32 partition] [i64 offset] [i32 leader epoch] [i64 commit timestamp] [i64 expire timestamp]
 *   [u32 metadata byte length] [metadata, UTF-8]
 */
import { StoreCorruptError } from './errors.js';
import type { OffsetWrite, PartitionOffset } from './store.js';

/** A value holds the partitions p whose p >> BLOCK_SHIFT is its block. */
const BLOCK_SHIFT = 7;
export const blockOf = (partition: number): number => partition >> BLOCK_SHIFT;

const FORMAT = 3;
const HEADER_FIXED = 5;
/** A record's bytes before its metadata. */
const RECORD_FIXED = 36;
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

/** One block's writes (at least one), any order, duplicates allowed (the last one wins). */
function encodeBlock(topic: string, topicHeader: Buffer, writes: OffsetWrite[]): BlockWrite {
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
  const partitions = new Array<number>(kept.length);
  const starts = new Array<number>(kept.length + 1);
  let at = 0;
  for (let i = 0; i < kept.length; i++) {
    const w = kept[i]!;
    partitions[i] = w.partition;
    starts[i] = at;
    records.writeInt32BE(w.partition, at);
    records.writeBigInt64BE(w.offset, at + 4);
    records.writeInt32BE(w.leaderEpoch, at + 12);
    records.writeBigInt64BE(w.commitTimestamp, at + 16);
    records.writeBigInt64BE(w.expireTimestamp, at + 24);
    records.writeUInt32BE(metadataBytes[i]!, at + 32);
    at += RECORD_FIXED;
    if (metadataBytes[i]! > 0) at += records.write(w.metadata, at, 'utf8');
  }
  starts[kept.length] = at;
  return { topic, block: blockOf(partitions[0]!), header: topicHeader, records, partitions, starts };
}

/**
 * A commit's writes, grouped by topic and block. Throws RangeError for a number the format cannot
 * hold (Kafka's own fields are int32 and int64, so only a caller outside the protocol can).
 */
export function encodeBlockWrites(writes: readonly OffsetWrite[]): BlockWrite[] {
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
    for (const list of blocks.values()) out.push(encodeBlock(topic, topicHeader, list));
  }
  return out;
}

/** Walks the records of a stored value, checking its structure; returns the topic's header length. */
function checkedHeader(value: Uint8Array, group: string, topicHeader?: Buffer): number {
  if (value.length < HEADER_FIXED || value[0] !== FORMAT)
    throw new StoreCorruptError(group, 'offsets value is malformed');
  const length = HEADER_FIXED + Buffer.from(value.buffer, value.byteOffset, value.length).readUInt32BE(1);
  if (length > value.length) throw new StoreCorruptError(group, 'offsets value is malformed');
  if (topicHeader !== undefined && Buffer.compare(value.subarray(0, length), topicHeader) !== 0)
    throw new StoreCorruptError(
      group,
      `offsets value of topic ${JSON.stringify(topicHeader.toString('utf8', HEADER_FIXED))} names another topic`,
    );
  return length;
}

/** The end of the record starting at `at` (checked to lie within the value). */
function recordEnd(value: Buffer, at: number, group: string): number {
  if (at + RECORD_FIXED > value.length) throw new StoreCorruptError(group, 'offsets value is malformed');
  const end = at + RECORD_FIXED + value.readUInt32BE(at + 32);
  if (end > value.length) throw new StoreCorruptError(group, 'offsets value is malformed');
  return end;
}

const asBuffer = (v: Uint8Array): Buffer =>
  Buffer.isBuffer(v) ? v : Buffer.from(v.buffer, v.byteOffset, v.length);

/**
 * The block's new value: `stored` (undefined: none yet) with `w`'s records written over it. Reads
 * `stored` before returning, so it may be a buffer the next read reuses.
 */
export function mergeBlock(stored: Uint8Array | undefined, w: BlockWrite, group: string): Buffer {
  if (stored === undefined) return Buffer.concat([w.header, w.records]);
  const old = asBuffer(stored);
  let i = checkedHeader(old, group, w.header);
  const out = Buffer.allocUnsafe(old.length + w.header.length + w.records.length);
  let at = w.header.copy(out, 0);
  let j = 0;
  const n = w.partitions.length;
  while (i < old.length) {
    const end = recordEnd(old, i, group);
    const p = old.readInt32BE(i);
    // The new records of smaller partitions come first.
    while (j < n && w.partitions[j]! < p) at += w.records.copy(out, at, w.starts[j]!, w.starts[++j]!);
    if (j >= n || w.partitions[j]! !== p) at += old.copy(out, at, i, end);
    i = end;
  }
  if (j < n) at += w.records.copy(out, at, w.starts[j]!, w.starts[n]!);
  return out.subarray(0, at);
}

/** A copy of the value without the records of `partitions`; undefined when none is left. */
export function withoutPartitions(
  stored: Uint8Array,
  topicHeader: Buffer,
  partitions: ReadonlySet<number>,
  group: string,
): Buffer | undefined {
  const old = asBuffer(stored);
  let i = checkedHeader(old, group, topicHeader);
  const out = Buffer.allocUnsafe(old.length);
  let at = old.copy(out, 0, 0, i);
  let left = 0;
  while (i < old.length) {
    const end = recordEnd(old, i, group);
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
  let i = checkedHeader(value, group, expect?.header);
  const topic = value.toString('utf8', HEADER_FIXED, i);
  while (i < value.length) {
    const end = recordEnd(value, i, group);
    const partition = value.readInt32BE(i);
    if (expect?.wanted === undefined || expect.wanted(partition)) {
      const metadataBytes = value.readUInt32BE(i + 32);
      into.push({
        topic,
        partition,
        offset: value.readBigInt64BE(i + 4),
        leaderEpoch: value.readInt32BE(i + 12),
        metadata: metadataBytes === 0 ? '' : value.toString('utf8', i + RECORD_FIXED, end),
        commitTimestamp: value.readBigInt64BE(i + 16),
        expireTimestamp: value.readBigInt64BE(i + 24),
      });
    }
    i = end;
  }
  return topic;
}
