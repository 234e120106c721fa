import { describe, expect, test } from 'vitest';
import { ANON_GROWTH_LIMIT_MB, MIN_SAMPLES, anonGrowth, memoryReason } from '../reliability/chaos-memory.js';
import type { MemorySample } from '../reliability/chaos-memory.js';

/** Samples 5 s apart from `fromS`, anonymous memory given by `anon(i)`, VmRSS 40 MB above it. */
const series = (n: number, anon: (i: number) => number, incarnation = 1, fromS = 0): MemorySample[] =>
  Array.from({ length: n }, (_, i) => ({
    atS: fromS + 5 * i,
    mb: anon(i) + 40,
    anonMb: anon(i),
    incarnation,
  }));

describe('the chaos run\'s "RSS flat" verdict', () => {
  test('a proxy that fills up in its first minute and stays there is flat', () => {
    // As the 8-minute Cluster run of seed 2: about 150 MB within a minute, 140-155 MB after.
    const warm = series(96, (i) => (i < 12 ? 40 + 9 * i : 140 + (i % 4) * 5));
    const g = anonGrowth(warm)!;
    expect(g.growthMb).toBeLessThanOrEqual(0);
    expect(memoryReason('proxy-A', g)).toBeNull();
  });

  test('a steady leak past the limit fails, named', () => {
    const leak = series(96, (i) => 60 + 1.5 * i);
    const g = anonGrowth(leak)!;
    expect(g.growthMb).toBeGreaterThan(ANON_GROWTH_LIMIT_MB);
    expect(memoryReason('proxy-B', g)).toMatch(
      /^proxy-B: anonymous memory grew \d+ MB \(\d+ -> \d+ MB, incarnation 1, 0-475 s\)/,
    );
  });

  test('judges the longest incarnation alone: a restart starts from empty, not a drop', () => {
    const samples = [
      ...series(20, () => 150, 1, 0),
      ...series(60, (i) => 30 + 2 * i, 2, 100),
      ...series(10, () => 30, 3, 500),
    ];
    const g = anonGrowth(samples)!;
    expect(g.incarnation).toBe(2);
    expect(g.fromS).toBe(100);
    expect(g.growthMb).toBeGreaterThan(ANON_GROWTH_LIMIT_MB);
  });

  test('too few samples (or none readable) is no verdict', () => {
    expect(anonGrowth(series(MIN_SAMPLES - 1, (i) => 10 * i))).toBeNull();
    expect(anonGrowth(series(20, () => NaN))).toBeNull();
    expect(memoryReason('proxy-A', null)).toBeNull();
  });
});
