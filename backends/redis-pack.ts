/**
 * A commit's writes as ONE MessagePack argument for the commit script, which unpacks it with
 * Redis's built-in `cmsgpack` (C, not interpreted Lua).
 *
 * Why: passing three arguments per partition cost more CPU than everything else about a commit.
 * ioredis builds and copies each argument separately, Redis parses each one and Lua copies it again
 * into ARGV (bench/offset-commits.ts: 0.41 ms of proxy CPU per 100-partition commit, against 0.15
 * ms for the whole proxy path with no store). Parsing a length-prefixed string in Lua instead
 * moved the cost into Redis. One binary argument decoded in C removes it on both sides.
 *
 * Layout: a 2-element array [hset, cas], where `hset` is [field1, value1, field2, value2, ...],
 * ready for HSET, and `cas` is [field, expectedOffset, ...] for the partitions that carry an
 * expected offset (usually none). Every element is a MessagePack str (binary-safe in cmsgpack);
 * a value's header is sized for the longest the value could be (str8 for up to 255 bytes) and
 * filled in once it is written, which MessagePack allows (a decoder reads the length it is given).
 */
import type { CommitRequest } from './store.js';

/**
 * The packed bytes are written straight into one growing scratch buffer: digits from numbers,
 * names byte by byte. Building a JS string per field and value first (and converting it) was a
 * sixth of the proxy's CPU on a 100-partition commit (bench/offset-commits.ts --cpu-prof). The hot
 * loop keeps the buffer and position in locals and passes them to small helpers that return the new
 * position: through module-level variables every byte cost a load and a store of the position
 * (in a micro-benchmark, best of 8: 27 µs per 100-partition commit before, 19 µs now).
 */
let scratch = Buffer.allocUnsafe(64 * 1024);

/** A buffer of at least `n` bytes whose first `used` bytes are kept. */
function grow(b: Buffer, used: number, n: number): Buffer {
  if (n <= b.length) return b;
  const bigger = Buffer.allocUnsafe(Math.max(n, 2 * b.length));
  b.copy(bigger, 0, 0, used);
  scratch = bigger;
  return bigger;
}

function putArrayHeader(b: Buffer, p: number, n: number): number {
  if (n < 16) {
    b[p] = 0x90 | n;
    return p + 1;
  }
  if (n < 0x10000) {
    b[p] = 0xdc;
    b.writeUInt16BE(n, p + 1);
    return p + 3;
  }
  b[p] = 0xdd;
  b.writeUInt32BE(n, p + 1);
  return p + 5;
}

/** Header bytes of a str of up to `max` bytes: values are written before their exact length is known. */
const headerBytesFor = (max: number): number => (max < 0x100 ? 2 : max < 0x10000 ? 3 : 5);

/** A str header of `size` bytes (2, 3 or 5: str8/16/32) for `n` bytes; non-minimal is valid MessagePack. */
function putSizedStrHeader(b: Buffer, p: number, size: number, n: number): void {
  if (size === 2) {
    b[p] = 0xd9;
    b[p + 1] = n;
  } else if (size === 3) {
    b[p] = 0xda;
    b.writeUInt16BE(n, p + 1);
  } else {
    b[p] = 0xdb;
    b.writeUInt32BE(n, p + 1);
  }
}

/** A MessagePack str header for `n` bytes, minimal. */
function putStrHeader(b: Buffer, p: number, n: number): number {
  if (n < 32) {
    b[p] = 0xa0 | n;
    return p + 1;
  }
  const size = headerBytesFor(n);
  putSizedStrHeader(b, p, size, n);
  return p + size;
}

/** A string's UTF-8 bytes: its length when every character is ASCII (checked, not assumed). */
function byteLength(s: string): number {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) >= 0x80) return Buffer.byteLength(s, 'utf8');
  return s.length;
}

/** Writes the UTF-8 bytes of `s`, whose byte length is `n`. */
function putText(b: Buffer, p: number, s: string, n: number): number {
  if (n === s.length && n <= 64) {
    for (let i = 0; i < n; i++) b[p + i] = s.charCodeAt(i);
    return p + n;
  }
  return p + b.write(s, p, n, 'utf8');
}

/** Decimal digits of a non-negative integer below 2^53. */
function digits(n: number): number {
  let d = 1;
  while (n >= 10) {
    n = Math.floor(n / 10);
    d++;
  }
  return d;
}

