// Issue #43, the chaos run bounded for npm test: load (raw connections committing and fetching)
// and real consumer groups (Java classic and KIP-848, librdkafka) through the CLI proxy, two
// instances on Redis, one on the embedded store, while a fixed seed's schedule injects
// overlapping faults: proxy SIGKILL and restart, Redis SIGKILL, SIGSTOP, a frozen network that
// delivers late, reset connections, and a full disk under the embedded store. The long runs and
// their figures: `npm run chaos-run` and docs/reliability.md. The broker is the bed's, not killed
// here (its restart takes 20-60 s on 2 loaded cores). Asserted: correctness only, never timing,
// and no rebalance through a proxy that neither a fault nor the direct group explains.
import { describe, expect, inject, test } from 'vitest';
import { chaosRun } from '../reliability/chaos-run.js';
import type { ChaosOptions } from '../reliability/chaos-run.js';
import { rebalanceReasons } from '../reliability/chaos-rebalances.js';

const runs: Partial<ChaosOptions>[] = [
  // Seed 8: Redis killed twice, frozen, partitioned twice and cut off, and both proxies killed at
  // once (8 faults, every kind the Redis run has but the broker's); the embedded store's disk full
  // three times and its proxy killed twice (5 faults).
  // The schedule depends on seconds - quietEndS alone (60 and 50 s): the same faults as with
  // seconds 80 and 70 and the default 20 s tail; the checker's own waits (the answers in flight,
  // the consumers catching up) cover the recovery after the last one.
  { store: 'redis', seconds: 65, quietEndS: 5, seed: 8, meanGapS: 8, maxFaultS: 6 },
  // The stalled disk needs a FUSE mount (/dev/fuse), which a CI machine may lack: it runs in the
  // long runs (`npm run chaos-run`, which names a kind it leaves out) and `npm run disk-stall-run`.
  {
    store: 'embedded',
    seconds: 55,
    quietEndS: 5,
    seed: 8,
    meanGapS: 10,
    maxFaultS: 6,
    exclude: ['disk-stall'],
  },
];

describe('the chaos run, bounded', () => {
  for (const run of runs) {
    test(`${run.store}: nothing acknowledged lost, no stale read, every record consumed`, async () => {
      const r = await chaosRun({
        ...run,
        connections: 100,
        rate: 1000,
        minFaultS: 2,
        records: 50,
        bootstrap: inject('kafkaBootstrap'),
        negativeControl: true,
        log: (line) => console.log(`[chaos] ${line}`),
      });
      console.log(r.report);
      expect(r.faults.length).toBeGreaterThanOrEqual(3);
      expect(r.faults.filter((f) => f.note.includes('injection error'))).toEqual([]);
      expect(r.lostDirect).toBe(0);
      expect(r.lostViaProxy).toBe(0);
      expect(r.staleReads).toBe(0);
      for (const g of r.groups) {
        expect(g.missing, `${g.kind}: records never consumed`).toBe(0);
        expect(g.duplicatesOutsideWindow, `${g.kind}: ${g.outsideExamples.join('; ')}`).toBe(0);
      }
      // Every rebalance through a proxy came with a kill of that proxy (the broker is not killed
      // here) or with one of the direct reference group. (The unready verdict is the run's, not
      // asserted here: at load average 27-37 the proxies said 503 before any fault, Redis or the
      // broker answering nothing for seconds on the starved machine; the run reports it.)
      expect(rebalanceReasons(r.rebalances)).toEqual([]);
      expect(r.load.acked).toBeGreaterThan(0);
      // The checker can fail: one group deleted from the store is reported, all 5 partitions.
      expect(r.negativeControlLost).toBe(5);
    }, 600_000);
  }
});
