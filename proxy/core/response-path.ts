/**
 * The way back of one connection pair: the broker's reads (this is their reader), the answers
 * they carry matched to the requests awaiting them, and every answer written to the client in
 * request order, whoever gave it (the broker, possibly rewritten, or the proxy itself).
 *
 * An answer the client may have as the broker wrote it, with nothing before it still owed, is
 * streamed to the client as its bytes arrive (views of the read, no copy); a Fetch v16+ answer is
 * streamed through the Fetch walker, which rewrites its NodeEndpoints at its end; any other answer
 * is read whole and handed to whoever awaits it (broker-answers.ts, the raw token of a legacy SASL
 * exchange, a request of the proxy's own). Answers go out in one write per batch, below Node's
 * Writable where Node allows (socket-writer.ts).
 */
import type { Socket } from 'node:net';
import { ProtocolError } from '../../protocol/errors.js';
import type { ConnectionHost, Quiescent } from './connection-parts.js';
import { FetchResponseStream } from './fetch-stream.js';
import type { ExposeBrokerNow } from './fetch-stream.js';
import type { ProxyObserver } from './observer.js';
import type { ResponseBacklog } from './response-backlog.js';
import { answeredBy } from './response-queue.js';
import type { Pending, ResponseQueue } from './response-queue.js';
import { ResponseReader } from './response-reader.js';
import type { FrameRoute, ResponseReaderSink } from './response-reader.js';
import type { ChunkReader } from './reused-reads.js';
import { SocketWriter } from './socket-writer.js';

export interface ResponsePathOptions {
  maxFrameSize: number;
  observer: ProxyObserver;
  /** Learns a broker named in a streamed Fetch answer's NodeEndpoints (ConnectionPolicy.exposeBroker). */
  exposeBroker?: ExposeBrokerNow;
  /** The connection notes activity for an idle timeout: a write the client took is activity. */
  watchesIdle: boolean;
}

export class ResponsePath implements ChunkReader, ResponseReaderSink, Quiescent {
  private readonly reader: ResponseReader;
  /** Writes to the client (below its Writable where Node allows: socket-writer.ts). */
  private readonly out: SocketWriter;
  /** The walker of the Fetch answer being streamed, when it is one ('fetch-stream'). */
  private fetchStream: FetchResponseStream | null = null;
  /** A write to the client returned false and its drain has not come yet. */
  private clientFullNow = false;
  private readonly observer: ProxyObserver;

  constructor(
    client: Socket,
    private readonly host: ConnectionHost,
    private readonly queue: ResponseQueue,
    private readonly backlog: ResponseBacklog,
    private readonly opts: ResponsePathOptions,
  ) {
    this.observer = opts.observer;
    this.reader = new ResponseReader(opts.maxFrameSize, this);
    this.out = new SocketWriter(
      client,
      () => this.clientDrained(),
      // The client took bytes it was sent: activity, as for Node's socket timeout.
      opts.watchesIdle ? () => host.active() : undefined,
    );
  }

  /** Whether the client's socket did not take everything it was given (until its drain). */
  get clientFull(): boolean {
    return this.clientFullNow;
  }

  /** A read of the broker, `buffer[0, end)` (ChunkReader): true when bytes of it are still referenced afterwards, the client's socket has not taken them all. */
  readBytes(buffer: Buffer, end: number): boolean {
    if (this.host.closed) return false;
    this.observer.bytes('broker_in', end);
    // A client that has not taken what it was sent gets a copy of just these bytes, so that the
    // reads waiting in its socket hold what is counted as unsent, not a read buffer each.
    const copied = this.out.unsent > 0;
    this.out.hold();
    try {
      if (copied) this.reader.push(Buffer.from(buffer.subarray(0, end)));
      else this.reader.push(buffer, end);
    } catch (err) {
      if (err instanceof ProtocolError) this.observer.frameRejected('broker_protocol');
      this.host.close(
        err instanceof ProtocolError ? 'bad response from broker' : 'response handling failed',
        err,
      );
    } finally {
      if (!this.out.release() && !this.host.closed) this.clientRefused();
    }
    // Streamed bytes are views of `buffer` (the reader copies what it keeps): what the socket
    // holds unsent may include them.
    const held = !copied && this.out.unsent > 0;
    if (!held) this.host.maybeNative();
    return held;
  }

