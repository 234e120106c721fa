import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ProtocolError } from './errors.js';
import { Writer, sizeOfUvarint, sizeOfUvarlong, sizeOfVarint, sizeOfVarlong } from './writer.js';

const hex = (s: string): string => s.replace(/\s+/g, '');

/** Reference unsigned LEB128 encoder written independently of the codec. */
function refEncodeUnsigned(v: bigint): string {
  const out: number[] = [];
  do {
    const digit = Number(v % 128n);
    v = v / 128n;
    out.push(v > 0n ? digit + 128 : digit);
  } while (v > 0n);
  return Buffer.from(out).toString('hex');
}
const refZigzag = (v: bigint): bigint => (v >= 0n ? 2n * v : -2n * v - 1n);

function bytesOf(fn: (w: Writer) => void): string {
  const w = new Writer(1);
  fn(w);
  return w.toBuffer().toString('hex');
}

describe('Writer primitives against hand-built bytes', () => {
  it('writes fixed-width integers big-endian', () => {
    expect(
      bytesOf((w) => {
        w.int8(-1);
        w.int16(-32768);
        w.int32(2147483647);
        w.int64(1n);
        w.uint16(65535);
        w.uint32(2147483648);
        w.int64(-2n);
      }),
    ).toBe(hex('ff 8000 7fffffff 0000000000000001 ffff 80000000 fffffffffffffffe'));
  });

  it('writes float64, bool and uuid', () => {
    const uuid = Buffer.from('000102030405060708090a0b0c0d0e0f', 'hex').toString('base64url');
    expect(
      bytesOf((w) => {
        w.float64(1.5);
        w.bool(false);
        w.bool(true);
        w.uuid(uuid);
      }),
    ).toBe(hex('3ff8000000000000 00 01 000102030405060708090a0b0c0d0e0f'));
    expect(() => bytesOf((w) => w.uuid('short'))).toThrow(RangeError);
  });

  it('writes strings and bytes in all four encodings', () => {
    expect(
      bytesOf((w) => {
        w.string('abc');
        w.nullableString(null);
        w.compactString('xyz');
        w.compactNullableString(null);
        w.compactString('é');
        w.bytes(Buffer.from([0xaa, 0xbb]));
        w.nullableBytes(null);
        w.compactBytes(Buffer.from([0xcc]));
        w.compactNullableBytes(null);
      }),
    ).toBe(hex('0003 616263 ffff 04 78797a 00 03 c3a9 00000002 aabb ffffffff 02 cc 00'));
  });

  it('back-patches a reserved int32 (frame size prefix)', () => {
    expect(
      bytesOf((w) => {
        const at = w.reserveInt32();
        w.string('hi');
        w.patchInt32(at, w.offset - at - 4);
      }),
    ).toBe(hex('00000004 0002 6869'));
  });
});

describe('Writer buffers', () => {
  it('grows across many writes and keeps earlier bytes', () => {
    const w = new Writer(16);
    for (let i = 0; i < 10_000; i++) w.int32(i);
    const b = w.toBuffer();
    expect(b.length).toBe(40_000);
    for (let i = 0; i < 10_000; i++) expect(b.readInt32BE(i * 4)).toBe(i);
  });

  it('never writes into a buffer it has handed out', () => {
    const w = new Writer(64);
    w.int32(1);
    const first = w.toBuffer();
    w.int32(2);
    const second = w.toBuffer();
    expect(first.toString('hex')).toBe('00000001');
    expect(second.toString('hex')).toBe('00000002');
    expect(first.buffer === second.buffer && first.byteOffset === second.byteOffset).toBe(false);
  });

  it('exact() refuses to overflow or to be left short', () => {
    const w = Writer.exact(4);
    w.int16(1);
    expect(() => w.int32(1)).toThrow(ProtocolError);
    const short = Writer.exact(4);
    short.int16(1);
    expect(() => short.toBuffer()).toThrow(ProtocolError);
    const ok = Writer.exact(5);
    ok.uvarint(300);
    ok.int16(7);
    ok.int8(0);
    expect(ok.toBuffer().toString('hex')).toBe('ac02000700');
  });
});

describe('varints against an independent reference implementation', () => {
  it('uvarint / varint', () => {
    fc.assert(
      fc.property(fc.integer({ min: 0, max: 0xffffffff }), (v) => {
        const expected = refEncodeUnsigned(BigInt(v));
        expect(bytesOf((w) => w.uvarint(v))).toBe(expected);
        expect(sizeOfUvarint(v)).toBe(expected.length / 2);
      }),
    );
    fc.assert(
      fc.property(fc.integer({ min: -0x80000000, max: 0x7fffffff }), (v) => {
        const expected = refEncodeUnsigned(refZigzag(BigInt(v)));
        expect(bytesOf((w) => w.varint(v))).toBe(expected);
        expect(sizeOfVarint(v)).toBe(expected.length / 2);
      }),
    );
  });

  it('uvarlong / varlong', () => {
    fc.assert(
      fc.property(fc.bigInt({ min: -(2n ** 63n), max: 2n ** 63n - 1n }), (v) => {
        const expected = refEncodeUnsigned(refZigzag(v));
        expect(bytesOf((w) => w.varlong(v))).toBe(expected);
        expect(sizeOfVarlong(v)).toBe(expected.length / 2);
        const u = BigInt.asUintN(64, v);
        expect(bytesOf((w) => w.uvarlong(u))).toBe(refEncodeUnsigned(u));
        expect(sizeOfUvarlong(u)).toBe(refEncodeUnsigned(u).length / 2);
      }),
    );
  });

  it('rejects values out of range', () => {
    expect(() => bytesOf((w) => w.uvarint(-1))).toThrow(RangeError);
    expect(() => bytesOf((w) => w.uvarint(2 ** 32))).toThrow(RangeError);
    expect(() => bytesOf((w) => w.varint(2 ** 31))).toThrow(RangeError);
    expect(() => bytesOf((w) => w.varlong(2n ** 63n))).toThrow(RangeError);
  });
});
