import { describe, expect, test } from 'vitest';
import { syncRequest } from './zookeeper-sync.js';

describe('ZooKeeper sync request', () => {
  test('SYNC on the wire with the xid the connection manager assigns; CREATE for the reply decoder', () => {
    const request = syncRequest('/chroot');
    // The library decodes the reply by this type: CREATE's reply is SYNC's shape (a path).
    expect(request.header.type).toBe(1);
    expect(request.payload).toBe(null);
    // The connection manager sets the xid just before it serializes the request.
    request.header.xid = 42;
    const b = request.toBuffer();
    expect(b.readInt32BE(0)).toBe(b.length - 4);
    expect(b.readInt32BE(4)).toBe(42);
    expect(b.readInt32BE(8)).toBe(9);
    expect(b.readInt32BE(12)).toBe(7);
    expect(b.subarray(16).toString('utf8')).toBe('/chroot');
  });
});
