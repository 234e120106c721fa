// The Redis store against a real redis-server (AOF, appendfsync always): the shared contract,
// then what only a real server shows: resends, corrupt keys, a killed and restarted server.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runStoreContract } from '../../backends/contract.js';
import { StoreCorruptError, StoreUnavailableError } from '../../backends/errors.js';
import { packCommitWrites } from '../../backends/redis-pack.js';
import { COMMIT_LUA, EXPIRED_REPLY } from '../../backends/redis-scripts.js';
import { RedisStore } from '../../backends/redis-store.js';
import { parseRedisUrl } from '../../backends/redis-url.js';
import { freePort } from '../bed/ports.js';
import { makeRunDir, removeRunDir, spawnManaged, waitUntil } from '../bed/process.js';
import { startRedis } from '../bed/redis.js';
import { writeOf } from '../harness/stored-offsets.js';
import type { RedisServer } from '../bed/redis.js';
import { FaultRelay } from '../reliability/fault-relay.js';

let server: RedisServer;
beforeAll(async () => {
  server = await startRedis({ appendfsync: 'always' });
});
afterAll(async () => {
  await server?.kill();
});

const w = writeOf;

runStoreContract('redis standalone', async () => new RedisStore(server.url, { operationTimeoutMs: 3000 }));

describe('redis store on a real server', () => {
  it('keeps one group in one hash slot, with the documented layout', async () => {
    const store = new RedisStore(server.url);
    const raw = new Redis(server.port, server.host);
    try {
      await store.commit({
        group: 'layout',
        writes: [{ ...w(3, 42n), metadata: 'a|b' }],
        requestId: 'layout-1',
      });
      expect(await raw.hgetall('kop:{g:layout}:offsets')).toEqual({ 't:3': '42|1|1|-1|a|b' });
      expect(JSON.parse((await raw.get('kop:{g:layout}:state'))!)).toMatchObject({
        generationId: -1,
        members: [],
      });
      const ttl = await raw.pttl('kop:{g:layout}:req:layout-1');
      expect(ttl).toBeGreaterThan(500_000);
      // The empty group id still gets a non-empty hash tag.
      await store.commit({ group: '', writes: [w(0, 1n)], requestId: 'empty-group' });
      expect(await raw.hget('kop:{g:}:offsets', 't:0')).toBe('1|1|1|-1|m');
      expect(await store.listGroups()).toEqual(expect.arrayContaining(['layout', '']));
    } finally {
      raw.disconnect();
      await store.close();
    }
  });

  it('turns a hash of 32 or more offsets into a hash table; readers never see the marker', async () => {
    const store = new RedisStore(server.url);
    const raw = new Redis(server.port, server.host);
    const big = 'hashtable-big';
    const small = 'hashtable-small';
    const writes = (n: number, offset: bigint) => Array.from({ length: n }, (_, p) => w(p, offset));
    try {
      await store.commit({ group: small, writes: writes(3, 5n), requestId: 'ht-small' });
      expect(await raw.object('ENCODING', `kop:{g:${small}}:offsets`)).toBe('listpack');
      expect(await raw.hlen(`kop:{g:${small}}:offsets`)).toBe(3);
      await store.commit({ group: big, writes: writes(31, 1n), requestId: 'ht-1' });
      expect(await raw.object('ENCODING', `kop:{g:${big}}:offsets`)).toBe('listpack');
      await store.commit({ group: big, writes: writes(100, 2n), requestId: 'ht-2' });
      expect(await raw.object('ENCODING', `kop:{g:${big}}:offsets`)).toBe('hashtable');
      expect(await raw.hlen(`kop:{g:${big}}:offsets`)).toBe(101);
      const fetched = await store.fetch(big, null);
      expect(fetched).toHaveLength(100);
      expect(new Set(fetched.map((o) => o.offset))).toEqual(new Set([2n]));
      expect(await store.listGroups()).toEqual(expect.arrayContaining([big, small]));
      // Deleting every offset leaves no key behind, marker included.
      await store.deleteOffsets(
        big,
        Array.from({ length: 100 }, (_, p) => ({ topic: 't', partition: p })),
      );
      expect(await raw.exists(`kop:{g:${big}}:offsets`)).toBe(0);
      expect(await store.fetch(big, null)).toEqual([]);
    } finally {
      raw.disconnect();
      await store.close();
    }
  });

  it('a corrupt key fails that group only, with StoreCorruptError', async () => {
    const store = new RedisStore(server.url);
    const raw = new Redis(server.port, server.host);
    try {
      await raw.set('kop:{g:bad-type}:offsets', 'not a hash');
      await raw.hset('kop:{g:bad-value}:offsets', 't:0', 'abc|1|1|-1|');
      await raw.set('kop:{g:bad-state}:state', '{nope');
      await expect(store.fetch('bad-type', null)).rejects.toBeInstanceOf(StoreCorruptError);
      await expect(
        store.commit({ group: 'bad-type', writes: [w(0, 1n)], requestId: 'c1' }),
      ).rejects.toBeInstanceOf(StoreCorruptError);
      await expect(store.fetch('bad-value', null)).rejects.toBeInstanceOf(StoreCorruptError);
      await expect(
        store.commit({ group: 'bad-value', writes: [{ ...w(0, 1n), expectedOffset: 0n }], requestId: 'c2' }),
      ).rejects.toBeInstanceOf(StoreCorruptError);
      await expect(store.getGroup('bad-state')).rejects.toBeInstanceOf(StoreCorruptError);
      await expect(
        store.commit({ group: 'bad-state', writes: [w(0, 1n)], requestId: 'c3' }),
      ).rejects.toBeInstanceOf(StoreCorruptError);
      await expect(store.updateGroup('bad-state', { kind: 'empty' })).rejects.toBeInstanceOf(
        StoreCorruptError,
      );
      // Other groups are unaffected.
      expect(await store.commit({ group: 'fine', writes: [w(0, 1n)], requestId: 'c4' })).toEqual({
        status: 'ok',
      });
    } finally {
      raw.disconnect();
      await store.close();
    }
  });

  it('a resent commit script (same requestId) is answered, not applied twice', async () => {
    const store = new RedisStore(server.url);
    const raw = new Redis(server.port, server.host);
    try {
      await store.commit({
        group: 'resend',
        writes: [{ ...w(0, 10n), expectedOffset: -1n }],
        requestId: 'once',
      });
      // What ioredis does after a reconnect: run the very same script again.
      await raw.hset('kop:{g:resend}:offsets', 't:1', '5|1|1|-1|');
      expect(
        await store.commit({
          group: 'resend',
          writes: [{ ...w(0, 10n), expectedOffset: -1n }, w(1, 99n)],
          requestId: 'once',
        }),
      ).toEqual({ status: 'ok' });
      expect((await store.fetch('resend', null)).map((o) => o.offset).sort()).toEqual([10n, 5n]);
    } finally {
      raw.disconnect();
      await store.close();
    }
  });

  it('a commit script run after its validity writes nothing and records nothing', async () => {
    const raw = new Redis(server.port, server.host);
    try {
      const [seconds] = await raw.time();
      const keys = [
        'kop:{g:expired}:offsets',
        'kop:{g:expired}:state',
        'kop:{g:expired}:req:x',
        'kop:{g:expired}:orders',
      ];
      const writes = packCommitWrites({ group: 'expired', requestId: 'x', writes: [w(0, 9n)] });
      const past = Number(seconds) * 1000 - 1;
      expect(await raw.eval(COMMIT_LUA, 4, ...keys, '', 600_000, writes, past)).toBe(EXPIRED_REPLY);
      expect(await raw.exists(...keys)).toBe(0);
      expect(await raw.eval(COMMIT_LUA, 4, ...keys, '', 600_000, writes, past + 60_000)).toBe('{"s":"ok"}');
      // No read order given: none is stored (the orders hash stays absent).
      expect(await raw.exists(...keys)).toBe(3);
    } finally {
      raw.disconnect();
    }
  });

  it('bytes a hop held past the answer and delivered late (after a reconnect) apply nothing', async () => {
    const relay = await FaultRelay.start({ host: server.host, port: server.port });
    const store = new RedisStore(`redis://${relay.address}`, { operationTimeoutMs: 600 });
    const raw = new Redis(server.port, server.host);
    try {
      await store.commit({ group: 'held', writes: [w(0, 1n)], requestId: 'held-1' });
      relay.hold();
      // Nothing comes back: the store answers after the validity (and a read-back that cannot
      // be answered either), "timed out".
      const a = await store
        .commit({ group: 'held', writes: [w(0, 3n)], requestId: 'held-3' })
        .catch((e) => e);
      expect(a).toBeInstanceOf(StoreUnavailableError);
      expect(relay.heldBytes()).toBeGreaterThan(0);
      // The store loses its connection and cannot reconnect at first, so ioredis gives up on the
      // unanswered commands instead of resending them; then it reconnects through a fresh
      // connection and the client's next commit is acknowledged.
      relay.refusing = true;
      relay.cutClients();
      await new Promise((r) => setTimeout(r, 500));
      relay.refusing = false;
      expect(await store.commit({ group: 'held', writes: [w(0, 5n)], requestId: 'held-5' })).toEqual({
        status: 'ok',
      });
      // Now the held bytes reach Redis on the old connection.
      expect(await relay.deliverHeld()).toBeGreaterThan(0);
      expect(await raw.hget('kop:{g:held}:offsets', 't:0')).toMatch(/^5\|/);
      expect(await raw.exists('kop:{g:held}:req:held-3')).toBe(0);
    } finally {
      raw.disconnect();
      await store.close();
      await relay.close();
    }
  });

  it('deletes a hop held past their answer and delivered after the next commit remove nothing', async () => {
    const relay = await FaultRelay.start({ host: server.host, port: server.port });
    const store = new RedisStore(`redis://${relay.address}`, { operationTimeoutMs: 600 });
    const raw = new Redis(server.port, server.host);
    try {
      await store.commit({ group: 'held-del', writes: [w(0, 1n), w(1, 1n)], requestId: 'hd-1' });
      relay.hold();
      const started = performance.now();
      const answers = await Promise.all([
        store.deleteOffsets('held-del', [{ topic: 't', partition: 0 }]).catch((e: unknown) => e),
        store.deleteGroup('held-del').catch((e: unknown) => e),
      ]);
      for (const a of answers) expect(a).toBeInstanceOf(StoreUnavailableError);
      // Not answered before the validity (the last quarter of the deadline is the read-back's).
      expect(performance.now() - started).toBeGreaterThanOrEqual(450 - 5);
      relay.refusing = true;
      relay.cutClients();
      await new Promise((r) => setTimeout(r, 500));
      relay.refusing = false;
      expect(
        await store.commit({ group: 'held-del', writes: [w(0, 5n), w(1, 5n)], requestId: 'hd-5' }),
      ).toEqual({ status: 'ok' });
      expect(await relay.deliverHeld()).toBeGreaterThan(0);
      expect(await raw.hget('kop:{g:held-del}:offsets', 't:0')).toMatch(/^5\|/);
      expect(await raw.hget('kop:{g:held-del}:offsets', 't:1')).toMatch(/^5\|/);
      expect(await raw.exists('kop:{g:held-del}:state')).toBe(1);
      // In time, both work.
      await store.deleteOffsets('held-del', [{ topic: 't', partition: 0 }]);
      expect(await raw.hexists('kop:{g:held-del}:offsets', 't:0')).toBe(0);
      await store.deleteGroup('held-del');
      expect(await raw.exists('kop:{g:held-del}:offsets', 'kop:{g:held-del}:state')).toBe(0);
    } finally {
      raw.disconnect();
      await store.close();
      await relay.close();
    }
  });

  it('a membership update a hop held past its answer does not bring back a member that left', async () => {
    const relay = await FaultRelay.start({ host: server.host, port: server.port });
    const store = new RedisStore(`redis://${relay.address}`, { operationTimeoutMs: 600 });
    const direct = new RedisStore(`redis://${server.host}:${server.port}`, { operationTimeoutMs: 5_000 });
    try {
      const joined = { kind: 'joined', generationId: 3, memberId: 'zombie', groupInstanceId: null } as const;
      await store.updateGroup('held-member', { ...joined, memberId: 'live' });
      relay.hold();
      const late = await store.updateGroup('held-member', joined).catch((e: unknown) => e);
      expect(late).toBeInstanceOf(StoreUnavailableError);
      expect(relay.heldBytes()).toBeGreaterThan(0);
      // Meanwhile (another proxy instance) the record moves on: the zombie is gone for good.
      await direct.updateGroup('held-member', { kind: 'gone', memberId: 'zombie' });
      relay.refusing = true;
      relay.cutClients();
      await new Promise((r) => setTimeout(r, 500));
      relay.refusing = false;
      expect(await relay.deliverHeld()).toBeGreaterThan(0);
      const members = (await direct.getGroup('held-member'))?.members.map((m) => m.memberId);
      expect(members).toEqual(['live']);
      // In time, the same update applies.
      await store.updateGroup('held-member', joined);
      expect((await direct.getGroup('held-member'))?.members.map((m) => m.memberId).sort()).toEqual([
        'live',
        'zombie',
      ]);
    } finally {
      await store.close();
      await direct.close();
      await relay.close();
    }
  });

  it('an applied commit whose reply was lost is answered from its record, after its validity', async () => {
    const relay = await FaultRelay.start({ host: server.host, port: server.port });
    const store = new RedisStore(`redis://${relay.address}`, { operationTimeoutMs: 2_000 });
    try {
      await store.commit({ group: 'lost-reply', writes: [w(0, 1n)], requestId: 'lr-1' });
      relay.muteReplies();
      const t0 = performance.now();
      const answer = store.commit({ group: 'lost-reply', writes: [w(0, 2n)], requestId: 'lr-2' });
      // After the validity (1.5 s of the 2 s), the read-back is sent on the muted connection too:
      // reset it, and ioredis resends the read on a new one.
      await new Promise((r) => setTimeout(r, 1_600));
      relay.drop();
      expect(await answer).toEqual({ status: 'ok' });
      expect(performance.now() - t0).toBeGreaterThanOrEqual(1_500);
      expect((await store.fetch('lost-reply', null))[0]?.offset).toBe(2n);
    } finally {
      await store.close();
      await relay.close();
    }
  });

  it('WAIT with too few replicas fails the commit as unavailable (standalone has none)', async () => {
    const store = new RedisStore(`${server.url}?wait=1&waitTimeoutMs=50`);
    try {
      await expect(
        store.commit({ group: 'waiting', writes: [w(0, 1n)], requestId: 'wait-1' }),
      ).rejects.toBeInstanceOf(StoreUnavailableError);
      // The write itself is on the primary; the resend answers the recorded outcome but WAIT still fails.
      expect(await store.fetch('waiting', null)).toHaveLength(1);
    } finally {
      await store.close();
    }
  });

  it('WAIT with a live replica: the commit is acknowledged once the replica has it', async () => {
    const dir = makeRunDir('redis-replica');
    const port = await freePort();
    const replica = spawnManaged({
      name: `redis replica :${port}`,
      command: 'redis-server',
      args: [
        '--port',
        String(port),
        '--bind',
        '127.0.0.1',
        '--dir',
        dir,
        '--save',
        '',
        '--replicaof',
        server.host,
        String(server.port),
      ],
      logFile: join(dir, 'replica.log'),
      cwd: dir,
    });
    const probe = new Redis({ port, host: '127.0.0.1', maxRetriesPerRequest: 0 });
    probe.on('error', () => undefined);
    const store = new RedisStore(`${server.url}?wait=1&waitTimeoutMs=5000`, { operationTimeoutMs: 8000 });
    try {
      await waitUntil(
        'the replica to sync',
        async () => {
          try {
            return String(await probe.info('replication')).includes('master_link_status:up');
          } catch {
            return false;
          }
        },
        { timeoutMs: 30_000, intervalMs: 100, proc: replica },
      );
      expect(await store.commit({ group: 'replicated', writes: [w(0, 5n)], requestId: 'rep-1' })).toEqual({
        status: 'ok',
      });
      // Acknowledged after WAIT: the replica already holds it.
      expect(await probe.hget('kop:{g:replicated}:offsets', 't:0')).toBe('5|1|1|-1|m');
    } finally {
      probe.disconnect();
      await store.close();
      await replica.kill();
      removeRunDir(dir);
    }
  });

  it('finds the primary through Sentinel (redis+sentinel://)', async () => {
    const dir = makeRunDir('redis-sentinel');
    const port = await freePort();
    const conf = join(dir, 'sentinel.conf');
    writeFileSync(
      conf,
      [
        `port ${port}`,
        'bind 127.0.0.1',
        'daemonize no',
        `dir ${dir}`,
        `sentinel monitor mymaster ${server.host} ${server.port} 1`,
        '',
      ].join('\n'),
    );
    const sentinel = spawnManaged({
      name: `redis-sentinel :${port}`,
      command: 'redis-server',
      args: [conf, '--sentinel'],
      logFile: join(dir, 'sentinel.log'),
      cwd: dir,
    });
    const probe = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0 });
    probe.on('error', () => undefined);
    const store = new RedisStore(`redis+sentinel://127.0.0.1:${port}/mymaster`, { operationTimeoutMs: 3000 });
    try {
      await waitUntil(
        'sentinel to know mymaster',
        async () => {
          try {
            return Array.isArray(await probe.call('SENTINEL', 'get-master-addr-by-name', 'mymaster'));
          } catch {
            return false;
          }
        },
        { timeoutMs: 20_000, intervalMs: 100, proc: sentinel },
      );
      expect(await store.commit({ group: 'via-sentinel', writes: [w(0, 77n)], requestId: 's1' })).toEqual({
        status: 'ok',
      });
      const direct = new RedisStore(server.url);
      expect((await direct.fetch('via-sentinel', null))[0]?.offset).toBe(77n);
      await direct.close();
    } finally {
      probe.disconnect();
      await store.close();
      await sentinel.kill();
      removeRunDir(dir);
    }
  });

  it('Redis killed: fails fast with StoreUnavailableError; after restart nothing acknowledged is lost', async () => {
    const deadline = 1000;
    const store = new RedisStore(server.url, { operationTimeoutMs: deadline });
    try {
      const acked: bigint[] = [];
      // Commit continuously; kill the server part-way.
      let stop = false;
      const writer = (async () => {
        for (let i = 1n; !stop; i++) {
          try {
            const r = await store.commit({
              group: 'crash',
              writes: [w(0, i), w(1, i)],
              requestId: `crash-${i}`,
            });
            if (r.status === 'ok') acked.push(i);
          } catch (e) {
            expect(e).toBeInstanceOf(StoreUnavailableError);
          }
        }
      })();
      await new Promise((r) => setTimeout(r, 300));
      await server.kill();
      const lastAcked = acked.at(-1);
      expect(lastAcked).toBeDefined();
      const t0 = Date.now();
      await expect(store.fetch('crash', null)).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(
        store.commit({ group: 'crash', writes: [w(0, 0n)], requestId: 'while-down' }),
      ).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(store.ping()).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(Date.now() - t0).toBeLessThan(3 * deadline + 500);
      stop = true;
      await writer;
      const finalAcked = acked.at(-1)!;
      await server.start();
      // The same store object recovers by itself.
      let offsets: bigint[] = [];
      for (let i = 0; i < 50; i++) {
        try {
          offsets = (await store.fetch('crash', null)).map((o) => o.offset);
          break;
        } catch {
          await new Promise((r) => setTimeout(r, 200));
        }
      }
      expect(offsets).toHaveLength(2);
      // appendfsync always: every acknowledged commit is in the AOF (a later, unacknowledged one may be too).
      for (const o of offsets) expect(o).toBeGreaterThanOrEqual(finalAcked);
      expect(await store.commit({ group: 'crash', writes: [w(0, 0n)], requestId: 'after' })).toEqual({
        status: 'ok',
      });
    } finally {
      await store.close();
    }
  });
});

