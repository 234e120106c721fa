import { ProtocolError } from './errors.js';

/** One tagged field the codec did not recognise, kept as raw bytes so re-encoding is byte-exact. */
export interface TaggedField {
  tag: number;
  data: Buffer;
}

/**
 * Sequential reader over one Kafka frame (or a slice of it). Every length and count is checked
 * against the bytes left before it is used, so a hostile length can never cause an allocation larger
 * than the frame itself; all failures throw ProtocolError. Byte fields come back as views into the
 * input buffer (zero copy): callers that keep them past the life of the frame must copy them.
 */
export class Reader {
  readonly buf: Buffer;
  offset: number;
  readonly end: number;

  constructor(buf: Buffer, offset = 0, end = buf.length) {
    if (offset < 0 || end > buf.length || offset > end) {
      throw new ProtocolError(
        'BAD_RANGE',
        `reader range ${offset}..${end} outside buffer of ${buf.length}`,
        offset,
      );
    }
    this.buf = buf;
    this.offset = offset;
    this.end = end;
  }

  get remaining(): number {
    return this.end - this.offset;
  }

  private need(n: number): void {
    if (this.end - this.offset < n) {
      throw new ProtocolError(
        'TRUNCATED',
        `needed ${n} bytes at offset ${this.offset}, only ${this.end - this.offset} left`,
        this.offset,
      );
    }
  }

  int8(): number {
    this.need(1);
    return this.buf.readInt8(this.offset++);
  }

  uint8(): number {
    this.need(1);
    return this.buf[this.offset++]!;
  }

  // Hot paths read bytes directly: Buffer#readInt*BE repeats the bounds checks `need` already did.
  int16(): number {
    const o = this.offset;
    if (this.end - o < 2) this.need(2);
    const b = this.buf;
    this.offset = o + 2;
    return ((b[o]! << 24) | (b[o + 1]! << 16)) >> 16;
  }

  uint16(): number {
    this.need(2);
    const v = this.buf.readUInt16BE(this.offset);
    this.offset += 2;
    return v;
  }

  int32(): number {
    const o = this.offset;
    if (this.end - o < 4) this.need(4);
    const b = this.buf;
    this.offset = o + 4;
    return (b[o]! << 24) | (b[o + 1]! << 16) | (b[o + 2]! << 8) | b[o + 3]!;
  }

  uint32(): number {
    this.need(4);
    const v = this.buf.readUInt32BE(this.offset);
    this.offset += 4;
    return v;
  }

  int64(): bigint {
    const o = this.offset;
    if (this.end - o < 8) this.need(8);
    const b = this.buf;
    this.offset = o + 8;
    const hi = (b[o]! << 24) | (b[o + 1]! << 16) | (b[o + 2]! << 8) | b[o + 3]!;
    const lo = ((b[o + 4]! << 24) | (b[o + 5]! << 16) | (b[o + 6]! << 8) | b[o + 7]!) >>> 0;
    // Small values (the common case: offsets, ids, -1) avoid BigInt shifting.
    if ((hi === 0 && lo <= 0x7fffffff) || (hi === -1 && lo >= 0x80000000))
      return BigInt(hi === 0 ? lo : lo - 0x100000000);
    return (BigInt(hi) << 32n) | BigInt(lo);
  }

  float64(): number {
    this.need(8);
    const v = this.buf.readDoubleBE(this.offset);
    this.offset += 8;
    return v;
  }

  /** Kafka treats any non-zero byte as true; so do we (re-encoding writes 1). */
  bool(): boolean {
    this.need(1);
    return this.buf[this.offset++] !== 0;
  }

