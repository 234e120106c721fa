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
 * expected offset (usually none). Every element is a MessagePack str (binary-safe in cmsgpack).
 */
import type { CommitRequest } from './store.js';

/**
 * The packed bytes are written straight into one growing scratch buffer: digits from numbers,
 * names byte by byte. Building a JS string per field and value first (and converting it) was a
 * sixth of the proxy's CPU on a 100-partition commit (bench/offset-commits.ts --cpu-prof).
 */
let buf = Buffer.allocUnsafe(64 * 1024);
let pos = 0;

function ensure(n: number): void {
  if (pos + n <= buf.length) return;
  const bigger = Buffer.allocUnsafe(Math.max(pos + n, 2 * buf.length));
  buf.copy(bigger, 0, 0, pos);
  buf = bigger;
}

function writeArrayHeader(n: number): void {
  ensure(5);
  if (n < 16) {
    buf[pos++] = 0x90 | n;
  } else if (n < 0x10000) {
    buf[pos] = 0xdc;
    buf.writeUInt16BE(n, pos + 1);
    pos += 3;
  } else {
    buf[pos] = 0xdd;
    buf.writeUInt32BE(n, pos + 1);
    pos += 5;
  }
}

/** A MessagePack str header for `n` bytes (room for it ensured by the caller). */
function writeStrHeader(n: number): void {
  if (n < 32) {
    buf[pos++] = 0xa0 | n;
  } else if (n < 0x100) {
    buf[pos++] = 0xd9;
    buf[pos++] = n;
  } else if (n < 0x10000) {
    buf[pos] = 0xda;
    buf.writeUInt16BE(n, pos + 1);
    pos += 3;
  } else {
    buf[pos] = 0xdb;
    buf.writeUInt32BE(n, pos + 1);
    pos += 5;
  }
}

/** A string's UTF-8 bytes: its length when every character is ASCII (checked, not assumed). */
function byteLength(s: string): number {
  for (let i = 0; i < s.length; i++) if (s.charCodeAt(i) >= 0x80) return Buffer.byteLength(s, 'utf8');
  return s.length;
}

/** Writes the UTF-8 bytes of `s`, whose byte length is `n` (room ensured by the caller). */
function writeText(s: string, n: number): void {
  if (n === s.length && n <= 64) {
    for (let i = 0; i < n; i++) buf[pos + i] = s.charCodeAt(i);
  } else {
    buf.write(s, pos, n, 'utf8');
  }
  pos += n;
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

/** Writes a safe integer (|n| < 2^53) as decimal text (room ensured by the caller: 17 bytes). */
function writeInteger(n: number): void {
  if (n < 0) {
    buf[pos++] = 0x2d; // '-'
    n = -n;
  }
  const d = digits(n);
  for (let i = pos + d - 1; i >= pos; i--) {
    const q = Math.floor(n / 10);
    buf[i] = 0x30 + (n - q * 10);
    n = q;
  }
  pos += d;
}

/** The length of a safe integer's decimal text. */
const integerLength = (n: number): number => (n < 0 ? 1 + digits(-n) : digits(n));

/**
 * A 64-bit integer as what writeLong needs: the number when it is exact as a double (checked with
 * Number() once, not with BigInt comparisons: each BigInt operation is a runtime call), else text.
 */
function longValue(v: bigint): number | string {
  const n = Number(v);
  return Number.isSafeInteger(n) ? n : v.toString();
}

const longLength = (x: number | string): number => (typeof x === 'number' ? integerLength(x) : x.length);

function writeLong(x: number | string): void {
  if (typeof x === 'number') writeInteger(x);
  else writeText(x, x.length);
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
  pos = 0;
  writeArrayHeader(2);
  writeArrayHeader(2 * writes.length);
  // A request's partitions nearly always share their topic and timestamps: measure each once.
  let topic: string | null = null;
  let topicBytes = 0;
  let lastCommit = -2n;
  let lastExpire = -2n;
  let tail = '';
  let withCas = 0;
  for (const w of writes) {
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
    const fieldBytes = topicBytes + 1 + integerLength(w.partition);
    // The value: "<offset>|<leaderEpoch>|<commitTs>|<expireTs>|<metadata>".
    const offset = longValue(w.offset);
    const metadataBytes = w.metadata === '' ? 0 : byteLength(w.metadata);
    const valueBytes = longLength(offset) + 1 + integerLength(w.leaderEpoch) + tail.length + metadataBytes;
    ensure(10 + fieldBytes + valueBytes);
    writeStrHeader(fieldBytes);
    writeText(topic, topicBytes);
    buf[pos++] = COLON;
    writeInteger(w.partition);
    writeStrHeader(valueBytes);
    writeLong(offset);
    buf[pos++] = PIPE;
    writeInteger(w.leaderEpoch);
    writeText(tail, tail.length);
    if (metadataBytes > 0) writeText(w.metadata, metadataBytes);
  }
  writeArrayHeader(2 * withCas);
  for (const w of writes) {
    if (w.expectedOffset === undefined) continue;
    const field = fieldOf(w);
    const fieldBytes = byteLength(field);
    const expected = String(w.expectedOffset);
    ensure(10 + fieldBytes + expected.length);
    writeStrHeader(fieldBytes);
    writeText(field, fieldBytes);
    writeStrHeader(expected.length);
    writeText(expected, expected.length);
  }
  // A copy: ioredis may hold the argument until its pipeline flushes, after the next commit has
  // reused the scratch buffer. A rare huge commit does not keep its buffer for good.
  const out = Buffer.from(buf.subarray(0, pos));
  if (buf.length > 1024 * 1024) buf = Buffer.allocUnsafe(64 * 1024);
  return out;
}
