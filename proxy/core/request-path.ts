/**
 * The way in of one connection pair: the client's reads (this is their reader), each request's
 * plan (api-plan.ts), and where it goes: streamed to the broker as its bytes arrive, forwarded
 * whole, answered by the extension (local-answers.ts), answered here (an ApiVersions version above
 * the proxy's), or refused. A request the broker will answer takes its place in the client's
 * order (response-queue.ts) before it is written; --max-in-flight of them hold the client.
 *
 * A request of at most ALWAYS_READ_REQUEST_BYTES that spans reads and that the proxy reads
 * nothing of is streamed (request-reader.ts), once the broker connection is open: a connection's
 * first request is received whole, so idle and slowloris connections open none. A larger one goes
 * through the request memory pool (request-pool.ts), which bounds what half-sent requests hold.
 */
import { ProtocolError } from '../../protocol/errors.js';
import { encodeResponseFrame, peekProduceAcks, peekRequestHeader } from '../../protocol/frames.js';
import type { PeekedRequestHeader } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/api-info.js';
import type { AnyRequest } from '../../protocol/messages/api-info.js';
import { defaultApiVersionsResponse } from '../../protocol/messages/api-versions-response.js';
import { decodeTaggedRequest } from '../../protocol/tagged-frames.js';
import { relayedNatively, unreachable } from './api-plan.js';
import type { AnswerPlan, ApiPlans, ForwardingPlan, RelayPlan, RewritePlan } from './api-plan.js';
import type { BrokerAnswers, AnswerSink } from './broker-answers.js';
import type { BrokerLink } from './broker-link.js';
import type { BrokerWrites } from './broker-writes.js';
import { withSize } from './connection-parts.js';
import type { ConnectionHost, Quiescent } from './connection-parts.js';
import type { FlowControl } from './flow-control.js';
import type { LocalAnswers } from './local-answers.js';
import type { ProxyObserver } from './observer.js';
import { ALWAYS_READ_REQUEST_BYTES, RequestAccount } from './request-pool.js';
import type { RequestBufferPool } from './request-pool.js';
import { RequestReader } from './request-reader.js';
import type { RequestReaderSink, RequestRoute } from './request-reader.js';
import type { LocalPending, Pending, RawTokenPending, ResponseQueue } from './response-queue.js';
import type { ChunkReader } from './reused-reads.js';
import type { LegacySaslExchange } from './sasl-legacy.js';

export interface RequestPathParts {
  host: ConnectionHost;
  /** The client's reads go into a buffer the next read overwrites (readsIntoReusedBuffer). */
  transientReads: boolean;
  maxFrameSize: number;
  plans: ApiPlans;
  observer: ProxyObserver;
  requestBuffers: RequestBufferPool | undefined;
  broker: Pick<BrokerLink, 'cork' | 'uncork' | 'isOpen' | 'holdsWrites'>;
  flow: Pick<FlowControl, 'pause' | 'resume' | 'isDraining' | 'stopReadingClient'>;
  writes: Pick<BrokerWrites, 'forward' | 'stream' | 'streaming'>;
  queue: Pick<ResponseQueue, 'add' | 'full' | 'sent'>;
  sink: AnswerSink;
  answers: Pick<BrokerAnswers, 'pending'>;
  locals: Pick<LocalAnswers, 'add'>;
  legacySasl: LegacySaslExchange;
}

/** A streak that never reaches the native path's threshold (a pair that cannot move). */
const NEVER = -1_000_000;

export class RequestPath implements ChunkReader, RequestReaderSink, Quiescent {
  private readonly reader: RequestReader;
  /** The header and plan of the request `routeRequest` last chose to stream, until its first bytes. */
  private routed: { h: PeekedRequestHeader; plan: RelayPlan | RewritePlan } | null = null;
  /** The incomplete request's memory in the request buffer pool. */
  private readonly memory: RequestAccount;
  /**
   * The client's reads go into a buffer the next read overwrites (reused-reads.ts): a request
   * frame kept past its read (decoded, answered here, or waiting in the broker socket) is copied,
   * or the next read goes into a new buffer.
   */
  private readonly transientReads: boolean;
  /** Requests passed on unread since the last one the proxy read (the native path's threshold). */
  private streak = 0;

  constructor(private readonly parts: RequestPathParts) {
    // A streamed request is at most ALWAYS_READ_REQUEST_BYTES: its head need not be held longer.
    this.reader = new RequestReader(parts.maxFrameSize, ALWAYS_READ_REQUEST_BYTES, this);
    this.memory = new RequestAccount(parts.requestBuffers, () => parts.flow.resume('memory'));
    this.transientReads = parts.transientReads;
  }

  /** Requests passed on unread in a row (NativeHandover's threshold). */
  get passedOnStreak(): number {
    return this.streak;
  }

  /** The pair came back from the native path: the count starts again. */
  resetStreak(): void {
    this.streak = 0;
  }

