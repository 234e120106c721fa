// The offset service end to end on the embedded store: unchanged clients commit and fetch through
// the proxy, the offsets live in the store, and the broker holds none for the group.
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { createTopics, fetchCommittedOffsets, kafkajsClient } from '../bed/clients/kafkajs.js';
import { commitStopResume } from '../bed/clients/scenarios.js';
import { decodeResponseFrame, encodeRequestFrame } from '../../protocol/frames.js';
import { ApiKey } from '../../protocol/messages/index.js';
import type { OffsetFetchResponse } from '../../protocol/messages/offset-fetch-response.js';
import { defaultOffsetFetchRequest } from '../../protocol/messages/offset-fetch-request.js';
import { startOffsetProxy } from '../harness/offset-proxy.js';
import type { OffsetProxy } from '../harness/offset-proxy.js';
import { RawClient } from '../harness/raw-client.js';
import { commitBody } from '../reliability/commit-checker.js';

describe('offsets on the embedded store, single broker', () => {
  const brokerBootstrap = inject('kafkaBootstrap');
  let dir: string;
  let store: EmbeddedStore;
  let proxy: OffsetProxy;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'kop-embedded-'));
    store = new EmbeddedStore({ dataDir: dir });
    proxy = await startOffsetProxy(brokerBootstrap, store);
  });
  afterAll(async () => {
    await proxy?.stop();
    await store?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('kafkajs commits go to the store, not to the broker, and a new consumer resumes there', async () => {
    const report = await commitStopResume(kafkajsClient, { bootstrap: proxy.bootstrap });
    const stored = await store.fetch(report.group, null);
    expect(stored.length).toBeGreaterThan(0);
    const total = stored.reduce((sum, o) => sum + Number(o.offset), 0);
    expect(total).toBe(1010); // 1,000 records then 10 more, all consumed and committed
    const atBroker = await fetchCommittedOffsets({ bootstrap: brokerBootstrap }, report.group, report.topic);
    expect(atBroker.filter((c) => c.offset >= 0)).toEqual([]);
  });

  test('a fetch pipelined right after a commit on one connection sees that commit, as at a broker', async () => {
    // A broker handles one request of a connection at a time. The proxy once answered pipelined
    // requests concurrently, and an LMDB write is applied after the event-loop turn: the fetch
    // read the old offset (2,987 of 3,000 in the load run's generator).
    const group = `ryw-${Date.now()}`;
    // A topic the cluster has: commits to others are refused as a broker refuses them.
    const topic = `ryw-topic-${Date.now()}`;
    await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 1 }]);
    const client = await RawClient.connect(proxy.bootstrap);
    try {
      const frames: Buffer[] = [];
      const n = 300;
      for (let i = 1; i <= n; i++) {
        frames.push(
          encodeRequestFrame(
            { apiKey: ApiKey.OffsetCommit, apiVersion: 8, correlationId: 2 * i, clientId: 'ryw' },
            commitBody(group, topic, 1, BigInt(i)) as never,
          ),
          encodeRequestFrame(
            { apiKey: ApiKey.OffsetFetch, apiVersion: 7, correlationId: 2 * i + 1, clientId: 'ryw' },
            {
              ...defaultOffsetFetchRequest(),
              groupId: group,
              topics: [{ name: topic, partitionIndexes: [0] }],
            },
          ),
        );
      }
      client.write(Buffer.concat(frames));
      const answers = await client.read(2 * n, 30_000);
      const seen = answers
        .filter((_, k) => k % 2 === 1)
        .map(
          (f) =>
            (decodeResponseFrame(f, ApiKey.OffsetFetch, 7).body as OffsetFetchResponse).topics[0]!
              .partitions[0]!.committedOffset,
        );
      expect(seen).toEqual(Array.from({ length: n }, (_, k) => BigInt(k + 1)));
    } finally {
      client.close();
    }
  });
});
