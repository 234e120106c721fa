/**
 * What the core does with each request and its answer, one plan per (api key, version), computed
 * once when the proxy starts: whether it reads the request, who answers it, whether the broker's
 * answer is passed on as written, streamed through the Fetch walker, walked for Produce
 * NodeEndpoints or decoded, and which versions it refuses. The connection (connection.ts) looks
 * the plan up and follows it; nothing else decides per API.
 *
 * The core decodes a response for three reasons of its own: ApiVersions (the ranges it
 * advertises, api-versions.ts), broker addresses (address-rewrite.ts), and the legacy SASL
 * handshake (sasl-legacy.ts). An extension adds the APIs it answers or observes. Every API
 * decoded for any of these has its versions capped to the codec's in ApiVersions, so a version
 * above the codec's is one the proxy never advertised: it is refused, as a broker closes the
 * connection on a version it did not advertise.
 */
import { ApiKey, apiInfos } from '../../protocol/messages/api-info.js';
import { carriesBrokerAddresses } from './address-rewrite.js';
import type { ProxyExtension } from './extension.js';
import { canStreamFetch } from './fetch-stream.js';
import { canWalkProduceResponse } from './produce-endpoints.js';

/**
 * What the core does with the broker's answer to a request it forwards:
 * - 'as-is': passes it on as the broker wrote it (so it may be streamed);
 * - 'walk-produce': a Produce v10+ answer, walked for NodeEndpoints and decoded only when it has
 *   them, as few do (produce-endpoints.ts); one without them that arrives in one read is
 *   streamed like 'as-is';
 * - 'fetch-stream': a Fetch v16+ answer, as written but for its NodeEndpoints, which the Fetch
 *   walker rewrites as it streams (fetch-stream.ts);
 * - 'decode': decodes it, takes the steps it names, and encodes it again when one changed it.
 * An answer that may be streamed is read whole while an earlier answer is still owed to the
 * client; 'fetch-stream' is then decoded.
 */
export type AnswerPlan =
  | { readonly response: 'as-is' }
  | { readonly response: 'walk-produce' }
  | { readonly response: 'fetch-stream' }
  | DecodedAnswer;

/** An answer the core decodes, and the steps it takes on it, in this order (at least one). */
export interface DecodedAnswer {
  readonly response: 'decode';
  /** SaslHandshake v0: its successful answer starts raw tokens (sasl-legacy.ts). */
  readonly legacySasl: boolean;
  /** The core rewrites it (broker addresses, ApiVersions ranges). */
  readonly coreRewrite: boolean;
  /** The extension sees the decoded request and answer before the client does, and may replace it. */
  readonly observed: boolean;
}

/** How an answer reaches the client, as the response queue streams or holds it. */
export type ResponseHandling = AnswerPlan['response'];

/**
 * Passed on opaque: nothing of the request is read beyond its header (and a Produce's acks), and
 * its answer goes back as the broker wrote it or after the Produce NodeEndpoints walk. These are
 * the frames the native path relays itself (native-relay.ts).
 */
export interface RelayPlan {
  readonly kind: 'relay';
  readonly answer: { readonly response: 'as-is' } | { readonly response: 'walk-produce' };
  /** Produce: one with acks=0 gets no answer from the broker (read from the request's bytes). */
  readonly mayBeUnanswered: boolean;
  /** True by kind: the one kind passed on unread, named so a reader of the table need not know the kinds. */
  readonly passedOnUnread: true;
}

/** The request is passed on unread; the core rewrites its answer (broker addresses, ApiVersions). */
export interface RewritePlan {
  readonly kind: 'rewrite';
  readonly answer: { readonly response: 'fetch-stream' } | DecodedAnswer;
  readonly mayBeUnanswered: boolean;
}

/**
 * The request is decoded, then forwarded: the extension observes its exchange, it opens a legacy
 * SASL exchange, or it is decoded to be checked (every SaslHandshake, an API the extension
 * intercepts without answering).
 */
export interface ReadPlan {
  readonly kind: 'read';
  readonly answer: AnswerPlan;
  readonly mayBeUnanswered: boolean;
}

/** The request is decoded and the extension answers it; should it forward it after all, `forwarded` applies. */
export interface AnswerLocallyPlan {
  readonly kind: 'answer-locally';
  readonly forwarded: AnswerPlan;
  readonly mayBeUnanswered: boolean;
}

