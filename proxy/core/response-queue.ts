/**
 * The order of answers on one client connection: correlation with the broker and the order the
 * client reads in. It knows no socket; the connection (connection.ts) writes what it hands out.
 *
 * Two lists, as a broker imposes two orders:
 * - the client's order: every request that will get an answer, in arrival order. Its answer goes
 *   out once every earlier one has, whether it comes from the broker or from the proxy (a local
 *   answer in the middle of a pipeline keeps its place). A Produce with acks=0 gets no answer, so
 *   it takes no place: nothing may wait for it.
 * - the broker's order: what was sent to the broker and is owed an answer, in sending order (the
 *   broker answers in that order). Besides client requests it holds the raw tokens of a legacy
 *   SASL exchange (no header to correlate) and requests of the proxy's own, whose answers never go
 *   to the client.
 *
 * The client's list is bounded by --max-in-flight: `full` tells the connection to stop reading
 * its client until an answer has gone out.
 */
import { ProtocolError } from '../../protocol/errors.js';
import type { ResponseHandling } from './api-plan.js';
import type { AnsweredBy } from './observer.js';
import type { FrameRoute } from './response-reader.js';

/** A request's place in the client's order. */
interface Place {
  readonly correlationId: number;
  readonly apiKey: number;
  readonly apiVersion: number;
  /** performance.now() when the request arrived. */
  readonly started: number;
  /** Bytes to send to the client once every earlier answer has gone; null until it is answered. */
  out: Buffer[] | null;
  /** The length of `out`. */
  outBytes: number;
}

/** A client request sent to the broker: the broker answers it. */
export interface BrokerPending extends Place {
  readonly kind: 'broker';
  /**
   * How its answer reaches the client (its plan's): 'as-is' and 'fetch-stream' may stream, and
   * 'walk-produce' when the whole answer is at hand and needs no rewrite.
   */
  readonly response: ResponseHandling;
  /** Handles the broker's answer when it is read whole. */
  readonly onResponse: (frame: Buffer) => void;
  /** Sent, and its answer not read yet. */
  awaitingBroker: boolean;
}

/** A client request the proxy answers itself (or is deciding about: it may forward it after all). */
export interface LocalPending extends Place {
  readonly kind: 'local';
}

/** A raw token of a legacy SASL exchange: no Kafka header, one token back from the broker. */
export interface RawTokenPending extends Place {
  readonly kind: 'raw-token';
  readonly onResponse: (frame: Buffer) => void;
  awaitingBroker: boolean;
}

/** What takes a place in the client's order. */
export type Pending = BrokerPending | LocalPending | RawTokenPending;

/** A request of the proxy's own on the client's broker connection: its answer stays here. */
export interface OwnRequest {
  readonly kind: 'own';
  readonly correlationId: number;
  readonly onResponse: (frame: Buffer) => void;
  /** The connection closed before the answer came. */
  readonly onLost: (err: Error) => void;
}

/** What the broker owes an answer to, in sending order. */
export type Awaited = BrokerPending | RawTokenPending | OwnRequest;

/** Who answered, as the metrics count it (a raw token is not counted at all). */
export function answeredBy(p: Pending): AnsweredBy {
  return p.kind === 'local' ? 'proxy' : 'broker';
}

export class ResponseQueue {
  /** Client requests in arrival order, waiting for their answer to be sent. */
  private readonly pending: Pending[] = [];
  /** What was sent to the broker and not answered, in sending order. */
  private readonly forwarded: Awaited[] = [];
  private streamingNow: BrokerPending | null = null;
  private emptied: (() => void) | null = null;

  /**
   * `unchanged`: whether a 'walk-produce' answer (its whole frame, without the size prefix) goes to
   * the client as the broker wrote it; such an answer at the head is streamed, not copied.
   */
  constructor(
    private readonly maxInFlight: number,
    private readonly unchanged: (a: BrokerPending, payload: Buffer) => boolean = () => false,
  ) {}

  /** Requests whose answer has not gone to the client yet. */
  get inFlight(): number {
    return this.pending.length;
  }

  /** --max-in-flight requests wait: read no more from the client. */
  get full(): boolean {
    return this.pending.length >= this.maxInFlight;
  }

  /** Nothing owed to the client and nothing owed by the broker. */
  get idle(): boolean {
    return this.pending.length === 0 && this.forwarded.length === 0;
  }

  /** The oldest request whose answer has not gone: it holds back every answer after it. */
  get head(): Pending | undefined {
    return this.pending[0];
  }

  /** The forwarded request whose answer is being streamed to the client now. */
  get streaming(): BrokerPending | null {
    return this.streamingNow;
  }

  /** The client is waiting on the broker: its answer is at the head, or is being streamed. */
  get headAwaitsBroker(): boolean {
    if (this.streamingNow !== null) return true;
    const head = this.pending[0];
    return head !== undefined && head.kind !== 'local' && head.awaitingBroker;
  }

  /** A request that will be answered takes its place in the client's order. */
  add(p: Pending): void {
    this.pending.push(p);
  }

