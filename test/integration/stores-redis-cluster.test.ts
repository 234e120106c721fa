// The Redis store against a real 3-master Redis Cluster: every group's keys share one slot
// (the Lua script would fail with CROSSSLOT otherwise), and listGroups scans every master.
import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runStoreContract } from '../../backends/contract.js';
import { RedisStore } from '../../backends/redis-store.js';
import { startRedisCluster } from '../bed/redis.js';
import type { RedisCluster } from '../bed/redis.js';
import { redisCommand } from '../bed/resp.js';

let cluster: RedisCluster;
beforeAll(async () => {
  cluster = await startRedisCluster();
});
afterAll(async () => {
  await cluster?.stop();
});

runStoreContract('redis cluster', async () => new RedisStore(cluster.url, { operationTimeoutMs: 5000 }));

describe('redis store on a cluster', () => {
  it('spreads groups over many hash slots (so over the masters) and still lists them all', async () => {
    const store = new RedisStore(cluster.url);
    const raw = new Cluster(cluster.nodes);
    try {
      const groups = Array.from({ length: 30 }, (_, i) => `spread-${i}`);
      for (const g of groups) {
        expect(
          await store.commit({
            group: g,
            writes: [
              {
                topic: 't',
                partition: 0,
                offset: 1n,
                leaderEpoch: -1,
                metadata: '',
                commitTimestamp: 0n,
                expireTimestamp: -1n,
              },
            ],
            requestId: `${g}-1`,
          }),
        ).toEqual({ status: 'ok' });
      }
      const slots = new Set(
        await Promise.all(groups.map((g) => raw.call('CLUSTER', 'KEYSLOT', `kop:{g:${g}}:offsets`))),
      );
      expect(slots.size).toBeGreaterThan(10);
      expect(await store.listGroups()).toEqual(expect.arrayContaining(groups));
    } finally {
      raw.disconnect();
      await store.close();
    }
  });

  it('keeps a marker on every master, and one master flushed loses exactly its own', async () => {
    const store = new RedisStore(cluster.url);
    const other = new RedisStore(cluster.url);
    try {
      await store.ping();
      await other.ping();
      const markers = await store.ensureMarker('first');
      const masters = (await cluster.topology()).filter((n) => n.role === 'master' && !n.failing);
      expect(markers.size).toBe(masters.length);
      const owners = await Promise.all(
        [...markers.keys()].map(async (key) => {
          const slot = Number(
            await redisCommand('127.0.0.1', masters[0]!.port, `CLUSTER KEYSLOT ${key}`).then((r) =>
              r.slice(1),
            ),
          );
          return masters.find((m) => m.slots.some(([a, b]) => slot >= a && slot <= b))!.port;
        }),
      );
      expect(new Set(owners).size).toBe(masters.length);
      // Set-if-absent: a second proxy finds the first one's markers.
      expect([...(await other.ensureMarker('second')).values()]).toEqual(masters.map(() => 'first'));
      await redisCommand('127.0.0.1', owners[1]!, 'FLUSHALL');
      const after = await store.readMarker();
      expect([...after.values()]).toEqual(owners.map((_, i) => (i === 1 ? null : 'first')));
    } finally {
      await store.close();
      await other.close();
    }
  });
});
