import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';
import { Reader } from './reader.js';

const hex = (s: string): Buffer => Buffer.from(s.replace(/\s+/g, ''), 'hex');

/** Reference unsigned LEB128 decoder written independently of the codec (BigInt, digit list). */
function refDecodeUnsigned(bytes: number[]): { value: bigint; length: number } {
  let value = 0n;
  for (let i = 0; i < bytes.length; i++) {
    value += BigInt(bytes[i]! & 0x7f) * 128n ** BigInt(i);
    if ((bytes[i]! & 0x80) === 0) return { value, length: i + 1 };
  }
  throw new Error('unterminated');
}
function refEncodeUnsigned(v: bigint): number[] {
  const out: number[] = [];
  do {
    const digit = Number(v % 128n);
    v = v / 128n;
    out.push(v > 0n ? digit + 128 : digit);
  } while (v > 0n);
  return out;
}
const refZigzag = (v: bigint): bigint => (v >= 0n ? 2n * v : -2n * v - 1n);

describe('Reader primitives against hand-built bytes', () => {
  it('reads fixed-width big-endian integers', () => {
    const r = new Reader(hex('ff 8000 7fffffff 0000000000000001 ffff 80000000 fffffffffffffffe'));
    expect(r.int8()).toBe(-1);
    expect(r.int16()).toBe(-32768);
    expect(r.int32()).toBe(2147483647);
    expect(r.int64()).toBe(1n);
    expect(r.uint16()).toBe(65535);
    expect(r.uint32()).toBe(2147483648);
    expect(r.int64()).toBe(-2n);
    expect(r.remaining).toBe(0);
  });

  it('reads float64, bool and uuid', () => {
    const r = new Reader(hex('3ff8000000000000 00 01 02 000102030405060708090a0b0c0d0e0f'));
    expect(r.float64()).toBe(1.5);
    expect(r.bool()).toBe(false);
    expect(r.bool()).toBe(true);
    expect(r.bool()).toBe(true); // Kafka reads any non-zero byte as true
    const uuid = r.uuid();
    expect(uuid).toHaveLength(22);
    expect(Buffer.from(uuid, 'base64url').toString('hex')).toBe('000102030405060708090a0b0c0d0e0f');
  });

  it('reads the four string encodings', () => {
    const r = new Reader(hex('0003 616263 ffff 0000 04 78797a 00 01 03 c3a9'));
    expect(r.string()).toBe('abc');
    expect(r.nullableString()).toBeNull();
    expect(r.string()).toBe('');
    expect(r.compactString()).toBe('xyz');
    expect(r.compactNullableString()).toBeNull();
    expect(r.compactString()).toBe('');
    expect(r.compactString()).toBe('é');
    expect(r.remaining).toBe(0);
  });

  it('returns bytes as views of the input, not copies', () => {
    const buf = hex('00000002 aabb ffffffff 03 ccdd 00');
    const r = new Reader(buf);
    const b = r.bytes();
    expect(b.toString('hex')).toBe('aabb');
    expect(b.buffer).toBe(buf.buffer);
    expect(b.byteOffset).toBe(buf.byteOffset + 4);
    expect(r.nullableBytes()).toBeNull();
    expect(r.compactBytes().toString('hex')).toBe('ccdd');
    expect(r.compactNullableBytes()).toBeNull();
  });

  it('reads compact bytes that end exactly at the end of the buffer (kafkajs off-by-one)', () => {
    const r = new Reader(hex('03 0102'));
    expect(r.compactBytes().toString('hex')).toBe('0102');
    expect(r.remaining).toBe(0);
    // One byte short must fail, not return a shorter view.
    expect(() => new Reader(hex('04 0102')).compactBytes()).toThrow(ProtocolError);
    // A window that ends before the buffer does: the bound is the window, not the buffer.
    expect(() => new Reader(hex('03 0102 ff'), 0, 2).compactBytes()).toThrow(ProtocolError);
  });

  it('reads array lengths', () => {
    expect(new Reader(hex('00000001 00')).arrayLength()).toBe(1);
    expect(new Reader(hex('ffffffff')).nullableArrayLength()).toBe(-1);
    expect(new Reader(hex('02 00')).compactArrayLength()).toBe(1);
    expect(new Reader(hex('00')).compactNullableArrayLength()).toBe(-1);
    expect(() => new Reader(hex('ffffffff')).arrayLength()).toThrow(ProtocolError);
    expect(() => new Reader(hex('00')).compactArrayLength()).toThrow(ProtocolError);
  });
});

