/**
 * One client connection and its upstream broker connection.
 *
 * Requests are read as frames; most are forwarded untouched. Responses go back to the client in
 * request order, whether they come from the broker (possibly rewritten) or are answered by the
 * proxy itself, so a locally answered request in the middle of a pipeline keeps its place.
 * Backpressure runs both ways: a side that cannot keep up pauses the side that feeds it, and the
 * number of requests in flight is bounded. A client that does not read its responses stops being
 * read, whoever answers it (response-backlog.ts). The broker connection is opened when the client
 * first needs the broker (broker-link.ts).
 */
import type { Socket } from 'node:net';
import { ProtocolError } from '../../protocol/errors.js';
import {
  decodeRequestFrame,
  decodeResponseFrame,
  encodeRequestFrame,
  encodeResponseFrame,
  peekProduceAcks,
  peekRequestHeader,
} from '../../protocol/frames.js';
import type { PeekedRequestHeader } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { defaultApiVersionsResponse } from '../../protocol/messages/api-versions-response.js';
import type { AnyRequest, AnyResponse, RequestBody, ResponseBody } from '../../protocol/messages/index.js';
import type { AnyExchange, ProxyExtension, RequestDecision, RequestInfo } from './extension.js';
import { FetchResponseStream } from './fetch-stream.js';
import type { ExposeBrokerNow } from './fetch-stream.js';
import { produceResponseHasNodeEndpoints } from './produce-endpoints.js';
import type { ApiPlans, RelayPlan } from './api-plan.js';
import type { Logger } from '../common/log.js';
import type { ProxyObserver, RejectCause } from './observer.js';
import { ResponseReader } from './response-reader.js';
import { RequestReader } from './request-reader.js';
import type { RequestReaderSink, RequestRoute } from './request-reader.js';
import type { FrameRoute, ResponseReaderSink } from './response-reader.js';
import { BrokerLink } from './broker-link.js';
import type { BrokerLinkEvents } from './broker-link.js';
import { ResponseBacklog } from './response-backlog.js';
import { ResponseQueue, answeredBy } from './response-queue.js';
import type { BrokerPending, LocalPending, OwnRequest, Pending, RawTokenPending } from './response-queue.js';
import { ALWAYS_READ_REQUEST_BYTES, RequestAccount } from './request-pool.js';
import type { RequestBufferPool } from './request-pool.js';
import type { ResponseBufferPool } from './response-backlog.js';
import { LegacySaslExchange } from './sasl-legacy.js';
import { closeLogLevel } from './close-reason.js';
import type { BrokerLoss, CloseReason } from './close-reason.js';
import { PROXY_CLIENT_ID, RELAY_DEFAULTS } from './defaults.js';
import { readSocket, readsIntoReusedBuffer } from './reused-reads.js';
import type { ChunkReader } from './reused-reads.js';
import { SocketWriter } from './socket-writer.js';
import { idleSweep } from './idle-sweep.js';
import type { IdleSweep, IdleWatched } from './idle-sweep.js';
import { nativeFd, pausedForNative } from './native-relay.js';
import type { NativeEnd, NativeHost, NativePair, NativePending, NativeRelay } from './native-relay.js';

export interface ConnectionPolicy {
  log: Logger;
  maxFrameSize: number;
  maxInFlight: number;
  /** Close a client connection idle this long (0 = never), as a broker does (connections.max.idle.ms). */
  idleTimeoutMs?: number;
  extension: ProxyExtension | null;
  /** What the core does with each (api key, version): decode, rewrite, answer, refuse (api-plan.ts). */
  plans: ApiPlans;
  /**
   * Rewrites a decoded response body in place (addresses, ApiVersions ranges); may await new
   * listeners. Resolves true when it changed the body (a Fetch without NodeEndpoints stays as the
   * broker wrote it).
   */
  rewriteResponse(response: AnyResponse, apiVersion: number): Promise<boolean>;
  /**
   * Learns a broker named in a streamed Fetch response's NodeEndpoints and gives the address the
   * client must use; `ready` (when present) resolves once that address is listened on. Needed
   * when `plans` stream Fetch answers ('fetch-stream').
   */
  exposeBroker?: ExposeBrokerNow;
  onClose?(conn: ProxyConnection): void;
  observer: ProxyObserver;
  /** The bound on memory in incomplete request frames, shared by every client connection. */
  requestBuffers?: RequestBufferPool;
  /** The bound on memory in responses clients have not read, shared by every client connection. */
  responseBuffers?: ResponseBufferPool;
  /** Deadline of a request of the proxy's own on this connection (askBroker); default 10 s. */
  requestTimeoutMs?: number;
  /** The native path (native-relay.ts), when the proxy has it; plain TCP connections move to it. */
  nativeRelay?: NativeRelay | null;
  /**
   * Requests passed on unread in a row before a connection moves to the native path (default
   * RELAY_DEFAULTS.nativeRelayAfter): a connection that mixes in frames the proxy reads (a group
   * coordinator's) stays in JavaScript rather than move back and forth, while a producer's or a
   * consumer's moves after its first few.
   */
  nativeAfterRequests?: number;
}

