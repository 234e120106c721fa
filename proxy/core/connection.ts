/**
 * One client connection and its upstream broker connection: a small coordinator over parts that
 * each own one job and are themselves the targets of that job's callbacks.
 *
 * - request-path.ts: the client's reads, each request's plan, and where it goes;
 * - broker-writes.ts: writes to the broker, none splitting a request being streamed;
 * - response-path.ts: the broker's reads, and answers to the client in request order;
 * - broker-answers.ts: what happens to the broker's answer of each request (rewrite, observe);
 * - local-answers.ts: requests the extension answers, one at a time;
 * - own-requests.ts: requests of the proxy's own on this broker connection (askBroker);
 * - flow-control.ts: which side is read, and why not (the pause reasons);
 * - native-handover.ts: the move to the native path and back, when every part is quiescent.
 *
 * The connection makes the parts, carries what one part sets off in the others (updateFlow after
 * anything held changed, maybeNative after a read), watches for idleness, and owns the lifecycle:
 * the broker connection opened when the client first needs it (broker-link.ts), drain, close.
 */
import type { Socket } from 'node:net';
import type { RequestBody, ResponseBody } from '../../protocol/messages/api-info.js';
import type { AnyResponse } from '../../protocol/messages/api-info.js';
import type { ProxyExtension, RequestInfo } from './extension.js';
import { apiCodecsLoaded, loadApiCodecs } from '../../protocol/codec-registry.js';
import { nextReadSeq } from './read-order.js';
import type { ExposeBrokerNow } from './fetch-stream.js';
import type { ApiPlans } from './api-plan.js';
import type { Logger } from '../common/log.js';
import type { ProxyObserver } from './observer.js';
import { BrokerAnswers, produceAnswerUnchanged } from './broker-answers.js';
import { BrokerLink } from './broker-link.js';
import type { BrokerLinkEvents } from './broker-link.js';
import { BrokerWrites } from './broker-writes.js';
import { closeLogLevel } from './close-reason.js';
import type { BrokerLoss, CloseReason } from './close-reason.js';
import type { ConnectionHost, RequestKey } from './connection-parts.js';
import { RELAY_DEFAULTS } from './defaults.js';
import { FlowControl } from './flow-control.js';
import { idleSweep } from './idle-sweep.js';
import type { IdleSweep, IdleWatched } from './idle-sweep.js';
import { LocalAnswers } from './local-answers.js';
import { NativeHandover } from './native-handover.js';
import type { NativeRelay } from './native-relay.js';
import { OwnRequests } from './own-requests.js';
import type { RequestBufferPool } from './request-pool.js';
import { RequestPath } from './request-path.js';
import { ResponseBacklog } from './response-backlog.js';
import type { ResponseBufferPool } from './response-backlog.js';
import { ResponsePath } from './response-path.js';
import { ResponseQueue } from './response-queue.js';
import { readSocket, readsIntoReusedBuffer } from './reused-reads.js';
import { LegacySaslExchange } from './sasl-legacy.js';

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

let nextId = 1;

/**
 * The connection's logger, `parent.child({ conn, node })` made on its first line: most
 * connections log nothing until they close (and then at debug level), while a child logger made
 * up front is a copy of the parent's fields and a closure per level, about 2 KB of heap that every
 * idle connection would hold.
 */
class ConnectionLog implements Logger {
  private made: Logger | null = null;

  constructor(
    private readonly parent: Logger,
    private readonly conn: string,
    private readonly node: number | null,
  ) {}

  private get logger(): Logger {
    return (this.made ??= this.parent.child({ conn: this.conn, node: this.node }));
  }

  debug(event: string, fields?: Record<string, unknown>): void {
    this.logger.debug(event, fields);
  }

  info(event: string, fields?: Record<string, unknown>): void {
    this.logger.info(event, fields);
  }

  warn(event: string, fields?: Record<string, unknown>): void {
    this.logger.warn(event, fields);
  }

  error(event: string, fields?: Record<string, unknown>): void {
    this.logger.error(event, fields);
  }

  child(fields: Record<string, unknown>): Logger {
    return this.logger.child(fields);
  }
}

