/**
 * When one connection pair moves to the native path (native-relay.ts) and how it comes back.
 *
 * The decision: after enough requests in a row passed on unread (--native-relay-after), at a
 * moment when every part of the connection is quiescent (nothing half done in JavaScript that the
 * addon would not know of), both sockets are plain TCP reading into reused buffers, and every
 * request awaiting the broker is one whose answer the addon can take (response-queue.ts,
 * handOver). Nothing happens when any of that is not so: the next read or answer tries again.
 *
 * The way back: the addon hands the pair back with the requests still awaiting answers and the
 * bytes it read and did not pass on; those requests take their places again and the bytes are
 * read here as if just read, the broker's first (they answer those requests), then the client's.
 */
import type { Socket } from 'node:net';
import type { Logger } from '../common/log.js';
import { answerOf } from './api-plan.js';
import type { ApiPlans } from './api-plan.js';
import type { BrokerAnswers } from './broker-answers.js';
import type { BrokerLink } from './broker-link.js';
import type { BrokerLoss } from './close-reason.js';
import type { ConnectionHost, Quiescent } from './connection-parts.js';
import type { FlowControl } from './flow-control.js';
import { nativeFd, pausedForNative } from './native-relay.js';
import type { NativeEnd, NativeHost, NativePair, NativePending, NativeRelay } from './native-relay.js';
import type { RequestPath } from './request-path.js';
import type { ResponsePath } from './response-path.js';
import type { BrokerPending, ResponseQueue } from './response-queue.js';

export interface NativeHandoverParts {
  /** The connection; a broker socket's end on the native path is reported as its loss. */
  host: ConnectionHost & { brokerLost(reason: BrokerLoss, err?: unknown): void };
  /** The native path, when the proxy has it. */
  relay: Pick<NativeRelay, 'attach'> | null;
  /** Requests passed on unread in a row before the pair moves. */
  after: number;
  client: Socket;
  broker: Pick<BrokerLink, 'openSocket'>;
  flow: Pick<FlowControl, 'suspendForNative' | 'resumeAfterNative'>;
  queue: ResponseQueue;
  plans: ApiPlans;
  requests: Pick<RequestPath, 'passedOnStreak' | 'resetStreak' | 'neverNative' | 'readBytes' | 'admit'>;
  responses: Pick<ResponsePath, 'readBytes'>;
  answers: Pick<BrokerAnswers, 'pending'>;
  /** Every other part of the connection: the pair moves only when all are quiescent. */
  parts: readonly Quiescent[];
  log: Logger;
}

export class NativeHandover implements NativeHost, Quiescent {
  /** The pair while the native path relays it (neither socket is read or written here then). */
  private pair: NativePair | null = null;
  /** The native path's bytes are being taken back: nothing moves to it meanwhile. */
  private takingBack = false;
  /** Who waits for the native path to hand the pair back (drain, askBroker). */
  /** Who awaits the move back (takeBack), made on the first: most connections never have one. */
  private waiters: (() => void)[] | null = null;

  constructor(private readonly parts: NativeHandoverParts) {}

  /** The native path relays the pair now. */
  get onNative(): boolean {
    return this.pair !== null;
  }

  /** The native path's figures for the idle check, while it relays the pair (else null). */
  status(): { idleMs: number; awaiting: number; unsentToClient: number } | null {
    return this.pair?.status() ?? null;
  }

  /** Requests the native path awaits answers to. */
  get awaiting(): number {
    return this.pair?.status().awaiting ?? 0;
  }

  get quiescent(): boolean {
    return this.pair === null && !this.takingBack;
  }

  /**
   * After a client read, a broker read or an answer completed outside them (what a read started
   * is then wholly done): moves to the native path if enough requests in a row passed on unread.
   */
  maybeMove(): void {
    const { relay, requests, after } = this.parts;
    if (requests.passedOnStreak >= after && this.pair === null && relay !== null) this.move(relay);
  }

