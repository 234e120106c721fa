/**
 * Watches whether the offset store answers, for the operator: an `OffsetStore` decorator that sees
 * every operation's outcome and pings the store every PING_INTERVAL_MS. When the store stops
 * answering it logs one warning naming the target and why ("connection refused to h:p"), and one
 * line when it answers again; `up` feeds the kop_store_up gauge. It also rewrites the errors of
 * failed operations so that they name the target instead of repeating the client library's text.
 *
 * Only StoreUnavailableError counts as "not answering": a corrupt record is an answer. A failed
 * operation is confirmed with a ping before the store is declared down, so one slow operation does
 * not flap the state; and a ping that times out while the store answered other operations since it
 * was sent does not either: under load Redis answered commits in 1-2 s while a ping now and then
 * missed its deadline, and the store was declared down (and the circuit opened) with every commit
 * succeeding (issue 43). Slow is not down.
 */
import { StoreUnavailableError } from '../../backends/errors.js';
import { probeEndpoints } from '../../backends/connection-problem.js';
import type { Endpoint } from '../../backends/connection-problem.js';
import { StoreDecorator } from '../../backends/store-decorator.js';
import type { StoreOperation } from '../../backends/store-decorator.js';
import type { OffsetStore } from '../../backends/store.js';
import type { Logger } from '../common/log.js';

export const PING_INTERVAL_MS = 5000;

/**
 * Each operation as the stores name it in their errors ("redis store: getGroup: ..."): the
 * OffsetStore method it calls.
 */
const METHOD_OF: Readonly<Record<StoreOperation, keyof OffsetStore>> = {
  commit: 'commit',
  fetch: 'fetch',
  delete_offsets: 'deleteOffsets',
  delete_group: 'deleteGroup',
  list_groups: 'listGroups',
  get_group: 'getGroup',
  update_group: 'updateGroup',
  lease: 'lease',
  release_lease: 'releaseLease',
  ping: 'ping',
};

/** Errors whose message names the store's target already (one this module made). */
const namingTarget = new WeakSet<Error>();

export interface StoreHealthOptions {
  /** Where the store is, for the log lines: host:port list or directory, never a credential. */
  target: string;
  /** The store's servers, probed over TCP to say why they do not answer (none for local stores). */
  endpoints?: readonly Endpoint[];
  log: Logger;
  pingIntervalMs?: number;
  /** Told, with the reason, whenever a ping finds the store not answering (the circuit opens). */
  onDown?: (why: string) => void;
}

export class StoreHealth extends StoreDecorator {
  readonly target: string;
  /** null until the first operation or ping has answered or failed. */
  private state: boolean | null = null;
  private downSince = 0;
  /** Why the store does not answer (the last probe or client report); null while it answers. */
  private why: string | null = null;
  private confirming: Promise<void> | null = null;
  /** Date.now() of the store's last answer to an operation or ping (0: none yet). */
  private lastAnswerAt = 0;
  private readonly timer: NodeJS.Timeout;
  private closed = false;

  constructor(
    inner: OffsetStore,
    private readonly opts: StoreHealthOptions,
  ) {
    super(inner);
    this.target = opts.target;
    this.timer = setInterval(() => void this.check(), opts.pingIntervalMs ?? PING_INTERVAL_MS);
    this.timer.unref();
  }

  /** 1 while the store answers, 0 while it does not or before it first answered. */
  get up(): boolean {
    return this.state === true;
  }

  /** Why the store does not answer, naming its target; null while it answers. */
  get problem(): string | null {
    return this.state === false ? this.why : null;
  }

