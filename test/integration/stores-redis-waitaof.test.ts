// Issue #43: WAITAOF as the Redis store's acknowledgement option (`waitAofLocal`, `waitAofReplicas`):
// a commit is acknowledged once the primary's and the replicas' append-only files hold it, fsynced.
// On Valkey 8 (Redis 7.2's protocol, Debian's bookworm-backports), the bed's only server with
// WAITAOF; beside it Redis 7.0, which lacks it and is refused at start, with its version named.
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../backends/errors.js';
import { redisKindProblem } from '../../backends/redis-kind.js';
import { RedisStore } from '../../backends/redis-store.js';
import { parseRedisUrl } from '../../backends/redis-url.js';
import { waitUntil } from '../bed/process.js';
import { startRedis } from '../bed/redis.js';
import { writeOf } from '../harness/stored-offsets.js';
import type { RedisServer } from '../bed/redis.js';

const w = writeOf;

let primary: RedisServer;
let replica: RedisServer;
let redis70: RedisServer;
let onReplica: Redis;

beforeAll(async () => {
  // Redis's default fsync policy: WAITAOF is what makes an acknowledged commit durable here.
  primary = await startRedis({ server: 'valkey', appendfsync: 'everysec' });
  replica = await startRedis({
    server: 'valkey',
    appendfsync: 'everysec',
    extraArgs: ['--replicaof', primary.host, String(primary.port)],
  });
  redis70 = await startRedis({ appendfsync: 'always' });
  onReplica = new Redis({ host: replica.host, port: replica.port, maxRetriesPerRequest: 0 });
  onReplica.on('error', () => undefined);
  await waitUntil(
    'the Valkey replica to sync',
    async () => String(await onReplica.info('replication')).includes('master_link_status:up'),
    { timeoutMs: 30_000, intervalMs: 100 },
  );
});

afterAll(async () => {
  onReplica?.disconnect();
  await Promise.allSettled([primary?.kill(), replica?.kill(), redis70?.kill()]);
});

describe('WAITAOF: a commit acknowledged once append-only files hold it', () => {
  it('is acknowledged once the primary and the replica have fsynced it', async () => {
    const store = new RedisStore(`${primary.url}?waitAofLocal=1&waitAofReplicas=1&waitTimeoutMs=5000`, {
      operationTimeoutMs: 8000,
    });
    try {
      expect(await store.commit({ group: 'durable', writes: [w(0, 7n)], requestId: 'aof-1' })).toEqual({
        status: 'ok',
      });
      // Acknowledged after WAITAOF 1 1: the replica already holds it.
      expect(await onReplica.hget('kop:{g:durable}:offsets', 't:0')).toBe('7|1|1|-1|m');
      expect((await store.fetch('durable', null))[0]?.offset).toBe(7n);
    } finally {
      await store.close();
    }
  });

  it('is not acknowledged while the replica cannot fsync it, and says why', async () => {
    const store = new RedisStore(`${primary.url}?waitAofReplicas=1&waitTimeoutMs=200`, {
      operationTimeoutMs: 3000,
    });
    process.kill(replica.pid!, 'SIGSTOP');
    try {
      const answer = store.commit({ group: 'stalled', writes: [w(0, 1n)], requestId: 'aof-2' });
      await expect(answer).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(answer).rejects.toThrow(
        /was fsynced to the append-only files of 0 of 1 replicas within 200 ms/,
      );
    } finally {
      process.kill(replica.pid!, 'SIGCONT');
      await store.close();
    }
  });

  it('refuses at start a server that cannot confirm as asked, naming why', async () => {
    const problem = (url: string) => redisKindProblem(parseRedisUrl(url), 3000);
    expect(await problem(`${primary.url}?waitAofLocal=1&waitAofReplicas=1`)).toBeNull();
    expect(await problem(`${redis70.url}?waitAofReplicas=1`)).toMatch(
      /^waitAofLocal and waitAofReplicas need WAITAOF \(Redis 7\.2\+ or Valkey\); 127\.0\.0\.1:\d+ runs Redis 7\.0\.\d+/,
    );
    // Redis 7.0 with WAIT only: nothing to refuse.
    expect(await problem(`${redis70.url}?wait=1`)).toBeNull();
    const noAof = await startRedis({ server: 'valkey', extraArgs: ['--appendonly', 'no'] });
    try {
      expect(await problem(`${noAof.url}?waitAofLocal=1`)).toMatch(
        /^waitAofLocal=1 needs the append-only file on 127\.0\.0\.1:\d+ \(appendonly yes\); it is off$/,
      );
      expect(await problem(`${noAof.url}?waitAofReplicas=1`)).toBeNull();
    } finally {
      await noAof.kill();
    }
  });
});
