/**
 * Keys of the embedded store's layouts 2 and 3, as raw bytes (LMDB `keyEncoding: 'binary'`).
 *
 * Group and topic names are anything Kafka accepts: up to 32,767 bytes of any Unicode, NUL
 * included. Layout 1 put them into lmdb-js's ordered-binary array keys, whose encoding of a string
 * changes at 64 characters (NUL and other low bytes escaped below, raw above): the range bounds
 * "group followed by \u0000" then named the group's own first key, and a walk from group to group
 * never moved on. LMDB also caps keys at 1,978 bytes.
 *
 * So every name is reduced to a fixed-width digest (SHA-256, 32 bytes) and keys are built from
 * fixed-width parts: the keys of one group are exactly those that start with its 32 bytes, and the
 * range [digest, successor(digest)) holds them all and nothing else, whatever the names are. The
 * names themselves live in the values (and are compared on read, so a digest collision would be
 * reported as corruption, never served as another group's data).
 */
import { createHash } from 'node:crypto';

export const DIGEST_BYTES = 32;
const PARTITION_BYTES = 4;
const TIME_BYTES = 8;
const REQUEST_DIGEST_BYTES = 16;

/** Names at most this long are remembered (a digest is computed once per commit otherwise). */
const CACHED_NAME_MAX = 256;
const CACHE_ENTRIES = 10_000;
const cache = new Map<string, Buffer>();

/** The 32-byte digest of a group or topic name. */
export function nameDigest(name: string): Buffer {
  const cached = cache.get(name);
  if (cached !== undefined) return cached;
  const digest = createHash('sha256').update(name, 'utf8').digest();
  if (name.length <= CACHED_NAME_MAX) {
    if (cache.size >= CACHE_ENTRIES) cache.clear();
    cache.set(name, digest);
  }
  return digest;
}

/** groups: digest(group). */
export const groupKey = (group: string): Buffer => nameDigest(group);

/**
 * offsets: digest(group) ‖ digest(topic) ‖ n, where n is the block of partitions (layout 3,
 * embedded-value.ts) or the partition (layout 2's offsets-v2, read by the migration). n is an int32
 * with its sign bit flipped, big-endian, so keys sort numerically (negative ones first).
 */
export function offsetKey(
  groupDigest: Buffer,
  topic: string,
  partition: number,
  into: Buffer = Buffer.allocUnsafe(OFFSET_KEY_BYTES),
): Buffer {
  groupDigest.copy(into, 0);
  nameDigest(topic).copy(into, DIGEST_BYTES);
  into.writeUInt32BE((partition ^ 0x80000000) >>> 0, DIGEST_BYTES * 2);
  return into;
}

export const OFFSET_KEY_BYTES = DIGEST_BYTES * 2 + PARTITION_BYTES;

/** The int32 (block or partition) of the offsets key at `start` of `bytes`. */
export function partitionOf(bytes: Uint8Array, start = 0): number {
  const at = start + DIGEST_BYTES * 2;
  return ((bytes[at]! << 24) | (bytes[at + 1]! << 16) | (bytes[at + 2]! << 8) | bytes[at + 3]!) ^ 0x80000000;
}

/** requests: digest(group) ‖ first 16 bytes of digest(requestId). */
export function requestKey(groupDigest: Buffer, requestId: string): Buffer {
  const key = Buffer.allocUnsafe(DIGEST_BYTES + REQUEST_DIGEST_BYTES);
  groupDigest.copy(key, 0);
  createHash('sha256').update(requestId, 'utf8').digest().copy(key, DIGEST_BYTES, 0, REQUEST_DIGEST_BYTES);
  return key;
}

/**
 * requests-v3: the 16 bytes of a time-ordered request id (request-id.ts, its issue time first) ‖
 * digest(group). Keys sort by issue time: a transaction's records land on the last leaf, and
 * expired ones are the range before `issuedBound(cutoff)`.
 */
export function orderedRequestKey(idBytes: Buffer, groupDigest: Buffer): Buffer {
  const key = Buffer.allocUnsafe(idBytes.length + DIGEST_BYTES);
  idBytes.copy(key, 0);
  groupDigest.copy(key, idBytes.length);
  return key;
}

/** The smallest requests-v3 key issued at or after `at` (6 bytes, big-endian ms): a sweep's end. */
export function issuedBound(at: number): Buffer {
  const key = Buffer.alloc(6);
  key.writeUIntBE(Math.max(0, Math.min(2 ** 48 - 1, Math.floor(at))), 0, 6);
  return key;
}

/** request-times: recorded-at milliseconds (uint64 big-endian) ‖ the request key. */
export function requestTimeKey(at: number, reqKey: Buffer): Buffer {
  const key = Buffer.allocUnsafe(TIME_BYTES + reqKey.length);
  key.writeBigUInt64BE(BigInt(Math.max(0, Math.floor(at))), 0);
  reqKey.copy(key, TIME_BYTES);
  return key;
}

/** The request key inside a request-times key. */
export const requestKeyOf = (timeKey: Uint8Array): Buffer => Buffer.from(timeKey.subarray(TIME_BYTES));

/** The smallest request-times key recorded at or after `at`: the exclusive end of a sweep. */
export function timeBound(at: number): Buffer {
  const key = Buffer.alloc(TIME_BYTES);
  key.writeBigUInt64BE(BigInt(Math.max(0, Math.floor(at))), 0);
  return key;
}

/**
 * The range of every key that starts with `prefix`: [prefix, the next prefix of the same length).
 * `end` is absent only for a prefix of all 0xff bytes (nothing sorts after its keys).
 */
export function prefixRange(prefix: Buffer): { start: Buffer; end?: Buffer } {
  const end = Buffer.from(prefix);
  for (let i = end.length - 1; i >= 0; i--) {
    if (end[i]! < 0xff) {
      end[i]!++;
      return { start: prefix, end: end.subarray(0, i + 1) };
    }
  }
  return { start: prefix };
}

/** The first key after `key` among keys of the same fixed width (a page of a walk starts here). */
export const after = (key: Uint8Array): Buffer => Buffer.concat([key, Buffer.of(0)]);