  /** The pair cannot move to the native path (TLS, or reads Node allocates): not asked again soon. */
  neverNative(): void {
    this.streak = NEVER;
  }

  /** A read of the client, `buffer[0, end)` (ChunkReader): true when bytes of it are still referenced afterwards (see `transientReads`). */
  readBytes(buffer: Buffer, end: number): boolean {
    const { host, broker, flow } = this.parts;
    if (host.closed) return false;
    host.active();
    this.parts.observer.bytes('client_in', end);
    let completed: number;
    // The frames of one read go to the broker in one system call.
    broker.cork();
    try {
      completed = this.reader.push(buffer, end);
    } catch (err) {
      this.parts.observer.frameRejected('too_large');
      host.close('bad request framing', err);
      return false;
    } finally {
      if (!broker.uncork() && !host.closed) flow.pause('upstream');
    }
    if (host.closed) return false;
    // Whole frames in one read (the common case) hold nothing and skip this.
    const reader = this.reader;
    if (this.memory.changed(reader.retainedBytes, completed > 0)) {
      if (this.memory.update(reader.retainedBytes, reader.incompleteFrameSize, completed > 0))
        flow.pause('memory');
    }
    // Forwarded and streamed bytes are views of the read until the broker's socket has taken them.
    const held = broker.holdsWrites;
    if (!held) host.maybeNative();
    return held;
  }

  wholeRequest(frame: Buffer, sized: Buffer | null): void {
    const { host, observer } = this.parts;
    if (host.closed) return;
    try {
      this.onRequest(frame, sized);
    } catch (err) {
      if (err instanceof ProtocolError) {
        observer.frameRejected(err.code === 'UNSUPPORTED_VERSION' ? 'unsupported_version' : 'malformed');
      }
      host.close(err instanceof ProtocolError ? 'malformed request' : 'request handling failed', err);
    }
  }

  /**
   * A request that spans reads: streamed to the broker as its bytes arrive when the proxy has
   * nothing to read in it (a pass-through request that expects an answer), else received whole.
   */
  routeRequest(size: number, head: Buffer): RequestRoute {
    const { broker, legacySasl, plans } = this.parts;
    // A larger request goes through the request memory pool (request-pool.ts) as before: streamed,
    // a client could start any number of them and leave them half sent at the broker, which
    // reserves a request's whole size as soon as it knows it. And only a client whose broker
    // connection is open already streams: a connection's first request is received whole, so that
    // idle and slowloris connections open none (broker-link.ts).
    if (!broker.isOpen || legacySasl.expectsRawToken) return 'whole';
    if (size < 8 || size > ALWAYS_READ_REQUEST_BYTES) return 'whole';
    const h = peekRequestHeader(head);
    const plan = plans.of(h.apiKey, h.apiVersion);
    switch (plan.kind) {
      case 'relay':
      case 'rewrite':
        break;
      case 'read':
      case 'answer-locally':
      case 'refuse':
      case 'api-versions-unsupported':
        return 'whole';
      default:
        return unreachable(plan);
    }
    if (plan.mayBeUnanswered) {
      // acks=0 takes no place in the queue: received whole, as the rest of its path expects.
      const acks = peekProduceAcksIfIn(head);
      if (acks === null) return 'more';
      if (acks === 0) return 'whole';
    }
    this.routed = { h, plan };
    this.streak = relayedNatively(plan) ? this.streak + 1 : 0;
    return 'stream';
  }

  streamRequest(bytes: Buffer, end: boolean): void {
    const { host, writes, flow } = this.parts;
    if (host.closed) return;
    if (!writes.streaming) {
      const routed = this.routed;
      if (routed === null) throw new Error('a request is streamed that was not routed');
      this.routed = null;
      const p = this.parts.answers.pending(routed.h, performance.now(), routed.plan.answer, null, null);
      this.admit(p);
      this.parts.queue.sent(p);
    }
    writes.stream(bytes, end);
    if (end && flow.isDraining) flow.stopReadingClient();
  }

  /** A request that will be answered takes its place in the client's order; --max-in-flight of them hold the client. */
  admit(p: Pending): void {
    const queue = this.parts.queue;
    queue.add(p);
    if (queue.full) this.parts.flow.pause('inflight');
  }

  /** Between requests, none being routed, and not in a legacy SASL exchange (its tokens are not requests). */
  get quiescent(): boolean {
    return this.routed === null && this.reader.atFrameBoundary && !this.parts.legacySasl.inExchange;
  }

  /** The connection closed: what the incomplete request held goes back to the pool. */
  close(): void {
    this.memory.close();
  }

