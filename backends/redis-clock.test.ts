import { EventEmitter } from 'node:events';
import type { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import { localNow, RedisClock } from './redis-clock.js';

/** A server whose clock is `skew` ms ahead of ours and answers TIME after `delay` ms. */
function fakeServer(skew: number, delay: () => number) {
  const node = new EventEmitter() as EventEmitter & { time(): Promise<[string, string]> };
  node.time = async () => {
    await new Promise((r) => setTimeout(r, delay() / 2));
    const us = Math.round((localNow() + skew) * 1000);
    await new Promise((r) => setTimeout(r, delay() / 2));
    return [String(Math.floor(us / 1e6)), String(us % 1e6)];
  };
  return node as unknown as Redis & EventEmitter;
}

describe('RedisClock', () => {
  it('keeps a lower bound of the skew, the best of its recent probes', async () => {
    const clock = new RedisClock();
    let delay = 60;
    const node = fakeServer(50_000, () => delay);
    const slow = await clock.probe(node);
    // The bound is below the true skew by at most the probe's round trip.
    expect(slow).toBeLessThanOrEqual(50_000);
    expect(slow).toBeGreaterThan(50_000 - 200);
    delay = 0;
    const fast = await clock.probe(node);
    expect(fast).toBeGreaterThanOrEqual(slow);
    expect(fast).toBeLessThanOrEqual(50_000);
    expect(clock.known(node)).toBe(fast);
  });

  it('forgets a connection that closed (the next one may reach another server)', async () => {
    const clock = new RedisClock();
    const node = fakeServer(-3_000, () => 0);
    expect(await clock.probe(node)).toBeLessThanOrEqual(-3_000);
    node.emit('close');
    expect(clock.known(node)).toBeUndefined();
  });
});
