/**
 * A request that declares at most this size is always read: it holds about one socket read at
 * most, and the small requests of consumers and admin tools (Metadata, Fetch, OffsetCommit,
 * Heartbeat, ...) keep being answered while large ones wait.
 */
export const ALWAYS_READ_REQUEST_BYTES = 64 * 1024;

/**
 * Memory for incomplete request frames across all client connections, bounded as a broker bounds
 * it with queued.max.request.bytes and its memory pool.
 *
 * A request larger than ALWAYS_READ_REQUEST_BYTES is admitted when its first body bytes arrive if
 * the pool is not exhausted, and then reserves its whole declared size until it is complete: like
 * the broker's non-strict pool, an admitted request never waits half way, so it finishes and frees
 * its memory (nothing deadlocks), and the pool can pass its limit by one request. If the pool is
 * exhausted, the connection is muted (no longer read: its client waits, TCP holds the rest) and
 * queued, holding what it had sent (at most one socket read). Whenever memory is released (a
 * request completes, a connection closes), queued connections are admitted in arrival order while
 * the pool is below its limit, and read again. Smaller requests count the bytes they hold and are
 * never muted. A muted connection still closes when idle (--idle-timeout-ms); the close of a
 * muted client is seen once it is admitted and reads to the end.
 */
export class RequestBufferPool {
  /** Memory held by incomplete requests now (what the proxy really holds). */
  held = 0;
  /** What admission compares with the limit: reservations of admitted requests, bytes of small ones. */
  charged = 0;
  /** Muted connections, in arrival order. */
  private readonly queue = new Set<RequestAccount>();

  constructor(readonly limit: number) {}

  /** Connections not read now because the pool is exhausted. */
  get mutedCount(): number {
    return this.queue.size;
  }

  change(heldDelta: number, chargedDelta: number): void {
    this.held += heldDelta;
    this.charged += chargedDelta;
    if (chargedDelta < 0) this.admitQueued();
  }

  /**
   * The native relay (native-relay.ts) asks to pass on a large request as its bytes arrive: it
   * holds none of them, but the broker reserves the declared size as soon as it reads the size,
   * so the request is charged that size until its last byte is passed on (`release`). Refused
   * while the pool is exhausted or connections wait for it (they came first): the request then
   * goes through a connection's account, which mutes it.
   */
  reserve(size: number): boolean {
    if (this.charged >= this.limit || this.queue.size > 0) return false;
    this.charged += size;
    return true;
  }

  /**
   * A reservation of the native relay ends. Muted connections are admitted on the next turn of
   * the event loop: the addon calls this in the middle of a read, where nothing may resume a
   * socket or attach a pair (native/relay-report.c, the rule above call_js).
   */
  release(size: number): void {
    this.charged -= size;
    if (this.queue.size > 0) setImmediate(() => this.admitQueued());
  }

  private admitQueued(): void {
    for (const account of this.queue) {
      if (this.charged >= this.limit) break;
      this.queue.delete(account);
      account.admit();
    }
  }

  mute(account: RequestAccount): void {
    this.queue.add(account);
  }

  forget(account: RequestAccount): void {
    this.queue.delete(account);
  }
}

/**
 * One client connection's account with the pool: what its incomplete request holds and what it
 * is charged. The connection reports each read (`update`); the account tells it to stop reading
 * (`update` returns true, the pool has queued it) and to read again (`onAdmitted`).
 */
export class RequestAccount {
  /** Memory of the incomplete request frame, as last told to the pool. */
  private held = 0;
  /** What the incomplete request counts in the pool: its reservation once admitted, else its memory. */
  private charged = 0;
  /** The incomplete request was admitted by the pool (reserves its declared size). */
  private admitted = false;
  private size = 0;
  private closed = false;

  constructor(
    private readonly pool: RequestBufferPool | undefined,
    private readonly onAdmitted: () => void,
  ) {}

  /** Whether a read must be reported: what is held changed, or an admitted request completed. */
  changed(held: number, completed: boolean): boolean {
    return held !== this.held || (this.admitted && completed);
  }

  /**
   * The incomplete request now holds `held` bytes of its declared `size` (0: none is incomplete);
   * `completed`: a request completed in this read, so an incomplete one now is a new one. True
   * when the connection must not be read until `onAdmitted`.
   */
  update(held: number, size: number, completed: boolean): boolean {
    const pool = this.pool;
    if (completed) this.admitted = false;
    this.size = size;
    if (!pool) {
      this.held = held;
      return false;
    }
    const large = held > 0 && size > ALWAYS_READ_REQUEST_BYTES;
    let mute = false;
    if (large && !this.admitted) {
      if (pool.charged - this.charged < pool.limit) this.admitted = true;
      else mute = true;
    }
    // A muted request charges nothing: what it holds (one read) must not keep others out.
    const charged = this.admitted ? Math.max(size, held) : large ? 0 : held;
    pool.change(held - this.held, charged - this.charged);
    this.held = held;
    this.charged = charged;
    if (mute) pool.mute(this);
    return mute;
  }

  /** Called by the pool: the muted request now has its reservation. */
  admit(): void {
    if (this.closed || !this.pool) return;
    this.admitted = true;
    const charged = Math.max(this.size, this.held);
    this.pool.change(0, charged - this.charged);
    this.charged = charged;
    this.onAdmitted();
  }

  /** The connection closed: everything it held or reserved goes back to the pool. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.pool) {
      this.pool.forget(this);
      this.pool.change(-this.held, -this.charged);
    }
    this.held = 0;
    this.charged = 0;
  }
}
