// Issue #43: the chaos run's own logic, without a broker: the seeded schedule deals every fault
// kind a store allows in a run of the default length.
import { describe, expect, test } from 'vitest';
import { defaultChaosOptions } from '../reliability/chaos-run.js';
import { FAULTS_BY_STORE, faultSchedule } from '../reliability/chaos-schedule.js';
import type { StoreKind } from '../reliability/chaos-schedule.js';

describe('the fault schedule', () => {
  const stores = Object.keys(FAULTS_BY_STORE) as StoreKind[];
  test.each(stores)('%s: every fault kind is dealt in every seed of a default-length run', (store) => {
    const o = defaultChaosOptions;
    for (let seed = 1; seed <= 100; seed++) {
      // As chaos-run.ts builds it for a run with its own broker.
      const schedule = faultSchedule({
        seed,
        store,
        seconds: o.seconds,
        meanGapS: o.meanGapS,
        minDurationS: o.minFaultS,
        maxDurationS: o.maxFaultS,
        proxies: store === 'embedded' ? 1 : 2,
        quietStartS: 15,
        quietEndS: Math.max(20, o.seconds / 4),
      });
      const drawn = new Set(schedule.map((f) => f.kind));
      expect([...drawn].sort(), `seed ${seed}`).toEqual([...FAULTS_BY_STORE[store]].sort());
      // Still a schedule: inside the run's window, no kind overlapping itself on one target.
      for (const f of schedule) {
        expect(f.atS).toBeGreaterThanOrEqual(15);
        expect(f.atS + f.durationS).toBeLessThanOrEqual(o.seconds - Math.max(20, o.seconds / 4));
        const overlap = schedule.filter(
          (g) =>
            g !== f &&
            g.kind === f.kind &&
            g.target === f.target &&
            g.atS >= f.atS &&
            g.atS < f.atS + f.durationS + 2,
        );
        expect(overlap, `seed ${seed}`).toEqual([]);
      }
    }
  });

  test('a seed gives the same schedule again; excluded kinds are never dealt', () => {
    const o = {
      seed: 7,
      store: 'redis' as const,
      seconds: 300,
      meanGapS: 20,
      minDurationS: 3,
      maxDurationS: 12,
      proxies: 2,
      quietStartS: 15,
      quietEndS: 75,
    };
    expect(faultSchedule(o)).toEqual(faultSchedule(o));
    expect(faultSchedule({ ...o, seed: 8 })).not.toEqual(faultSchedule(o));
    const without = faultSchedule({ ...o, exclude: ['broker-kill'] });
    expect(without.length).toBeGreaterThan(0);
    expect(without.filter((f) => f.kind === 'broker-kill')).toEqual([]);
  });
});