  /**
   * Pings the store now and logs its state; resolves when known (never rejects). A ping that
   * timed out is asked again once before the store is called down (`retryTimeout`): the first
   * ping of a proxy starting on a loaded machine waits for the connection too, and missed its
   * deadline in the bounded chaos run at load average 28 (2 s of 503s before any fault).
   */
  async check(retryTimeout = true): Promise<void> {
    if (this.closed) return;
    const sentAt = Date.now();
    try {
      await this.inner.ping();
      this.lastAnswerAt = Date.now();
      this.answered();
    } catch (err) {
      const timedOut = err instanceof StoreUnavailableError && err.timedOut;
      // Slow, not down: the store answered something else after this ping was sent.
      if (timedOut && this.lastAnswerAt > sentAt) return;
      if (timedOut && retryTimeout) return this.check(false);
      await this.failed(err);
    }
  }

  private answered(): void {
    if (this.closed) return;
    const before = this.state;
    this.state = true;
    this.why = null;
    if (before === false) {
      this.opts.log.info('offset store answers again', {
        store: this.kind,
        target: this.target,
        downSeconds: Math.round((Date.now() - this.downSince) / 1000),
      });
    } else if (before === null) {
      this.opts.log.info('offset store open', { store: this.kind, target: this.target });
    }
  }

  private async failed(err: unknown): Promise<void> {
    if (this.closed || !(err instanceof StoreUnavailableError)) return;
    this.why = await this.reason(err);
    // A local store's own error already says "<kind> store: ping: ...".
    const prefix = `${this.kind} store: `;
    this.opts.onDown?.(this.why.startsWith(prefix) ? this.why : `${prefix}ping: ${this.why}`);
    if (this.state === false) return;
    const first = this.state === null;
    this.state = false;
    this.downSince = Date.now();
    this.opts.log.warn(first ? 'offset store not answering at start' : 'offset store not answering', {
      store: this.kind,
      target: this.target,
      error: this.why,
      effect: 'offset requests are answered with retriable errors until it answers',
    });
  }

  /** The client's own report if it has one, else what a TCP probe of the endpoints finds. */
  private async reason(err: StoreUnavailableError): Promise<string> {
    const reported = this.inner.connectionProblem?.();
    if (reported) return reported;
    const endpoints = this.inner.probeEndpoints?.() ?? this.opts.endpoints ?? [];
    if (endpoints.length > 0) return probeEndpoints(endpoints);
    return err.message;
  }

  /** An operation failed: confirm with a ping (one at a time) before calling the store down. */
  private observeFailure(err: unknown): void {
    if (!(err instanceof StoreUnavailableError) || this.confirming !== null) return;
    this.confirming = this.check().finally(() => (this.confirming = null));
  }

  /**
   * The error a caller sees: a store that is unreachable says so with its target ("redis store:
   * commit: connection refused to h:p") instead of the client library's words.
   */
  private rewrite(op: StoreOperation, err: unknown): unknown {
    if (!(err instanceof StoreUnavailableError)) return err;
    const reported = this.inner.connectionProblem?.() ?? this.problem;
    if (reported === null || reported === undefined) {
      if (!err.timedOut || namingTarget.has(err)) return err;
      const named = new StoreUnavailableError(`${err.message} (store ${this.target})`, {
        cause: err,
        timedOut: true,
      });
      namingTarget.add(named);
      return named;
    }
    // The stores' own "<kind> store: <operation>: " prefix, with the reason in words after it.
    return new StoreUnavailableError(`${this.kind} store: ${METHOD_OF[op]}: ${reported}`, {
      cause: err,
      timedOut: err.timedOut,
    });
  }

  protected around<T>(op: StoreOperation, run: () => Promise<T>): Promise<T> {
    return run().then(
      (value) => {
        this.lastAnswerAt = Date.now();
        if (this.state !== true) this.answered();
        return value;
      },
      (err: unknown) => {
        this.observeFailure(err);
        throw this.rewrite(op, err);
      },
    );
  }

  override connectionProblem(): string | null {
    return this.inner.connectionProblem?.() ?? this.problem;
  }

  override close(): Promise<void> {
    this.closed = true;
    clearInterval(this.timer);
    return this.inner.close();
  }
}
