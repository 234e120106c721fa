/**
 * Fails fast once the offset store is known to be failing. A client connection's answers go back
 * in request order, so a heartbeat the broker answered at once still waits behind an OffsetCommit
 * the store has not answered: if every commit waited for the store's deadline, a consumer's
 * heartbeat answers would stop for longer than its session timeout, and the group would
 * rebalance over a store outage (issue 40). A broker's coordinator never stalls heartbeats on its
 * offsets log; the proxy must not either.
 *
 * A breaker in three states. Closed: everything goes to the store. The first operation that fails
 * with StoreUnavailableError (unreachable, or a write the store refused: disk or map full,
 * read-only, wrong server) opens it, as does the health watcher finding the store down (`trip`).
 * A timeout opens it only when the store answered nothing since the operation was sent: a store
 * that answers other operations meanwhile is slow (a loaded machine, a SCAN of a large keyspace
 * for ListGroups), not down, and refusing every commit for it turned /readyz 503 for seconds under
 * load with the store up (issue 43). Open: every operation but `ping` is refused at once with
 * StoreFailingFastError (reads excepted once a probe's ping succeeded: a full disk still serves
 * OffsetFetch), which the handlers answer with the broker's retriable COORDINATOR_LOAD_IN_PROGRESS
 * (kafka-errors.ts), and nothing is sent to the store: a refused commit can never apply later.
 * Half-open: one trial at a time, the probe, a ping and then a write (a lease no one else takes;
 * a store that reads but cannot write answers pings). The probe that succeeds closes the circuit
 * at once; a failed one is followed by the next `probeIntervalMs` (250 ms) after it ended, so a
 * store that is back serves within about that long plus one round trip (it was up to 2.5 s with
 * a probe a second: 3.6 s of 503s after Redis was back in a 10-minute chaos run).
 *
 * Without flapping: the probe sent at once when the circuit opens only pings (so reads resume at
 * once); the first write trial waits the hold, `probeIntervalMs` at first. A nearly full disk
 * accepts the probe's small write in pages freed by earlier transactions while commits fail: with
 * the write probe at once, the circuit closed within milliseconds of every failed commit and
 * /readyz answered 200 at every poll while commits failed (a Java consumer committing every 200 ms
 * on a full tmpfs, reliability-store-outage-java.test.ts). So a circuit that opens again within
 * FLAP_WINDOW_MS of closing doubles its hold (up to MAX_HOLD_MS); one that stayed closed that
 * long starts again from `probeIntervalMs`. While open, `problem` names the failure; readiness
 * reports it.
 */
import { StoreUnavailableError } from '../../backends/errors.js';
import { StoreDecorator } from '../../backends/store-decorator.js';
import type { StoreOperation } from '../../backends/store-decorator.js';
import type { OffsetStore } from '../../backends/store.js';
import type { Logger } from '../common/log.js';

/**
 * The pause after a failed probe before the next, and the first hold: a store that is back serves
 * within about this long (one probe in flight at a time, so a store that does not answer is asked
 * once per its deadline plus this).
 */
export const PROBE_INTERVAL_MS = 250;

/** A circuit that opens again within this long of closing was closed too early: its hold doubles. */
export const FLAP_WINDOW_MS = 10_000;

/** The longest hold: a store that keeps failing right after each trial is tried this often. */
export const MAX_HOLD_MS = 2_000;

/**
 * How long /readyz stays 503 after a write the store refused, unless a later write succeeded. The
 * circuit's write trial can pass on a nearly full disk (its small lease fits in pages freed by
 * earlier transactions) while every commit fails: readiness must follow the commits, not the trial.
 */
export const WRITE_FAILURE_MEMORY_MS = 5_000;

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

/** What is known of a failure reported from outside (`trip`). */
export interface TripFailure {
  /** False when only writes failed (the store still answers reads). Default true. */
  readsFailed?: boolean;
  /** The failed operation timed out; it was sent at this Date.now(). */
  timedOutSentAt?: number;
}

export class StoreCircuit extends StoreDecorator {
  /** Date.now() when the circuit opened; null while it is closed. */
  private openedAt: number | null = null;
  /** Date.now() when it last closed; null before it ever did. */
  private closedAt: number | null = null;
  /** Date.now() of the last answer of the store through this circuit (0: none yet). */
  private lastAnswerAt = 0;
  private why = '';
  /** The last write the store refused, until a later write succeeds. */
  private lastWriteFailure: { at: number; why: string } | null = null;
  /** While open: the last probe's ping succeeded, so reads are let through (only writes fail). */
  private readsOk = false;
  private probeTimer: NodeJS.Timeout | null = null;
  private closed = false;
  private readonly probeIntervalMs: number;
  /** The least time the circuit stays open before its first write trial (see the class comment). */
  private holdMs: number;

  constructor(
    inner: OffsetStore,
    private readonly opts: StoreCircuitOptions,
  ) {
    super(inner);
    this.probeIntervalMs = opts.probeIntervalMs ?? PROBE_INTERVAL_MS;
    this.holdMs = this.probeIntervalMs;
  }

  /** True while store operations are refused at once. */
  get isOpen(): boolean {
    return this.openedAt !== null;
  }

  /** Why the circuit is open (the store's own error), null while it is closed. */
  get problem(): string | null {
    return this.openedAt === null ? null : this.why;
  }

  /** A write the store refused within WRITE_FAILURE_MEMORY_MS, with no write succeeding since. */
  get recentWriteFailure(): string | null {
    const f = this.lastWriteFailure;
    if (f === null || Date.now() - f.at >= WRITE_FAILURE_MEMORY_MS) return null;
    return `a write failed ${Date.now() - f.at} ms ago: ${f.why}`;
  }

