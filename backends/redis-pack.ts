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

const strHeader = (n: number): number => (n < 32 ? 1 : n < 0x100 ? 2 : n < 0x10000 ? 3 : 5);

function writeArrayHeader(buf: Buffer, pos: number, n: number): number {
  if (n < 16) {
    buf[pos] = 0x90 | n;
    return pos + 1;
  }
  if (n < 0x10000) {
    buf[pos] = 0xdc;
    buf.writeUInt16BE(n, pos + 1);
    return pos + 3;
  }
  buf[pos] = 0xdd;
  buf.writeUInt32BE(n, pos + 1);
  return pos + 5;
}

/** Writes a MessagePack str header for `n` bytes at `pos`, whose size strHeader(n) the caller reserved. */
function writeStrHeader(buf: Buffer, pos: number, n: number): void {
  if (n < 32) buf[pos] = 0xa0 | n;
  else if (n < 0x100) {
    buf[pos] = 0xd9;
    buf[pos + 1] = n;
  } else if (n < 0x10000) {
    buf[pos] = 0xda;
    buf.writeUInt16BE(n, pos + 1);
  } else {
    buf[pos] = 0xdb;
    buf.writeUInt32BE(n, pos + 1);
  }
}

// eslint-disable-next-line no-control-regex
const NON_ASCII = /[^\x00-\x7f]/;

const chr = String.fromCharCode;

function strHeaderChars(n: number): string {
  if (n < 32) return chr(0xa0 | n);
  if (n < 0x100) return chr(0xd9, n);
  if (n < 0x10000) return chr(0xda, n >> 8, n & 0xff);
  return chr(0xdb, n >>> 24, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff);
}

function arrayHeaderChars(n: number): string {
  if (n < 16) return chr(0x90 | n);
  if (n < 0x10000) return chr(0xdc, n >> 8, n & 0xff);
  return chr(0xdd, n >>> 24, (n >> 16) & 0xff, (n >> 8) & 0xff, n & 0xff);
}

/**
 * The usual case, every string ASCII: characters are bytes, so the whole payload is built as one
 * latin1 string and converted once (a Buffer#write per string cost more than all the rest).
 */
function packAscii(hset: string[], cas: string[]): Buffer {
  let out = arrayHeaderChars(2) + arrayHeaderChars(hset.length);
  for (const s of hset) out += strHeaderChars(s.length) + s;
  out += arrayHeaderChars(cas.length);
  for (const s of cas) out += strHeaderChars(s.length) + s;
  return Buffer.from(out, 'latin1');
}

/** A reused scratch buffer: the packed result is copied out of it at the end. */
let scratch = Buffer.allocUnsafe(64 * 1024);

/**
 * Writes `s` as a str at `pos`, returns the next position. The header is sized for `s.length`
 * bytes (exact for ASCII, the usual case); a string that encodes longer is moved behind a bigger
 * header. `buf` has room for 5 + 3 × s.length bytes at `pos`.
 */
function writeStr(buf: Buffer, pos: number, s: string): number {
  const guess = strHeader(s.length);
  const n = buf.write(s, pos + guess, 'utf8');
  const h = strHeader(n);
  if (h !== guess) buf.copyWithin(pos + h, pos + guess, pos + guess + n);
  writeStrHeader(buf, pos, n);
  return pos + h + n;
}

/** The stored value of one partition: "<offset>|<leaderEpoch>|<commitTs>|<expireTs>|<metadata>". */
export function storedValue(w: CommitRequest['writes'][number]): string {
  return `${w.offset}|${w.leaderEpoch}|${w.commitTimestamp}|${w.expireTimestamp}|${w.metadata}`;
}

export const fieldOf = (tp: { topic: string; partition: number }): string => `${tp.topic}:${tp.partition}`;

export function packCommitWrites(request: CommitRequest): Buffer {
  const { writes } = request;
  const hset: string[] = new Array<string>(2 * writes.length);
  const cas: string[] = [];
  // A request's partitions nearly always share their timestamps: convert each bigint once.
  let lastCommit = -2n;
  let lastExpire = -2n;
  let tail = '';
  let bound = 16;
  writes.forEach((w, i) => {
    const field = fieldOf(w);
    if (w.commitTimestamp !== lastCommit || w.expireTimestamp !== lastExpire) {
      lastCommit = w.commitTimestamp;
      lastExpire = w.expireTimestamp;
      tail = `|${lastCommit}|${lastExpire}|`;
    }
    const value = `${w.offset}|${w.leaderEpoch}${tail}${w.metadata}`;
    hset[2 * i] = field;
    hset[2 * i + 1] = value;
    bound += 10 + 3 * (field.length + value.length);
    if (w.expectedOffset !== undefined) {
      const expected = String(w.expectedOffset);
      cas.push(field, expected);
      bound += 10 + 3 * (field.length + expected.length);
    }
  });
  if (!NON_ASCII.test(hset.join('')) && !NON_ASCII.test(cas.join(''))) return packAscii(hset, cas);
  // A rare huge commit gets its own buffer rather than growing the kept one for good.
  if (scratch.length < bound && bound <= 1024 * 1024)
    scratch = Buffer.allocUnsafe(Math.max(bound, 2 * scratch.length));
  const buf = scratch.length >= bound ? scratch : Buffer.allocUnsafe(bound);
  let pos = writeArrayHeader(buf, 0, 2);
  pos = writeArrayHeader(buf, pos, hset.length);
  for (const s of hset) pos = writeStr(buf, pos, s);
  pos = writeArrayHeader(buf, pos, cas.length);
  for (const s of cas) pos = writeStr(buf, pos, s);
  // A copy: ioredis may hold the argument until its pipeline flushes, after the next commit has
  // reused the scratch buffer.
  return Buffer.from(buf.subarray(0, pos));
}