/** What the core does with a request of one (api key, version): one switch on `kind` covers every case. */
export type ApiPlan =
  | RelayPlan
  | RewritePlan
  | ReadPlan
  | AnswerLocallyPlan
  /** A version the proxy never advertised, of an API it must decode: close, as a broker does. */
  | { readonly kind: 'refuse' }
  /**
   * An ApiVersions request above what the proxy can answer: answered here as a broker does, a v0
   * body with UNSUPPORTED_VERSION listing `maxVersion`, so the client retries lower.
   */
  | { readonly kind: 'api-versions-unsupported'; readonly maxVersion: number };

/** A plan of a request that goes to the broker (or may, once the extension decides). */
export type ForwardingPlan = RelayPlan | RewritePlan | ReadPlan | AnswerLocallyPlan;

/** What happens to the broker's answer of a request forwarded under `plan`. */
export function answerOf(plan: ForwardingPlan): AnswerPlan {
  return plan.kind === 'answer-locally' ? plan.forwarded : plan.answer;
}

/**
 * Whether the native relay can take frames of this plan (native-relay.ts): passed on unread, and
 * the answer passed back as written or through a walk it knows (Produce's, or Fetch's up to the
 * NodeEndpoints at its end).
 */
export function relayedNatively(plan: ApiPlan): boolean {
  return plan.kind === 'relay' || (plan.kind === 'rewrite' && plan.answer.response === 'fetch-stream');
}

/** Fails to compile when a switch over a union misses a member; throws if one comes anyway. */
export function unreachable(value: never): never {
  throw new Error(`unexpected ${JSON.stringify(value)}`);
}

/** Whether the core itself rewrites the answer of (apiKey, apiVersion). */
export function coreRewritesResponse(apiKey: number, apiVersion: number): boolean {
  return apiKey === ApiKey.ApiVersions || carriesBrokerAddresses(apiKey, apiVersion);
}

export interface ApiPlanOptions {
  extension: ProxyExtension | null;
  /**
   * Fetch v16+ answers are streamed (the server can expose a broker named in NodeEndpoints
   * synchronously); otherwise they are decoded whole.
   */
  streamFetch: boolean;
  /** Which answers the core rewrites; coreRewritesResponse unless a test narrows it. */
  rewrites?: (apiKey: number, apiVersion: number) => boolean;
}

interface ApiEntry {
  readonly min: number;
  readonly max: number;
  /** Indexed by version - min. */
  readonly versions: readonly ApiPlan[];
  /** Every version below min, and every version above max. */
  readonly below: ApiPlan;
  readonly above: ApiPlan;
}

const AS_IS: { readonly response: 'as-is' } = { response: 'as-is' };
const FETCH_STREAM: { readonly response: 'fetch-stream' } = { response: 'fetch-stream' };
const WALK_PRODUCE: { readonly response: 'walk-produce' } = { response: 'walk-produce' };

/** An API key the codec does not know: nothing can read it, so it goes through untouched. */
const OPAQUE: RelayPlan = {
  kind: 'relay',
  answer: AS_IS,
  mayBeUnanswered: false,
  passedOnUnread: true,
};

export class ApiPlans {
  /**
   * The APIs the proxy decodes in some version, for itself or for the extension: their ranges in
   * ApiVersions are cut to the codec's (api-versions.ts).
   */
  readonly decoded: ReadonlySet<number>;
  private readonly table: (ApiEntry | undefined)[] = [];

  /**
   * Asks the extension's interceptsRequest and observesResponse once per (api key, version) the
   * codec knows, and once for the versions below and above its range.
   */
  constructor(opts: ApiPlanOptions) {
    const rewrites = opts.rewrites ?? coreRewritesResponse;
    const decoded = decodedApis(opts.extension, rewrites);
    this.decoded = decoded;
    for (const [apiKey, codec] of apiInfos) {
      const { min, max } = codec.validVersions;
      const plan = (v: number): ApiPlan =>
        planOf(apiKey, v, codec.validVersions, decoded.has(apiKey), rewrites, opts);
      const versions: ApiPlan[] = [];
      for (let v = min; v <= max; v++) versions.push(plan(v));
      this.table[apiKey] = { min, max, versions, below: plan(min - 1), above: plan(max + 1) };
    }
  }