  /** Resolves once the pair is JavaScript's (at once when it is), closed, or after `timeoutMs`. */
  takeBack(timeoutMs?: number): Promise<void> {
    const pair = this.pair;
    if (pair === null) return Promise.resolve();
    return new Promise((resolve) => {
      (this.waiters ??= []).push(resolve);
      if (timeoutMs !== undefined) setTimeout(resolve, timeoutMs).unref();
      pair.handBack();
    });
  }

  /** The pair is JavaScript's again (NativeHost): see the module's comment. */
  nativeHandedBack(client: Buffer | undefined, broker: Buffer | undefined, pending: NativePending[]): void {
    const { host, requests, responses, flow } = this.parts;
    this.pair = null;
    requests.resetStreak();
    if (!host.closed) {
      this.takingBack = true;
      try {
        for (const n of pending) this.awaitAgain(n);
        if (broker !== undefined) responses.readBytes(broker, broker.length);
        if (client !== undefined && !host.closed) requests.readBytes(client, client.length);
      } catch (err) {
        host.close('request handling failed', err);
      } finally {
        this.takingBack = false;
      }
      if (!host.closed) flow.resumeAfterNative();
    }
    this.releaseWaiters();
  }

  /** A socket ended or failed on the native path (NativeHost). */
  nativeEnded(end: NativeEnd, error: Error | undefined): void {
    this.pair = null;
    if (end === 'broker ended' || end === 'broker error') this.parts.host.brokerLost(end, error);
    else this.parts.host.close(end, error);
  }

  /** The connection closed: the native side stops, and whoever waited for the pair goes on. */
  close(): void {
    this.pair?.close();
    this.pair = null;
    this.releaseWaiters();
  }

  /** Moves the pair when every part is quiescent and the sockets and the queue allow it. */
  private move(relay: Pick<NativeRelay, 'attach'>): void {
    const { host, parts, client, broker, queue, requests, flow, log } = this.parts;
    if (host.closed || !this.quiescent || !parts.every((part) => part.quiescent)) return;
    const brokerSocket = broker.openSocket;
    const clientFd = nativeFd(client);
    const brokerFd = brokerSocket === null ? -1 : nativeFd(brokerSocket);
    if (brokerSocket === null || clientFd < 0 || brokerFd < 0) {
      // TLS, or reads Node allocates: never native (counted down so as not to ask again soon).
      requests.neverNative();
      return;
    }
    const handedOver = queue.handOver();
    if (handedOver === null) return;
    // Both sockets read into reused buffers, whose pause() stops the handle's reads at once.
    flow.suspendForNative();
    let pair: NativePair | null = null;
    if (pausedForNative(client) && pausedForNative(brokerSocket)) {
      try {
        pair = relay.attach(this, clientFd, brokerFd, handedOver.map(nativePending));
      } catch (err) {
        log.debug('native path refused the connection', { error: err });
      }
    }
    if (pair === null) {
      requests.neverNative();
      for (const p of handedOver) {
        queue.add(p);
        queue.sent(p);
      }
      flow.resumeAfterNative();
      return;
    }
    this.pair = pair;
  }

  /** A request handed back awaiting its answer takes its place again. */
  private awaitAgain(n: NativePending): void {
    const { plans, answers, requests, queue } = this.parts;
    const plan = plans.of(n.apiKey, n.apiVersion);
    if (plan.kind === 'refuse' || plan.kind === 'api-versions-unsupported') {
      throw new Error(`native path handed back api ${n.apiKey} v${n.apiVersion}`);
    }
    const p = answers.pending(n, n.started, answerOf(plan), null, null);
    requests.admit(p);
    queue.sent(p);
  }

  private releaseWaiters(): void {
    const waiters = this.waiters;
    this.waiters = null;
    for (const w of waiters ?? []) w();
  }
}

function nativePending(p: BrokerPending): NativePending {
  return {
    correlationId: p.correlationId,
    apiKey: p.apiKey,
    apiVersion: p.apiVersion,
    started: p.started,
    walk: p.response === 'walk-produce',
    fetch: p.response === 'fetch-stream',
  };
}
