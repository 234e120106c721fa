import { ProtocolError } from './errors.js';
import type { TaggedField } from './reader.js';

const EMPTY = Buffer.alloc(0);

/** Kept out of line so the hot primitives stay small enough to inline. */
function outOfRange(type: string, v: unknown): never {
  throw new RangeError(`${type} out of range: ${String(v)}`);
}

/**
 * Growable output buffer for Kafka encodings. One `Buffer.allocUnsafe` region that doubles when full;
 * `toBuffer()` hands the bytes over and forgets them, so memory given to a caller (and maybe still
 * queued on a socket) is never written again. `Writer.exact(size)` writes straight into a buffer of a
 * size computed beforehand with the sizeOf* functions, the fast path for whole frames.
 */
export class Writer {
  private buf: Buffer;
  offset = 0;
  private fixed = false;
  private capacityHint = 0;

  constructor(initialCapacity = 256) {
    this.buf = Buffer.allocUnsafe(Math.max(16, initialCapacity));
  }

  /** A writer over exactly `size` fresh bytes; writing past them is a bug in a sizeOf* function and throws. */
  static exact(size: number): Writer {
    const w = new Writer(0);
    w.buf = Buffer.allocUnsafe(size);
    w.fixed = true;
    return w;
  }

  private ensure(n: number): void {
    if (this.offset + n <= this.buf.length) return;
    if (this.fixed) {
      throw new ProtocolError(
        'SIZE_MISMATCH',
        `exact-size writer of ${this.buf.length} bytes overflowed at ${this.offset} (+${n})`,
        this.offset,
      );
    }
    let cap = Math.max(16, this.buf.length * 2, this.capacityHint);
    while (cap < this.offset + n) cap *= 2;
    const next = Buffer.allocUnsafe(cap);
    this.buf.copy(next, 0, 0, this.offset);
    this.buf = next;
  }

  /** The bytes written so far; the Writer starts afresh and never touches them again. */
  toBuffer(): Buffer {
    const out = this.buf.subarray(0, this.offset);
    if (this.fixed && this.offset !== this.buf.length) {
      throw new ProtocolError(
        'SIZE_MISMATCH',
        `exact-size writer filled ${this.offset} of ${this.buf.length} bytes`,
        this.offset,
      );
    }
    // Allocate the next buffer lazily (many writers are used once), sized like this one up to 64 KiB.
    if (!this.fixed) this.capacityHint = Math.min(this.buf.length, 64 * 1024);
    this.buf = EMPTY;
    this.offset = 0;
    return out;
  }

  int8(v: number): void {
    this.ensure(1);
    this.offset = this.buf.writeInt8(v, this.offset);
  }

  uint8(v: number): void {
    this.ensure(1);
    this.offset = this.buf.writeUInt8(v, this.offset);
  }

  // Hot paths write bytes directly (after their own range check): Buffer#writeInt*BE is slower.
  int16(v: number): void {
    if (v !== (v << 16) >> 16) throw new RangeError(`int16 out of range: ${v}`);
    this.ensure(2);
    const b = this.buf;
    const o = this.offset;
    b[o] = v >>> 8;
    b[o + 1] = v;
    this.offset = o + 2;
  }

  uint16(v: number): void {
    this.ensure(2);
    this.offset = this.buf.writeUInt16BE(v, this.offset);
  }

  int32(v: number): void {
    if (v !== (v | 0)) outOfRange('int32', v);
    this.ensure(4);
    const b = this.buf;
    const o = this.offset;
    b[o] = v >>> 24;
    b[o + 1] = v >>> 16;
    b[o + 2] = v >>> 8;
    b[o + 3] = v;
    this.offset = o + 4;
  }

  uint32(v: number): void {
    this.ensure(4);
    this.offset = this.buf.writeUInt32BE(v, this.offset);
  }

