// The shared store contract through Sentinel (redis+sentinel://): the store finds the primary by
// asking the sentinels, and every operation, names included, behaves as on a standalone server.
import { afterAll, beforeAll } from 'vitest';
import { runStoreContract } from '../../backends/contract.js';
import { RedisStore } from '../../backends/redis-store.js';
import { startRedisSentinel } from '../bed/redis.js';
import type { RedisSentinelSet } from '../bed/redis.js';

let set: RedisSentinelSet;
beforeAll(async () => {
  set = await startRedisSentinel({ sentinels: 1 });
});
afterAll(async () => {
  await set?.stop();
});

runStoreContract('redis sentinel', async () => new RedisStore(set.url, { operationTimeoutMs: 5000 }));
