/**
 * Fails fast once the offset store is known to be failing. A client connection's answers go back
 * in request order, so a heartbeat the broker answered at once still waits behind an OffsetCommit
 * the store has not answered: if every commit waited for the store's deadline, a consumer's
 * heartbeat answers would stop for longer than its session timeout, and the group would
 * rebalance over a store outage (issue 40). A broker's coordinator never stalls heartbeats on its
 * offsets log; the proxy must not either.
 *
 * So the first operation that fails with StoreUnavailableError (unreachable, timed out, or a
 * write the store refused: disk or map full, read-only, wrong server) opens the circuit, as does
 * the health watcher finding the store down (`trip`). While it is open every operation but `ping`
 * is refused at once with StoreUnavailableError (reads excepted once a probe's ping succeeded: a
 * full disk still serves OffsetFetch), which the handlers answer with the broker's
 * retriable COORDINATOR_LOAD_IN_PROGRESS (kafka-errors.ts), and nothing is sent to the store: a refused commit can
 * never apply later. A probe runs every `probeIntervalMs`: a ping and then a write (a lease no
 * one else takes), because a store that reads but cannot write answers pings. The first probe
 * that succeeds closes the circuit. While open, `problem` names the failure; readiness reports it.
 *
 * The probe sent at once when the circuit opens only pings (so reads resume at once): the write
 * waits for the next one, so the circuit stays open at least `probeIntervalMs`. A nearly full
 * disk accepts the probe's small write in pages freed by earlier transactions while commits fail:
 * with the write probe at once, the circuit closed within milliseconds of every failed commit
 * and /readyz answered 200 at every poll while commits failed (a Java consumer committing every
 * 200 ms on a full tmpfs, reliability-store-outage-java.test.ts).
 */
import { StoreUnavailableError } from '../../backends/errors.js';
import { StoreDecorator } from '../../backends/store-decorator.js';
import type { StoreOperation } from '../../backends/store-decorator.js';
import type { OffsetStore } from '../../backends/store.js';
import type { Logger } from '../common/log.js';

/** How often an open circuit probes the store: a store that is back serves within about this long. */
export const PROBE_INTERVAL_MS = 1000;

/** The lease the probe writes: its own name, so it never holds a lease anything else takes. */
export const PROBE_LEASE = 'kop-store-write-probe';

/** Operations that only read: served while the store answers pings but refuses writes (disk full). */
const READS: ReadonlySet<StoreOperation> = new Set(['fetch', 'list_groups', 'get_group', 'ping']);

/** The refusal of an open circuit: nothing was sent to the store. */
export class StoreFailingFastError extends StoreUnavailableError {}

export interface StoreCircuitOptions {
  log: Logger;
  probeIntervalMs?: number;
  /** Who holds the probe's lease (unique per process, so two proxies' probes both succeed). */
  probeHolder: string;
  /** Called when the circuit opens (true) or closes (false): the kop_store_circuit_open gauge. */
  onChange?: (open: boolean) => void;
}

export class StoreCircuit extends StoreDecorator {
  /** Date.now() when the circuit opened; null while it is closed. */
  private openedAt: number | null = null;
  private why = '';
  /** While open: the last probe's ping succeeded, so reads are let through (only writes fail). */
  private readsOk = false;
  private probeTimer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly probeIntervalMs: number;

  constructor(
    inner: OffsetStore,
    private readonly opts: StoreCircuitOptions,
  ) {
    super(inner);
    this.probeIntervalMs = opts.probeIntervalMs ?? PROBE_INTERVAL_MS;
  }

  /** True while store operations are refused at once. */
  get isOpen(): boolean {
    return this.openedAt !== null;
  }

  /** Why the circuit is open (the store's own error), null while it is closed. */
  get problem(): string | null {
    return this.openedAt === null ? null : this.why;
  }

  /** Opens the circuit (or updates its reason): the store was found failing, here or by a probe. */
  trip(why: string, readsFailed = true): void {
    if (this.closed) return;
    this.why = why;
    if (readsFailed) this.readsOk = false;
    if (this.openedAt !== null) return;
    // Reads are let through once the first probe's ping, sent at once, has succeeded.
    this.readsOk = false;
    this.openedAt = Date.now();
    this.opts.log.warn('offset store failing: offset requests answered at once', {
      store: this.kind,
      error: why,
      effect:
        'OffsetCommit, OffsetFetch and OffsetDelete are answered COORDINATOR_LOAD_IN_PROGRESS (retriable) ' +
        'without waiting for the store, until a probe reads and writes it again',
      probeIntervalMs: this.probeIntervalMs,
    });
    this.opts.onChange?.(true);
    this.scheduleProbe(0);
  }

  private scheduleProbe(delayMs = this.probeIntervalMs): void {
    if (this.closed || this.probeTimer !== null) return;
    // The probe at once (as the circuit opens) only pings: see the class comment.
    this.probeTimer = setTimeout(() => void this.probe(delayMs > 0), delayMs);
    this.probeTimer.unref();
  }

  /** One probe: a ping, then (`write`) a write; either failing keeps the circuit open with its reason. */
  private async probe(write: boolean): Promise<void> {
    try {
      await this.inner.ping();
      this.readsOk = true;
      if (!write) {
        this.probeTimer = null;
        this.scheduleProbe();
        return;
      }
      await this.inner.lease(PROBE_LEASE, this.opts.probeHolder, this.probeIntervalMs);
    } catch (err) {
      this.probeTimer = null;
      if (this.closed) return;
      this.why = err instanceof Error ? err.message : String(err);
      this.scheduleProbe();
      return;
    }
    this.probeTimer = null;
    if (this.closed || this.openedAt === null) return;
    const downMs = Date.now() - this.openedAt;
    this.openedAt = null;
    this.why = '';
    this.opts.log.info('offset store takes requests again', { store: this.kind, failingMs: downMs });
    this.opts.onChange?.(false);
  }

  protected around<T>(op: StoreOperation, run: () => Promise<T>): Promise<T> {
    if (this.openedAt !== null && op !== 'ping' && !(this.readsOk && READS.has(op))) {
      return Promise.reject(
        new StoreFailingFastError(`${this.kind} store: ${op}: not tried, the store is failing: ${this.why}`),
      );
    }
    return run().catch((err: unknown) => {
      if (err instanceof StoreUnavailableError) this.trip(err.message, READS.has(op));
      throw err;
    });
  }

  override close(): Promise<void> {
    this.closed = true;
    if (this.probeTimer !== null) clearTimeout(this.probeTimer);
    this.probeTimer = null;
    return this.inner.close();
  }
}
