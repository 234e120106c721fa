import { describe, expect, test } from 'vitest';
import { ApiKey, getApiCodec } from '../../protocol/messages/index.js';
import { ownMaxVersion } from './own-versions.js';

describe("the proxy's own request versions", () => {
  test('each cap is a version the codec reads, so a Kafka 4.4 or 3.9 broker always has one in common', () => {
    for (const [name, apiKey] of Object.entries(ApiKey)) {
      const cap = ownMaxVersion(apiKey);
      if (cap === undefined) continue;
      const codec = getApiCodec(apiKey)!.validVersions;
      expect(cap >= codec.min && cap <= codec.max, name).toBe(true);
    }
  });

  test('the offset APIs stay below v10, whose topics are named by id', () => {
    expect(ownMaxVersion(ApiKey.OffsetFetch)).toBe(9);
    expect(ownMaxVersion(ApiKey.OffsetCommit)).toBe(9);
    expect(ownMaxVersion(ApiKey.DescribeGroups)).toBe(5);
  });
});