  /**
   * Matches an answer to the oldest forwarded request (a broker answers in order) and decides:
   * stream it when it goes to the client unchanged (or is a Fetch v16+ whose only change is in its
   * tail) and nothing before it is still waiting; otherwise take it whole.
   */
  routeResponse(size: number, correlationId: number | null, payload: Buffer | null): FrameRoute {
    const route = this.queue.route(size, correlationId, payload);
    const streaming = this.queue.streaming;
    if (route === 'stream' && streaming !== null && streaming.response === 'fetch-stream') {
      this.fetchStream = new FetchResponseStream(streaming.apiVersion);
    }
    return route;
  }

  streamResponse(bytes: Buffer, end: boolean): void {
    if (this.host.closed) return;
    const fetch = this.fetchStream;
    if (fetch === null) {
      this.sendStreamed(bytes);
      if (end) this.streamedDone();
      return;
    }
    // Everything before the top-level tagged fields goes now; those are held until the end.
    const now = fetch.push(bytes);
    if (now.length > 0) this.sendStreamed(now);
    if (!end) return;
    this.fetchStream = null;
    const expose = this.opts.exposeBroker;
    if (expose === undefined) throw new Error('a Fetch answer is streamed with no way to expose its brokers');
    const { tail, ready } = fetch.finish(expose);
    if (ready === null) {
      this.sendStreamed(tail);
      this.streamedDone();
      return;
    }
    // A newly exposed broker: the client may connect as soon as it reads the tail, so its
    // listener must be open first. The answer stays at the head of the queue meanwhile, so later
    // answers wait behind it.
    ready.then(
      () => {
        if (this.host.closed) return;
        this.sendStreamed(tail);
        this.streamedDone();
      },
      (err: unknown) => this.host.close('response handling failed', err),
    );
  }

  wholeResponse(payload: Buffer): void {
    if (this.host.closed) return;
    this.queue.takeWhole().onResponse(payload);
  }

  /** `p` is answered with `out`; it goes to the client once every earlier answer has. */
  complete(p: Pending, out: Buffer[]): void {
    this.backlog.addWaiting(this.queue.answer(p, out));
    this.flush();
  }

  /** Sends every answer at the head of the queue that is ready, in request order. */
  flush(): void {
    if (this.host.closed) return;
    let full = false;
    const observer = this.observer;
    // One writev for every ready answer and its size prefix, not a write() each: an answer
    // completed after an await (an answer from the store, a decoded Produce answer) is flushed
    // outside the hold of readBytes.
    this.out.hold();
    let written = 0;
    for (let p = this.queue.takeReady(); p !== undefined; p = this.queue.takeReady()) {
      for (const buf of p.out ?? []) {
        if (!this.out.write(buf)) full = true;
      }
      written += p.outBytes;
      observer.bytes('client_out', p.outBytes);
      if (p.kind !== 'raw-token')
        observer.responded(p.apiKey, p.apiVersion, answeredBy(p), (performance.now() - p.started) / 1000);
    }
    if (!this.out.release()) full = true;
    if (written > 0) {
      this.host.active();
      this.backlog.addWaiting(-written);
      // The client reads slower than it is answered: what the kernel did not take is held here.
      if (full) this.clientFullNow = true;
      this.backlog.setUnsent(this.out.full ? this.out.unsent : 0);
    }
    this.host.updateFlow();
  }

  /** Between answers, nothing streamed part way, nothing unsent to the client. */
  get quiescent(): boolean {
    return (
      this.reader.atFrameBoundary && this.fetchStream === null && this.out.unsent === 0 && !this.clientFullNow
    );
  }

  private sendStreamed(bytes: Buffer): void {
    this.host.active();
    this.observer.bytes('client_out', bytes.length);
    if (!this.out.write(bytes)) this.clientRefused();
  }

  /** A write to the client answered false: what it has not taken is held here until its drain. */
  private clientRefused(): void {
    this.clientFullNow = true;
    this.backlog.setUnsent(this.out.unsent);
    this.host.updateFlow();
  }

  private clientDrained(): void {
    this.host.active();
    this.clientFullNow = false;
    this.backlog.setUnsent(0);
    this.host.updateFlow();
  }

  /** The streamed answer (the head of the queue) has gone out whole. */
  private streamedDone(): void {
    const p = this.queue.finishStream();
    this.observer.responded(p.apiKey, p.apiVersion, 'broker', (performance.now() - p.started) / 1000);
    this.flush();
  }
}
