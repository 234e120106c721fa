/**
 * What a client connection holds for a client that has not read it yet, bounded per connection and
 * in total, whoever answers the requests: the broker or the proxy itself.
 *
 * A broker stops reading a connection while a response to it is being sent, so a client that does
 * not read costs it one response. The proxy pipelines, so it allows a little more, and counts:
 * - unsent: response bytes written to the client's socket that the kernel has not taken (counted
 *   while the socket waits for 'drain', i.e. is above its high-water mark; below it, at most that
 *   mark, 16 KiB, goes uncounted);
 * - waiting: responses complete but behind an earlier one not answered yet (responses go in
 *   request order);
 * - queued: requests the proxy answers itself that were read but not started (it starts one at a
 *   time per connection, as a broker handles one request of a connection at a time).
 *
 * When the responses held reach CONNECTION_RESPONSE_BYTES, or the pool of all connections is
 * exhausted and this one holds any, the connection stops reading its client and starts no local
 * answer until the client has read (the proxy's ProxyConnection does that, and also stops reading
 * the broker while the broker's answers would only add to what waits). A local answer that starts
 * below the limit may pass it by its own size: like a broker, the proxy holds one response
 * whatever its size.
 */

/** Responses held for one client before the proxy stops reading it. */
export const CONNECTION_RESPONSE_BYTES = 1024 * 1024;

/**
 * The bytes of responses held for clients, all connections together (`--max-buffered-response-bytes`).
 * While it is exhausted, every connection that holds any is treated as full. No connection needs
 * to be told when it has room again: one that holds something is released by its own progress
 * (its socket drains, the answer at its head comes), which re-evaluates it.
 */
export class ResponseBufferPool {
  held = 0;

  constructor(readonly limit: number) {}

  get exhausted(): boolean {
    return this.held >= this.limit;
  }
}

export class ResponseBacklog {
  private unsent = 0;
  private waiting = 0;
  private queued = 0;
  private closed = false;

  constructor(
    private readonly pool: ResponseBufferPool | null,
    private readonly limit = CONNECTION_RESPONSE_BYTES,
  ) {}

  /** Response bytes held for this client (unsent + waiting), as counted in the pool. */
  get held(): number {
    return this.unsent + this.waiting;
  }

  /** Bytes of the requests read and not yet started (they wait for the local answer before them). */
  get queuedRequestBytes(): number {
    return this.queued;
  }

  /** The socket's unsent bytes now (0 when it does not wait for 'drain'). */
  setUnsent(bytes: number): void {
    if (this.closed || bytes === this.unsent) return;
    if (this.pool) this.pool.held += bytes - this.unsent;
    this.unsent = bytes;
  }

  addWaiting(delta: number): void {
    if (this.closed || delta === 0) return;
    if (this.pool) this.pool.held += delta;
    this.waiting += delta;
  }

  addQueued(delta: number): void {
    this.queued += delta;
  }

  /**
   * The connection holds enough for its client: read no more requests, start no local answer
   * that is not at the head of the queue. True as well while the pool is exhausted and this
   * connection holds anything.
   */
  get full(): boolean {
    return this.over(this.held);
  }

  /** What was written to the socket is enough: even the request at the head waits for the client. */
  get clientBehind(): boolean {
    return this.over(this.unsent);
  }

  /** Read no more requests: responses are held, or read requests wait for their local answers. */
  get stopReading(): boolean {
    return this.full || this.queued >= this.limit;
  }

  private over(bytes: number): boolean {
    return bytes >= this.limit || (bytes > 0 && this.pool !== null && this.pool.exhausted);
  }

  /** The connection closed: what it held is no longer held. */
  release(): void {
    if (this.closed) return;
    if (this.pool) this.pool.held -= this.held;
    this.closed = true;
    this.unsent = 0;
    this.waiting = 0;
    this.queued = 0;
  }
}
