/**
 * Requests the extension answers itself (ProxyExtension.handleRequest), read and not answered yet.
 *
 * They start one at a time per connection, as a broker handles one request of a connection at a
 * time, and none starts while the client has not read what it was sent (response-backlog.ts),
 * except the one at the head of the queue, which holds back every answer after it: it starts as
 * long as the client reads what was written to its socket. An answer keeps its place in the
 * client's order; a request the extension forwards after all keeps it too, now awaiting the
 * broker.
 */
import { encodeResponseFrame } from '../../protocol/frames.js';
import type { AnyRequest } from '../../protocol/messages/api-info.js';
import { unreachable } from './api-plan.js';
import type { AnswerPlan } from './api-plan.js';
import type { BrokerAnswers, AnswerSink } from './broker-answers.js';
import type { BrokerWrites } from './broker-writes.js';
import type { ConnectionHost, Quiescent } from './connection-parts.js';
import type { ProxyExtension, RequestDecision, RequestInfo } from './extension.js';
import type { FlowControl } from './flow-control.js';
import type { ResponseBacklog } from './response-backlog.js';
import type { LocalPending, ResponseQueue } from './response-queue.js';

/** A request the extension answers, read and not answered yet. */
export interface LocalAnswer {
  p: LocalPending;
  frame: Buffer;
  info: RequestInfo;
  request: AnyRequest;
  /** How the broker's answer is handled should the extension forward the request after all. */
  forwarded: AnswerPlan;
}

export interface LocalAnswersParts {
  host: ConnectionHost;
  flow: Pick<FlowControl, 'pause'>;
  backlog: ResponseBacklog;
  queue: Pick<ResponseQueue, 'head' | 'replace'>;
  sink: AnswerSink;
  answers: Pick<BrokerAnswers, 'pending'>;
  writes: Pick<BrokerWrites, 'forward'>;
  extension: ProxyExtension | null;
}

export class LocalAnswers implements Quiescent {
  /** Read and not started, oldest first. */
  private readonly waiting: LocalAnswer[] = [];
  private running = false;

  constructor(private readonly parts: LocalAnswersParts) {}

  /** A request to answer here: started now if it may, else when the one before it is answered. */
  add(a: LocalAnswer): void {
    const { backlog, flow, extension } = this.parts;
    extension?.requestRead?.(a.info, a.request);
    this.waiting.push(a);
    backlog.addQueued(a.frame.length);
    this.start();
    if (backlog.stopReading) flow.pause('responses');
  }

  /** Starts the next answer if none runs and what the client has not read allows it. */
  start(): void {
    const { host, backlog, queue, extension } = this.parts;
    if (this.running || host.closed) return;
    const next = this.waiting[0];
    if (next === undefined) return;
    // The request at the head of the queue holds back every response after it: it may start
    // whatever waits behind it, as long as the client reads what it was sent.
    if (next.p === queue.head ? backlog.clientBehind : backlog.full) return;
    this.waiting.shift();
    backlog.addQueued(-next.frame.length);
    if (extension?.handleRequest === undefined) {
      // A plan answers locally only for an extension with handleRequest (api-plan.ts).
      extension?.requestDropped?.(next.info, next.request);
      host.close('extension failed', new Error('no extension answers this request'));
      return;
    }
    this.running = true;
    extension.handleRequest(next.info, next.request).then(
      (decision) => this.answered(next, decision),
      (err: unknown) => {
        this.running = false;
        host.close('extension failed', err);
      },
    );
  }

  /** Nothing waits to be answered here and nothing is being answered. */
  get quiescent(): boolean {
    return this.waiting.length === 0 && !this.running;
  }

  /** The connection closed: what waits is dropped. */
  close(): void {
    const { extension } = this.parts;
    for (const a of this.waiting.splice(0)) extension?.requestDropped?.(a.info, a.request);
  }

  private answered(a: LocalAnswer, decision: RequestDecision): void {
    const { host, sink, answers, queue, writes } = this.parts;
    this.running = false;
    if (host.closed) return;
    const p = a.p;
    switch (decision.action) {
      case 'respond':
        sink.complete(p, [encodeResponseFrame(p.apiKey, p.apiVersion, p.correlationId, decision.body)]);
        break;
      case 'forward': {
        const forwarded = answers.pending(p, p.started, a.forwarded, a.info, a.request);
        queue.replace(p, forwarded);
        writes.forward(a.frame, forwarded);
        this.start();
        break;
      }
      default:
        unreachable(decision);
    }
    host.maybeNative();
  }
}
