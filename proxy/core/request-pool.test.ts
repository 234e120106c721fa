// The request memory pool on its own: admission, muting and the order connections are read again.
import { describe, expect, test } from 'vitest';
import { ALWAYS_READ_REQUEST_BYTES, RequestAccount, RequestBufferPool } from './request-pool.js';

const LARGE = ALWAYS_READ_REQUEST_BYTES + 1;

function account(pool: RequestBufferPool, name: string, admitted: string[]): RequestAccount {
  return new RequestAccount(pool, () => admitted.push(name));
}

describe('RequestBufferPool and RequestAccount', () => {
  test('requests up to 64 KiB are never muted and count what they hold', () => {
    const pool = new RequestBufferPool(1000);
    const a = account(pool, 'a', []);
    expect(a.update(500, ALWAYS_READ_REQUEST_BYTES, false)).toBe(false);
    expect(a.update(5000, ALWAYS_READ_REQUEST_BYTES, false)).toBe(false);
    expect(pool.held).toBe(5000);
    expect(pool.charged).toBe(5000);
    a.update(0, 0, true);
    expect(pool.held).toBe(0);
    expect(pool.charged).toBe(0);
  });

  test('a large request below the limit is admitted and reserves its declared size', () => {
    const pool = new RequestBufferPool(10 * LARGE);
    const a = account(pool, 'a', []);
    expect(a.update(100, LARGE, false)).toBe(false);
    expect(pool.held).toBe(100);
    expect(pool.charged).toBe(LARGE);
    // Admitted: it goes on whatever the pool does, and may pass the limit by one request.
    const b = account(pool, 'b', []);
    expect(b.update(100, 20 * LARGE, false)).toBe(false);
    expect(pool.charged).toBe(21 * LARGE);
  });

  test('with the pool exhausted a large request is muted, charges nothing, and is admitted in arrival order', () => {
    const admitted: string[] = [];
    const pool = new RequestBufferPool(LARGE);
    const first = account(pool, 'first', admitted);
    expect(first.update(10, LARGE, false)).toBe(false);
    const second = account(pool, 'second', admitted);
    const third = account(pool, 'third', admitted);
    expect(second.update(10, LARGE, false)).toBe(true);
    expect(third.update(10, LARGE, false)).toBe(true);
    expect(pool.mutedCount).toBe(2);
    expect(pool.held).toBe(30);
    expect(pool.charged).toBe(LARGE);

    // The first completes: the second is admitted (and reserves), the pool is full again; the
    // third, still muted, holds its bytes but is charged nothing.
    first.update(0, 0, true);
    expect(admitted).toEqual(['second']);
    expect(pool.mutedCount).toBe(1);
    expect(pool.held).toBe(20);
    expect(pool.charged).toBe(LARGE);

    // The second's connection closes: its reservation and bytes go back, the third is admitted.
    second.close();
    expect(admitted).toEqual(['second', 'third']);
    expect(pool.mutedCount).toBe(0);
    expect(pool.held).toBe(10);
    expect(pool.charged).toBe(LARGE);
    third.close();
    expect(pool.held).toBe(0);
    expect(pool.charged).toBe(0);
  });

  test('a muted connection that closes leaves the queue and is never admitted', () => {
    const admitted: string[] = [];
    const pool = new RequestBufferPool(LARGE);
    const holder = account(pool, 'holder', admitted);
    holder.update(10, LARGE, false);
    const muted = account(pool, 'muted', admitted);
    expect(muted.update(10, LARGE, false)).toBe(true);
    muted.close();
    expect(pool.mutedCount).toBe(0);
    holder.close();
    expect(admitted).toEqual([]);
    expect(pool.held).toBe(0);
    expect(pool.charged).toBe(0);
  });

  test('without a pool nothing is muted and only the change of held bytes is tracked', () => {
    const a = new RequestAccount(undefined, () => undefined);
    expect(a.changed(10, false)).toBe(true);
    expect(a.update(10, 100 * LARGE, false)).toBe(false);
    expect(a.changed(10, false)).toBe(false);
  });

  test('a native reservation: refused while the pool is exhausted or connections wait, released later', async () => {
    const admitted: string[] = [];
    const pool = new RequestBufferPool(2 * LARGE);
    expect(pool.reserve(LARGE)).toBe(true);
    expect(pool.charged).toBe(LARGE);
    expect(pool.held).toBe(0);
    // Below the limit: admitted, and it may pass the limit by one request, as an account's.
    expect(pool.reserve(5 * LARGE)).toBe(true);
    expect(pool.reserve(10)).toBe(false);
    const muted = account(pool, 'muted', admitted);
    expect(muted.update(10, LARGE, false)).toBe(true);
    pool.release(5 * LARGE);
    expect(pool.charged).toBe(LARGE);
    // A connection waits: a reservation does not pass it.
    expect(pool.reserve(10)).toBe(false);
    // Admitted on the next turn: release is called by the addon in the middle of a read.
    expect(admitted).toEqual([]);
    await new Promise((r) => setImmediate(r));
    expect(admitted).toEqual(['muted']);
    expect(pool.charged).toBe(2 * LARGE);
    pool.release(LARGE);
    muted.update(0, 0, true);
    expect(pool.charged).toBe(0);
    expect(pool.reserve(10)).toBe(true);
  });
});