/** Writes a safe integer (|n| < 2^53) as decimal text (at most 17 bytes). */
function putInteger(b: Buffer, p: number, n: number): number {
  if (n < 0) {
    b[p++] = 0x2d; // '-'
    n = -n;
  }
  if (n < 10) {
    b[p] = 0x30 + n;
    return p + 1;
  }
  const end = p + digits(n);
  for (let i = end - 1; i >= p; i--) {
    const q = Math.floor(n / 10);
    b[i] = 0x30 + (n - q * 10);
    n = q;
  }
  return end;
}

/** A 64-bit integer as decimal text (at most 20 bytes). Number() once, not BigInt comparisons. */
function putLong(b: Buffer, p: number, v: bigint): number {
  const n = Number(v);
  if (Number.isSafeInteger(n)) return putInteger(b, p, n);
  const text = v.toString();
  return putText(b, p, text, text.length);
}

const PIPE = 0x7c;
const COLON = 0x3a;

/** The stored value of one partition: "<offset>|<leaderEpoch>|<commitTs>|<expireTs>|<metadata>". */
export function storedValue(w: CommitRequest['writes'][number]): string {
  return `${w.offset}|${w.leaderEpoch}|${w.commitTimestamp}|${w.expireTimestamp}|${w.metadata}`;
}

export const fieldOf = (tp: { topic: string; partition: number }): string => `${tp.topic}:${tp.partition}`;

export function packCommitWrites(request: CommitRequest): Buffer {
  const { writes } = request;
  // Room for the worst case, in one pass (UTF-8 is at most 3 bytes per UTF-16 unit), so the loop
  // below never checks: a str header (5), the partition (11), an offset (20), an epoch (11),
  // timestamps (2 x 20) and 4 separators, plus names and metadata.
  let room = 16;
  for (const w of writes) room += 100 + 3 * (w.topic.length + w.metadata.length);
  let b = grow(scratch, 0, room);
  let p = putArrayHeader(b, 0, 2);
  p = putArrayHeader(b, p, 2 * writes.length);
  // A request's partitions nearly always share their topic and timestamps: measure each once.
  let topic: string | null = null;
  let topicBytes = 0;
  // No timestamp is out of range (a v1 client sends its own), so "none yet" is null.
  let lastCommit: bigint | null = null;
  let lastExpire: bigint | null = null;
  let tail = '';
  let withCas = 0;
  for (let i = 0; i < writes.length; i++) {
    const w = writes[i]!;
    if (w.topic !== topic) {
      topic = w.topic;
      topicBytes = byteLength(topic);
    }
    if (w.commitTimestamp !== lastCommit || w.expireTimestamp !== lastExpire) {
      lastCommit = w.commitTimestamp;
      lastExpire = w.expireTimestamp;
      tail = `|${lastCommit}|${lastExpire}|`;
    }
    if (w.expectedOffset !== undefined) withCas++;
    // The field: "<topic>:<partition>" (a hostile client may send a negative partition).
    const partition = w.partition;
    p = putStrHeader(b, p, topicBytes + 1 + (partition < 0 ? 1 + digits(-partition) : digits(partition)));
    p = putText(b, p, topic, topicBytes);
    b[p++] = COLON;
    p = putInteger(b, p, partition);
    // The value: "<offset>|<leaderEpoch>|<commitTs>|<expireTs>|<metadata>", its length known once
    // written: the header is sized for the longest it can be and filled in after.
    const metadata = w.metadata;
    const header = headerBytesFor(33 + tail.length + 3 * metadata.length);
    const start = p + header;
    let q = putLong(b, start, w.offset);
    b[q++] = PIPE;
    q = putInteger(b, q, w.leaderEpoch);
    q = putText(b, q, tail, tail.length);
    if (metadata !== '') q = putText(b, q, metadata, byteLength(metadata));
    putSizedStrHeader(b, p, header, q - start);
    p = q;
  }
  b = grow(b, p, p + 5);
  p = putArrayHeader(b, p, 2 * withCas);
  for (const w of writes) {
    if (w.expectedOffset === undefined) continue;
    const field = fieldOf(w);
    const fieldBytes = byteLength(field);
    const expected = String(w.expectedOffset);
    b = grow(b, p, p + 10 + fieldBytes + expected.length);
    p = putStrHeader(b, p, fieldBytes);
    p = putText(b, p, field, fieldBytes);
    p = putStrHeader(b, p, expected.length);
    p = putText(b, p, expected, expected.length);
  }
  // A copy: ioredis may hold the argument until its pipeline flushes, after the next commit has
  // reused the scratch buffer. A rare huge commit does not keep its buffer for good.
  const out = Buffer.from(b.subarray(0, p));
  if (b.length > 1024 * 1024) scratch = Buffer.allocUnsafe(64 * 1024);
  return out;
}