export class ProxyConnection implements ConnectionHost, BrokerLinkEvents, IdleWatched {
  readonly id = `c${nextId++}`;
  private readonly log: Logger;
  private closedNow = false;
  /** Correlation with the broker and the order of answers to the client. */
  private readonly queue: ResponseQueue;
  /** What is held for a client that has not read it (response-backlog.ts). */
  private readonly backlog: ResponseBacklog;
  private readonly broker: BrokerLink;
  /** The broker connection was opened (and so is counted as open until this one closes). */
  private brokerCounted = false;
  private readonly flow: FlowControl;
  private readonly writes: BrokerWrites;
  private readonly responses: ResponsePath;
  private readonly answers: BrokerAnswers;
  private readonly locals: LocalAnswers;
  private readonly own: OwnRequests;
  private readonly requests: RequestPath;
  private readonly handover: NativeHandover;
  /** What tells this connection it is idle (idle-sweep.ts), when it has an idle timeout. */
  private readonly idle: IdleSweep | null;
  /** The idle sweep's tick at the last read of the client or write to it (IdleWatched). */
  activeTick = 0;

  constructor(
    private readonly client: Socket,
    openUpstream: () => Promise<Socket>,
    readonly nodeId: number | null,
    private readonly policy: ConnectionPolicy,
  ) {
    this.log = new ConnectionLog(policy.log, this.id, nodeId);
    const { observer, maxFrameSize, extension, plans } = policy;
    const legacySasl = new LegacySaslExchange();
    const queue = (this.queue = new ResponseQueue(policy.maxInFlight, produceAnswerUnchanged));
    const backlog = (this.backlog = new ResponseBacklog(policy.responseBuffers ?? null));
    client.setNoDelay(true);
    this.idle = policy.idleTimeoutMs ? idleSweep(policy.idleTimeoutMs) : null;
    this.idle?.add(this);
    // Before the client's reader: what was read already may be answered at once.
    const responses = (this.responses = new ResponsePath(client, this, queue, backlog, {
      maxFrameSize,
      observer,
      exposeBroker: policy.exposeBroker,
      watchesIdle: this.idle !== null,
    }));
    const broker = (this.broker = new BrokerLink(openUpstream, this, responses));
    const flow = (this.flow = new FlowControl(client, broker, backlog, responses));
    const writes = (this.writes = new BrokerWrites(broker, flow, queue, observer));
    // The policy itself as the answers' options (its extension and rewriteResponse): not a closure
    // and an object of its own per connection, for every idle connection to hold.
    const answers = (this.answers = new BrokerAnswers(this, responses, legacySasl, policy));
    const locals = (this.locals = new LocalAnswers({
      host: this,
      flow,
      backlog,
      queue,
      sink: responses,
      answers,
      writes,
      extension,
    }));
    const timeoutMs = policy.requestTimeoutMs ?? RELAY_DEFAULTS.requestTimeoutMs;
    const own = (this.own = new OwnRequests(this, queue, writes, observer, timeoutMs));
    const requests = (this.requests = new RequestPath({
      host: this,
      transientReads: readsIntoReusedBuffer(client),
      maxFrameSize,
      plans,
      observer,
      requestBuffers: policy.requestBuffers,
      broker,
      flow,
      writes,
      queue,
      sink: responses,
      answers,
      locals,
      legacySasl,
    }));
    this.handover = new NativeHandover({
      host: this,
      relay: policy.nativeRelay ?? null,
      after: policy.nativeAfterRequests ?? RELAY_DEFAULTS.nativeRelayAfter,
      client,
      broker,
      flow,
      queue,
      plans,
      requests,
      responses,
      answers,
      log: this.log,
      parts: [requests, writes, responses, answers, locals, own, flow],
    });
    // The client's reads go to the request path itself: see ChunkReader (reused-reads.ts) for why.
    readSocket(client, requests);
    client.on('error', (err) => this.close('client error', err));
    client.on('close', () => this.close('client closed'));
    client.on('end', () => this.close('client ended'));
  }

  get closed(): boolean {
    return this.closedNow;
  }

  get inFlight(): number {
    return this.queue.inFlight + this.handover.awaiting;
  }

  /**
   * No read of the client nor write to it for the idle timeout (IdleWatched): closed when nothing
   * is in flight, or when the client has read nothing of its answers all this time (a broker
   * closes such a connection too); a long Fetch wait or a slow broker is not idleness.
   */
  idleFor(): void {
    const idle = this.idle;
    if (idle === null) return;
    const native = this.handover.status();
    if (native !== null) {
      // The native path notes its own activity: idle only if it saw none either.
      if (native.idleMs < idle.timeoutMs) {
        this.activeTick = idle.tick - Math.floor(native.idleMs / idle.resolutionMs);
        return;
      }
      if (native.awaiting === 0 || native.unsentToClient > 0) this.close('idle');
      return;
    }
    if (this.queue.idle || this.responses.clientFull) this.close('idle');
  }

