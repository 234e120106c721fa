import { describe, expect, it } from 'vitest';
import { keySlot } from './redis-slot.js';

describe('keySlot', () => {
  it("computes Redis Cluster's slots (values from CLUSTER KEYSLOT)", () => {
    expect(keySlot('foo')).toBe(12182);
    expect(keySlot('somekey')).toBe(11058);
    expect(keySlot('{user1000}.following')).toBe(3443);
    expect(keySlot('')).toBe(0);
  });

  it('hashes the first non-empty hash tag only, as Redis does', () => {
    expect(keySlot('kop:{g:orders}:offsets')).toBe(keySlot('g:orders'));
    expect(keySlot('kop:{g:orders}:req:1')).toBe(keySlot('kop:{g:orders}:state'));
    // An empty first tag: the whole key (a later tag does not count).
    expect(keySlot('a{}b{c}')).not.toBe(keySlot('c'));
    expect(keySlot('{')).toBe(4092);
    expect(keySlot(Buffer.from('{é}x'))).toBe(keySlot('é'));
  });
});