  /** `sized`: the frame with its size prefix, when the reader has it as one view (else null). */
  private onRequest(frame: Buffer, sized: Buffer | null): void {
    const { plans, writes, legacySasl } = this.parts;
    const started = performance.now();
    if (legacySasl.takeRawToken()) {
      this.streak = 0;
      this.forwardRawToken(frame, started);
      return;
    }
    const h = peekRequestHeader(frame);
    const plan = plans.of(h.apiKey, h.apiVersion);
    // Large requests too: the native path passes them on as they arrive (with a reservation in
    // the request memory pool), so throughput-tuned producers move to it as well.
    const native = relayedNatively(plan);
    this.streak = native ? this.streak + 1 : 0;
    switch (plan.kind) {
      case 'api-versions-unsupported': {
        const p = localPending(h, started);
        this.admit(p);
        this.parts.sink.complete(p, [unsupportedApiVersionsResponse(h.correlationId, plan.maxVersion)]);
        return;
      }
      case 'refuse':
        throw new ProtocolError(
          'UNSUPPORTED_VERSION',
          `api ${h.apiKey} version ${h.apiVersion} was not advertised by the proxy`,
          2,
          h.apiKey,
          h.apiVersion,
        );
      case 'relay':
      case 'rewrite':
      case 'read':
      case 'answer-locally':
        break;
      default:
        unreachable(plan);
    }
    if (plan.mayBeUnanswered && peekProduceAcks(frame) === 0) {
      // acks=0: the broker sends nothing back, so nothing may wait for it.
      writes.forward(frame, null, sized);
      return;
    }
    this.forwardOrAnswer(h, started, plan, frame, sized);
  }

  /** A request the broker or the extension answers, as its plan says. */
  private forwardOrAnswer(
    h: PeekedRequestHeader,
    started: number,
    plan: ForwardingPlan,
    frame: Buffer,
    sized: Buffer | null,
  ): void {
    const { answers, writes, host } = this.parts;
    switch (plan.kind) {
      case 'relay':
      case 'rewrite': {
        const p = answers.pending(h, started, plan.answer, null, null);
        this.admit(p);
        writes.forward(frame, p, sized);
        return;
      }
      case 'read': {
        const { own, request } = this.decode(frame, plan.answer);
        // What the extension is told: only for an exchange it observes.
        const observed = plan.answer.response === 'decode' && plan.answer.observed;
        const p = answers.pending(h, started, plan.answer, observed ? host.requestInfo(h) : null, request);
        this.admit(p);
        writes.forward(own, p, sized);
        return;
      }
      case 'answer-locally': {
        const { own, request } = this.decode(frame, plan.forwarded);
        const p = localPending(h, started);
        this.admit(p);
        this.parts.locals.add({
          p,
          frame: own,
          info: host.requestInfo(h),
          request,
          forwarded: plan.forwarded,
        });
        return;
      }
      default:
        unreachable(plan);
    }
  }

  /**
   * Decodes the request; a SaslHandshake v0 names the mechanism of the legacy exchange it opens.
   * `own`: the frame as bytes of its own, as a decoded request (and a frame answered here)
   * outlives the read.
   */
  private decode(frame: Buffer, answer: AnswerPlan): { own: Buffer; request: AnyRequest } {
    const own = this.transientReads ? Buffer.from(frame) : frame;
    const request = decodeTaggedRequest(own);
    if (answer.response === 'decode' && answer.legacySasl && request.apiKey === ApiKey.SaslHandshake) {
      this.parts.legacySasl.handshakeRequested(request.body.mechanism);
    }
    return { own, request };
  }

  /** A raw token of a legacy SASL exchange: no Kafka header, one token back from the broker. */
  private forwardRawToken(frame: Buffer, started: number): void {
    const sink = this.parts.sink;
    const p: RawTokenPending = {
      kind: 'raw-token',
      correlationId: -1,
      apiKey: -1,
      apiVersion: -1,
      started,
      out: null,
      outBytes: 0,
      awaitingBroker: false,
      onResponse: (resp) => sink.complete(p, withSize(resp)),
    };
    this.admit(p);
    this.parts.writes.forward(frame, p);
  }
}

/** A Produce request's acks when `head` (its first bytes) holds them, else null. */
function peekProduceAcksIfIn(head: Buffer): number | null {
  try {
    return peekProduceAcks(head);
  } catch {
    return null;
  }
}

function localPending(h: PeekedRequestHeader, started: number): LocalPending {
  const { correlationId, apiKey, apiVersion } = h;
  return { kind: 'local', correlationId, apiKey, apiVersion, started, out: null, outBytes: 0 };
}

/** ApiVersions error response: a v0 body (header v0, as always for ApiVersions) listing its own range. */
function unsupportedApiVersionsResponse(correlationId: number, maxVersion: number): Buffer {
  const body = defaultApiVersionsResponse();
  body.errorCode = 35; // UNSUPPORTED_VERSION
  body.apiKeys = [{ apiKey: ApiKey.ApiVersions, minVersion: 0, maxVersion }];
  return encodeResponseFrame(ApiKey.ApiVersions, 0, correlationId, body);
}
