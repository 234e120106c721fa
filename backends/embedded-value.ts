/**
 * The MessagePack bytes of an offsets-v2 value ([topic, offset, leader epoch, metadata, commit
 * timestamp, expire timestamp], embedded-store.ts), written by hand before the write transaction
 * starts. lmdb-js would encode each value inside the transaction, on the event loop while the one
 * writer waits for it; a commit's values are encoded here beforehand, into one buffer, and put as
 * raw bytes. The bytes are standard MessagePack, so reads (lmdb-js's decoder) see the same tuple
 * as for values lmdb-js encoded itself (embedded-value.test.ts compares the decoded values).
 */
import { asBinary } from 'lmdb';
import type { OffsetWrite } from './store.js';

/** A value ready for a put inside a transaction (lmdb-js then stores its bytes as they are). */
export type EncodedValue = ReturnType<typeof asBinary>;

/** Header bytes of a string of `length` UTF-8 bytes. */
function stringHeaderBytes(length: number): number {
  if (length < 32) return 1;
  if (length < 0x100) return 2;
  if (length < 0x10000) return 3;
  return 5;
}

/** Writes a MessagePack string header at `at` (fixstr, str8, str16, str32); returns where the bytes go. */
function writeStringHeader(into: Buffer, at: number, length: number): number {
  if (length < 32) {
    into[at] = 0xa0 | length;
    return at + 1;
  }
  const size = stringHeaderBytes(length);
  into[at] = size === 2 ? 0xd9 : size === 3 ? 0xda : 0xdb;
  into.writeUIntBE(length, at + 1, size - 1);
  return at + size;
}

function writeString(into: Buffer, at: number, s: string, length: number): number {
  const start = writeStringHeader(into, at, length);
  // As many bytes as characters: ASCII (every other character takes more than one byte). Short
  // ASCII strings (digits, most names) are copied here: a native call costs more than the copy.
  if (length === s.length && length <= 64) {
    for (let i = 0; i < length; i++) into[start + i] = s.charCodeAt(i);
    return start + length;
  }
  return start + into.write(s, start, 'utf8');
}

/** A 32-bit signed integer: fixint when it fits (as any MessagePack encoder may), int32 otherwise. */
function writeInt32(into: Buffer, at: number, n: number): number {
  if (n >= 0 && n < 0x80) {
    into[at] = n;
    return at + 1;
  }
  if (n < 0 && n >= -32) {
    into[at] = n & 0xff;
    return at + 1;
  }
  into[at] = 0xd2;
  into.writeInt32BE(n, at + 1);
  return at + 5;
}

/**
 * The values of `writes`, in order, encoded into one buffer. The topic's bytes are measured once
 * per run of writes to the same topic (a commit names each topic once, for many partitions).
 */
export function encodeOffsetValues(writes: readonly OffsetWrite[]): EncodedValue[] {
  const texts: string[] = new Array<string>(writes.length * 5);
  const lengths: number[] = new Array<number>(writes.length * 5);
  let total = 0;
  let lastTopic: string | undefined;
  let topicLength = 0;
  // A commit's partitions share their timestamps: each is turned into decimal once per run of
  // equal values, not once per partition (a bigint's String() allocates every time).
  let lastCommitTimestamp: bigint | undefined;
  let commitTimestamp = '';
  let lastExpireTimestamp: bigint | undefined;
  let expireTimestamp = '';
  for (let i = 0; i < writes.length; i++) {
    const w = writes[i]!;
    if (w.topic !== lastTopic) {
      lastTopic = w.topic;
      topicLength = Buffer.byteLength(w.topic, 'utf8');
    }
    if (w.commitTimestamp !== lastCommitTimestamp) {
      lastCommitTimestamp = w.commitTimestamp;
      commitTimestamp = String(w.commitTimestamp);
    }
    if (w.expireTimestamp !== lastExpireTimestamp) {
      lastExpireTimestamp = w.expireTimestamp;
      expireTimestamp = String(w.expireTimestamp);
    }
    const k = i * 5;
    const offset = String(w.offset);
    // Metadata is most often "": no need to measure it.
    const metadataLength = w.metadata.length === 0 ? 0 : Buffer.byteLength(w.metadata, 'utf8');
    texts[k] = w.topic;
    lengths[k] = topicLength;
    texts[k + 1] = offset;
    lengths[k + 1] = offset.length;
    texts[k + 2] = w.metadata;
    lengths[k + 2] = metadataLength;
    texts[k + 3] = commitTimestamp;
    lengths[k + 3] = commitTimestamp.length;
    texts[k + 4] = expireTimestamp;
    lengths[k + 4] = expireTimestamp.length;
    // The array header, the epoch (at most 5 bytes) and the five strings with their headers.
    total += 6;
    for (let f = k; f < k + 5; f++) total += stringHeaderBytes(lengths[f]!) + lengths[f]!;
  }
  const buffer = Buffer.allocUnsafe(total);
  const out: EncodedValue[] = new Array<EncodedValue>(writes.length);
  let at = 0;
  for (let i = 0; i < writes.length; i++) {
    const start = at;
    const k = i * 5;
    buffer[at++] = 0x96; // fixarray of 6
    at = writeString(buffer, at, texts[k]!, lengths[k]!);
    at = writeString(buffer, at, texts[k + 1]!, lengths[k + 1]!);
    at = writeInt32(buffer, at, writes[i]!.leaderEpoch);
    at = writeString(buffer, at, texts[k + 2]!, lengths[k + 2]!);
    at = writeString(buffer, at, texts[k + 3]!, lengths[k + 3]!);
    at = writeString(buffer, at, texts[k + 4]!, lengths[k + 4]!);
    out[i] = asBinary(buffer.subarray(start, at));
  }
  return out;
}