  /** The elements of an int32 list (its length already written). */
  int32Array(a: readonly number[]): void {
    const n = a.length;
    this.ensure(4 * n);
    const b = this.buf;
    let o = this.offset;
    for (let i = 0; i < n; i++) {
      const v = a[i]!;
      if (v !== (v | 0)) outOfRange('int32', v);
      b[o] = v >>> 24;
      b[o + 1] = v >>> 16;
      b[o + 2] = v >>> 8;
      b[o + 3] = v;
      o += 4;
    }
    this.offset = o;
  }

  int64(v: bigint): void {
    this.ensure(8);
    // Offsets, ids and -1 fit in an int32: skip BigInt arithmetic for them.
    if (v >= -0x80000000n && v <= 0x7fffffffn) {
      const n = Number(v);
      const b = this.buf;
      const o = this.offset;
      const hi = n < 0 ? 0xff : 0;
      b[o] = hi;
      b[o + 1] = hi;
      b[o + 2] = hi;
      b[o + 3] = hi;
      b[o + 4] = n >>> 24;
      b[o + 5] = n >>> 16;
      b[o + 6] = n >>> 8;
      b[o + 7] = n;
      this.offset = o + 8;
      return;
    }
    this.offset = this.buf.writeBigInt64BE(v, this.offset);
  }

  float64(v: number): void {
    this.ensure(8);
    this.offset = this.buf.writeDoubleBE(v, this.offset);
  }

  bool(v: boolean): void {
    this.ensure(1);
    this.buf[this.offset++] = v ? 1 : 0;
  }

  uvarint(v: number): void {
    if (v >= 0 && v < 0x80 && Number.isInteger(v)) {
      this.ensure(1);
      this.buf[this.offset++] = v;
      return;
    }
    if (!(v >= 0 && v <= 0xffffffff) || !Number.isInteger(v)) {
      throw new RangeError(`uvarint out of range: ${v}`);
    }
    this.ensure(sizeOfUvarint(v));
    const buf = this.buf;
    while (v >= 0x80) {
      buf[this.offset++] = (v & 0x7f) | 0x80;
      v = Math.floor(v / 128);
    }
    buf[this.offset++] = v;
  }

  varint(v: number): void {
    if (!(v >= -0x80000000 && v <= 0x7fffffff) || !Number.isInteger(v)) {
      throw new RangeError(`varint out of range: ${v}`);
    }
    this.uvarint(((v << 1) ^ (v >> 31)) >>> 0);
  }

  uvarlong(v: bigint): void {
    if (v < 0n || v > 0xffffffffffffffffn) throw new RangeError(`uvarlong out of range: ${v}`);
    this.ensure(sizeOfUvarlong(v));
    while (v >= 0x80n) {
      this.buf[this.offset++] = Number(v & 0x7fn) | 0x80;
      v >>= 7n;
    }
    this.buf[this.offset++] = Number(v);
  }

  varlong(v: bigint): void {
    const s = BigInt.asIntN(64, v);
    if (s !== v) throw new RangeError(`varlong out of range: ${v}`);
    this.uvarlong(BigInt.asUintN(64, (s << 1n) ^ (s >> 63n)));
  }

  /** A UUID in Kafka's text form (22 characters of unpadded base64url), written as its 16 bytes. */
  uuid(v: string): void {
    this.ensure(16);
    const n = v.length === 22 ? this.buf.write(v, this.offset, 16, 'base64url') : -1;
    if (n !== 16) throw new RangeError(`not a 22-character base64url UUID: ${JSON.stringify(v)}`);
    this.offset += 16;
  }

  /** Raw bytes with no length prefix. */
  raw(b: Buffer): void {
    this.ensure(b.length);
    this.offset += b.copy(this.buf, this.offset);
  }

  private utf8(v: string, byteLength: number): void {
    this.ensure(byteLength);
    if (byteLength === v.length && byteLength < 48) {
      // ASCII (byte length equals UTF-16 length only then): a plain loop beats Buffer#write for short strings.
      const b = this.buf;
      let o = this.offset;
      for (let i = 0; i < byteLength; i++) b[o++] = v.charCodeAt(i);
      this.offset = o;
      return;
    }
    this.offset += this.buf.write(v, this.offset, byteLength, 'utf8');
  }

