import { createRequire } from 'node:module';
import fc from 'fast-check';
import { createClient } from 'node-zookeeper-client';
import { describe, expect, test } from 'vitest';
import {
  DEFAULT_MAX_MULTI_BYTES,
  multiBytes,
  opBytes,
  splitMulti,
  toTransaction,
} from './zookeeper-multi.js';
import type { MultiOp } from './zookeeper-multi.js';

// The library's own jute serializer is the independent reference for the byte counts.
interface Record {
  byteLength(): number;
}
interface Jute {
  OP_CODES: { [name: string]: number };
  Request: new (header: unknown, payload: unknown) => { toBuffer(): Buffer };
  TransactionRequest: new (ops: unknown[]) => Record;
  protocol: { [name: string]: new (...args: unknown[]) => Record & { [field: string]: unknown } };
  data: { Stat: new () => Record };
}
const jute = createRequire(import.meta.url)('node-zookeeper-client/lib/jute') as Jute;

/** The exact request the library sends for a multi of these ops (built through toTransaction). */
function librarySerializedRequest(ops: MultiOp[]): number {
  // A client that never connects: only its Transaction builder is used.
  const tx = toTransaction(createClient('127.0.0.1:1').transaction(), ops) as unknown as { ops: unknown[] };
  const header = new jute.protocol.RequestHeader!();
  header['xid'] = 7;
  header['type'] = jute.OP_CODES['MULTI'];
  return new jute.Request(header, new jute.TransactionRequest(tx.ops)).toBuffer().length;
}

/** The server's answer to a successful multi of these ops, sized with the library's records. */
function libraryResponseBytes(ops: MultiOp[], failed: boolean): number {
  const p = jute.protocol;
  let size = 4 + new p.ReplyHeader!().byteLength() + new p.MultiHeader!(-1, true, -1).byteLength();
  for (const op of ops) {
    size += new p.MultiHeader!(0, false, 0).byteLength();
    if (failed) size += new p.ErrorResponse!().byteLength();
    else if (op.type === 'create') {
      const r = new p.CreateResponse!();
      r['path'] = op.path;
      size += r.byteLength();
    } else if (op.type === 'setData') {
      const r = new p.SetDataResponse!();
      r['stat'] = new jute.data.Stat();
      size += r.byteLength();
    }
  }
  return size;
}

const arbOp: fc.Arbitrary<MultiOp> = fc.oneof(
  fc.record({
    type: fc.constant('create' as const),
    path: fc
      .string({ minLength: 1, maxLength: 60, unit: 'grapheme' })
      .map((s) => `/a/x${s.replace(/\//g, '_')}`),
    data: fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)),
  }),
  fc.record({
    type: fc.constant('setData' as const),
    path: fc.string({ minLength: 1, maxLength: 60 }).map((s) => `/b/x${s.replace(/\//g, '_')}`),
    data: fc.uint8Array({ maxLength: 300 }).map((a) => Buffer.from(a)),
    version: fc.integer({ min: -1, max: 1000 }),
  }),
  fc.record({
    type: fc.constant('check' as const),
    path: fc.constantFrom('/c', '/consumers/g/kop-state', '/ü/€'),
    version: fc.integer({ min: 1, max: 1000 }),
  }),
);

describe('ZooKeeper multi sizes', () => {
  test('the request estimate is exactly what the library sends', () => {
    fc.assert(
      fc.property(fc.array(arbOp, { maxLength: 20 }), (ops) => {
        const request = ops.reduce((sum, op) => sum + opBytes(op).request, 4 + 4 + 4 + 9);
        expect(request).toBe(librarySerializedRequest(ops));
      }),
      { numRuns: 200 },
    );
  });

  test('the response estimate covers the success answer exactly, and the failure answer', () => {
    fc.assert(
      fc.property(fc.array(arbOp, { maxLength: 20 }), (ops) => {
        const response = ops.reduce((sum, op) => sum + opBytes(op).response, 4 + 16 + 9);
        const ok = libraryResponseBytes(ops, false);
        const checks = ops.filter((op) => op.type === 'check').length;
        // A successful check answers nothing; 4 bytes are counted for its failure answer.
        expect(response).toBe(ok + 4 * checks);
        expect(response).toBeGreaterThanOrEqual(libraryResponseBytes(ops, true));
        expect(multiBytes(ops)).toBe(Math.max(response, librarySerializedRequest(ops)));
      }),
      { numRuns: 200 },
    );
  });

  test('a short setData is answered with more bytes than it takes (the response counts)', () => {
    const op: MultiOp = { type: 'setData', path: '/o/0', data: Buffer.from('1'), version: -1 };
    expect(opBytes(op).response).toBeGreaterThan(opBytes(op).request);
  });
});

describe('splitMulti', () => {
  const unit = (i: number, bytes = 100): MultiOp[] => [
    { type: 'setData', path: `/o/${i}`, data: Buffer.alloc(bytes), version: -1 },
    { type: 'create', path: `/m/${i}`, data: Buffer.alloc(bytes) },
  ];
  const frame = {
    firstHead: [{ type: 'create', path: '/s', data: Buffer.from('{}') } as MultiOp],
    head: [{ type: 'check', path: '/s', version: 1 } as MultiOp],
    tail: [{ type: 'create', path: '/r/x', data: Buffer.from('{"s":"ok"}') } as MultiOp],
  };

  test('what fits stays one multi: head, units in order, tail', () => {
    const units = Array.from({ length: 50 }, (_, i) => unit(i));
    const [only, ...rest] = splitMulti(units, frame, DEFAULT_MAX_MULTI_BYTES);
    expect(rest).toEqual([]);
    expect(only!.ops).toEqual([...frame.firstHead, ...units.flat(), ...frame.tail]);
    expect(only!.units).toEqual(units.map((_, i) => i));
  });

  test('splits in order; each multi fenced, within the limit, the marker in the last only', () => {
    fc.assert(
      fc.property(
        fc.array(fc.integer({ min: 0, max: 600 }), { minLength: 1, maxLength: 200 }),
        fc.integer({ min: 1500, max: 20_000 }),
        (sizes, limit) => {
          const units = sizes.map((b, i) => unit(i, b));
          const plans = splitMulti(units, frame, limit);
          expect(plans.flatMap((p) => p.units)).toEqual(units.map((_, i) => i));
          plans.forEach((p, n) => {
            expect(p.units.length).toBeGreaterThan(0);
            const head = n === 0 ? frame.firstHead : frame.head;
            const tail = n === plans.length - 1 ? frame.tail : [];
            expect(p.ops).toEqual([...head, ...p.units.flatMap((i) => units[i]!), ...tail]);
            // Over the limit only when a unit alone is (it cannot be split).
            if (p.units.length > 1)
              expect(
                multiBytes([...head, ...p.units.flatMap((i) => units[i]!), ...frame.tail]),
              ).toBeLessThanOrEqual(limit);
          });
          // Packed greedily: a multi's first unit did not fit in the multi before it.
          for (let n = 1; n < plans.length; n++) {
            const before = [...plans[n - 1]!.ops, ...units[plans[n]!.units[0]!]!, ...frame.tail];
            expect(multiBytes(before)).toBeGreaterThan(limit);
          }
        },
      ),
      { numRuns: 200 },
    );
  });

  test('no units: one multi of the head and the tail', () => {
    expect(splitMulti([], frame, 1024)).toEqual([{ ops: [...frame.firstHead, ...frame.tail], units: [] }]);
  });
});
