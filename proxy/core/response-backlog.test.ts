import { describe, expect, test } from 'vitest';
import { CONNECTION_RESPONSE_BYTES, ResponseBacklog, ResponseBufferPool } from './response-backlog.js';

describe('ResponseBacklog', () => {
  test('full at the per-connection bound, whether the bytes are unsent or waiting', () => {
    const b = new ResponseBacklog(null);
    b.addWaiting(CONNECTION_RESPONSE_BYTES - 1);
    expect(b.full).toBe(false);
    b.setUnsent(1);
    expect(b.full).toBe(true);
    // Only what was written holds back the request at the head of the queue.
    expect(b.clientBehind).toBe(false);
    b.setUnsent(CONNECTION_RESPONSE_BYTES);
    expect(b.clientBehind).toBe(true);
    b.setUnsent(0);
    b.addWaiting(-(CONNECTION_RESPONSE_BYTES - 1));
    expect(b.full).toBe(false);
    expect(b.held).toBe(0);
  });

  test('requests queued for a local answer stop reading at the bound, without counting as responses', () => {
    const b = new ResponseBacklog(null);
    b.addQueued(CONNECTION_RESPONSE_BYTES);
    expect(b.stopReading).toBe(true);
    expect(b.full).toBe(false);
    b.addQueued(-CONNECTION_RESPONSE_BYTES);
    expect(b.stopReading).toBe(false);
  });

  test('an exhausted pool holds back the connections that hold anything, not the others', () => {
    const pool = new ResponseBufferPool(1000);
    const stalled = new ResponseBacklog(pool);
    const busy = new ResponseBacklog(pool);
    const idle = new ResponseBacklog(pool);
    stalled.setUnsent(990);
    busy.addWaiting(5);
    expect(pool.held).toBe(995);
    expect(busy.full).toBe(false);
    stalled.setUnsent(1000);
    expect(pool.exhausted).toBe(true);
    expect(busy.full).toBe(true);
    expect(busy.clientBehind).toBe(false); // its head may still start: the 5 bytes wait behind it
    expect(idle.full).toBe(false);
    expect(idle.stopReading).toBe(false);
    // A connection that closes gives back what it held.
    stalled.release();
    expect(pool.held).toBe(5);
    expect(busy.full).toBe(false);
    stalled.setUnsent(500);
    expect(pool.held).toBe(5);
  });
});