  /** The plan of a request of (apiKey, apiVersion), as read from its header. */
  of(apiKey: number, apiVersion: number): ApiPlan {
    const entry = apiKey >= 0 && apiKey < this.table.length ? this.table[apiKey] : undefined;
    if (entry === undefined) return OPAQUE;
    if (apiVersion > entry.max) return entry.above;
    if (apiVersion < entry.min) return entry.below;
    return entry.versions[apiVersion - entry.min]!;
  }
}

/**
 * The APIs the proxy decodes in some version the codec knows: for itself (`rewrites`, the legacy
 * SASL handshake) or because the extension reads or answers them (`apiKeys`).
 */
export function decodedApis(
  extension: ProxyExtension | null,
  rewrites: (apiKey: number, apiVersion: number) => boolean = coreRewritesResponse,
): ReadonlySet<number> {
  const decoded = new Set<number>(extension?.apiKeys ?? []);
  for (const [apiKey, codec] of apiInfos) {
    const { min, max } = codec.validVersions;
    for (let v = min; v <= max; v++) {
      if (rewrites(apiKey, v) || isLegacySaslHandshake(apiKey, v)) decoded.add(apiKey);
    }
  }
  return decoded;
}

function isLegacySaslHandshake(apiKey: number, apiVersion: number): boolean {
  return apiKey === ApiKey.SaslHandshake && apiVersion === 0;
}

function planOf(
  apiKey: number,
  apiVersion: number,
  codecRange: { readonly min: number; readonly max: number },
  decoded: boolean,
  rewrites: (apiKey: number, apiVersion: number) => boolean,
  opts: ApiPlanOptions,
): ApiPlan {
  const ext = opts.extension;
  if (apiKey === ApiKey.ApiVersions && apiVersion > codecRange.max) {
    return { kind: 'api-versions-unsupported', maxVersion: codecRange.max };
  }
  const intercepted = ext?.interceptsRequest?.(apiKey, apiVersion) ?? false;
  const observed = ext?.observesResponse?.(apiKey, apiVersion) ?? false;
  const coreRewrite = rewrites(apiKey, apiVersion);
  // Outside the codec's range nothing can be read. A version above it was never advertised; one
  // below it is one Kafka 4 removed (KIP-896): a 4.x broker refuses it as well, and a 3.x broker's
  // answer is passed on unless the extension would have to read it.
  const above = apiVersion > codecRange.max;
  const below = apiVersion < codecRange.min;
  if (
    decoded &&
    (((intercepted || observed || coreRewrite) && above) || ((intercepted || observed) && below))
  ) {
    return { kind: 'refuse' };
  }
  // An API the extension answers itself is refused outside the range it advertises, as a broker
  // closes the connection on a version it did not advertise.
  const served = intercepted ? ext?.advertisedVersions?.(apiKey, undefined) : undefined;
  if (served && (apiVersion > served.max || apiVersion < served.min)) return { kind: 'refuse' };
  const legacySasl = isLegacySaslHandshake(apiKey, apiVersion);
  const mayBeUnanswered = apiKey === ApiKey.Produce;
  const answer = answerPlanOf(apiKey, apiVersion, { legacySasl, coreRewrite, observed }, opts.streamFetch);
  if (intercepted && ext?.handleRequest !== undefined) {
    return { kind: 'answer-locally', forwarded: answer, mayBeUnanswered };
  }
  // Every SaslHandshake version is decoded, so one the codec cannot read closes the pair here.
  if (intercepted || observed || apiKey === ApiKey.SaslHandshake)
    return { kind: 'read', answer, mayBeUnanswered };
  if (answer.response === 'as-is' || answer.response === 'walk-produce') {
    return { kind: 'relay', answer, mayBeUnanswered, passedOnUnread: true };
  }
  return { kind: 'rewrite', answer, mayBeUnanswered };
}

/** How the answer goes back: as written, walked or streamed through a walker when nothing else reads it, else decoded. */
function answerPlanOf(
  apiKey: number,
  apiVersion: number,
  steps: Omit<DecodedAnswer, 'response'>,
  streamFetch: boolean,
): AnswerPlan {
  const { legacySasl, coreRewrite, observed } = steps;
  if (!observed && !coreRewrite && !legacySasl) return AS_IS;
  if (!observed && !legacySasl) {
    if (apiKey === ApiKey.Fetch && canStreamFetch(apiVersion) && streamFetch) return FETCH_STREAM;
    if (apiKey === ApiKey.Produce && canWalkProduceResponse(apiVersion)) return WALK_PRODUCE;
  }
  return { response: 'decode', legacySasl, coreRewrite, observed };
}
