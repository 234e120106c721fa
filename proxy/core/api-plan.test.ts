// The plan of every (api key, version) in the generated registry, against expectations written
// out here from Kafka's specs (which responses name brokers, from which version), not from the
// code under test: the core's own reads, an extension's, the versions refused above the codec's.
import { describe, expect, test } from 'vitest';
import { ApiKey, apiCodecs } from '../../protocol/messages/index.js';
import { ApiPlans, answerOf, decodedApis } from './api-plan.js';
import type { AnswerPlan, ApiPlan, ForwardingPlan } from './api-plan.js';
import type { ProxyExtension } from './extension.js';

/** Responses that name brokers, and the first version that does (KIP-951 NodeEndpoints for Produce and Fetch). */
const NAMES_BROKERS_FROM = new Map<number, number>([
  [ApiKey.Metadata, 0],
  [ApiKey.FindCoordinator, 0],
  [ApiKey.DescribeCluster, 0],
  [ApiKey.ShareFetch, 0],
  [ApiKey.ShareAcknowledge, 0],
  [ApiKey.Produce, 10],
  [ApiKey.Fetch, 16],
]);

/** The APIs the core decoded before the plan existed (api-versions.ts's CORE_DECODED list). */
const CORE_DECODED = [
  ApiKey.ApiVersions,
  ApiKey.SaslHandshake,
  ApiKey.Metadata,
  ApiKey.FindCoordinator,
  ApiKey.DescribeCluster,
  ApiKey.Produce,
  ApiKey.Fetch,
  ApiKey.ShareFetch,
  ApiKey.ShareAcknowledge,
];

const namesBrokers = (apiKey: number, v: number): boolean =>
  NAMES_BROKERS_FROM.has(apiKey) && v >= NAMES_BROKERS_FROM.get(apiKey)!;

/** Every (api key, version) the codec knows. */
const everyVersion: [number, number][] = [...apiCodecs].flatMap(([apiKey, codec]) =>
  Array.from({ length: codec.validVersions.max - codec.validVersions.min + 1 }, (_, i): [number, number] => [
    apiKey,
    codec.validVersions.min + i,
  ]),
);

function forwarding(plan: ApiPlan): ForwardingPlan {
  if (plan.kind === 'refuse' || plan.kind === 'api-versions-unsupported')
    throw new Error(`${plan.kind}: not forwarded`);
  return plan;
}

/** How the core alone hands back the answer of (apiKey, v): written out from Kafka's specs. */
function expectedAnswer(apiKey: number, v: number, streamFetch: boolean): AnswerPlan {
  const rewrite = apiKey === ApiKey.ApiVersions || namesBrokers(apiKey, v);
  const legacySasl = apiKey === ApiKey.SaslHandshake && v === 0;
  if (apiKey === ApiKey.Fetch && v >= 16 && v <= 18 && streamFetch) return { response: 'fetch-stream' };
  if (apiKey === ApiKey.Produce && v >= 10 && v <= 13) return { response: 'walk-produce' };
  if (!rewrite && !legacySasl) return { response: 'as-is' };
  return { response: 'decode', legacySasl, coreRewrite: rewrite, observed: false };
}

/** The core alone (no extension): what it decodes for itself, and how each answer goes back. */
function expectedCore(apiKey: number, v: number, streamFetch: boolean): ApiPlan {
  const answer = expectedAnswer(apiKey, v, streamFetch);
  const mayBeUnanswered = apiKey === ApiKey.Produce;
  // Every SaslHandshake is decoded (checked); nothing else of a request is read by the core.
  if (apiKey === ApiKey.SaslHandshake) return { kind: 'read', answer, mayBeUnanswered };
  // Passed on unread, written out from its definition, not copied from api-plan.ts.
  if (answer.response === 'as-is' || answer.response === 'walk-produce') {
    return { kind: 'relay', answer, mayBeUnanswered, passedOnUnread: true };
  }
  return { kind: 'rewrite', answer, mayBeUnanswered };
}

