/**
 * What the proxy advertises in ApiVersions (api-versions.ts), decided without a broker: the
 * broker's answer is a plain object here. proxy-wire.test.ts and clients-compat.test.ts prove the
 * same with real brokers and clients.
 */
import { standaloneServiceOptions } from '../../test/harness/offset-service.js';
import { describe, expect, test } from 'vitest';
import { MemoryStore } from '../../backends/memory-store.js';
import type { ApiVersionsResponse } from '../../protocol/messages/api-versions-response.js';
import { defaultApiVersionsResponse } from '../../protocol/messages/api-versions-response.js';
import { ApiKey } from '../../protocol/messages/index.js';
import { OffsetService } from '../offsets/service.js';
import { ApiVersionsPolicy, codecRange } from './api-versions.js';
import type { ProxyExtension, VersionRange } from './extension.js';

type Entry = [apiKey: number, min: number, max: number];

function brokerSays(
  entries: Entry[],
  features: { name: string; min: number; max: number }[] = [],
): ApiVersionsResponse {
  return {
    ...defaultApiVersionsResponse(),
    apiKeys: entries.map(([apiKey, minVersion, maxVersion]) => ({ apiKey, minVersion, maxVersion })),
    supportedFeatures: features.map((f) => ({ name: f.name, minVersion: f.min, maxVersion: f.max })),
    finalizedFeatures: features.map((f) => ({
      name: f.name,
      minVersionLevel: f.min,
      maxVersionLevel: f.max,
    })),
  };
}

const advertised = (body: ApiVersionsResponse): Entry[] =>
  body.apiKeys.map((e) => [e.apiKey, e.minVersion, e.maxVersion]);

const max = (apiKey: number): number => codecRange(apiKey)!.max;

describe('ApiVersionsPolicy without an extension', () => {
  test("APIs the core decodes are cut to the codec's range; others pass as the broker says", () => {
    const body = brokerSays([
      [ApiKey.Metadata, 0, max(ApiKey.Metadata) + 5],
      [ApiKey.Fetch, 4, max(ApiKey.Fetch) + 1],
      [ApiKey.FindCoordinator, 0, 2],
      // Not decoded by the core: the broker's range stands, beyond the codec's too.
      [ApiKey.JoinGroup, 0, max(ApiKey.JoinGroup) + 3],
      [ApiKey.OffsetCommit, 2, 42],
      // A key no codec knows passes through.
      [9999, 0, 7],
    ]);
    new ApiVersionsPolicy(null).apply(body);
    expect(advertised(body)).toEqual([
      [ApiKey.Metadata, 0, max(ApiKey.Metadata)],
      [ApiKey.Fetch, 4, max(ApiKey.Fetch)],
      [ApiKey.FindCoordinator, 0, 2],
      [ApiKey.JoinGroup, 0, max(ApiKey.JoinGroup) + 3],
      [ApiKey.OffsetCommit, 2, 42],
      [9999, 0, 7],
    ]);
  });

  test('a decoded API with no version in common with the codec is hidden', () => {
    const body = brokerSays([
      [ApiKey.Metadata, max(ApiKey.Metadata) + 1, max(ApiKey.Metadata) + 2],
      [ApiKey.Heartbeat, 0, 4],
    ]);
    new ApiVersionsPolicy(null).apply(body);
    expect(advertised(body)).toEqual([[ApiKey.Heartbeat, 0, 4]]);
  });

  test('an error answer is left as it is', () => {
    const body = { ...brokerSays([[ApiKey.Metadata, 0, 99]]), errorCode: 35 };
    new ApiVersionsPolicy(null).apply(body);
    expect(advertised(body)).toEqual([[ApiKey.Metadata, 0, 99]]);
  });

  test('decodableMax: the codec maximum of decoded APIs only', () => {
    const policy = new ApiVersionsPolicy(null);
    expect(policy.decodableMax(ApiKey.Produce)).toBe(max(ApiKey.Produce));
    expect(policy.decodableMax(ApiKey.ApiVersions)).toBe(max(ApiKey.ApiVersions));
    expect(policy.decodableMax(ApiKey.JoinGroup)).toBeUndefined();
  });
});

describe('with an extension', () => {
  test("its API keys are cut to the codec's range; an API it serves gets the range it gives", () => {
    const seen: [number, VersionRange | undefined][] = [];
    const ext: ProxyExtension = {
      name: 'test',
      apiKeys: new Set([ApiKey.JoinGroup, ApiKey.OffsetCommit]),
      advertisedVersions: (apiKey, broker) => {
        seen.push([apiKey, broker]);
        return apiKey === ApiKey.OffsetCommit ? { min: 0, max: 3 } : undefined;
      },
    };
    const policy = new ApiVersionsPolicy(ext);
    const body = brokerSays([
      [ApiKey.JoinGroup, 0, max(ApiKey.JoinGroup) + 3],
      [ApiKey.OffsetCommit, 2, 42],
      [ApiKey.Heartbeat, 0, 9],
    ]);
    policy.apply(body);
    expect(advertised(body)).toEqual([
      [ApiKey.JoinGroup, 0, max(ApiKey.JoinGroup)],
      [ApiKey.OffsetCommit, 0, 3],
      [ApiKey.Heartbeat, 0, 9],
    ]);
    expect(seen).toContainEqual([ApiKey.OffsetCommit, { min: 2, max: 42 }]);
    expect(policy.decodableMax(ApiKey.JoinGroup)).toBe(max(ApiKey.JoinGroup));
  });

  test('the offset service serves the versions it reads, whatever the broker offers', () => {
    const service = new OffsetService({
      ...standaloneServiceOptions(new MemoryStore(), 'fence'),
    });
    // A Kafka 4 broker: OffsetCommit from v2 (KIP-896), newer versions than the codec.
    const body = brokerSays([
      [ApiKey.OffsetCommit, 2, 99],
      [ApiKey.OffsetFetch, 1, 99],
      [ApiKey.OffsetDelete, 0, 99],
      [ApiKey.JoinGroup, 0, 99],
      [ApiKey.DescribeGroups, 0, 99],
    ]);
    new ApiVersionsPolicy(service).apply(body);
    expect(advertised(body)).toEqual([
      // v10 (topic ids) served from the store, as the broker offers it.
      [ApiKey.OffsetCommit, 2, 10],
      [ApiKey.OffsetFetch, 1, 10],
      [ApiKey.OffsetDelete, 0, max(ApiKey.OffsetDelete)],
      // Observed, not served: cut to what the codec reads.
      [ApiKey.JoinGroup, 0, max(ApiKey.JoinGroup)],
      // Without a store group index the group tools' answers are not read.
      [ApiKey.DescribeGroups, 0, 99],
    ]);
    // Kafka 4 dropped OffsetCommit v0-1 (KIP-896), and the codec with them.
    expect(codecRange(ApiKey.OffsetCommit)!.min).toBe(2);
  });
});
