/**
 * The proxy's Prometheus metrics: one registry holding the hot-path metrics the core reports
 * through `ProxyObserver`, the offset service's commit counters, the store decorator's latency
 * and the default process metrics. Lag metrics register themselves on the same registry
 * (proxy/lag/).
 *
 * Names follow the Prometheus conventions: base units (seconds, bytes), `_total` for counters.
 */
import { collectDefaultMetrics, Registry } from 'prom-client';
import type { OffsetStore } from '../../backends/store.js';
import type { ProxyObserver } from '../observer.js';
import type { OffsetServiceMetrics } from '../offsets/service.js';
import { MeasuredStore, StoreMetrics } from './measured-store.js';
import { ObserverMetrics } from './observer-metrics.js';
import { CommitMetrics } from './commit-metrics.js';

export interface ProxyMetricsOptions {
  /** Label kop_requests_total with the API version (false: version=""), see --metrics-api-versions. */
  apiVersions?: boolean;
  /** Register prom-client's process metrics (CPU, memory, event loop lag, GC). Default true. */
  processMetrics?: boolean;
}

export interface ProxyMetrics {
  readonly registry: Registry;
  /** Pass to `KafkaProxy` as `observer`. */
  readonly observer: ProxyObserver;
  /** Pass to `createOffsetService`. */
  readonly offsets: OffsetServiceMetrics;
  /** Wraps a store so every operation's latency and failures are measured. */
  measureStore(store: OffsetStore): OffsetStore;
}

export function createProxyMetrics(opts: ProxyMetricsOptions = {}): ProxyMetrics {
  const registry = new Registry();
  if (opts.processMetrics ?? true) collectDefaultMetrics({ register: registry });
  const storeMetrics = new StoreMetrics(registry);
  return {
    registry,
    observer: new ObserverMetrics(registry, opts.apiVersions ?? true),
    offsets: new CommitMetrics(registry),
    measureStore: (store) => new MeasuredStore(store, storeMetrics),
  };
}