  string(v: string): void {
    const n = sizeOfUtf8(v);
    if (n > 0x7fff) throw new RangeError(`string of ${n} bytes is too long for an int16 length`);
    this.int16(n);
    this.utf8(v, n);
  }

  nullableString(v: string | null): void {
    if (v === null) this.int16(-1);
    else this.string(v);
  }

  compactString(v: string): void {
    const n = sizeOfUtf8(v);
    if (n > 0x7fff) throw new RangeError(`string of ${n} bytes is too long`);
    this.uvarint(n + 1);
    this.utf8(v, n);
  }

  compactNullableString(v: string | null): void {
    if (v === null) this.uvarint(0);
    else this.compactString(v);
  }

  bytes(v: Buffer): void {
    this.int32(v.length);
    this.raw(v);
  }

  nullableBytes(v: Buffer | null): void {
    if (v === null) this.int32(-1);
    else this.bytes(v);
  }

  compactBytes(v: Buffer): void {
    this.uvarint(v.length + 1);
    this.raw(v);
  }

  compactNullableBytes(v: Buffer | null): void {
    if (v === null) this.uvarint(0);
    else this.compactBytes(v);
  }

  arrayLength(n: number): void {
    this.int32(n);
  }

  /** Pass -1 for a null array. */
  compactArrayLength(n: number): void {
    this.uvarint(n + 1);
  }

  /** Reserves an int32 to be filled later with `patchInt32` (e.g. a frame size prefix). */
  reserveInt32(): number {
    this.ensure(4);
    const at = this.offset;
    this.offset += 4;
    return at;
  }

  patchInt32(at: number, v: number): void {
    this.buf.writeInt32BE(v, at);
  }

  /** Writes tagged fields kept raw (unknown to this codec), in the order given. */
  rawTaggedField(f: TaggedField): void {
    this.uvarint(f.tag);
    this.uvarint(f.data.length);
    this.raw(f.data);
  }

  /** A whole tagged-field section made only of raw fields (headers). */
  rawTaggedFields(fields: readonly TaggedField[] | undefined): void {
    if (fields === undefined) {
      this.uvarint(0);
      return;
    }
    this.uvarint(fields.length);
    for (const f of fields) this.rawTaggedField(f);
  }
}

// Exact encoded sizes, used by the generated sizeOf* functions.

export function sizeOfUvarint(v: number): number {
  if (v < 0x80) return 1;
  if (v < 0x4000) return 2;
  if (v < 0x200000) return 3;
  if (v < 0x10000000) return 4;
  return 5;
}

export function sizeOfVarint(v: number): number {
  return sizeOfUvarint(((v << 1) ^ (v >> 31)) >>> 0);
}

export function sizeOfUvarlong(v: bigint): number {
  let n = 1;
  while (v >= 0x80n) {
    v >>= 7n;
    n++;
  }
  return n;
}

export function sizeOfVarlong(v: bigint): number {
  const s = BigInt.asIntN(64, v);
  return sizeOfUvarlong(BigInt.asUintN(64, (s << 1n) ^ (s >> 63n)));
}

export function sizeOfUtf8(v: string): number {
  // Short ASCII strings (names, ids) are the common case: count them without calling into C++.
  const len = v.length;
  if (len < 48) {
    let i = 0;
    while (i < len && v.charCodeAt(i) < 0x80) i++;
    if (i === len) return len;
  }
  return Buffer.byteLength(v, 'utf8');
}

export function sizeOfRawTaggedFields(fields: readonly TaggedField[] | undefined): number {
  if (fields === undefined) return 1;
  let n = sizeOfUvarint(fields.length);
  for (const f of fields) n += sizeOfUvarint(f.tag) + sizeOfUvarint(f.data.length) + f.data.length;
  return n;
}
