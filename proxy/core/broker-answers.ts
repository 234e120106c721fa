/**
 * What happens to the broker's answer of each forwarded client request, as its plan says
 * (api-plan.ts, AnswerPlan): passed on as written, walked for Produce NodeEndpoints, or decoded
 * and then noted by the legacy SASL exchange, rewritten by the core (broker addresses, ApiVersions
 * ranges) and shown to the extension, in that order, and encoded again only when one changed it.
 * An answer streamed to the client (response-path.ts) never comes here.
 */
import { encodeResponseFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/api-info.js';
import type { AnyRequest, AnyResponse } from '../../protocol/messages/api-info.js';
import { decodeTaggedResponse, exchangeOf } from '../../protocol/tagged-frames.js';
import { unreachable } from './api-plan.js';
import type { AnswerPlan, DecodedAnswer } from './api-plan.js';
import { withSize } from './connection-parts.js';
import type { ConnectionHost, Quiescent, RequestKey } from './connection-parts.js';
import type { AnyResponseBody, ProxyExtension, RequestInfo } from './extension.js';
import { produceResponseHasNodeEndpoints } from './produce-endpoints.js';
import type { BrokerPending, Pending } from './response-queue.js';
import type { LegacySaslExchange } from './sasl-legacy.js';

/** False only for a well-formed Produce answer without NodeEndpoints; a malformed one is left to the decoder. */
function mayHaveNodeEndpoints(frame: Buffer, apiVersion: number): boolean {
  try {
    return produceResponseHasNodeEndpoints(frame, apiVersion);
  } catch {
    return true;
  }
}

/**
 * A Produce answer read in one piece goes to the client as a view of the read, as an answer
 * passed as-is does, unless it has NodeEndpoints to rewrite (the response queue's test).
 */
export function produceAnswerUnchanged(a: BrokerPending, payload: Buffer): boolean {
  return !mayHaveNodeEndpoints(payload, a.apiVersion);
}

export interface BrokerAnswersOptions {
  extension: ProxyExtension | null;
  /** ConnectionPolicy.rewriteResponse: true when it changed the body. */
  rewriteResponse(response: AnyResponse, apiVersion: number): Promise<boolean>;
}

/** Where a finished answer goes (response-path.ts). */
export interface AnswerSink {
  complete(p: Pending, out: Buffer[]): void;
}

type DecodeSteps = Omit<DecodedAnswer, 'response'>;
const REWRITE_ONLY: DecodeSteps = { legacySasl: false, coreRewrite: true, observed: false };
const NO_STEP: DecodeSteps = { legacySasl: false, coreRewrite: false, observed: false };

/** The steps taken on an answer read whole and decoded, by its plan. */
function stepsOf(answer: AnswerPlan): DecodeSteps {
  switch (answer.response) {
    case 'decode':
      return answer;
    // Read whole (it could not be streamed, or has NodeEndpoints): the core rewrites its brokers.
    case 'fetch-stream':
    case 'walk-produce':
      return REWRITE_ONLY;
    case 'as-is':
      return NO_STEP;
    default:
      return unreachable(answer);
  }
}

export class BrokerAnswers implements Quiescent {
  /** Answers being decoded, rewritten or shown to the extension. */
  private transforming = 0;

  constructor(
    private readonly host: ConnectionHost,
    private readonly sink: AnswerSink,
    private readonly legacySasl: LegacySaslExchange,
    private readonly opts: BrokerAnswersOptions,
  ) {}

  /**
   * A client request to forward, with what handles its answer. `info` and `request`: what the
   * extension is told, when it observes the exchange (else null).
   */
  pending(
    h: RequestKey,
    started: number,
    answer: AnswerPlan,
    info: RequestInfo | null,
    request: AnyRequest | null,
  ): BrokerPending {
    const response = answer.response;
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
          ? (frame) => this.sink.complete(p, withSize(frame))
          : (frame) => this.answered(p, frame, answer, info, request),
    };
    return p;
  }

  /** No answer is being transformed. */
  get quiescent(): boolean {
    return this.transforming === 0;
  }

  private answered(
    p: BrokerPending,
    frame: Buffer,
    answer: AnswerPlan,
    info: RequestInfo | null,
    request: AnyRequest | null,
  ): void {
    if (answer.response === 'walk-produce' && !mayHaveNodeEndpoints(frame, p.apiVersion)) {
      this.sink.complete(p, withSize(frame));
      return;
    }
    this.transforming++;
    this.transform(p, frame, stepsOf(answer), info, request).then(
      (out) => {
        this.transforming--;
        this.sink.complete(p, out);
        this.host.maybeNative();
      },
      (err: unknown) => {
        this.transforming--;
        this.host.close('response handling failed', err);
      },
    );
  }

  private async transform(
    p: BrokerPending,
    frame: Buffer,
    steps: DecodeSteps,
    info: RequestInfo | null,
    request: AnyRequest | null,
  ): Promise<Buffer[]> {
    const { response, bodyVersion } = decodeTaggedResponse(frame, p.apiKey, p.apiVersion);
    let body: AnyResponseBody = response.body;
    let changed = false;
    if (steps.legacySasl && response.apiKey === ApiKey.SaslHandshake) {
      this.legacySasl.handshakeAnswered(response.body.errorCode);
    }
    if (steps.coreRewrite) changed = await this.opts.rewriteResponse(response, p.apiVersion);
    const ext = this.opts.extension;
    if (steps.observed && info !== null && request !== null && ext?.onResponse) {
      const replaced = await ext.onResponse(info, exchangeOf(request, response));
      if (replaced !== undefined) {
        body = replaced;
        changed = true;
      }
    }
    if (!changed) return withSize(frame);
    return [encodeResponseFrame(p.apiKey, bodyVersion, p.correlationId, body)];
  }
}
