import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeResponseFrame, encodeRequestFrame, encodeResponseFrame } from '../../protocol/frames.js';
import { ApiKey, getApiCodec } from '../../protocol/messages/index.js';
import { defaultProduceRequest } from '../../protocol/messages/produce-request.js';
import { defaultProduceResponse } from '../../protocol/messages/produce-response.js';
import type { ProduceResponse } from '../../protocol/messages/produce-response.js';
import { connectionBed } from '../../test/harness/connection-bed.js';
import { produceResponses as response } from '../../test/harness/produce-responses.js';
import { rewriteBrokerAddresses } from './address-rewrite.js';
import { ApiPlans } from './api-plan.js';
import { canWalkProduceResponse, produceResponseHasNodeEndpoints } from './produce-endpoints.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';

/** The frame as the connection sees it: no size prefix. */
const frameOf = (version: number, body: ProduceResponse): Buffer =>
  encodeResponseFrame(ApiKey.Produce, version, 42, body).subarray(4);

// A codec update that adds a Produce version fails here: check ProduceResponse.json's notes for the
// new version's answer layout, then teach the walkers (this file's and frames.h's). Until then its
// answers are decoded whole, which is how Kafka 4.1+ clients' v13 lost the native relay.
it('every Produce version of the codec is one the walker knows', () => {
  const { max } = getApiCodec(ApiKey.Produce)!.validVersions;
  expect(canWalkProduceResponse(max)).toBe(true);
  expect(canWalkProduceResponse(max + 1)).toBe(false);
});

describe('produceResponseHasNodeEndpoints', () => {
  it('says true exactly when the codec decodes NodeEndpoints (property, v10 and v11)', () => {
    fc.assert(
      fc.property(fc.constantFrom(10, 11, 12, 13), response, (version, body) => {
        const frame = frameOf(version, body);
        const decoded = decodeResponseFrame(frame, ApiKey.Produce, version).body;
        expect(produceResponseHasNodeEndpoints(frame, version)).toBe(decoded.nodeEndpoints.length > 0);
      }),
      { numRuns: 400 },
    );
  });

  it('refuses what the codec refuses: every truncation and trailing bytes (property)', () => {
    fc.assert(
      fc.property(fc.constantFrom(10, 11, 12, 13), response, fc.nat(), (version, body, cut) => {
        const frame = frameOf(version, body);
        const short = frame.subarray(0, cut % frame.length);
        expect(() => decodeResponseFrame(short, ApiKey.Produce, version)).toThrow();
        expect(() => produceResponseHasNodeEndpoints(short, version)).toThrow();
        const long = Buffer.concat([frame, Buffer.from([0])]);
        expect(() => decodeResponseFrame(long, ApiKey.Produce, version)).toThrow();
        expect(() => produceResponseHasNodeEndpoints(long, version)).toThrow();
      }),
      { numRuns: 200 },
    );
  });

  it('walks only the versions whose layout it knows', () => {
    expect([8, 9, 10, 11, 12, 13, 14].map(canWalkProduceResponse)).toEqual([
      false,
      false,
      true,
      true,
      true,
      true,
      false,
    ]);
    expect(() => produceResponseHasNodeEndpoints(Buffer.alloc(8), 9)).toThrow(/cannot walk Produce v9/);
  });
});

/** Plans that rewrite Produce v10+ answers only, as the proxy does. */
const producePlans = (): ApiPlans =>
  new ApiPlans({
    extension: null,
    streamFetch: false,
    rewrites: (apiKey, apiVersion) => apiKey === ApiKey.Produce && apiVersion >= 10,
  });

describe('a ProxyConnection relaying Produce v11', () => {
  const produce = (correlationId: number): Buffer =>
    encodeRequestFrame(
      { apiKey: ApiKey.Produce, apiVersion: 11, correlationId, clientId: 't' },
      { ...defaultProduceRequest(), acks: -1 },
    );
  const answer = (nodeEndpoints: ProduceResponse['nodeEndpoints']): ProduceResponse => ({
    ...defaultProduceResponse(),
    responses: [
      {
        name: 'orders',
        topicId: ZERO_UUID,
        partitionResponses: [
          {
            index: 0,
            errorCode: nodeEndpoints.length > 0 ? 6 : 0, // NOT_LEADER_OR_FOLLOWER names the new leader
            baseOffset: 10n,
            logAppendTimeMs: -1n,
            logStartOffset: 0n,
            recordErrors: [],
            errorMessage: null,
            currentLeader: { leaderId: nodeEndpoints[0]?.nodeId ?? -1, leaderEpoch: 3 },
          },
        ],
      },
    ],
    nodeEndpoints,
  });

  it('passes responses without NodeEndpoints through untouched, and rewrites the others', async () => {
    const frames = new Map<number, Buffer>([
      [1, encodeResponseFrame(ApiKey.Produce, 11, 1, answer([]))],
      [
        2,
        encodeResponseFrame(
          ApiKey.Produce,
          11,
          2,
          answer([{ nodeId: 2, host: 'broker-2', port: 9092, rack: null }]),
        ),
      ],
      [3, encodeResponseFrame(ApiKey.Produce, 11, 3, answer([]))],
    ]);
    const rewritten: number[] = [];
    const bed = await connectionBed((id) => frames.get(id)!, {
      plans: producePlans(),
      rewriteResponse: (response) => {
        if (response.apiKey === ApiKey.Produce) rewritten.push(response.body.nodeEndpoints.length);
        rewriteBrokerAddresses(response, (nodeId) => ({ host: 'proxy', port: 30000 + nodeId }));
        return Promise.resolve(true);
      },
    });
    try {
      bed.client.write(Buffer.concat([produce(1), produce(2), produce(3)]));
      const [one, two, three] = [1, 2, 3].map((id) => frames.get(id)!);
      for (let i = 0; i < 200 && bed.received().length < one!.length + three!.length + 20; i++) {
        await new Promise((r) => setTimeout(r, 10));
      }
      const got = bed.received();
      // Only the response that names a broker was decoded and rewritten.
      expect(rewritten).toEqual([1]);
      expect(got.subarray(0, one!.length).equals(one!)).toBe(true);
      const secondSize = got.readInt32BE(one!.length);
      const second = got.subarray(one!.length + 4, one!.length + 4 + secondSize);
      expect(decodeResponseFrame(second, ApiKey.Produce, 11).body.nodeEndpoints).toEqual([
        { nodeId: 2, host: 'proxy', port: 30002, rack: null },
      ]);
      expect(two!.length).toBeGreaterThan(0);
      expect(got.subarray(one!.length + 4 + secondSize).equals(three!)).toBe(true);
    } finally {
      await bed.stop();
    }
  });

  it('closes the connection pair on a malformed response, as before the walk', async () => {
    const good = encodeResponseFrame(ApiKey.Produce, 11, 1, answer([]));
    const bad = Buffer.concat([good, Buffer.from([0, 0])]);
    bad.writeInt32BE(bad.length - 4, 0);
    const bed = await connectionBed(() => bad, {
      plans: producePlans(),
    });
    try {
      bed.client.write(produce(1));
      await bed.closed;
      expect(bed.received().length).toBe(0);
    } finally {
      await bed.stop();
    }
  });
});
