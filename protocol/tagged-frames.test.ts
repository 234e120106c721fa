// Bodies tagged with their API key: decoded by that key's codec, and a request paired only with
// an answer of the same API.
import { expect, test } from 'vitest';
import { encodeRequestFrame, encodeResponseFrame } from './frames.js';
import { ApiKey } from './messages/index.js';
import { defaultMetadataRequest } from './messages/metadata-request.js';
import { defaultMetadataResponse } from './messages/metadata-response.js';
import { defaultOffsetFetchResponse } from './messages/offset-fetch-response.js';
import { ZERO_UUID } from './generated-support.js';
import { decodeTaggedRequest, decodeTaggedResponse, exchangeOf } from './tagged-frames.js';

const request = () =>
  decodeTaggedRequest(
    encodeRequestFrame(
      { apiKey: ApiKey.Metadata, apiVersion: 12, correlationId: 1, clientId: 'c' },
      {
        ...defaultMetadataRequest(),
        topics: [{ name: 't', topicId: ZERO_UUID }],
      },
    ).subarray(4),
  );

test('a request and its answer, narrowed by their API key', () => {
  const r = request();
  expect(r.apiKey).toBe(ApiKey.Metadata);
  if (r.apiKey !== ApiKey.Metadata) throw new Error('not Metadata');
  expect(r.body.topics?.map((t) => t.name)).toEqual(['t']);
  const frame = encodeResponseFrame(ApiKey.Metadata, 12, 1, { ...defaultMetadataResponse(), clusterId: 'k' });
  const { response, bodyVersion } = decodeTaggedResponse(frame.subarray(4), ApiKey.Metadata, 12);
  expect(bodyVersion).toBe(12);
  const exchange = exchangeOf(r, response);
  if (exchange.apiKey !== ApiKey.Metadata) throw new Error('not Metadata');
  expect([exchange.request.topics?.[0]?.name, exchange.response.clusterId]).toEqual(['t', 'k']);
});

test('an answer of another API is not paired with the request', () => {
  const frame = encodeResponseFrame(ApiKey.OffsetFetch, 1, 1, defaultOffsetFetchResponse());
  const { response } = decodeTaggedResponse(frame.subarray(4), ApiKey.OffsetFetch, 1);
  expect(() => exchangeOf(request(), response)).toThrow('api 9 answer paired with an api 3 request');
});
