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
import { ApiKey, apiCodecs } from '../../protocol/messages/index.js';
import { carriesBrokerAddresses } from './address-rewrite.js';
import type { ProxyExtension } from './extension.js';
import { canStreamFetch } from './fetch-stream.js';
import { canWalkProduceResponse } from './produce-endpoints.js';

/**
 * How the broker's answer to a forwarded request reaches the client:
 * - 'as-is': as the broker wrote it (so it may be streamed);
 * - 'fetch-stream': a Fetch v16+ answer, as written but for its NodeEndpoints, which the Fetch
 *   walker rewrites as it streams (fetch-stream.ts);
 * - 'walk-produce': a Produce v10+ answer, walked for NodeEndpoints and decoded only when it has
 *   them, as few do (produce-endpoints.ts); one without them that arrives in one read is
 *   streamed like 'as-is';
 * - 'decode': decoded, rewritten or shown to the extension, and encoded again when changed.
 * An answer that may be streamed is read whole while an earlier answer is still owed to the
 * client; 'fetch-stream' is then decoded.
 */
export type ResponseHandling = 'as-is' | 'fetch-stream' | 'walk-produce' | 'decode';

/** A request the core relays or answers. */
export interface RelayPlan {
  readonly kind: 'relay';
  /** Its body is decoded: the extension answers or observes it, or it is a SaslHandshake. */
  readonly decodeRequest: boolean;
  /** The extension answers it (it may still forward it, then `response` applies). */
  readonly answerLocally: boolean;
  /** The extension sees the decoded request and answer before the client does. */
  readonly observed: boolean;
  /** The core rewrites its answer (broker addresses, ApiVersions ranges). */
  readonly coreRewrite: boolean;
  /** SaslHandshake v0: its request names the mechanism, its successful answer starts raw tokens. */
  readonly legacySasl: boolean;
  /** Produce: one with acks=0 gets no answer from the broker (read from the request's bytes). */
  readonly mayBeUnanswered: boolean;
  readonly response: ResponseHandling;
  /**
   * Nothing of the request is read beyond its header (and a Produce's acks), and its answer goes
   * back as the broker wrote it or after the Produce NodeEndpoints walk: the frames the native
   * path relays itself (native-relay.ts).
   */
  readonly passedOnUnread: boolean;
}

export type ApiPlan =
  | RelayPlan
  /** A version the proxy never advertised, of an API it must decode: close, as a broker does. */
  | { readonly kind: 'refuse' }
  /**
   * An ApiVersions request above what the proxy can answer: answered here as a broker does, a v0
   * body with UNSUPPORTED_VERSION listing `maxVersion`, so the client retries lower.
   */
  | { readonly kind: 'api-versions-unsupported'; readonly maxVersion: number };

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

/** An API key the codec does not know: nothing can read it, so it goes through untouched. */
const OPAQUE: RelayPlan = {
  kind: 'relay',
  decodeRequest: false,
  answerLocally: false,
  observed: false,
  coreRewrite: false,
  legacySasl: false,
  mayBeUnanswered: false,
  response: 'as-is',
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
    for (const [apiKey, codec] of apiCodecs) {
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
  for (const [apiKey, codec] of apiCodecs) {
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
  let response: ResponseHandling = 'decode';
  if (!observed && !coreRewrite && !legacySasl) response = 'as-is';
  else if (!observed && coreRewrite && !legacySasl) {
    if (apiKey === ApiKey.Fetch && canStreamFetch(apiVersion) && opts.streamFetch) response = 'fetch-stream';
    else if (apiKey === ApiKey.Produce && canWalkProduceResponse(apiVersion)) response = 'walk-produce';
  }
  // Every SaslHandshake version is decoded, so one the codec cannot read closes the pair here.
  const decodeRequest = intercepted || observed || apiKey === ApiKey.SaslHandshake;
  const answerLocally = intercepted && ext?.handleRequest !== undefined;
  return {
    kind: 'relay',
    decodeRequest,
    answerLocally,
    observed,
    coreRewrite,
    legacySasl,
    mayBeUnanswered: apiKey === ApiKey.Produce,
    response,
    passedOnUnread:
      !decodeRequest &&
      !answerLocally &&
      !observed &&
      !legacySasl &&
      (response === 'as-is' || response === 'walk-produce'),
  };
}
