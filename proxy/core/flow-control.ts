/**
 * Which side of one connection pair is read: the client's reads and the broker's, held for the
 * reasons below and let go when the last reason goes (connection.ts holds one per connection).
 *
 * The client side is one state machine over a set of reasons: read while the set is empty, paused
 * while it holds any, and never read again once draining (shutdown), whatever the set. A reason is
 * added and removed only by what it stands for, so the socket is paused and resumed once per
 * change, never per call:
 * - 'upstream': the broker connection takes no more bytes (until its drain);
 * - 'inflight': --max-in-flight requests wait for their answers;
 * - 'memory': the request memory pool is exhausted (request-pool.ts);
 * - 'responses': the client has not read what it was sent (response-backlog.ts).
 * The broker side is held while the client's socket is full (its answers would only pile up
 * here), or while the responses held reach their bound, unless the answer the client waits for
 * comes from the broker: that answer is what lets the queue move.
 */
import type { Quiescent } from './connection-parts.js';
import type { ResponseBacklog } from './response-backlog.js';

export type PauseReason = 'upstream' | 'inflight' | 'memory' | 'responses';

/** A side flow control pauses and resumes: the client's socket, the broker's link. */
export interface PausableSide {
  pause(): void;
  resume(): void;
}

export class FlowControl implements Quiescent {
  private readonly pausedFor = new Set<PauseReason>();
  private draining = false;
  private brokerHeld = false;

  constructor(
    private readonly client: PausableSide,
    private readonly broker: PausableSide,
    private readonly backlog: ResponseBacklog,
    /** The writes to the client (response-path.ts): whether its socket took everything. */
    private readonly toClient: { readonly clientFull: boolean },
  ) {}

  /** The client is not read for `reason` until `resume(reason)`. */
  pause(reason: PauseReason): void {
    if (this.pausedFor.has(reason)) return;
    this.pausedFor.add(reason);
    this.client.pause();
  }

  /** `reason` no longer holds the client: read again if nothing else holds it. */
  resume(reason: PauseReason): void {
    if (!this.pausedFor.delete(reason)) return;
    if (this.pausedFor.size === 0 && !this.draining) this.client.resume();
  }

  /**
   * Re-evaluates both sides after what is held changed. `requestsFull`: --max-in-flight requests
   * wait. `brokerNeeded`: an answer from the broker is what the client waits for (at the head of
   * its queue) or a request of the proxy's own does.
   */
  update(requestsFull: boolean, brokerNeeded: boolean): void {
    if (!requestsFull) this.resume('inflight');
    if (this.backlog.stopReading) this.pause('responses');
    else this.resume('responses');
    const hold = this.toClient.clientFull || (this.backlog.full && !brokerNeeded);
    if (hold === this.brokerHeld) return;
    this.brokerHeld = hold;
    if (hold) this.broker.pause();
    else this.broker.resume();
  }

  /** Shutdown: the client is not read again once what it is sending now has been read. */
  startDraining(): void {
    this.draining = true;
  }

  get isDraining(): boolean {
    return this.draining;
  }

  /** Stops reading the client for good (draining). */
  stopReadingClient(): void {
    this.client.pause();
  }

  /** Node reads neither socket while the native path has the pair (only when quiescent). */
  suspendForNative(): void {
    this.client.pause();
    this.broker.pause();
  }

  /** The pair is back from the native path: each side is read unless something holds it. */
  resumeAfterNative(): void {
    if (!this.brokerHeld) this.broker.resume();
    if (this.pausedFor.size === 0 && !this.draining) this.client.resume();
  }

  /** No reason to hold either side, nothing held for the client, not shutting down. */
  get quiescent(): boolean {
    return this.pausedFor.size === 0 && !this.brokerHeld && this.backlog.held === 0 && !this.draining;
  }
}