  /** A read of the client or a write to it: the connection is not idle (ConnectionHost). */
  active(): void {
    if (this.idle !== null) this.activeTick = this.idle.tick;
  }

  /**
   * Reads the client and the broker, and starts local answers, as far as what the client has not
   * read allows (flow-control.ts): after anything held for the client, or awaited from the
   * broker, changed (ConnectionHost).
   */
  updateFlow(): void {
    if (this.closedNow) return;
    this.flow.update(this.queue.full, this.own.waiting || this.queue.headAwaitsBroker);
    this.locals.start();
  }

  /** A read or an answer is wholly done (ConnectionHost): the pair may move to the native path. */
  maybeNative(): void {
    this.handover.maybeMove();
  }

  /**
   * What the extension is told of a request it answers or observes (ConnectionHost), built as the
   * request is read: its readSeq is the read order.
   */
  requestInfo(h: RequestKey): RequestInfo {
    return {
      connectionId: this.id,
      apiKey: h.apiKey,
      apiVersion: h.apiVersion,
      correlationId: h.correlationId,
      nodeId: this.nodeId,
      readSeq: nextReadSeq(),
      askBroker: (apiKey, apiVersion, body) => this.askBroker(apiKey, apiVersion, body),
    };
  }

  brokerDrained(): void {
    this.flow.resume('upstream');
  }

  brokerOpened(): void {
    this.brokerCounted = true;
    this.policy.observer.brokerConnectionOpened(this.nodeId);
  }

  brokerLost(reason: BrokerLoss, err?: unknown): void {
    if (reason === 'no broker connection' && !this.closedNow) {
      this.log.warn('no broker connection for client', { error: err });
      this.policy.observer.upstreamConnectFailed(this.nodeId);
    }
    this.close(reason, err);
  }

  /** Stops reading requests, lets in-flight ones finish (up to `timeoutMs`), then closes. */
  async drain(timeoutMs: number): Promise<void> {
    if (this.closedNow) return;
    this.flow.startDraining();
    // The native path stops at its next frame boundaries; its requests are answered here.
    await this.handover.takeBack(timeoutMs);
    if (this.closed) return;
    // A request part way through being streamed is read to its end, so that it can be answered.
    if (!this.writes.streaming) this.flow.stopReadingClient();
    await this.queue.whenEmpty(timeoutMs);
    this.close('proxy shutting down');
  }

  /**
   * Sends a request of the proxy's own on this connection's broker connection (own-requests.ts),
   * so the broker answers it for the client's authenticated principal. It fails after
   * --request-timeout-ms without an answer.
   */
  askBroker<K extends number>(apiKey: K, apiVersion: number, body: RequestBody<K>): Promise<ResponseBody<K>> {
    if (this.closedNow) return Promise.reject(new Error('connection closed'));
    // Its codec loads on first use (codec-registry.ts): its frame is written once it is there.
    if (!apiCodecsLoaded([apiKey]))
      return loadApiCodecs([apiKey]).then(() => this.askBroker(apiKey, apiVersion, body));
    // Its frame goes between the client's on the broker connection, which the native path writes.
    if (this.handover.onNative) {
      const timeoutMs = this.policy.requestTimeoutMs ?? RELAY_DEFAULTS.requestTimeoutMs;
      return this.handover.takeBack(timeoutMs).then(() => {
        if (this.handover.onNative)
          throw new Error(`the connection was not handed back within ${timeoutMs} ms`);
        return this.askBroker(apiKey, apiVersion, body);
      });
    }
    return this.own.ask(apiKey, apiVersion, body);
  }

  close(reason: CloseReason, detail?: unknown): void {
    if (this.closedNow) return;
    this.closedNow = true;
    this.idle?.delete(this);
    this.handover.close();
    this.queue.clear(reason);
    if (closeLogLevel(reason) === 'debug') this.log.debug('connection closed', { reason });
    else this.log.warn('connection closed', { reason, error: detail });
    this.client.destroy();
    this.broker.destroy();
    if (this.brokerCounted) this.policy.observer.brokerConnectionClosed(this.nodeId);
    this.locals.close();
    this.backlog.release();
    this.requests.close();
    this.policy.onClose?.(this);
  }
}
