/**
 * What metrics cost on the hot path: the per-frame observer calls the core makes (bytes in and
 * out, one response with its latency), with prom-client metrics against the no-op observer, in
 * one run.
 *
 *   npx tsx bench/metrics.ts [frames=2000000]
 *
 * Per relayed response the core calls bytes() three or four times and responded() once.
 */
import { createProxyMetrics } from '../proxy/ops/metrics/proxy-metrics.js';
import { noopObserver } from '../proxy/core/observer.js';
import type { ProxyObserver } from '../proxy/core/observer.js';

const frames = Number(process.argv[2] ?? 2_000_000);
const apis: [number, number][] = [
  [0, 11],
  [1, 17],
  [3, 12],
  [8, 9],
  [9, 9],
  [12, 4],
];

function run(observer: ProxyObserver): number {
  const started = process.hrtime.bigint();
  for (let i = 0; i < frames; i++) {
    const [apiKey, version] = apis[i % apis.length]!;
    observer.bytes('client_in', 1100);
    observer.bytes('broker_out', 1100);
    observer.bytes('broker_in', 64);
    observer.responded(apiKey, version, i % 5 === 0 ? 'proxy' : 'broker', 0.0004);
    observer.bytes('client_out', 64);
  }
  return Number(process.hrtime.bigint() - started) / frames;
}

const metrics = createProxyMetrics({ processMetrics: false });
// Warm up both, then measure alternately.
run(noopObserver);
run(metrics.observer);
const noop: number[] = [];
const measured: number[] = [];
for (let round = 0; round < 3; round++) {
  noop.push(run(noopObserver));
  measured.push(run(metrics.observer));
}
const best = (xs: number[]) => Math.min(...xs);
console.log(`${frames} frames per round, best of 3 rounds, Node ${process.versions.node}`);
console.log(`no-op observer:     ${best(noop).toFixed(1)} ns per relayed response`);
console.log(`prom-client metrics: ${best(measured).toFixed(1)} ns per relayed response`);
console.log(`cost of metrics:     ${(best(measured) - best(noop)).toFixed(1)} ns per response`);
