// Any ProduceResponse the codec can encode, with or without NodeEndpoints and unknown tagged
// fields: for the tests of the two Produce walks (proxy/core/produce-endpoints.ts, native/relay.c).
import fc from 'fast-check';
import type { ProduceResponse } from '../../protocol/messages/produce-response.js';
import { ZERO_UUID } from '../../protocol/generated-support.js';

const text = fc.string({ unit: 'grapheme', maxLength: 12 });
const tagged = fc.option(
  fc.array(
    fc.record({
      tag: fc.integer({ min: 1, max: 300 }),
      data: fc.uint8Array({ maxLength: 6 }).map((a) => Buffer.from(a)),
    }),
    { minLength: 1, maxLength: 2 },
  ),
  { nil: undefined },
);

/** Any ProduceResponse the codec can encode, with or without NodeEndpoints and unknown tags. */
export const produceResponses: fc.Arbitrary<ProduceResponse> = fc
  .record({
    responses: fc.array(
      fc.record({
        name: text,
        topicId: fc.constant(ZERO_UUID),
        partitionResponses: fc.array(
          fc.record({
            index: fc.integer({ min: -1, max: 1000 }),
            errorCode: fc.integer({ min: -1, max: 130 }),
            baseOffset: fc.bigInt({ min: -1n, max: 2n ** 62n }),
            logAppendTimeMs: fc.bigInt({ min: -1n, max: 2n ** 45n }),
            logStartOffset: fc.bigInt({ min: -1n, max: 2n ** 40n }),
            recordErrors: fc.array(
              fc.record({
                batchIndex: fc.integer({ min: 0, max: 100 }),
                batchIndexErrorMessage: fc.option(text),
              }),
              { maxLength: 2 },
            ),
            errorMessage: fc.option(text),
            currentLeader: fc.record({
              leaderId: fc.integer({ min: -1, max: 5 }),
              leaderEpoch: fc.integer({ min: -1, max: 50 }),
            }),
          }),
          { maxLength: 3 },
        ),
      }),
      { maxLength: 3 },
    ),
    throttleTimeMs: fc.integer({ min: 0, max: 1000 }),
    nodeEndpoints: fc.array(
      fc.record({
        nodeId: fc.integer({ min: 0, max: 5 }),
        host: text,
        port: fc.integer({ min: 1, max: 65535 }),
        rack: fc.option(text),
      }),
      { maxLength: 2 },
    ),
    unknown: tagged,
  })
  .map(({ unknown, ...body }) => (unknown ? { ...body, _unknownTaggedFields: unknown } : body));
