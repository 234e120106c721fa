import fs from 'node:fs';
import path from 'node:path';
import { Cluster, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { startRedis, startRedisCluster } from '../bed/redis.js';
import type { RedisCluster, RedisServer } from '../bed/redis.js';
import { redisCommand } from '../bed/resp.js';

describe('bed: Redis from the global setup', () => {
  it('answers set/get at the provided url', async () => {
    const client = new Redis(inject('redisUrl'), { lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await client.connect();
      await client.set('bed:global', 'hello');
      expect(await client.get('bed:global')).toBe('hello');
    } finally {
      client.disconnect();
    }
  });
});

describe('bed: standalone Redis with AOF', () => {
  let server: RedisServer;
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    await server?.kill();
  });

  it('persists writes in the AOF and keeps them across a SIGKILL and restart', async () => {
    const client = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await client.connect();
    for (let i = 0; i < 20; i++) await client.set(`k${i}`, `v${i}`);
    client.disconnect();

    // Redis 7 keeps the AOF as a directory of base/incr files plus a manifest.
    const aofDir = path.join(server.dataDir, 'appendonlydir');
    const aofFiles = fs.readdirSync(aofDir).filter((f) => f.endsWith('.aof'));
    expect(aofFiles.length).toBeGreaterThan(0);
    const totalSize = aofFiles.reduce((sum, f) => sum + fs.statSync(path.join(aofDir, f)).size, 0);
    expect(totalSize).toBeGreaterThan(0);

    const pidBefore = server.pid;
    await server.kill();
    expect(server.pid).toBeUndefined();
    await expect(redisCommand(server.host, server.port, 'PING')).rejects.toThrow();
    await server.start();
    expect(server.pid).not.toBe(pidBefore);

    const again = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    try {
      await again.connect();
      expect(await again.get('k0')).toBe('v0');
      expect(await again.get('k19')).toBe('v19');
      expect(await again.dbsize()).toBe(20);
    } finally {
      again.disconnect();
    }
  });

  it('stop() shuts down cleanly and start() serves the same data', async () => {
    const client = new Redis(server.url, { lazyConnect: true, maxRetriesPerRequest: 1 });
    await client.connect();
    await client.set('after-clean-stop', 'yes');
    client.disconnect();
    await server.stop();
    await server.start();
    expect(await redisCommand(server.host, server.port, 'GET after-clean-stop')).toBe('yes');
  });
});

describe('bed: Redis Cluster with 3 masters', () => {
  let cluster: RedisCluster;
  beforeAll(async () => {
    cluster = await startRedisCluster();
  });
  afterAll(async () => {
    await cluster?.stop();
  });

  it('reports cluster_state:ok on every node and has 3 masters', async () => {
    expect(cluster.nodes).toHaveLength(3);
    expect(cluster.url).toBe(`redis+cluster://${cluster.nodes.map((n) => `${n.host}:${n.port}`).join(',')}`);
    for (const node of cluster.nodes) {
      const info = await redisCommand(node.host, node.port, 'CLUSTER INFO');
      expect(info).toContain('cluster_state:ok');
      expect(info).toContain('cluster_size:3');
    }
  });

  it('spreads keys over the 3 masters', async () => {
    const client = new Cluster(cluster.nodes, { redisOptions: { maxRetriesPerRequest: 1 } });
    try {
      for (let i = 0; i < 60; i++) await client.set(`spread:${i}`, String(i));
      expect(await client.get('spread:42')).toBe('42');
    } finally {
      client.disconnect();
    }
    const sizes = await Promise.all(
      cluster.nodes.map(async (n) => Number((await redisCommand(n.host, n.port, 'DBSIZE')).slice(1))),
    );
    expect(sizes.reduce((a, b) => a + b, 0)).toBe(60);
    for (const size of sizes) expect(size).toBeGreaterThan(0);
  });
});
