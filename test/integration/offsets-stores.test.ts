// The offset service on each external store, end to end through the proxy: a kafkajs group
// commits through the proxy, and the offsets are found by reading Redis, Redis Cluster and
// ZooKeeper directly (Kafka 0.8's znode layout for ZooKeeper). Also: two proxies sharing one Redis
// serve one group consistently, and a store that goes down mid-run costs retries, never data.
import { Redis, Cluster } from 'ioredis';
import zookeeper from 'node-zookeeper-client';
import { afterAll, beforeAll, describe, expect, inject, test } from 'vitest';
import { openStore } from '../../backends/open-store.js';
import type { OffsetStore } from '../../backends/store.js';
import { createTopics, fetchCommittedOffsets, kafkajsClient } from '../bed/clients/kafkajs.js';
import { commitStopResume, expectExactlyRecords, uniqueName } from '../bed/clients/scenarios.js';
import { startRedis, startRedisCluster } from '../bed/redis.js';
import type { RedisCluster, RedisServer } from '../bed/redis.js';
import { startOffsetProxy } from '../harness/offset-proxy.js';

function zkGet(connect: string, path: string): Promise<string> {
  const client = zookeeper.createClient(connect);
  return new Promise((resolve, reject) => {
    client.once('connected', () => {
      client.getData(path, (err, data) => {
        client.close();
        if (err) reject(err);
        else resolve(data?.toString('utf8') ?? '');
      });
    });
    client.connect();
  });
}

/** kafkajs commits through a proxy on `store`; returns the group, topic and per-partition offsets. */
async function groupThroughProxy(brokerBootstrap: string, store: OffsetStore) {
  const proxy = await startOffsetProxy(brokerBootstrap, store);
  try {
    const report = await commitStopResume(
      kafkajsClient,
      { bootstrap: proxy.bootstrap },
      { admin: { bootstrap: brokerBootstrap } },
    );
    const stored = await store.fetch(report.group, null);
    expect(stored.reduce((sum, o) => sum + Number(o.offset), 0)).toBe(1010);
    expect(await fetchCommittedOffsets({ bootstrap: brokerBootstrap }, report.group, report.topic)).toEqual(
      [],
    );
    return { ...report, stored };
  } finally {
    await proxy.stop();
  }
}

describe('offsets in external stores through the proxy', () => {
  const brokerBootstrap = inject('kafkaBootstrap');

  test("Redis standalone: offsets are in the group's hash", async () => {
    const url = inject('redisUrl');
    const store = await openStore(url);
    try {
      const { group, topic, stored } = await groupThroughProxy(brokerBootstrap, store);
      const redis = new Redis(url);
      try {
        const hash = await redis.hgetall(`kop:{g:${group}}:offsets`);
        for (const o of stored) {
          expect(hash[`${topic}:${o.partition}`]?.split('|')[0]).toBe(String(o.offset));
        }
      } finally {
        redis.disconnect();
      }
    } finally {
      await store.close();
    }
  });

  describe('Redis Cluster', () => {
    let cluster: RedisCluster;
    beforeAll(async () => {
      cluster = await startRedisCluster();
    });
    afterAll(async () => {
      await cluster?.stop();
    });

    test('offsets are in one hash slot per group', async () => {
      const store = await openStore(cluster.url);
      try {
        const { group, topic, stored } = await groupThroughProxy(brokerBootstrap, store);
        const client = new Cluster(cluster.nodes);
        try {
          const hash = await client.hgetall(`kop:{g:${group}}:offsets`);
          for (const o of stored)
            expect(hash[`${topic}:${o.partition}`]?.split('|')[0]).toBe(String(o.offset));
        } finally {
          client.disconnect();
        }
      } finally {
        await store.close();
      }
    });
  });

  test('ZooKeeper: offsets at /consumers/<group>/offsets/<topic>/<partition>, as Kafka 0.8 wrote them', async () => {
    const connect = inject('zkConnect');
    const store = await openStore(`zk://${connect}`);
    try {
      const { group, topic, stored } = await groupThroughProxy(brokerBootstrap, store);
      for (const o of stored) {
        expect(await zkGet(connect, `/consumers/${group}/offsets/${topic}/${o.partition}`)).toBe(
          String(o.offset),
        );
      }
    } finally {
      await store.close();
    }
  });

  test('two proxy instances sharing one Redis serve one group consistently', async () => {
    const url = inject('redisUrl');
    const storeA = await openStore(url);
    const storeB = await openStore(url);
    const proxyA = await startOffsetProxy(brokerBootstrap, storeA);
    const proxyB = await startOffsetProxy(brokerBootstrap, storeB);
    try {
      const topic = uniqueName('two-proxies');
      const group = `${topic}-g`;
      await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 4 }]);
      await kafkajsClient.produce({ bootstrap: proxyA.bootstrap }, { topic, count: 400 });
      // The group's first half is consumed through proxy A, the rest through proxy B.
      const first = await kafkajsClient.consume({ bootstrap: proxyA.bootstrap }, { topic, group, max: 200 });
      const second = await kafkajsClient.consume({ bootstrap: proxyB.bootstrap }, { topic, group, max: 200 });
      expectExactlyRecords([...first.records, ...second.records], 0, 400);
      // Both proxies read the same committed offsets.
      expect(second.committed.reduce((s, o) => s + o.offset, 0)).toBe(400);
      const viaA = await fetchCommittedOffsets({ bootstrap: proxyA.bootstrap }, group, topic);
      expect(viaA).toEqual(second.committed);
      // The generation proxy B recorded fences commits arriving through proxy A.
      const state = await storeA.getGroup(group);
      expect(state?.generationId).toBeGreaterThanOrEqual(2);
    } finally {
      await proxyA.stop();
      await proxyB.stop();
      await storeA.close();
      await storeB.close();
    }
  });

  describe('a store that goes down mid-run', () => {
    let redis: RedisServer;
    beforeAll(async () => {
      redis = await startRedis();
    });
    afterAll(async () => {
      await redis?.kill();
    });

    test('commits get retriable errors while Redis is down; the consumer carries on and nothing acknowledged is lost', async () => {
      const store = await openStore(redis.url, { operationTimeoutMs: 1000 });
      const proxy = await startOffsetProxy(brokerBootstrap, store, ['--store-timeout-ms', '1000']);
      try {
        const topic = uniqueName('store-down');
        const group = `${topic}-g`;
        await createTopics({ bootstrap: brokerBootstrap }, [{ topic, partitions: 2 }]);
        await kafkajsClient.produce({ bootstrap: proxy.bootstrap }, { topic, count: 300 });
        const first = await kafkajsClient.consume({ bootstrap: proxy.bootstrap }, { topic, group, max: 100 });
        const acknowledged = first.committed;
        expect(acknowledged.reduce((s, o) => s + o.offset, 0)).toBe(100);

        await redis.kill();
        // While Redis is down the consumer cannot commit; restart Redis shortly after it starts.
        const restart = new Promise<void>((resolve) =>
          setTimeout(() => void redis.start().then(resolve), 3000),
        );
        const second = await kafkajsClient.consume(
          { bootstrap: proxy.bootstrap },
          { topic, group, max: 200, timeoutMs: 60_000 },
        );
        await restart;
        expect(second.timedOut).toBe(false);
        // Resumed where the acknowledged commits were, and finished: nothing lost, nothing repeated.
        expectExactlyRecords([...first.records, ...second.records], 0, 300);
        const stored = await store.fetch(group, null);
        expect(stored.reduce((s, o) => s + Number(o.offset), 0)).toBe(300);
      } finally {
        await proxy.stop();
        await store.close();
      }
    });
  });
});
