// The store outages of issue 40's tests (reliability-store-outage*.test.ts), one store each, so
// that they can run at once: Redis frozen (SIGSTOP), Redis partitioned away (a FaultRelay that
// stops forwarding and keeps every connection open), Redis SIGKILLed (restarted on its AOF),
// ZooKeeper stopped, and the embedded store's disk full (an 8 MB tmpfs filled to the last page).
// Also the proxy they run under and what /readyz must say on the full disk.
import { join } from 'node:path';
import type { ExpectStatic } from 'vitest';
import { freePort } from '../bed/ports.js';
import { startRedis } from '../bed/redis.js';
import type { RedisServer } from '../bed/redis.js';
import { startZooKeeper } from '../bed/zookeeper.js';
import type { ZooKeeperServer } from '../bed/zookeeper.js';
import { FaultRelay } from '../reliability/fault-relay.js';
import { spawnProxy } from './proxy.js';
import type { ProxyProcess } from './proxy.js';
import type { Readiness } from './readiness-poll.js';
import { SmallDisk } from './small-disk.js';

export type OutageKind = 'redis-frozen' | 'redis-partition' | 'redis-killed' | 'zookeeper-stop' | 'disk-full';

/** Test titles: what happens to the store, and how it comes back. */
export const OUTAGE_TITLES: Record<OutageKind, string> = {
  'redis-frozen': 'Redis frozen (SIGSTOP) and resumed',
  'redis-partition': 'Redis partitioned away (connections kept open, nothing forwarded)',
  'redis-killed': 'Redis killed (SIGKILL) and restarted',
  'zookeeper-stop': 'ZooKeeper stopped and started',
  'disk-full': 'embedded store on a full disk, then space freed',
};

export interface Outage {
  name: string;
  /** The proxy's store options. */
  storeArgs: string[];
  /** The store's URL for reading it directly once the proxy has stopped. */
  directUrl: string;
  down(): Promise<void>;
  up(): Promise<void>;
  /** /readyz must be 503 naming the cause while the store is away (the full disk). */
  checkReadiness: boolean;
}

export class OutageStores {
  private redisFrozen: RedisServer | undefined;
  private redisBehindRelay: RedisServer | undefined;
  private relay: FaultRelay | undefined;
  private redisKilled: RedisServer | undefined;
  private zk: ZooKeeperServer | undefined;
  private disk: SmallDisk | undefined;

  /** Starts the stores of `kinds`, at once. */
  static async start(kinds: OutageKind[]): Promise<OutageStores> {
    const s = new OutageStores();
    const redis = () => startRedis({ appendfsync: 'always' });
    if (kinds.includes('disk-full')) s.disk = SmallDisk.mount(8);
    await Promise.all([
      kinds.includes('redis-frozen') && redis().then((r) => (s.redisFrozen = r)),
      kinds.includes('redis-partition') &&
        redis().then(async (r) => {
          s.redisBehindRelay = r;
          s.relay = await FaultRelay.start({ host: r.host, port: r.port });
        }),
      kinds.includes('redis-killed') && redis().then((r) => (s.redisKilled = r)),
      kinds.includes('zookeeper-stop') && startZooKeeper().then((z) => (s.zk = z)),
    ]);
    return s;
  }

  outage(kind: OutageKind): Outage {
    const plain = { checkReadiness: false };
    switch (kind) {
      case 'redis-frozen': {
        const r = this.redisFrozen!;
        const up = async () => void process.kill(r.pid!, 'SIGCONT');
        const down = async () => void process.kill(r.pid!, 'SIGSTOP');
        return { ...plain, name: 'Redis SIGSTOP', storeArgs: ['--store', r.url], directUrl: r.url, down, up };
      }
      case 'redis-partition': {
        const relay = this.relay!;
        return {
          ...plain,
          name: 'Redis partition',
          storeArgs: ['--store', `redis://${relay.address}`],
          directUrl: this.redisBehindRelay!.url,
          down: async () => relay.freeze(),
          up: async () => relay.thaw(),
        };
      }
      case 'redis-killed': {
        const r = this.redisKilled!;
        return {
          ...plain,
          name: 'Redis SIGKILL',
          storeArgs: ['--store', r.url],
          directUrl: r.url,
          down: () => r.kill(),
          up: () => r.start(),
        };
      }
      case 'zookeeper-stop': {
        const z = this.zk!;
        return {
          ...plain,
          name: 'ZooKeeper stop',
          storeArgs: ['--store', z.url],
          directUrl: z.url,
          down: () => z.stop(),
          up: () => z.start(),
        };
      }
      case 'disk-full': {
        const disk = this.disk!;
        const dataDir = join(disk.path, 'data');
        return {
          name: 'disk full',
          storeArgs: ['--data-dir', dataDir],
          directUrl: `embedded:${dataDir}`,
          down: async () => void disk.fill(),
          up: async () => disk.free(),
          checkReadiness: true,
        };
      }
    }
  }

  async stop(): Promise<void> {
    if (this.redisFrozen?.pid !== undefined) process.kill(this.redisFrozen.pid, 'SIGCONT');
    this.relay?.thaw();
    await this.relay?.close();
    await Promise.all([
      this.redisFrozen?.kill(),
      this.redisBehindRelay?.kill(),
      this.redisKilled?.kill(),
      this.zk?.stop(),
    ]);
    this.disk?.free();
    this.disk?.unmount();
  }
}

/** The CLI proxy on the outage's store, with its HTTP endpoint (for /readyz) on a free port. */
export async function spawnOutageProxy(
  brokerBootstrap: string,
  o: Outage,
): Promise<{ proxy: ProxyProcess; http: number }> {
  const http = await freePort();
  const proxy = await spawnProxy([
    '--bootstrap-server',
    brokerBootstrap,
    ...o.storeArgs,
    '--http',
    `127.0.0.1:${http}`,
  ]);
  return { proxy, http };
}

/** On the full disk: /readyz 503 at some polls, naming the cause, and 200 once space is freed. */
export function expectReadinessNamedTheCause(
  expect: ExpectStatic,
  seen: Readiness[],
  after: Readiness,
): void {
  const notReady = seen.filter((r) => r.status === 503);
  expect(notReady.length, JSON.stringify(seen)).toBeGreaterThan(0);
  expect(notReady.map((r) => r.body).join('\n')).toMatch(
    /no space left on device|MDB_MAP_FULL|ENOSPC|file system of .* is full/i,
  );
  expect(after.status, after.body).toBe(200);
}
