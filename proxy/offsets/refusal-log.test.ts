import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createLogger } from '../logger.js';
import { RefusalLog } from './refusal-log.js';

describe('RefusalLog', () => {
  beforeEach(() => vi.useFakeTimers({ now: 1_000_000 }));
  afterEach(() => vi.useRealTimers());

  it('logs the first refusal of a reason at once, sums the rest into one line per interval', () => {
    const lines: Record<string, unknown>[] = [];
    const log = createLogger('info', {}, (l) => lines.push(JSON.parse(l) as Record<string, unknown>));
    const counted: string[] = [];
    const inner = {
      commitAccepted: () => undefined,
      mirrored: () => undefined,
      commitRefused: (_g: string, reason: string, n: number) => counted.push(`${reason}:${n}`),
    };
    const refusals = new RefusalLog(inner, log, () => 'connection refused to r:6379', 10_000);
    refusals.commitRefused('g1', 'store_down', 3);
    for (let i = 0; i < 100; i++) refusals.commitRefused(`g${i}`, 'store_down', 2);
    refusals.commitRefused('z', 'fence', 1);
    expect(lines).toHaveLength(2);
    expect(lines[0]).toMatchObject({
      level: 'warn',
      event: 'commits refused',
      reason: 'store_down',
      commits: 1,
      partitions: 3,
      storeError: 'connection refused to r:6379',
    });
    expect(lines[1]).toMatchObject({ level: 'info', reason: 'fence', commits: 1 });
    vi.advanceTimersByTime(10_000);
    expect(lines).toHaveLength(3);
    expect(lines[2]).toMatchObject({
      reason: 'store_down',
      commits: 100,
      partitions: 200,
      group: 'g99',
      sinceSeconds: 10,
    });
    vi.advanceTimersByTime(60_000);
    expect(lines).toHaveLength(3);
    // Every refusal is counted by the metrics, logged or not.
    expect(counted).toHaveLength(102);
  });
});
