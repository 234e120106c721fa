/**
 * An `OffsetStore` decorator that times every operation and counts failures, by store kind and
 * operation. A commit refused by a guard is a successful store operation (the store answered);
 * only a rejected promise (timeout, connection loss, corrupt record) counts as an error.
 */
import { Counter, Histogram } from 'prom-client';
import type { Registry } from 'prom-client';
import { STORE_OPERATIONS, StoreDecorator } from '../../../backends/store-decorator.js';
import type { StoreOperation } from '../../../backends/store-decorator.js';
import type { OffsetStore } from '../../../backends/store.js';

export { STORE_OPERATIONS };
export type { StoreOperation };

/** Store round trips: sub-millisecond (memory, LMDB reads) to seconds (fsync, a failing-over Redis). */
export const STORE_DURATION_BUCKETS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];

type CounterChild = ReturnType<Counter['labels']>;
type HistogramChild = ReturnType<Histogram['labels']>;

/** The store metrics of one registry; children are cached per store kind. */
export class StoreMetrics {
  private readonly duration: Histogram<'store' | 'operation'>;
  private readonly errors: Counter<'store' | 'operation'>;

  constructor(registry: Registry) {
    this.duration = new Histogram({
      name: 'kop_store_operation_duration_seconds',
      help: 'Offset store operation latency, by store kind and operation (failed operations included).',
      labelNames: ['store', 'operation'],
      buckets: STORE_DURATION_BUCKETS,
      registers: [registry],
    });
    this.errors = new Counter({
      name: 'kop_store_errors_total',
      help: 'Offset store operations that failed (timeout, connection loss, bad record), by store kind and operation.',
      labelNames: ['store', 'operation'],
      registers: [registry],
    });
  }

  forStore(kind: string): Record<StoreOperation, { duration: HistogramChild; errors: CounterChild }> {
    const out = {} as Record<StoreOperation, { duration: HistogramChild; errors: CounterChild }>;
    for (const op of STORE_OPERATIONS) {
      const errors = this.errors.labels(kind, op);
      // Export 0 from the start so rate() and alerts see the series before the first failure.
      errors.inc(0);
      out[op] = { duration: this.duration.labels(kind, op), errors };
    }
    return out;
  }
}

export class MeasuredStore extends StoreDecorator {
  private readonly ops: ReturnType<StoreMetrics['forStore']>;

  constructor(inner: OffsetStore, metrics: StoreMetrics) {
    super(inner);
    this.ops = metrics.forStore(inner.kind);
  }

  /** The undecorated store (for tests and admin code that need backend specifics). */
  get unwrapped(): OffsetStore {
    return this.inner;
  }

  protected async around<T>(op: StoreOperation, run: () => Promise<T>): Promise<T> {
    const m = this.ops[op];
    const start = performance.now();
    try {
      return await run();
    } catch (err) {
      m.errors.inc();
      throw err;
    } finally {
      m.duration.observe((performance.now() - start) / 1000);
    }
  }
}
