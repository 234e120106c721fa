// ApiVersions parity: every API a real broker offers is offered through the proxy (offset service
// on, as shipped) with the broker's highest version, on the newest and the oldest supported Kafka.
// The only exceptions are the ones docs/protocol.md lists, with their reason; the test reads that
// list from the document, so the document and the proxy cannot drift apart.
import fs from 'node:fs';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { MemoryStore } from '../../backends/memory-store.js';
import { ApiVersionsPolicy } from '../../proxy/core/api-versions.js';
import { ErrorCode } from '../../protocol/error-codes.js';
import { decodeResponseFrame } from '../../protocol/frames.js';
import type { ApiVersionsResponse } from '../../protocol/messages/api-versions-response.js';
import { ApiKey, apiCodecs } from '../../protocol/messages/index.js';
import { KAFKA_COMPAT_VERSION, KAFKA_VERSION, startKafka } from '../bed/kafka.js';
import type { KafkaCluster } from '../bed/kafka.js';
import { startOffsetProxy } from '../harness/offset-proxy.js';
import type { OffsetProxy } from '../harness/offset-proxy.js';
import { RawClient, apiVersionsRequest } from '../harness/raw-client.js';

type Ranges = Map<number, { min: number; max: number }>;

/** The ApiVersions answer, asked as a client asks: at its newest version, then lower if refused. */
async function apiVersionsOf(bootstrap: string): Promise<Ranges> {
  const client = await RawClient.connect(bootstrap);
  try {
    let version = apiCodecs.get(ApiKey.ApiVersions)!.validVersions.max;
    for (let correlationId = 1; ; correlationId++) {
      client.write(apiVersionsRequest(version, correlationId));
      const [frame] = await client.read(1);
      const body = decodeResponseFrame(frame!, ApiKey.ApiVersions, version).body as ApiVersionsResponse;
      const own = body.apiKeys.find((k) => k.apiKey === ApiKey.ApiVersions);
      if (body.errorCode === ErrorCode.UNSUPPORTED_VERSION && own && own.maxVersion < version) {
        version = own.maxVersion; // a 3.9 broker knows ApiVersions up to v4
        continue;
      }
      expect(body.errorCode).toBe(0);
      return new Map(body.apiKeys.map((k) => [k.apiKey, { min: k.minVersion, max: k.maxVersion }]));
    }
  } finally {
    client.close();
  }
}

/**
 * docs/protocol.md's table of APIs offered below the broker's highest version: rows
 * `| Name | highest offered | reason |` under the heading "Versions capped below the broker's".
 */
function documentedCaps(): Map<string, number> {
  const doc = fs.readFileSync(new URL('../../docs/protocol.md', import.meta.url), 'utf8');
  const section = doc.split(/^## Versions capped below the broker's$/m)[1]?.split(/^## /m)[0];
  expect(section, 'docs/protocol.md lists the capped versions').toBeDefined();
  const caps = new Map<string, number>();
  for (const m of section!.matchAll(/^\| `(\w+)` \| (\d+) \|/gm)) caps.set(m[1]!, Number(m[2]));
  return caps;
}

const nameOf = (apiKey: number): string => apiCodecs.get(apiKey)?.name ?? `unknown_${apiKey}`;

function compare(broker: Ranges, proxied: Ranges): void {
  const caps = documentedCaps();
  const problems: string[] = [];
  for (const [apiKey, b] of broker) {
    const p = proxied.get(apiKey);
    const name = nameOf(apiKey);
    if (p === undefined) {
      problems.push(`${name}(${apiKey}) ${b.min}-${b.max} is not offered through the proxy`);
      continue;
    }
    if (p.min > p.max) problems.push(`${name}: empty range ${p.min}-${p.max}`);
    const expected = caps.has(name) ? Math.min(caps.get(name)!, b.max) : b.max;
    if (p.max !== expected) problems.push(`${name}: broker ${b.min}-${b.max}, proxy ${p.min}-${p.max}`);
  }
  for (const apiKey of proxied.keys()) {
    if (!broker.has(apiKey)) problems.push(`${nameOf(apiKey)} offered by the proxy, not by the broker`);
  }
  expect(problems).toEqual([]);
}

for (const version of [KAFKA_VERSION, KAFKA_COMPAT_VERSION]) {
  describe(`ApiVersions through the proxy, Kafka ${version} at its defaults`, () => {
    let cluster: KafkaCluster | null = null;
    let bootstrap: string;
    let proxy: OffsetProxy;
    beforeAll(async () => {
      if (version === KAFKA_VERSION) bootstrap = inject('kafkaBootstrap');
      else {
        cluster = await startKafka({ version });
        bootstrap = cluster.bootstrap;
      }
      proxy = await startOffsetProxy(bootstrap, new MemoryStore());
    });
    afterAll(async () => {
      await proxy?.stop();
      await cluster?.stop();
    });

    test("every API the broker offers, at the broker's highest version but for the documented caps", async () => {
      const broker = await apiVersionsOf(bootstrap);
      const proxied = await apiVersionsOf(proxy.bootstrap);
      if (version === KAFKA_VERSION) {
        // The 4.4 broker at its defaults offers share groups and streams groups.
        for (const k of [ApiKey.ShareFetch, ApiKey.ShareAcknowledge, ApiKey.StreamsGroupHeartbeat]) {
          expect(broker.get(k), nameOf(k)).toBeDefined();
        }
      }
      compare(broker, proxied);
    });

    test("a broker API the codec does not know passes at the broker's versions", () => {
      // Every key of a newer broker the codec lacks is relayed unread: nothing hides it. Checked on
      // the policy with a key no Kafka has yet, since both pinned brokers are within the codec.
      const unknown = 4000;
      expect(apiCodecs.has(unknown)).toBe(false);
      const body: ApiVersionsResponse = {
        errorCode: 0,
        apiKeys: [{ apiKey: unknown, minVersion: 0, maxVersion: 3 }],
        throttleTimeMs: 0,
        supportedFeatures: [],
        finalizedFeaturesEpoch: -1n,
        finalizedFeatures: [],
        zkMigrationReady: false,
      };
      new ApiVersionsPolicy(proxy.offsets.service).apply(body);
      expect(body.apiKeys).toEqual([{ apiKey: unknown, minVersion: 0, maxVersion: 3 }]);
    });
  });
}
