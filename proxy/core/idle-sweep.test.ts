import { afterEach, beforeEach, describe, expect, test, vi } from 'vitest';
import { IdleSweep, idleSweep } from './idle-sweep.js';
import type { IdleWatched } from './idle-sweep.js';

/** A watched connection that records when (fake time, ms) it was told it is idle. */
function watched(): IdleWatched & { told: number[] } {
  const told: number[] = [];
  return {
    activeTick: -1,
    told,
    idleFor() {
      told.push(Date.now());
    },
  };
}

describe('IdleSweep', () => {
  beforeEach(() => vi.useFakeTimers({ now: 0 }));
  afterEach(() => vi.useRealTimers());

  test('tells a connection without activity after the timeout, never before, within a resolution', () => {
    const sweep = new IdleSweep(100);
    expect(sweep.resolutionMs).toBe(10);
    const w = watched();
    sweep.add(w);
    vi.advanceTimersByTime(99);
    expect(w.told).toEqual([]);
    vi.advanceTimersByTime(100 + sweep.resolutionMs - 99);
    expect(w.told).toEqual([110]);
    sweep.delete(w);
  });

  test('activity at any moment within a tick is never followed by an early verdict', () => {
    for (const at of [1, 5, 9, 10, 11, 19, 37]) {
      vi.setSystemTime(0);
      const sweep = new IdleSweep(100);
      const w = watched();
      sweep.add(w);
      vi.advanceTimersByTime(at);
      w.activeTick = sweep.tick;
      vi.advanceTimersByTime(300);
      expect(w.told.length, `activity at ${at} ms`).toBeGreaterThan(0);
      const first = w.told[0]!;
      expect(first - at, `activity at ${at} ms`).toBeGreaterThanOrEqual(100);
      expect(first - at, `activity at ${at} ms`).toBeLessThanOrEqual(100 + sweep.resolutionMs);
      sweep.delete(w);
      vi.clearAllTimers();
    }
  });

  test('activity postpones the verdict; while none comes it is repeated every timeout', () => {
    const sweep = new IdleSweep(100);
    const w = watched();
    sweep.add(w);
    for (let i = 0; i < 10; i++) {
      vi.advanceTimersByTime(50);
      w.activeTick = sweep.tick;
    }
    expect(w.told).toEqual([]);
    // The last activity at 500 ms: told at 610, 710 and 810 by 900.
    vi.advanceTimersByTime(400);
    expect(w.told).toEqual([610, 710, 810]);
    sweep.delete(w);
  });

  test('a connection that goes while told leaves the others watched', () => {
    const sweep = new IdleSweep(100);
    const a = watched();
    const b = watched();
    const closing: IdleWatched = {
      activeTick: 0,
      idleFor: () => sweep.delete(closing),
    };
    sweep.add(a);
    sweep.add(closing);
    sweep.add(b);
    vi.advanceTimersByTime(110);
    expect(sweep.size).toBe(2);
    expect(a.told.length).toBe(1);
    expect(b.told.length).toBe(1);
    sweep.delete(a);
    sweep.delete(b);
  });

  test('its interval runs only while it watches a connection, and never holds the process', () => {
    const sweep = new IdleSweep(600_000);
    expect(sweep.resolutionMs).toBe(1000);
    expect(vi.getTimerCount()).toBe(0);
    const w = watched();
    sweep.add(w);
    expect(vi.getTimerCount()).toBe(1);
    sweep.delete(w);
    expect(vi.getTimerCount()).toBe(0);
    const ref = vi.spyOn(globalThis, 'setInterval');
    sweep.add(w);
    const timer = ref.mock.results[0]!.value as NodeJS.Timeout;
    expect(timer.hasRef()).toBe(false);
    sweep.delete(w);
    ref.mockRestore();
  });

  test('one sweep per timeout, shared by its connections; a non-positive timeout is refused', () => {
    expect(idleSweep(12_345)).toBe(idleSweep(12_345));
    expect(idleSweep(12_345)).not.toBe(idleSweep(12_346));
    expect(() => new IdleSweep(0)).toThrow(RangeError);
  });
});
