/**
 * The Redis store's ioredis client for a parsed URL: a plain connection, one through Sentinel, or a
 * Cluster client. The options are the store's failure behaviour (how fast a command gives up while
 * Redis is away, how it reconnects), so they live here, each with its reason.
 */
import { Cluster, Redis } from 'ioredis';
import type { RedisOptions } from 'ioredis';
import type { RedisTarget } from './redis-url.js';

/** `timeoutMs`: the store's per-operation deadline, also the connect timeout. */
export function createRedisClient(t: RedisTarget, timeoutMs: number): Redis | Cluster {
  const common: RedisOptions = {
    username: t.username,
    password: t.password,
    ...(t.tls ? { tls: {} } : {}),
    connectTimeout: timeoutMs,
    // Fail fast while Redis is down: one retry per command, then the command rejects (our
    // per-operation deadline bounds the rest). Queued commands still go out after a quick reconnect.
    maxRetriesPerRequest: 1,
    enableOfflineQueue: true,
    retryStrategy: (attempt: number) => Math.min(50 * attempt, 1000),
    // Each command goes out as soon as it is issued, not at the end of the event-loop turn:
    // Redis starts on the first commit while the proxy still decodes the next ones, so the two
    // processes work side by side instead of taking turns with whole batches (with 32 closed-loop
    // clients, the batched version left a core partly idle; bench/offset-commits.ts). Writes
    // issued while one is in progress are still coalesced by the socket.
    enableAutoPipelining: false,
  };
  if (t.mode === 'cluster') {
    return new Cluster(t.endpoints, {
      redisOptions: common,
      enableOfflineQueue: true,
      enableAutoPipelining: false,
      maxRedirections: 16,
      retryDelayOnFailover: 100,
      clusterRetryStrategy: (attempt: number) => Math.min(100 * attempt, 1000),
    });
  }
  if (t.mode === 'sentinel') {
    return new Redis({
      ...common,
      sentinels: t.endpoints,
      name: t.sentinelMaster,
      db: t.db,
      sentinelPassword: t.sentinelPassword,
    });
  }
  return new Redis({
    ...common,
    host: t.endpoints[0]!.host,
    port: t.endpoints[0]!.port,
    db: t.db,
  });
}
