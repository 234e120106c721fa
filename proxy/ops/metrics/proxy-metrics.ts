/**
 * The proxy's Prometheus metrics: one registry holding the hot-path metrics the core reports
 * through `ProxyObserver`, the offset service's commit counters, the store decorator's latency
 * and the default process metrics. Lag metrics register themselves on the same registry
 * (proxy/ops/lag/).
 *
 * Names follow the Prometheus conventions: base units (seconds, bytes), `_total` for counters.
 */
import { collectDefaultMetrics, Counter, Gauge, Registry } from 'prom-client';
import type { OffsetStore } from '../../../backends/store.js';
import type { ProxyObserver } from '../../core/observer.js';
import type { OffsetServiceMetrics } from '../../offsets/service.js';
import { MeasuredStore, StoreMetrics } from './measured-store.js';
import { ObserverMetrics } from './observer-metrics.js';
import { CommitMetrics } from './commit-metrics.js';
import { productVersion } from '../../common/version.js';

/**
 * How often the event-loop-delay histogram (nodejs_eventloop_lag_*) samples, in ms. Every sample
 * is a timer wake-up: prom-client's default of 10 ms cost an idle proxy about 3 ms of CPU a
 * second, 50 ms costs a fifth of that (docs/benchmarks.md). A stall still shows at its full length
 * (the next sample waits for it); only stalls shorter than this may fall between two samples.
 */
export const EVENT_LOOP_DELAY_RESOLUTION_MS = 50;

export interface ProxyMetricsOptions {
  /** Label kop_requests_total with the API version (false: version=""), see --metrics-api-versions. */
  apiVersions?: boolean;
  /** Register prom-client's process metrics (CPU, memory, event loop lag, GC). Default true. */
  processMetrics?: boolean;
  /** Labels of kop_build_info: this build's version and the store kind in use. */
  build?: { version: string; store: string };
}

/** What kop_store_up (StoreHealth) and kop_store_circuit_open (StoreCircuit) read at scrape time. */
export interface StoreState {
  readonly up: boolean;
  /** True while store-served requests are refused at once (proxy/offsets/store-circuit.ts). */
  readonly circuitOpen?: boolean;
}

/** State of the core read at scrape time (`KafkaProxy` has these getters). */
export interface ProxyState {
  readonly bufferedRequestBytes: number;
  readonly mutedConnections: number;
  readonly bufferedResponseBytes: number;
  readonly refusedConnections: number;
  /** Client connections relayed on the native path now. */
  readonly nativeConnections: number;
  /** Moves of connections to the native path and back, since the start. */
  readonly nativeHandovers: { readonly toNative: number; readonly toJavaScript: number };
  /** Hands what the native path counted to the observer (it batches its counts). */
  flushNativeFigures(): void;
}

export interface ProxyMetrics {
  readonly registry: Registry;
  /** Pass to `KafkaProxy` as `observer`. */
  readonly observer: ProxyObserver;
  /** Pass to `createOffsetService`. */
  readonly offsets: OffsetServiceMetrics;
  /** Wraps a store so every operation's latency and failures are measured. */
  measureStore(store: OffsetStore): OffsetStore;
  /** Exports the proxy's request and response buffer and refused-connection figures (read at each scrape, 0 until then). */
  watchProxy(proxy: ProxyState): void;
  /** Exports whether the store answers as kop_store_up (0 until then). */
  watchStore(store: StoreState): void;
  /** `kop_store_data_lost`: 1 once the store is found to have lost its data (proxy/data-loss-watch.ts). */
  readonly storeDataLost: Gauge<'store'>;
}

