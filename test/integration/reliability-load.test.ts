// Issue #7, the load run, short: the generator of test/reliability/load-run.ts in-process against
// the CLI proxy (embedded store, default options) at the load, 2,000 connections and 10,000
// partition commits/s (2,000 OffsetCommit/s of 5 partitions): a 10 s ramp, then 40 s at the full
// rate. Zero failed requests, every acknowledged commit in the store (read directly), memory
// bounded. Behaviour only: the rate achieved and the latencies are printed, not asserted (on a
// shared 2-core machine they are the machine's), and a request counts as failed only when it has no
// answer after 60 s, a stall rather than a slow machine. The 10-minute run (RSS flat, rate and
// latency checked) is the same generator from the command line:
//   npx tsx test/reliability/load-run.ts --connections 2000 --rate 10000 --seconds 600
//
// And the checks can fail: a short run with the proxy stopped (SIGSTOP) for longer than the request
// deadline, and an acknowledged commit deleted from the store, must be reported; so must RSS growth.
import { expect, inject, test } from 'vitest';
import { rssVerdict } from '../reliability/load-proxy-process.js';
import { formatReport } from '../reliability/load-report.js';
import { runLoad } from '../reliability/load-run.js';
import type { LoadRunResult, MemorySample } from '../reliability/load-run-types.js';

const bootstrap = inject('kafkaBootstrap');
const SECONDS = Number(process.env['KOP_LOAD_SECONDS'] ?? 40);
const MB = 1024 * 1024;

function report(result: LoadRunResult): void {
  console.log(`[load]\n${formatReport(result)}`);
}

test('2,000 connections, 10,000 partition commits/s: nothing fails, nothing is lost, memory bounded', async () => {
  const result = await runLoad({
    bootstrap,
    connections: 2000,
    rate: 10_000,
    seconds: SECONDS,
    rampSeconds: 10,
    partitionsPerCommit: 5,
    store: 'embedded',
    intervalSeconds: 5,
    // Every connection relays one Metadata request to the broker during the run.
    metadataEverySeconds: SECONDS,
    requestTimeoutMs: 60_000,
    // Speed is reported, not judged, here.
    minRateFraction: 0,
  });
  report(result);
  expect(result.totals.failures).toEqual({});
  expect(result.totals.failed).toBe(0);
  expect(result.totals.errorCodes).toEqual({});
  expect(result.lost).toEqual([]);
  expect(result.partitionsChecked).toBe(2000 * 2 * 5);
  // Open loop: every scheduled request was sent (the generator never skips one), and answered.
  expect(result.totals.sent).toBeGreaterThanOrEqual((SECONDS * 10_000) / 5);
  expect(result.totals.fetches).toBeGreaterThan(0);
  expect(result.totals.metadata).toBe(2000);
  // Memory. Within 40 s RSS is not a leak detector: V8 sizes its heap to the allocation rate, and a
  // 1-4 s pause (a busy machine) grows it by 100-150 MB that stays until the next full GC, which may
  // come after the run (seen here: +184 MB between the quarter medians with 26 MB of live heap). So:
  // a ceiling on VmRSS (measured peaks 200-370 MB; a proxy buffering without bound or keeping a few
  // KB per request exceeds it), and the heap V8 keeps after its full GCs (--trace-gc), which is
  // what the proxy really holds: 25-37 MB here, up to 74 MB while thousands of requests were queued;
  // a leak of 1 KB per request would add 80 MB over the run. RSS flatness is the 10-minute run's.
  expect(Math.max(...result.rssSeries.map(([, rss]) => rss)), 'peak VmRSS, MB').toBeLessThan(640);
  const heaps = result.heapAfterGc.map(([, mb]) => mb).sort((a, b) => a - b);
  expect(heaps.length, 'full GCs seen').toBeGreaterThan(0);
  expect(heaps[Math.floor(heaps.length / 2)], 'median heap after a full GC, MB').toBeLessThan(64);
  expect(result.proxyExitCode).toBe(0);
}, 300_000);

test('the load run reports requests that time out and acknowledged commits missing from the store', async () => {
  let tampered = '';
  const result = await runLoad({
    bootstrap,
    connections: 100,
    rate: 1_000,
    seconds: 8,
    rampSeconds: 0,
    store: 'embedded',
    intervalSeconds: 2,
    metadataEverySeconds: 0,
    requestTimeoutMs: 1_000,
    // Stopped for 2 s: every request in flight then outlives its 1 s deadline.
    fault: {
      atSecond: 3,
      run: (pid) => {
        process.kill(pid, 'SIGSTOP');
        setTimeout(() => process.kill(pid, 'SIGCONT'), 2_000);
      },
    },
    beforeVerify: async (store, groups, topic) => {
      tampered = groups[7]!;
      await store.deleteOffsets(tampered, [{ topic, partition: 3 }]);
    },
  });
  report(result);
  expect(result.ok).toBe(false);
  expect(result.totals.failures['timeout']).toBeGreaterThan(0);
  expect(result.lost).toEqual([
    expect.objectContaining({
      group: tampered,
      partition: 3,
      stored: null,
      problem: 'acknowledged commit missing',
    }),
  ]);
}, 120_000);

test('the RSS rule: a sawtooth around a level is flat, a steady climb is not', () => {
  const series = (mbAt: (t: number) => number): MemorySample[] =>
    Array.from({ length: 601 }, (_, t) => ({ t, rss: mbAt(t) * MB, anon: 0, file: 0 }));
  const bound = { rssGrowthMb: 50, rssGrowthFraction: 0.25 };
  // GC sawtooth: 150-250 MB every 30 s.
  expect(
    rssVerdict(
      series((t) => 150 + ((t % 30) / 30) * 100),
      600,
      bound,
    ).ok,
  ).toBe(true);
  // 0.2 MB/s (100 bytes per request at 2,000 requests/s): 60 MB between the quarter medians.
  const leak = rssVerdict(
    series((t) => 150 + 0.2 * t),
    600,
    bound,
  );
  expect(leak.ok).toBe(false);
  expect(leak.growthMb).toBeCloseTo(60, 0);
});