describe('Reader refuses hostile lengths before using them', () => {
  const cases: [string, (r: Reader) => unknown][] = [
    ['7fffffff', (r) => r.bytes()],
    ['7fffffff', (r) => r.arrayLength()],
    ['7fffffff 00', (r) => r.nullableArrayLength()],
    ['fffffff00f', (r) => r.compactArrayLength()],
    ['fffffff00f', (r) => r.compactBytes()],
    ['7fff 61', (r) => r.string()],
    ['fffe', (r) => r.nullableString()],
    ['fffffffe', (r) => r.nullableBytes()],
    ['ff ff ff ff ff 01', (r) => r.uvarint()],
    ['ff ff ff ff 1f', (r) => r.uvarint()],
    ['80 80', (r) => r.uvarint()],
    ['ffffffffffffffffff02', (r) => r.uvarlong()],
    ['05 00', (r) => r.taggedFieldCount()],
    ['', (r) => r.int8()],
    ['00', (r) => r.int16()],
    ['000000', (r) => r.int32()],
    ['00000000000000', (r) => r.int64()],
    ['00', (r) => r.uuid()],
  ];
  for (const [bytes, read] of cases) {
    it(`throws ProtocolError for ${bytes || '(empty)'}`, () => {
      const r = new Reader(hex(bytes));
      let err: unknown;
      try {
        read(r);
      } catch (e) {
        err = e;
      }
      expect(err).toBeInstanceOf(ProtocolError);
      expect((err as ProtocolError).code).toMatch(/^[A-Z_]+$/);
    });
  }

  it('sub() readers stay inside their window', () => {
    const r = new Reader(hex('01 02 03 04'));
    const s = r.sub(2);
    expect(r.offset).toBe(2);
    expect(s.int16()).toBe(0x0102);
    expect(() => s.int8()).toThrow(ProtocolError);
    expect(() => r.sub(3)).toThrow(ProtocolError);
  });
});

describe('varints against an independent reference implementation', () => {
  it('uvarint matches reference decoding', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), (v) => {
        const bytes = refEncodeUnsigned(BigInt(v));
        const r = new Reader(Buffer.from(bytes));
        expect(r.uvarint()).toBe(v);
        expect(r.remaining).toBe(0);
        expect(refDecodeUnsigned(bytes).value).toBe(BigInt(v));
      }),
    );
  });

  it('varint (zigzag) matches reference decoding', () => {
    fc.assert(
      fc.property(fc.integer({ min: -0x80000000, max: 0x7fffffff }), (v) => {
        const r = new Reader(Buffer.from(refEncodeUnsigned(refZigzag(BigInt(v)))));
        expect(r.varint()).toBe(v);
        expect(r.remaining).toBe(0);
      }),
    );
  });

  it('uvarlong and varlong match reference decoding', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), (v) => {
        const zig = new Reader(Buffer.from(refEncodeUnsigned(refZigzag(v))));
        expect(zig.varlong()).toBe(v);
        expect(zig.remaining).toBe(0);
        const u = BigInt.asUintN(64, v);
        const un = new Reader(Buffer.from(refEncodeUnsigned(u)));
        expect(un.uvarlong()).toBe(u);
      }),
    );
  });

  it('decodes well-known encodings', () => {
    expect(new Reader(hex('ac02')).uvarint()).toBe(300);
    expect(new Reader(hex('01')).varint()).toBe(-1);
    expect(new Reader(hex('02')).varint()).toBe(1);
    expect(new Reader(hex('ffffffff0f')).varint()).toBe(-2147483648);
    expect(new Reader(hex('feffffff0f')).varint()).toBe(2147483647);
    expect(new Reader(hex('ffffffffffffffffff01')).varlong()).toBe(-(2n ** 63n));
  });
});