describe('redis store URLs', () => {
  it('parses every scheme and option', () => {
    expect(parseRedisUrl('redis://:s3cret@h:7000/2?wait=1&waitTimeoutMs=200')).toMatchObject({
      mode: 'standalone',
      endpoints: [{ host: 'h', port: 7000 }],
      password: 's3cret',
      db: 2,
      wait: 1,
      waitTimeoutMs: 200,
    });
    expect(parseRedisUrl('rediss://u:p@h')).toMatchObject({
      tls: true,
      username: 'u',
      password: 'p',
      endpoints: [{ host: 'h', port: 6379 }],
    });
    expect(parseRedisUrl('redis+sentinel://a:1,b:2/mymaster')).toMatchObject({
      mode: 'sentinel',
      sentinelMaster: 'mymaster',
      endpoints: [
        { host: 'a', port: 1 },
        { host: 'b', port: 2 },
      ],
    });
    expect(parseRedisUrl('redis+sentinel://a,b/m').endpoints.map((e) => e.port)).toEqual([26379, 26379]);
    expect(parseRedisUrl('redis+cluster://a:1,b:2,c:3')).toMatchObject({ mode: 'cluster' });
  });
  it('rejects bad URLs clearly, without echoing the password', () => {
    expect(() => parseRedisUrl('redis+sentinel://a:1,b:2')).toThrow(/master name/);
    expect(() => parseRedisUrl('redis://a:1,b:2')).toThrow(/sentinel|cluster/);
    expect(() => parseRedisUrl('redis://h:99999')).toThrow(/port/);
    expect(() => parseRedisUrl('redis://h/x')).toThrow(/database/);
    expect(() => parseRedisUrl('redis://h?wiat=1')).toThrow(/unknown option/);
    expect(parseRedisUrl('redis+cluster://a:1?wait=1')).toMatchObject({ mode: 'cluster', wait: 1 });
    expect(() => parseRedisUrl('redis://:hunter2@h?wait=x')).toThrow(/^(?!.*hunter2)/);
    expect(() => parseRedisUrl('http://h')).toThrow(/expected redis/);
  });
});