  /** Unsigned 32-bit varint (at most 5 bytes), as used for compact lengths and tagged-field headers. */
  uvarint(): number {
    // One-byte values (compact lengths of short strings/arrays, empty tag sections) dominate.
    if (this.offset < this.end) {
      const first = this.buf[this.offset]!;
      if (first < 0x80) {
        this.offset++;
        return first;
      }
    }
    const buf = this.buf;
    let value = 0;
    let shift = 0;
    for (let i = 0; i < 5; i++) {
      if (this.offset >= this.end) this.need(1);
      const b = buf[this.offset++]!;
      if (i === 4 && b > 0x0f) {
        throw new ProtocolError('BAD_VARINT', 'unsigned varint does not fit in 32 bits', this.offset - 1);
      }
      value += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) return value;
      shift += 7;
    }
    throw new ProtocolError('BAD_VARINT', 'varint longer than 5 bytes', this.offset);
  }

  /** Signed zigzag 32-bit varint. */
  varint(): number {
    // uvarint() never exceeds 2^32-1, so the unsigned shift undoes the zigzag without overflow.
    const u = this.uvarint();
    return (u >>> 1) ^ -(u & 1);
  }

  /** Unsigned 64-bit varint (at most 10 bytes). */
  uvarlong(): bigint {
    let value = 0n;
    let shift = 0n;
    for (let i = 0; i < 10; i++) {
      if (this.offset >= this.end) this.need(1);
      const b = this.buf[this.offset++]!;
      if (i === 9 && b > 0x01) {
        throw new ProtocolError('BAD_VARINT', 'unsigned varlong does not fit in 64 bits', this.offset - 1);
      }
      value |= BigInt(b & 0x7f) << shift;
      if ((b & 0x80) === 0) return value;
      shift += 7n;
    }
    throw new ProtocolError('BAD_VARINT', 'varlong longer than 10 bytes', this.offset);
  }

  /** Signed zigzag 64-bit varint. */
  varlong(): bigint {
    const u = this.uvarlong();
    return BigInt.asIntN(64, (u >> 1n) ^ -(u & 1n));
  }

  /** A 16-byte UUID, returned in Kafka's own text form: unpadded base64url (22 characters). */
  uuid(): string {
    this.need(16);
    const s = this.buf.toString('base64url', this.offset, this.offset + 16);
    this.offset += 16;
    return s;
  }

  /** A view of the next `n` bytes (zero copy). */
  view(n: number): Buffer {
    if (n < 0) throw new ProtocolError('BAD_LENGTH', `negative length ${n}`, this.offset);
    this.need(n);
    const v = this.buf.subarray(this.offset, this.offset + n);
    this.offset += n;
    return v;
  }

  skip(n: number): void {
    this.need(n);
    this.offset += n;
  }

  /** A reader over the next `n` bytes; this reader moves past them. Used for tagged-field payloads. */
  sub(n: number): Reader {
    this.need(n);
    const r = new Reader(this.buf, this.offset, this.offset + n);
    this.offset += n;
    return r;
  }

  private utf8(n: number): string {
    // Empty strings are common (committed metadata, one per partition): no Buffer#toString call.
    if (n === 0) return '';
    const start = this.offset;
    if (this.end - start < n) this.need(n);
    this.offset = start + n;
    return this.buf.toString('utf8', start, start + n);
  }

  private nonNull(what: string): never {
    throw new ProtocolError('UNEXPECTED_NULL', `non-nullable ${what} was null`, this.offset);
  }

  string(): string {
    const n = this.int16();
    if (n < 0) this.nonNull('string');
    return this.utf8(n);
  }

  nullableString(): string | null {
    const n = this.int16();
    if (n < 0) {
      if (n !== -1) throw new ProtocolError('BAD_LENGTH', `string length ${n}`, this.offset - 2);
      return null;
    }
    return this.utf8(n);
  }

  compactString(): string {
    const n = this.uvarint();
    if (n === 0) this.nonNull('compact string');
    return this.utf8(n - 1);
  }

  compactNullableString(): string | null {
    const n = this.uvarint();
    return n === 0 ? null : this.utf8(n - 1);
  }

  bytes(): Buffer {
    const n = this.int32();
    if (n < 0) this.nonNull('bytes');
    return this.view(n);
  }

  nullableBytes(): Buffer | null {
    const n = this.int32();
    if (n < 0) {
      if (n !== -1) throw new ProtocolError('BAD_LENGTH', `bytes length ${n}`, this.offset - 4);
      return null;
    }
    return this.view(n);
  }

  compactBytes(): Buffer {
    const n = this.uvarint();
    if (n === 0) this.nonNull('compact bytes');
    return this.view(n - 1);
  }

  compactNullableBytes(): Buffer | null {
    const n = this.uvarint();
    return n === 0 ? null : this.view(n - 1);
  }

  /**
   * Array counts are bounded by the bytes left: every element takes at least one byte in any
   * version that can carry a useful element, so a larger count is malformed and is refused before
   * anything is allocated for it.
   */
  private checkCount(n: number, at: number): number {
    if (n > this.end - this.offset) {
      throw new ProtocolError(
        'BAD_LENGTH',
        `array count ${n} exceeds the ${this.end - this.offset} bytes left`,
        at,
      );
    }
    return n;
  }

  arrayLength(): number {
    const at = this.offset;
    const n = this.int32();
    if (n < 0) this.nonNull('array');
    return this.checkCount(n, at);
  }

  /** Returns -1 for a null array. */
  nullableArrayLength(): number {
    const at = this.offset;
    const n = this.int32();
    if (n < 0) {
      if (n !== -1) throw new ProtocolError('BAD_LENGTH', `array length ${n}`, at);
      return -1;
    }
    return this.checkCount(n, at);
  }

  compactArrayLength(): number {
    const at = this.offset;
    const n = this.uvarint();
    if (n === 0) this.nonNull('compact array');
    return this.checkCount(n - 1, at);
  }

  /** Returns -1 for a null array. */
  compactNullableArrayLength(): number {
    const at = this.offset;
    const n = this.uvarint();
    return n === 0 ? -1 : this.checkCount(n - 1, at);
  }

  /** `n` int32 values (an array body whose count was already read and checked). */
  int32Array(n: number): number[] {
    const o = this.offset;
    if (this.end - o < 4 * n) this.need(4 * n);
    const b = this.buf;
    const out = new Array<number>(n);
    for (let i = 0, p = o; i < n; i++, p += 4)
      out[i] = (b[p]! << 24) | (b[p + 1]! << 16) | (b[p + 2]! << 8) | b[p + 3]!;
    this.offset = o + 4 * n;
    return out;
  }

  /** Reads a whole tagged-field section keeping every field as raw bytes (for headers and tools). */
  rawTaggedFields(): TaggedField[] | undefined {
    const at = this.offset;
    const count = this.uvarint();
    if (count === 0) return undefined;
    this.checkCount(count, at);
    const out: TaggedField[] = [];
    for (let i = 0; i < count; i++) {
      const tag = this.uvarint();
      out.push({ tag, data: this.view(this.uvarint()) });
    }
    return out;
  }

  /** The count of a tagged-field section; each field takes at least two bytes, so the count is bounded. */
  taggedFieldCount(): number {
    const at = this.offset;
    return this.checkCount(this.uvarint(), at);
  }

  /** Throws unless everything up to `end` has been consumed (tagged-field payloads must be exact). */
  expectEnd(): void {
    if (this.offset !== this.end) {
      throw new ProtocolError('TRAILING_BYTES', `${this.end - this.offset} unread bytes`, this.offset);
    }
  }
}