/**
 * Why the client is not read: its broker connection takes no more bytes, --max-in-flight requests
 * wait, the request buffer pool is exhausted, or the client has not read what it was sent.
 */
type PauseReason = 'upstream' | 'inflight' | 'memory' | 'responses';

/** False only for a well-formed Produce response without NodeEndpoints; a malformed one is left to the decoder. */
function mayHaveNodeEndpoints(frame: Buffer, apiVersion: number): boolean {
  try {
    return produceResponseHasNodeEndpoints(frame, apiVersion);
  } catch {
    return true;
  }
}

/**
 * A Produce answer read in one piece goes to the client as a view of the read, as an answer
 * passed as-is does, unless it has NodeEndpoints to rewrite.
 */
function produceAnswerUnchanged(a: BrokerPending, payload: Buffer): boolean {
  return !mayHaveNodeEndpoints(payload, a.apiVersion);
}

/** A request the proxy answers itself (ProxyExtension.handleRequest), read and not answered yet. */
interface LocalAnswer {
  p: LocalPending;
  frame: Buffer;
  info: RequestInfo;
  request: AnyRequest;
  /** How to handle the broker's response should the extension forward the request after all. */
  plan: RelayPlan;
}

let nextId = 1;

export class ProxyConnection
  implements ChunkReader, RequestReaderSink, ResponseReaderSink, BrokerLinkEvents, IdleWatched, NativeHost
{
  readonly id = `c${nextId++}`;
  private readonly log: Logger;
  private readonly requests: RequestReader;
  /** The request being streamed to the broker ('stream' routes), until its last bytes are written. */
  private streamed: BrokerPending | null = null;
  /** The header and plan of the request `routeRequest` last chose to stream. */
  private routed: { h: PeekedRequestHeader; plan: RelayPlan } | null = null;
  /** Writes to the broker that wait for the streamed request's last bytes (they may not split it). */
  private writesAfterStream: Buffer[][] = [];
  private readonly responses: ResponseReader;
  /** The walker of the Fetch response being streamed, when it is one ('fetch-stream'). */
  private fetchStream: FetchResponseStream | null = null;
  /** Correlation with the broker and the order of answers to the client. */
  private readonly queue: ResponseQueue;
  private nextInternalId = -1;
  private readonly legacySasl = new LegacySaslExchange();
  private closed = false;
  private draining = false;
  private clientPausedFor = new Set<PauseReason>();
  private readonly broker: BrokerLink;
  /** The broker connection was opened (and so is counted as open until this one closes). */
  private brokerCounted = false;
  /** Not reading the broker now (see updateFlow). */
  private brokerPaused = false;
  /** Writes to the client (below its Writable where Node allows: socket-writer.ts). */
  private readonly out: SocketWriter;
  /** A write to the client returned false and its drain has not come yet. */
  private clientFull = false;
  private readonly backlog: ResponseBacklog;
  /** Requests the proxy answers itself, read and not started: one runs at a time. */
  private readonly localAnswers: LocalAnswer[] = [];
  private localRunning = false;
  /** Requests of the proxy's own (askBroker) whose answer is awaited. */
  private ownInFlight = 0;
  /** The incomplete request's memory in `policy.requestBuffers`. */
  private readonly requestMemory: RequestAccount;
  /**
   * The client's reads go into a buffer the next read overwrites (reused-reads.ts): a request
   * frame kept past its read (decoded, answered here, or waiting in the broker socket) is copied,
   * or the next read goes into a new buffer.
   */
  private readonly transientReads: boolean;
  /** What tells this connection it is idle (idle-sweep.ts), when it has an idle timeout. */
  private readonly idle: IdleSweep | null;
  /** The idle sweep's tick at the last read of the client or write to it (IdleWatched). */
  activeTick = 0;
  /** The pair while the native path relays it (neither socket is read or written here then). */
  private nativePair: NativePair | null = null;
  /** Requests passed on unread since the last one the proxy read (see nativeAfterRequests). */
  private passedOnStreak = 0;
  /** The native path's bytes are being taken back: nothing moves to it meanwhile. */
  private takingBack = false;
  /** Who waits for the native path to hand the pair back (drain, askBroker). */
  private handBackWaiters: (() => void)[] = [];
  private readonly nativeAfter: number;

  constructor(
    private readonly client: Socket,
    openUpstream: () => Promise<Socket>,
    readonly nodeId: number | null,
    private readonly policy: ConnectionPolicy,
  ) {
    this.log = policy.log.child({ conn: this.id, node: nodeId });
    this.nativeAfter = policy.nativeAfterRequests ?? RELAY_DEFAULTS.nativeRelayAfter;
    this.transientReads = readsIntoReusedBuffer(client);
    // A streamed request is at most ALWAYS_READ_REQUEST_BYTES: its head need not be held longer.
    // The readers, the broker link and the client's reads call this connection's methods, not
    // closures of their own: see ChunkReader (reused-reads.ts) for why.
    this.requests = new RequestReader(policy.maxFrameSize, ALWAYS_READ_REQUEST_BYTES, this);
    this.responses = new ResponseReader(policy.maxFrameSize, this);
    this.queue = new ResponseQueue(policy.maxInFlight, produceAnswerUnchanged);
    this.backlog = new ResponseBacklog(policy.responseBuffers ?? null);
    this.requestMemory = new RequestAccount(policy.requestBuffers, () => this.resumeClient('memory'));
    this.broker = new BrokerLink(openUpstream, this);

    client.setNoDelay(true);
    this.idle = policy.idleTimeoutMs ? idleSweep(policy.idleTimeoutMs) : null;
    this.idle?.add(this);
    // Before the reader: what was read already may be answered at once.
    this.out = new SocketWriter(
      client,
      () => {
        this.active();
        this.clientFull = false;
        this.backlog.setUnsent(0);
        this.updateFlow();
      },
      // The client took bytes it was sent: activity, as for Node's socket timeout.
      this.idle === null ? undefined : () => this.active(),
    );
    readSocket(client, this);
    client.on('error', (err) => this.close('client error', err));
    client.on('close', () => this.close('client closed'));
    client.on('end', () => this.close('client ended'));
  }

  get inFlight(): number {
    return this.queue.inFlight + (this.nativePair?.status().awaiting ?? 0);
  }

  /**
   * No read of the client nor write to it for the idle timeout (IdleWatched): closed when nothing
   * is in flight, or when the client has read nothing of its answers all this time (a broker
   * closes such a connection too); a long Fetch wait or a slow broker is not idleness.
   */
  idleFor(): void {
    const pair = this.nativePair;
    if (pair !== null) {
      // The native path notes its own activity: idle only if it saw none either.
      const { idleMs, awaiting, unsentToClient } = pair.status();
      const idle = this.idle!;
      if (idleMs < idle.timeoutMs) {
        this.activeTick = idle.tick - Math.floor(idleMs / idle.resolutionMs);
        return;
      }
      if (awaiting === 0 || unsentToClient > 0) this.close('idle');
      return;
    }
    if (this.queue.idle || this.clientFull) this.close('idle');
  }

  /** A read of the client or a write to it: the connection is not idle. */
  private active(): void {
    if (this.idle !== null) this.activeTick = this.idle.tick;
  }

  // ---- client → broker -------------------------------------------------------------------

  /** A read of the client, `buffer[0, end)` (ChunkReader): true when bytes of it are still referenced afterwards (see `transientReads`). */
  readBytes(buffer: Buffer, end: number): boolean {
    if (this.closed) return false;
    this.active();
    this.policy.observer.bytes('client_in', end);
    let completed: number;
    // The frames of one read go to the broker in one system call.
    this.broker.cork();
    try {
      completed = this.requests.push(buffer, end);
    } catch (err) {
      this.reject('too_large');
      this.close('bad request framing', err);
      return false;
    } finally {
      if (!this.broker.uncork() && !this.closed) this.pauseClient('upstream');
    }
    if (this.closed) return false;
    // Whole frames in one read (the common case) hold nothing and skip this.
    if (this.requestMemory.changed(this.requests.retainedBytes, completed > 0)) {
      const mute = this.requestMemory.update(
        this.requests.retainedBytes,
        this.requests.incompleteFrameSize,
        completed > 0,
      );
      if (mute) this.pauseClient('memory');
    }
    // Forwarded and streamed bytes are views of the read until the broker's socket has taken them.
    const held = this.broker.holdsWrites;
    if (!held) this.maybeNative();
    return held;
  }

  wholeRequest(frame: Buffer, sized: Buffer | null): void {
    if (this.closed) return;
    try {
      this.onRequest(frame, sized);
    } catch (err) {
      if (err instanceof ProtocolError) {
        this.reject(err.code === 'UNSUPPORTED_VERSION' ? 'unsupported_version' : 'malformed');
      }
      this.close(err instanceof ProtocolError ? 'malformed request' : 'request handling failed', err);
    }
  }

  /**
   * A request that spans reads: streamed to the broker as its bytes arrive when the proxy has
   * nothing to read in it (a pass-through request that expects an answer), else received whole.
   */
  routeRequest(size: number, head: Buffer): RequestRoute {
    // A larger request goes through the request memory pool (request-pool.ts) as before: streamed,
    // a client could start any number of them and leave them half sent at the broker, which
    // reserves a request's whole size as soon as it knows it. And only a client whose broker
    // connection is open already streams: a connection's first request is received whole, so that
    // idle and slowloris connections open none (broker-link.ts).
    if (!this.broker.isOpen || this.legacySasl.expectsRawToken) return 'whole';
    if (size < 8 || size > ALWAYS_READ_REQUEST_BYTES) return 'whole';
    const h = peekRequestHeader(head);
    const plan = this.policy.plans.of(h.apiKey, h.apiVersion);
    if (plan.kind !== 'relay' || plan.decodeRequest || plan.answerLocally || plan.observed || plan.legacySasl)
      return 'whole';
    if (plan.mayBeUnanswered) {
      // acks=0 takes no place in the queue: received whole, as the rest of its path expects.
      const acks = peekProduceAcksIfIn(head);
      if (acks === null) return 'more';
      if (acks === 0) return 'whole';
    }
    this.routed = { h, plan };
    this.passedOnStreak = plan.passedOnUnread ? this.passedOnStreak + 1 : 0;
    return 'stream';
  }

  streamRequest(bytes: Buffer, end: boolean): void {
    if (this.closed) return;
    if (this.streamed === null) {
      const { h, plan } = this.routed!;
      this.routed = null;
      const p = this.brokerPending(h, performance.now(), plan, null, undefined);
      this.enqueue(p);
      this.queue.sent(p);
      this.streamed = p;
    }
    this.policy.observer.bytes('broker_out', bytes.length);
    if (!this.broker.write(bytes)) this.pauseClient('upstream');
    if (!end) return;
    this.streamed = null;
    if (this.draining) this.client.pause();
    const waiting = this.writesAfterStream;
    this.writesAfterStream = [];
    for (const buffers of waiting) this.writeBroker(buffers);
  }

  /** Writes to the broker, after the request being streamed if there is one. */
  private writeBroker(buffers: Buffer[]): void {
    if (this.streamed !== null) {
      this.writesAfterStream.push(buffers);
      return;
    }
    let ok = true;
    for (const b of buffers) ok = this.broker.write(b);
    if (!ok) this.pauseClient('upstream');
  }

  /** `sized`: the frame with its size prefix, when the reader has it as one view (else null). */
  private onRequest(frame: Buffer, sized: Buffer | null): void {
    const started = performance.now();
    if (this.legacySasl.takeRawToken()) {
      this.passedOnStreak = 0;
      const p: RawTokenPending = {
        kind: 'raw-token',
        correlationId: -1,
        apiKey: -1,
        apiVersion: -1,
        started,
        out: null,
        outBytes: 0,
        awaitingBroker: false,
        onResponse: (resp) => this.complete(p, withSize(resp)),
      };
      this.enqueue(p);
      this.forward(frame, p);
      return;
    }

    const h = peekRequestHeader(frame);
    const plan = this.policy.plans.of(h.apiKey, h.apiVersion);
    // Large requests too: the native path passes them on as they arrive (with a reservation in
    // the request memory pool), so throughput-tuned producers move to it as well.
    const native = plan.kind === 'relay' && plan.passedOnUnread;
    this.passedOnStreak = native ? this.passedOnStreak + 1 : 0;
    if (plan.kind === 'api-versions-unsupported') {
      const p = localPending(h.correlationId, h.apiKey, h.apiVersion, started);
      this.enqueue(p);
      this.complete(p, [unsupportedApiVersionsResponse(h.correlationId, plan.maxVersion)]);
      return;
    }
    if (plan.kind === 'refuse') {
      throw new ProtocolError(
        'UNSUPPORTED_VERSION',
        `api ${h.apiKey} version ${h.apiVersion} was not advertised by the proxy`,
        2,
        h.apiKey,
        h.apiVersion,
      );
    }
    if (plan.mayBeUnanswered && peekProduceAcks(frame) === 0) {
      // acks=0: the broker sends nothing back, so nothing may wait for it.
      this.forward(frame, null, sized);
      return;
    }

    // A decoded request (and a frame answered here) outlives the read: its bytes must be its own.
    if (this.transientReads && (plan.decodeRequest || plan.answerLocally)) frame = Buffer.from(frame);
    const request = plan.decodeRequest ? decodeRequestFrame(frame).body : undefined;
    if (plan.legacySasl) {
      this.legacySasl.handshakeRequested((request as { mechanism: string }).mechanism);
    }
    // What the extension is told: only for a request it answers or observes.
    const info = plan.answerLocally || plan.observed ? this.requestInfo(h) : null;
    if (plan.answerLocally) {
      const p = localPending(h.correlationId, h.apiKey, h.apiVersion, started);
      this.enqueue(p);
      // Decoded by the codec of `h.apiKey` (a plan answers locally only what it decodes): the cast
      // states what the registry guarantees.
      const tagged = { apiKey: h.apiKey, body: request } as AnyRequest;
      this.answerLocally({ p, frame, info: info!, request: tagged, plan });
      return;
    }
    const p = this.brokerPending(h, started, plan, info, request);
    this.enqueue(p);
    this.forward(frame, p, sized);
  }

  private requestInfo(h: { correlationId: number; apiKey: number; apiVersion: number }): RequestInfo {
    return {
      connectionId: this.id,
      apiKey: h.apiKey,
      apiVersion: h.apiVersion,
      correlationId: h.correlationId,
      nodeId: this.nodeId,
      askBroker: (apiKey, apiVersion, body) => this.askBroker(apiKey, apiVersion, body),
    };
  }

  /** A client request to forward, and how its answer is handled (its plan's `response`). */
  private brokerPending(
    h: { correlationId: number; apiKey: number; apiVersion: number },
    started: number,
    plan: RelayPlan,
    info: RequestInfo | null,
    request: unknown,
  ): BrokerPending {
    const response = plan.response;
    const p: BrokerPending = {
      kind: 'broker',
      correlationId: h.correlationId,
      apiKey: h.apiKey,
      apiVersion: h.apiVersion,
      started,
      out: null,
      outBytes: 0,
      response,
      awaitingBroker: false,
      onResponse:
        response === 'as-is'
          ? (resp) => this.complete(p, withSize(resp))
          : (resp) => {
              if (response === 'walk-produce' && !mayHaveNodeEndpoints(resp, p.apiVersion)) {
                this.complete(p, withSize(resp));
                return;
              }
              this.transformResponse(p, resp, plan, info, request).then(
                (out) => {
                  this.complete(p, out);
                  this.maybeNative();
                },
                (err: unknown) => this.close('response handling failed', err),
              );
            },
    };
    return p;
  }

  private async transformResponse(
    p: BrokerPending,
    frame: Buffer,
    plan: RelayPlan,
    info: RequestInfo | null,
    request: unknown,
  ): Promise<Buffer[]> {
    const { body, bodyVersion } = decodeResponseFrame(frame, p.apiKey, p.apiVersion);
    let response: unknown = body;
    let changed = false;
    if (plan.legacySasl) {
      this.legacySasl.handshakeAnswered((body as { errorCode: number }).errorCode);
    }
    // The body was decoded by the codec of `p.apiKey`: the cast states what the registry
    // guarantees, so the rewriting gets a body typed by its api key.
    if (plan.coreRewrite) {
      changed = await this.policy.rewriteResponse(
        { apiKey: p.apiKey, body: response } as AnyResponse,
        p.apiVersion,
      );
    }
    if (plan.observed && info !== null && this.policy.extension?.onResponse) {
      const exchange = { apiKey: p.apiKey, request, response } as AnyExchange;
      const replaced = await this.policy.extension.onResponse(info, exchange);
      if (replaced !== undefined) {
        response = replaced;
        changed = true;
      }
    }
    if (!changed) return withSize(frame);
    return [encodeResponseFrame(p.apiKey, bodyVersion, p.correlationId, response)];
  }

  /**
   * Queues a request the proxy answers itself: one runs at a time (as a broker handles one request
   * of a connection at a time), and none starts while the client has not read what it was sent.
   */
  private answerLocally(a: LocalAnswer): void {
    this.localAnswers.push(a);
    this.backlog.addQueued(a.frame.length);
    this.startLocalAnswer();
    if (this.backlog.stopReading) this.pauseClient('responses');
  }

  private startLocalAnswer(): void {
    if (this.localRunning || this.closed) return;
    const next = this.localAnswers[0];
    if (next === undefined) return;
    // The request at the head of the queue holds back every response after it: it may start
    // whatever waits behind it, as long as the client reads what it was sent.
    if (next.p === this.queue.head ? this.backlog.clientBehind : this.backlog.full) return;
    this.localAnswers.shift();
    this.backlog.addQueued(-next.frame.length);
    this.localRunning = true;
    this.policy.extension!.handleRequest!(next.info, next.request).then(
      (decision) => this.localAnswered(next, decision),
      (err: unknown) => {
        this.localRunning = false;
        this.close('extension failed', err);
      },
    );
  }

  private localAnswered(a: LocalAnswer, decision: RequestDecision): void {
    this.localRunning = false;
    if (this.closed) return;
    const p = a.p;
    if (decision.action === 'respond') {
      this.complete(p, [encodeResponseFrame(p.apiKey, p.apiVersion, p.correlationId, decision.body)]);
    } else {
      const forwarded = this.brokerPending(p, p.started, a.plan, a.info, a.request);
      this.queue.replace(p, forwarded);
      this.forward(a.frame, forwarded);
      this.startLocalAnswer();
    }
    this.maybeNative();
  }

  /**
   * Writes a request to the broker; `p` is what its answer belongs to (null: no answer comes).
   * `sized`: the same frame with its size prefix as one view of the read, when there is one.
   */
  private forward(
    frame: Buffer,
    p: BrokerPending | RawTokenPending | null,
    sized: Buffer | null = null,
  ): void {
    if (p) this.queue.sent(p);
    this.policy.observer.bytes('broker_out', frame.length + 4);
    this.writeBroker(sized !== null ? [sized] : [sizePrefix(frame.length), frame]);
  }

  // ---- broker → client -------------------------------------------------------------------

  /** A read of the broker, `buffer[0, end)` (BrokerLinkEvents): true when bytes of it are still referenced afterwards, the client's socket has not taken them all. */
  brokerData(buffer: Buffer, end: number): boolean {
    if (this.closed) return false;
    this.policy.observer.bytes('broker_in', end);
    // A client that has not taken what it was sent gets a copy of just these bytes, so that the
    // reads waiting in its socket hold what is counted as unsent, not a read buffer each.
    const copied = this.out.unsent > 0;
    this.out.hold();
    try {
      if (copied) this.responses.push(Buffer.from(buffer.subarray(0, end)));
      else this.responses.push(buffer, end);
    } catch (err) {
      if (err instanceof ProtocolError) this.reject('broker_protocol');
      this.close(err instanceof ProtocolError ? 'bad response from broker' : 'response handling failed', err);
    } finally {
      if (!this.out.release() && !this.closed) this.clientRefused();
    }
    // Streamed bytes are views of `chunk` (the reader copies what it keeps): what the socket
    // holds unsent may include them.
    const held = !copied && this.out.unsent > 0;
    if (!held) this.maybeNative();
    return held;
  }

  /**
   * Matches a response to the oldest forwarded request (a broker answers in order) and decides:
   * stream it when it goes to the client unchanged (or is a Fetch v16+ whose only change is in its
   * tail) and nothing before it is still waiting; otherwise take it whole.
   */
  routeResponse(size: number, correlationId: number | null, payload: Buffer | null): FrameRoute {
    const route = this.queue.route(size, correlationId, payload);
    if (route === 'stream' && this.queue.streaming!.response === 'fetch-stream') {
      this.fetchStream = new FetchResponseStream(this.queue.streaming!.apiVersion);
    }
    return route;
  }

  streamResponse(bytes: Buffer, end: boolean): void {
    if (this.closed) return;
    const fetch = this.fetchStream;
    if (fetch !== null) {
      // Everything before the top-level tagged fields goes now; those are held until the end.
      const now = fetch.push(bytes);
      if (now.length > 0) this.sendStreamed(now);
      if (!end) return;
      this.fetchStream = null;
      const { tail, ready } = fetch.finish(this.policy.exposeBroker!);
      if (ready === null) {
        this.sendStreamed(tail);
        this.streamedDone();
        return;
      }
      // A newly exposed broker: the client may connect as soon as it reads the tail, so its
      // listener must be open first. The response stays at the head of the queue meanwhile, so
      // later responses wait behind it.
      ready.then(
        () => {
          if (this.closed) return;
          this.sendStreamed(tail);
          this.streamedDone();
        },
        (err: unknown) => this.close('response handling failed', err),
      );
      return;
    }
    this.sendStreamed(bytes);
    if (!end) return;
    this.streamedDone();
  }

  private sendStreamed(bytes: Buffer): void {
    this.active();
    this.policy.observer.bytes('client_out', bytes.length);
    if (!this.out.write(bytes)) this.clientRefused();
  }

  /** A write to the client answered false: what it has not taken is held here until its drain. */
  private clientRefused(): void {
    this.clientFull = true;
    this.backlog.setUnsent(this.out.unsent);
    this.updateFlow();
  }

  /** The streamed response (the head of the queue) has gone out whole. */
  private streamedDone(): void {
    const p = this.queue.finishStream();
    this.policy.observer.responded(p.apiKey, p.apiVersion, 'broker', (performance.now() - p.started) / 1000);
    this.flush();
  }

  wholeResponse(payload: Buffer): void {
    if (this.closed) return;
    this.queue.takeWhole().onResponse(payload);
  }

  brokerDrained(): void {
    this.resumeClient('upstream');
  }

  brokerOpened(): void {
    this.brokerCounted = true;
    this.policy.observer.brokerConnectionOpened(this.nodeId);
  }

  brokerLost(reason: BrokerLoss, err?: unknown): void {
    if (reason === 'no broker connection' && !this.closed) {
      this.log.warn('no broker connection for client', { error: err });
      this.policy.observer.upstreamConnectFailed(this.nodeId);
    }
    this.close(reason, err);
  }

  private enqueue(p: Pending): void {
    this.queue.add(p);
    if (this.queue.full) this.pauseClient('inflight');
  }

  private complete(p: Pending, out: Buffer[]): void {
    this.backlog.addWaiting(this.queue.answer(p, out));
    this.flush();
  }

  /** Sends every response at the head of the queue that is ready, in request order. */
  private flush(): void {
    if (this.closed) return;
    let full = false;
    const observer = this.policy.observer;
    // One writev for every ready response and its size prefix, not a write() each: a response
    // completed after an await (an answer from the store, a decoded Produce response) is flushed
    // outside the cork of brokerData.
    this.out.hold();
    let written = 0;
    for (let p = this.queue.takeReady(); p !== undefined; p = this.queue.takeReady()) {
      for (const buf of p.out!) {
        if (!this.out.write(buf)) full = true;
      }
      written += p.outBytes;
      observer.bytes('client_out', p.outBytes);
      if (p.kind !== 'raw-token')
        observer.responded(p.apiKey, p.apiVersion, answeredBy(p), (performance.now() - p.started) / 1000);
    }
    if (!this.out.release()) full = true;
    if (written > 0) {
      this.active();
      this.backlog.addWaiting(-written);
      // The client reads slower than it is answered: what the kernel did not take is held here.
      if (full) this.clientFull = true;
      this.backlog.setUnsent(this.out.full ? this.out.unsent : 0);
    }
    if (!this.queue.full) this.resumeClient('inflight');
    this.updateFlow();
  }

  /**
   * Reads the client and the broker, and starts local answers, as far as what the client has not
   * read allows (response-backlog.ts). The broker is not read while the client's socket is full
   * (its answers would only pile up here), nor while the responses held reach their bound, unless
   * the head of the queue or a request of the proxy's own waits for the broker: those answers
   * are what lets the queue move.
   */
  private updateFlow(): void {
    if (this.closed) return;
    if (this.backlog.stopReading) this.pauseClient('responses');
    else this.resumeClient('responses');
    const holdBroker = this.clientFull || (this.backlog.full && !this.brokerNeeded());
    if (holdBroker !== this.brokerPaused) {
      this.brokerPaused = holdBroker;
      if (holdBroker) this.broker.pause();
      else this.broker.resume();
    }
    this.startLocalAnswer();
  }

  private brokerNeeded(): boolean {
    return this.ownInFlight > 0 || this.queue.headAwaitsBroker;
  }

  private pauseClient(reason: PauseReason): void {
    if (this.clientPausedFor.has(reason)) return;
    this.clientPausedFor.add(reason);
    this.client.pause();
  }

  private resumeClient(reason: PauseReason): void {
    if (!this.clientPausedFor.delete(reason)) return;
    if (this.clientPausedFor.size === 0 && !this.draining) this.client.resume();
  }

  private reject(cause: RejectCause): void {
    this.policy.observer.frameRejected(cause);
  }

  // ---- the native path ---------------------------------------------------------------------

  /**
   * After a client read, a broker read or an answer completed outside them (what a read started
   * is then wholly done): moves to the native path if enough requests in a row passed on unread.
   */
  private maybeNative(): void {
    if (this.passedOnStreak >= this.nativeAfter && this.nativePair === null && this.policy.nativeRelay) {
      this.moveToNative();
    }
  }

  /**
   * Moves the pair to the native path (native-relay.ts) when nothing is half done here: both
   * readers between frames, nothing unsent either way, no answer waiting for the client, nothing
   * answered here or of the proxy's own in flight, no reason to hold a side, and every request
   * awaiting the broker one whose answer the native path can take. Called by maybeNative; nothing
   * happens when any of that is not so (the next read or answer tries again).
   */
  private moveToNative(): void {
    const native = this.policy.nativeRelay;
    if (!native || this.nativePair !== null || this.closed || this.draining || this.takingBack) return;
    if (this.streamed !== null || this.routed !== null || this.writesAfterStream.length > 0) return;
    if (!this.requests.atFrameBoundary || !this.responses.atFrameBoundary || this.fetchStream !== null)
      return;
    if (this.localAnswers.length > 0 || this.localRunning || this.ownInFlight > 0) return;
    if (this.clientPausedFor.size > 0 || this.brokerPaused || this.clientFull || this.backlog.held > 0)
      return;
    if (this.out.unsent > 0 || this.broker.holdsWrites || this.legacySasl.inExchange) return;
    const brokerSocket = this.broker.openSocket;
    const clientFd = nativeFd(this.client);
    const brokerFd = brokerSocket === null ? -1 : nativeFd(brokerSocket);
    if (clientFd < 0 || brokerFd < 0) {
      // TLS, or reads Node allocates: never native (counted down so as not to ask again soon).
      this.passedOnStreak = -1_000_000;
      return;
    }
    const handedOver = this.queue.handOver();
    if (handedOver === null) return;
    // Both sockets read into reused buffers, whose pause() stops the handle's reads at once.
    this.client.pause();
    this.broker.pause();
    let pair: NativePair | null = null;
    if (pausedForNative(this.client) && pausedForNative(brokerSocket!)) {
      const pending = handedOver.map((p) => ({
        correlationId: p.correlationId,
        apiKey: p.apiKey,
        apiVersion: p.apiVersion,
        started: p.started,
        walk: p.response === 'walk-produce',
      }));
      try {
        pair = native.attach(this, clientFd, brokerFd, pending);
      } catch (err) {
        this.log.debug('native path refused the connection', { error: err });
      }
    }
    if (pair === null) {
      this.passedOnStreak = -1_000_000;
      for (const p of handedOver) {
        this.queue.add(p);
        this.queue.sent(p);
      }
      this.broker.resume();
      this.client.resume();
      return;
    }
    this.nativePair = pair;
  }

  /**
   * The native path hands the pair back (NativeHost): its requests awaiting answers take their
   * places again, and the bytes it read and did not pass on are read here as if just read, the
   * broker's first (they answer those requests), then the client's.
   */
  nativeHandedBack(client: Buffer | undefined, broker: Buffer | undefined, pending: NativePending[]): void {
    this.nativePair = null;
    this.passedOnStreak = 0;
    if (!this.closed) {
      this.takingBack = true;
      try {
        for (const n of pending) {
          const plan = this.policy.plans.of(n.apiKey, n.apiVersion);
          if (plan.kind !== 'relay')
            throw new Error(`native path handed back api ${n.apiKey} v${n.apiVersion}`);
          const p = this.brokerPending(n, n.started, plan, null, undefined);
          this.enqueue(p);
          this.queue.sent(p);
        }
        if (broker !== undefined) this.brokerData(broker, broker.length);
        if (client !== undefined && !this.closed) this.readBytes(client, client.length);
      } catch (err) {
        this.close('request handling failed', err);
      } finally {
        this.takingBack = false;
      }
      if (!this.closed) {
        if (!this.brokerPaused) this.broker.resume();
        if (this.clientPausedFor.size === 0 && !this.draining) this.client.resume();
      }
    }
    const waiters = this.handBackWaiters;
    this.handBackWaiters = [];
    for (const w of waiters) w();
  }

  /** A socket ended or failed on the native path (NativeHost). */
  nativeEnded(end: NativeEnd, error: Error | undefined): void {
    this.nativePair = null;
    if (end === 'broker ended' || end === 'broker error') this.brokerLost(end, error);
    else this.close(end, error);
  }

  /** Resolves once the pair is JavaScript's (at once when it is), closed, or after `timeoutMs`. */
  private takeBackFromNative(timeoutMs?: number): Promise<void> {
    const pair = this.nativePair;
    if (pair === null) return Promise.resolve();
    return new Promise((resolve) => {
      this.handBackWaiters.push(resolve);
      if (timeoutMs !== undefined) setTimeout(resolve, timeoutMs).unref();
      pair.handBack();
    });
  }

  // ---- lifecycle ---------------------------------------------------------------------------

  /** Stops reading requests, lets in-flight ones finish (up to `timeoutMs`), then closes. */
  async drain(timeoutMs: number): Promise<void> {
    if (this.closed) return;
    this.draining = true;
    // The native path stops at its next frame boundaries; its requests are answered here.
    await this.takeBackFromNative(timeoutMs);
    if (this.closed) return;
    // A request part way through being streamed is read to its end, so that it can be answered.
    if (this.streamed === null) this.client.pause();
    await this.queue.whenEmpty(timeoutMs);
    this.close('proxy shutting down');
  }

  /**
   * Sends a request of the proxy's own on this connection's broker connection, so the broker
   * answers it for the client's authenticated principal (authorization probes). Negative
   * correlation ids keep it apart from the client's requests; its response is consumed here. It
   * fails after --request-timeout-ms without an answer (the answer, if it comes later, is read and
   * dropped: the broker answers in order).
   */
  askBroker<K extends number>(apiKey: K, apiVersion: number, body: RequestBody<K>): Promise<ResponseBody<K>> {
    if (this.closed) return Promise.reject(new Error('connection closed'));
    // Its frame goes between the client's on the broker connection, which the native path writes.
    if (this.nativePair !== null) {
      const timeoutMs = this.policy.requestTimeoutMs ?? RELAY_DEFAULTS.requestTimeoutMs;
      return this.takeBackFromNative(timeoutMs).then(() => {
        if (this.nativePair !== null)
          throw new Error(`the connection was not handed back within ${timeoutMs} ms`);
        return this.askBroker(apiKey, apiVersion, body);
      });
    }
    const correlationId = this.nextInternalId;
    this.nextInternalId = this.nextInternalId <= -0x7ffffff0 ? -1 : this.nextInternalId - 1;
    const timeoutMs = this.policy.requestTimeoutMs ?? RELAY_DEFAULTS.requestTimeoutMs;
    return new Promise((resolve, reject) => {
      let settled = false;
      const settle = (): boolean => {
        if (settled) return false;
        settled = true;
        clearTimeout(timer);
        this.ownInFlight--;
        return true;
      };
      const timer = setTimeout(() => {
        if (!settle()) return;
        reject(new Error(`the broker did not answer api ${apiKey} within ${timeoutMs} ms`));
        this.updateFlow();
      }, timeoutMs);
      const own: OwnRequest = {
        kind: 'own',
        correlationId,
        onLost: (err) => {
          if (settle()) reject(err);
        },
        onResponse: (frame) => {
          if (!settle()) return;
          try {
            resolve(decodeResponseFrame(frame, apiKey, apiVersion).body);
          } catch (err) {
            reject(err as Error);
          }
        },
      };
      this.ownInFlight++;
      this.queue.sent(own);
      const frame = encodeRequestFrame(
        { apiKey, apiVersion, correlationId, clientId: PROXY_CLIENT_ID },
        body,
      );
      this.policy.observer.bytes('broker_out', frame.length);
      this.writeBroker([frame]);
      // Its answer must be read even while responses wait for the client.
      this.updateFlow();
    });
  }

  close(reason: CloseReason, detail?: unknown): void {
    if (this.closed) return;
    this.closed = true;
    this.idle?.delete(this);
    this.nativePair?.close();
    this.nativePair = null;
    this.queue.clear(reason);
    if (closeLogLevel(reason) === 'debug') this.log.debug('connection closed', { reason });
    else this.log.warn('connection closed', { reason, error: detail });
    this.client.destroy();
    this.broker.destroy();
    if (this.brokerCounted) this.policy.observer.brokerConnectionClosed(this.nodeId);
    this.localAnswers.length = 0;
    this.backlog.release();
    this.requestMemory.close();
    const waiters = this.handBackWaiters;
    this.handBackWaiters = [];
    for (const w of waiters) w();
    this.policy.onClose?.(this);
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

function localPending(
  correlationId: number,
  apiKey: number,
  apiVersion: number,
  started: number,
): LocalPending {
  return { kind: 'local', correlationId, apiKey, apiVersion, started, out: null, outBytes: 0 };
}

function sizePrefix(length: number): Buffer {
  const b = Buffer.allocUnsafe(4);
  b.writeInt32BE(length, 0);
  return b;
}

function withSize(frame: Buffer): Buffer[] {
  return [sizePrefix(frame.length), frame];
}

/** ApiVersions error response: a v0 body (header v0, as always for ApiVersions) listing its own range. */
function unsupportedApiVersionsResponse(correlationId: number, maxVersion: number): Buffer {
  const body = defaultApiVersionsResponse();
  body.errorCode = 35; // UNSUPPORTED_VERSION
  body.apiKeys = [{ apiKey: ApiKey.ApiVersions, minVersion: 0, maxVersion }];
  return encodeResponseFrame(ApiKey.ApiVersions, 0, correlationId, body);
}
