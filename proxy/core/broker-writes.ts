/**
 * Writes to one broker connection in the order the broker must read them. A request streamed to
 * the broker as its bytes arrive (request-path.ts) may not be split: every other write meanwhile
 * (a request received whole behind it, a request the extension forwards after all, a request of
 * the proxy's own) waits for its last byte. A write the broker's socket does not take holds the
 * client ('upstream') until the socket drains.
 */
import type { BrokerLink } from './broker-link.js';
import { sizePrefix } from './connection-parts.js';
import type { Quiescent } from './connection-parts.js';
import type { FlowControl } from './flow-control.js';
import type { ProxyObserver } from './observer.js';
import type { BrokerPending, RawTokenPending, ResponseQueue } from './response-queue.js';

export class BrokerWrites implements Quiescent {
  /** A request is part way through being streamed. */
  private streamingNow = false;
  /** Writes that wait for the streamed request's last bytes. */
  private waiting: Buffer[][] = [];

  constructor(
    private readonly broker: Pick<BrokerLink, 'write' | 'holdsWrites'>,
    private readonly flow: Pick<FlowControl, 'pause'>,
    private readonly queue: Pick<ResponseQueue, 'sent'>,
    private readonly observer: ProxyObserver,
  ) {}

  /** A request is being streamed: nothing else may be written to the broker until its end. */
  get streaming(): boolean {
    return this.streamingNow;
  }

  /**
   * Writes a request to the broker; `p` is what its answer belongs to (null: no answer comes).
   * `sized`: the same frame with its size prefix as one view of the read, when there is one.
   */
  forward(frame: Buffer, p: BrokerPending | RawTokenPending | null, sized: Buffer | null = null): void {
    if (p) this.queue.sent(p);
    this.observer.bytes('broker_out', frame.length + 4);
    this.write(sized !== null ? [sized] : [sizePrefix(frame.length), frame]);
  }

  /** Writes to the broker, after the request being streamed if there is one. */
  write(buffers: Buffer[]): void {
    if (this.streamingNow) {
      this.waiting.push(buffers);
      return;
    }
    let ok = true;
    for (const b of buffers) ok = this.broker.write(b);
    if (!ok) this.flow.pause('upstream');
  }

  /** Bytes of the streamed request (its size prefix in the first); `end` on its last, which lets the waiting writes go. */
  stream(bytes: Buffer, end: boolean): void {
    this.streamingNow = !end;
    this.observer.bytes('broker_out', bytes.length);
    if (!this.broker.write(bytes)) this.flow.pause('upstream');
    if (!end) return;
    const waiting = this.waiting;
    this.waiting = [];
    for (const buffers of waiting) this.write(buffers);
  }

  /** Nothing part way through, nothing waiting, everything written taken by the broker's socket. */
  get quiescent(): boolean {
    return !this.streamingNow && this.waiting.length === 0 && !this.broker.holdsWrites;
  }
}