  /** The store answered an operation (or a probe) after `time` (a Date.now()): it is up, if slow. */
  answeredSince(time: number): boolean {
    return this.lastAnswerAt > time;
  }

  /**
   * Opens the circuit (or updates its reason): the store was found failing, here or by the health
   * watcher. A timeout does not when the store answered something since that operation was sent.
   * Returns whether the circuit is open now.
   */
  trip(why: string, failure: TripFailure = {}): boolean {
    if (this.closed) return false;
    const { readsFailed = true, timedOutSentAt } = failure;
    if (timedOutSentAt !== undefined && this.answeredSince(timedOutSentAt)) return this.isOpen;
    this.why = why;
    if (readsFailed) this.readsOk = false;
    if (this.openedAt !== null) return true;
    // Reads are let through once the first probe's ping, sent at once, has succeeded.
    this.readsOk = false;
    const now = Date.now();
    this.openedAt = now;
    const flapped = this.closedAt !== null && now - this.closedAt < FLAP_WINDOW_MS;
    this.holdMs = flapped ? Math.min(this.holdMs * 2, MAX_HOLD_MS) : this.probeIntervalMs;
    this.opts.log.warn('offset store failing: offset requests answered at once', {
      store: this.kind,
      error: why,
      effect:
        'OffsetCommit, OffsetFetch and OffsetDelete are answered COORDINATOR_LOAD_IN_PROGRESS (retriable) ' +
        'without waiting for the store, until a probe reads and writes it again',
      probeIntervalMs: this.probeIntervalMs,
      holdMs: this.holdMs,
    });
    this.opts.onChange?.(true);
    this.scheduleProbe(0, false);
    return true;
  }

  /** The next probe in `delayMs`: a ping, and a write unless `write` is false. One at a time. */
  private scheduleProbe(delayMs: number, write = true): void {
    if (this.closed || this.probeTimer !== null) return;
    this.probeTimer = setTimeout(() => void this.probe(write), delayMs);
    this.probeTimer.unref();
  }

  /** The next write trial: a probe interval after the last one, and not before the hold is over. */
  private scheduleTrial(): void {
    const holdLeft = this.openedAt === null ? 0 : this.openedAt + this.holdMs - Date.now();
    this.scheduleProbe(Math.max(this.probeIntervalMs, holdLeft));
  }

  /** One probe: a ping, then (`write`) a write; either failing keeps the circuit open with its reason. */
  private async probe(write: boolean): Promise<void> {
    try {
      await this.inner.ping();
      this.lastAnswerAt = Date.now();
      this.readsOk = true;
      if (!write) {
        this.probeTimer = null;
        this.scheduleTrial();
        return;
      }
      await this.inner.lease(PROBE_LEASE, this.opts.probeHolder, Math.max(this.probeIntervalMs, 1000));
    } catch (err) {
      this.probeTimer = null;
      if (this.closed) return;
      this.why = err instanceof Error ? err.message : String(err);
      this.scheduleTrial();
      return;
    }
    this.probeTimer = null;
    if (this.closed || this.openedAt === null) return;
    const now = Date.now();
    const downMs = now - this.openedAt;
    this.openedAt = null;
    this.closedAt = now;
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
    const sentAt = Date.now();
    return run().then(
      (value) => {
        this.lastAnswerAt = Date.now();
        if (!READS.has(op)) this.lastWriteFailure = null;
        return value;
      },
      (err: unknown) => {
        // A ping that timed out is the health watcher's to judge (it asks again before calling
        // the store down, store-health.ts): readiness polls ping through here.
        const pingTimedOut = op === 'ping' && err instanceof StoreUnavailableError && err.timedOut;
        if (err instanceof StoreUnavailableError && !pingTimedOut) {
          // A write that timed out while the store answered others meanwhile was slow, not refused
          // (the same rule as trip's): readiness must not say 503 for WRITE_FAILURE_MEMORY_MS
          // each time one commit of many misses its deadline on a loaded store (issue 43: a
          // ZooKeeper chaos run was unready 36.5 s on such timeouts after its faults' grace).
          const slow = err.timedOut && this.answeredSince(sentAt);
          if (!READS.has(op) && !slow) this.lastWriteFailure = { at: Date.now(), why: err.message };
          this.trip(err.message, {
            readsFailed: READS.has(op),
            ...(err.timedOut ? { timedOutSentAt: sentAt } : {}),
          });
        } else {
          // Any other error (a corrupt record) is an answer of the store.
          this.lastAnswerAt = Date.now();
        }
        throw err;
      },
    );
  }

  override close(): Promise<void> {
    this.closed = true;
    if (this.probeTimer !== null) clearTimeout(this.probeTimer);
    this.probeTimer = null;
    return this.inner.close();
  }
}

/**
 * The store part of /readyz: not ready while the circuit is open (a store that fails writes still
 * answers pings: the circuit's reason says so), nor for WRITE_FAILURE_MEMORY_MS after a write the
 * store refused (unless a write succeeded since), nor when a ping fails. A ping that times out while
 * the store answered other operations since it was sent is ready: the store answers, slowly (under
 * load, commits answered in 1-2 s while a ping now and then missed its deadline, and /readyz said
 * 503 for 2-7 s with nothing failing; issue 43).
 */
export async function storeReadiness(circuit: StoreCircuit, ping: () => Promise<void>): Promise<void> {
  const problem = circuit.problem ?? circuit.recentWriteFailure;
  if (problem !== null) throw new Error(problem);
  const sentAt = Date.now();
  try {
    await ping();
  } catch (err) {
    const slow = err instanceof StoreUnavailableError && err.timedOut && circuit.answeredSince(sentAt);
    if (!slow) throw err;
  }
}