  /** A local request the proxy forwards after all keeps its place, now awaiting the broker. */
  replace(local: LocalPending, next: BrokerPending): void {
    const at = this.pending.indexOf(local);
    if (at < 0) throw new Error('replace: the request has no place in the queue');
    this.pending[at] = next;
  }

  /** `a` was written to the broker: its answer comes after those of everything sent before. */
  sent(a: Awaited): void {
    if (a.kind !== 'own') a.awaitingBroker = true;
    this.forwarded.push(a);
  }

  /**
   * A broker answer of `size` bytes begins: it is the oldest one owed (a broker answers in order),
   * checked by correlation id except for a raw token. Streamed when it may go to the client as the
   * broker writes it and nothing before it is still owed to the client; otherwise read whole
   * (`takeWhole`). `payload`: the whole frame when it is at hand (a view valid during the call), so
   * that a Produce answer without NodeEndpoints streams too. Throws ProtocolError for an answer
   * nobody asked for or out of order.
   */
  route(size: number, correlationId: number | null, payload: Buffer | null = null): FrameRoute {
    const a = this.forwarded[0];
    if (a === undefined)
      throw new ProtocolError('UNSOLICITED', 'the broker sent a response nobody asked for', 0);
    if (a.kind !== 'raw-token' && correlationId !== a.correlationId) {
      throw new ProtocolError(
        'OUT_OF_ORDER',
        `the broker answered correlation id ${correlationId}, expected ${a.correlationId} (${size} bytes)`,
        0,
      );
    }
    if (
      a.kind === 'broker' &&
      this.pending[0] === a &&
      (a.response === 'as-is' ||
        a.response === 'fetch-stream' ||
        (a.response === 'walk-produce' && payload !== null && this.unchanged(a, payload)))
    ) {
      this.forwarded.shift();
      a.awaitingBroker = false;
      this.streamingNow = a;
      return 'stream';
    }
    return 'whole';
  }

  /** The answer `route` chose to read whole has come: whose it is (its handler is the caller's). */
  takeWhole(): Awaited {
    const a = this.forwarded.shift();
    if (a === undefined) throw new Error('takeWhole: nothing awaits the broker');
    if (a.kind !== 'own') a.awaitingBroker = false;
    return a;
  }

  /** The streamed answer has gone out whole: its place, the head, is free. */
  finishStream(): BrokerPending {
    const p = this.streamingNow;
    if (p === null || this.pending[0] !== p) throw new Error('finishStream: no answer is being streamed');
    this.streamingNow = null;
    this.pending.shift();
    this.checkEmpty();
    return p;
  }

  /** `p` is answered with `out` (sent once every earlier answer has gone); returns its bytes. */
  answer(p: Pending, out: Buffer[]): number {
    let bytes = 0;
    for (const b of out) bytes += b.length;
    p.out = out;
    p.outBytes = bytes;
    return bytes;
  }

  /** The head, removed, when its answer is ready to be sent; undefined when it is not. */
  takeReady(): Pending | undefined {
    const p = this.pending[0];
    if (p === undefined || p.out === null) return undefined;
    this.pending.shift();
    this.checkEmpty();
    return p;
  }

  /**
   * Takes every place out of the queue when each is a forwarded request awaiting the broker's
   * answer, none part way through, and that answer goes to the client as the broker writes it
   * ('as-is') or after a walk ('walk-produce', 'fetch-stream'), with nothing else owed by the broker
   * (what the native path can take over: native-relay.ts); else leaves the queue as it is and
   * returns null.
   */
  handOver(): BrokerPending[] | null {
    if (this.streamingNow !== null || this.pending.length !== this.forwarded.length) return null;
    const handed: BrokerPending[] = [];
    for (let i = 0; i < this.pending.length; i++) {
      const p = this.pending[i]!;
      if (p !== this.forwarded[i] || p.kind !== 'broker' || !p.awaitingBroker || p.out !== null) return null;
      if (p.response !== 'as-is' && p.response !== 'walk-produce' && p.response !== 'fetch-stream')
        return null;
      handed.push(p);
    }
    this.forwarded.length = 0;
    this.pending.length = 0;
    return handed;
  }

  /** Resolves once every answer owed to the client has gone, or after `timeoutMs`. */
  whenEmpty(timeoutMs: number): Promise<void> {
    if (this.pending.length === 0) return Promise.resolve();
    return new Promise((resolve) => {
      this.emptied = resolve;
      setTimeout(resolve, timeoutMs).unref();
    });
  }

  /** The connection closed: requests of the proxy's own fail, every place is dropped. */
  clear(reason: string): void {
    const forwarded = this.forwarded.splice(0);
    for (const a of forwarded) {
      if (a.kind === 'own') a.onLost(new Error(`connection closed: ${reason}`));
    }
    this.pending.length = 0;
    this.streamingNow = null;
  }

  private checkEmpty(): void {
    if (this.pending.length === 0 && this.emptied !== null) {
      const resolve = this.emptied;
      this.emptied = null;
      resolve();
    }
  }
}