describe('the core alone', () => {
  const plans = new ApiPlans({ extension: null, streamFetch: true });

  // Without synchronous broker exposure (streamFetch false), Fetch v16-17 answers are decoded whole.
  test.each([true, false])(
    `every one of the registry's ${everyVersion.length} (api key, version) pairs, streamFetch %s`,
    (streamFetch) => {
      const under = new ApiPlans({ extension: null, streamFetch });
      expect(everyVersion.length).toBeGreaterThan(300);
      for (const [apiKey, v] of everyVersion) {
        expect({ apiKey, v, plan: under.of(apiKey, v) }).toEqual({
          apiKey,
          v,
          plan: expectedCore(apiKey, v, streamFetch),
        });
      }
    },
  );

  test('it decodes the same APIs as before the plan', () => {
    expect([...plans.decoded].sort((a, b) => a - b)).toEqual([...CORE_DECODED].sort((a, b) => a - b));
    expect(decodedApis(null)).toEqual(plans.decoded);
  });

  test('above the codec: ApiVersions is answered, an API it decodes refused, any other relayed', () => {
    for (const [apiKey, codec] of apiCodecs) {
      const above = plans.of(apiKey, codec.validVersions.max + 1);
      const farAbove = plans.of(apiKey, 0x7fff);
      expect(farAbove).toBe(above);
      if (apiKey === ApiKey.ApiVersions) {
        expect(above).toEqual({ kind: 'api-versions-unsupported', maxVersion: codec.validVersions.max });
      } else if (NAMES_BROKERS_FROM.has(apiKey)) {
        expect({ apiKey, ...above }).toEqual({ apiKey, kind: 'refuse' });
      } else {
        // SaslHandshake: decoded at every version, so a version the codec cannot read fails there.
        expect({ apiKey, kind: above.kind }).toEqual({
          apiKey,
          kind: apiKey === ApiKey.SaslHandshake ? 'read' : 'relay',
        });
        expect(answerOf(forwarding(above)).response).toBe('as-is');
      }
    }
  });

  test('below the codec (a negative version): relayed as the API is otherwise', () => {
    expect(plans.of(ApiKey.Metadata, -1)).toEqual({
      kind: 'rewrite',
      answer: { response: 'decode', legacySasl: false, coreRewrite: true, observed: false },
      mayBeUnanswered: false,
    });
    expect(plans.of(ApiKey.Produce, -1)).toMatchObject({ kind: 'relay', answer: { response: 'as-is' } });
    expect(plans.of(ApiKey.JoinGroup, -5)).toMatchObject({ kind: 'relay', answer: { response: 'as-is' } });
  });

  test('an api key the codec does not know goes through untouched', () => {
    for (const apiKey of [-1, 1000, 0x7fff, apiCodecs.size + 10]) {
      expect(plans.of(apiKey, 0)).toEqual({
        kind: 'relay',
        answer: { response: 'as-is' },
        mayBeUnanswered: false,
        passedOnUnread: true,
      });
    }
  });

  test('a plan is computed once: the same object at every lookup', () => {
    expect(plans.of(ApiKey.Fetch, 17)).toBe(plans.of(ApiKey.Fetch, 17));
  });
});

describe('with an extension', () => {
  /** Answers OffsetCommit v2+ and observes JoinGroup, counting how often it is asked. */
  function extension(handles = true): ProxyExtension & { asked: number } {
    const ext = {
      name: 'test',
      apiKeys: new Set([ApiKey.OffsetCommit, ApiKey.JoinGroup]),
      asked: 0,
      interceptsRequest(apiKey: number, apiVersion: number) {
        ext.asked++;
        return apiKey === ApiKey.OffsetCommit && apiVersion >= 2;
      },
      observesResponse(apiKey: number) {
        ext.asked++;
        return apiKey === ApiKey.JoinGroup;
      },
      ...(handles ? { handleRequest: () => Promise.resolve({ action: 'forward' as const }) } : {}),
    };
    return ext;
  }

  test('every pair: what it answers and observes is decoded, the rest as for the core alone', () => {
    const plans = new ApiPlans({ extension: extension(), streamFetch: true });
    for (const [apiKey, v] of everyVersion) {
      const answers = apiKey === ApiKey.OffsetCommit && v >= 2;
      const observes = apiKey === ApiKey.JoinGroup;
      const mayBeUnanswered = apiKey === ApiKey.Produce;
      let expected: ApiPlan = expectedCore(apiKey, v, true);
      if (answers)
        expected = { kind: 'answer-locally', forwarded: expectedAnswer(apiKey, v, true), mayBeUnanswered };
      if (observes) {
        expected = {
          kind: 'read',
          answer: { response: 'decode', legacySasl: false, coreRewrite: false, observed: true },
          mayBeUnanswered,
        };
      }
      expect({ apiKey, v, plan: plans.of(apiKey, v) }).toEqual({ apiKey, v, plan: expected });
    }
  });

  test('its APIs are decoded, so versions above the codec are refused, and capped in ApiVersions', () => {
    const plans = new ApiPlans({ extension: extension(), streamFetch: true });
    expect(plans.decoded.has(ApiKey.OffsetCommit)).toBe(true);
    expect(plans.decoded.has(ApiKey.JoinGroup)).toBe(true);
    const commitMax = apiCodecs.get(ApiKey.OffsetCommit)!.validVersions.max;
    expect(plans.of(ApiKey.OffsetCommit, commitMax + 1)).toEqual({ kind: 'refuse' });
    expect(plans.of(ApiKey.JoinGroup, apiCodecs.get(ApiKey.JoinGroup)!.validVersions.max + 1)).toEqual({
      kind: 'refuse',
    });
  });

  test('an extension without handleRequest answers nothing, though it intercepts', () => {
    const plans = new ApiPlans({ extension: extension(false), streamFetch: true });
    // Decoded (so checked), then forwarded.
    expect(plans.of(ApiKey.OffsetCommit, 8)).toEqual({
      kind: 'read',
      answer: { response: 'as-is' },
      mayBeUnanswered: false,
    });
  });

  test('it is asked once per pair and once per api for the versions outside the codec, never per request', () => {
    const ext = extension();
    const plans = new ApiPlans({ extension: ext, streamFetch: true });
    // ApiVersions above its range is answered by the core without asking.
    const expected = 2 * (everyVersion.length + 2 * apiCodecs.size - 1);
    expect(ext.asked).toBe(expected);
    for (let i = 0; i < 100; i++) plans.of(ApiKey.OffsetCommit, 8);
    expect(ext.asked).toBe(expected);
  });
});