export function createProxyMetrics(opts: ProxyMetricsOptions = {}): ProxyMetrics {
  const registry = new Registry();
  if (opts.processMetrics ?? true)
    collectDefaultMetrics({
      register: registry,
      eventLoopMonitoringPrecision: EVENT_LOOP_DELAY_RESOLUTION_MS,
    });
  const storeMetrics = new StoreMetrics(registry);
  let proxy: ProxyState | null = null;
  let store: StoreState | null = null;
  registerProxyState(registry, () => proxy);
  new Gauge({
    name: 'kop_store_up',
    help: 'Whether the offset store answered its last operation or ping (1) or not (0); pinged every 5 s.',
    registers: [registry],
    collect() {
      this.set(store?.up ? 1 : 0);
    },
  });
  new Gauge({
    name: 'kop_store_circuit_open',
    help: 'Whether store-served requests (OffsetCommit, OffsetFetch, OffsetDelete) are answered COORDINATOR_LOAD_IN_PROGRESS at once because the store failed (1), until a probe reads and writes it again (0).',
    registers: [registry],
    collect() {
      this.set(store?.circuitOpen ? 1 : 0);
    },
  });
  const build = opts.build ?? { version: productVersion(), store: '' };
  new Gauge({
    name: 'kop_build_info',
    help: 'Always 1; the labels say which build runs: version, Node.js version (node) and the store kind.',
    labelNames: ['version', 'node', 'store'],
    registers: [registry],
  }).set({ version: build.version, node: process.version, store: build.store }, 1);
  return {
    registry,
    observer: new ObserverMetrics(registry, opts.apiVersions ?? true),
    offsets: new CommitMetrics(registry),
    measureStore: (store) => new MeasuredStore(store, storeMetrics),
    watchProxy: (p) => {
      proxy = p;
    },
    watchStore: (s) => {
      store = s;
    },
    storeDataLost: new Gauge({
      name: 'kop_store_data_lost',
      help: 'Whether the offset store lost its data (its marker gone or replaced): 1 until the proxy is restarted.',
      labelNames: ['store'],
      registers: [registry],
    }),
  };
}

/** Gauges and a counter computed at scrape time from the core's own counts: nothing on the hot path. */
function registerProxyState(registry: Registry, state: () => ProxyState | null): void {
  // Registered before the observer's metrics, so collected first at each scrape: the native path's
  // batched counts reach kop_requests_total, kop_request_duration_seconds and kop_bytes_total
  // before those are read.
  new Gauge({
    name: 'kop_native_relay_connections',
    help: 'Client connections relayed on the native path now (--native-relay): both sockets read and written by the addon, no JavaScript per read.',
    registers: [registry],
    collect() {
      const s = state();
      s?.flushNativeFigures();
      this.set(s?.nativeConnections ?? 0);
    },
  });
  new Gauge({
    name: 'kop_request_buffer_bytes',
    help: 'Memory held for request frames not yet fully received, all client connections together (bounded by --max-buffered-request-bytes).',
    registers: [registry],
    collect() {
      this.set(state()?.bufferedRequestBytes ?? 0);
    },
  });
  new Gauge({
    name: 'kop_request_buffer_muted_connections',
    help: 'Client connections not read because --max-buffered-request-bytes is reached (their large requests wait).',
    registers: [registry],
    collect() {
      this.set(state()?.mutedConnections ?? 0);
    },
  });
  new Gauge({
    name: 'kop_response_buffer_bytes',
    help: 'Memory held for responses clients have not read yet, all client connections together (bounded by --max-buffered-response-bytes).',
    registers: [registry],
    collect() {
      this.set(state()?.bufferedResponseBytes ?? 0);
    },
  });
  const handedOver = { native: 0, javascript: 0 };
  new Counter({
    name: 'kop_native_relay_handovers_total',
    help: 'Client connections moved to the native path (to="native") and handed back to JavaScript for a frame the proxy reads (to="javascript"), since the start.',
    labelNames: ['to'],
    registers: [registry],
    collect() {
      const now = state()?.nativeHandovers ?? { toNative: 0, toJavaScript: 0 };
      const add = (to: 'native' | 'javascript', total: number): void => {
        this.inc({ to }, Math.max(0, total - handedOver[to]));
        handedOver[to] = Math.max(handedOver[to], total);
      };
      add('native', now.toNative);
      add('javascript', now.toJavaScript);
    },
  });
  let reported = 0;
  new Counter({
    name: 'kop_connections_refused_total',
    help: 'Client connections closed at accept because --max-connections was reached.',
    registers: [registry],
    collect() {
      const refused = state()?.refusedConnections ?? 0;
      if (refused > reported) this.inc(refused - reported);
      reported = refused;
    },
  });
}
