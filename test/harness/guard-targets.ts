// The targets of the guard's differential runs: the broker itself, and the proxy on every store
// (two proxy instances sharing Redis, so a member and its successor may go through different
// instances). Each proxy target's store can be made unreachable for a step (store-outage.ts).
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { MemoryStore } from '../../backends/memory-store.js';
import { openStore } from '../../backends/open-store.js';
import type { OffsetStore } from '../../backends/store.js';
import type { Target } from './guard-differential.js';
import { startOffsetProxy } from './offset-proxy.js';
import { StoreOutage, withOutage } from './store-outage.js';
import type { OffsetProxy } from './offset-proxy.js';

export interface GuardTargets {
  targets: Target[];
  stop(): Promise<void>;
}

export async function startGuardTargets(
  broker: string,
  redisUrl: string,
  zkConnect: string,
): Promise<GuardTargets> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'kop-guard-diff-'));
  const stores: OffsetStore[] = [];
  const proxies: OffsetProxy[] = [];
  const proxyOn = async (store: OffsetStore, outage: StoreOutage): Promise<string> => {
    stores.push(store);
    const p = await startOffsetProxy(broker, withOutage(store, outage));
    proxies.push(p);
    return p.bootstrap;
  };
  const stop = async () => {
    await Promise.allSettled(proxies.map((p) => p.stop()));
    await Promise.allSettled(stores.map((s) => s.close()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const outages = Array.from({ length: 4 }, () => new StoreOutage());
    const [memory, embedded, redis, zookeeper] = outages as [
      StoreOutage,
      StoreOutage,
      StoreOutage,
      StoreOutage,
    ];
    const targets: Target[] = [
      { name: 'broker', bootstraps: [broker] },
      { name: 'memory', bootstraps: [await proxyOn(new MemoryStore(), memory)], outage: memory },
      {
        name: 'embedded',
        bootstraps: [await proxyOn(new EmbeddedStore({ dataDir: dir }), embedded)],
        outage: embedded,
      },
      {
        name: 'redis×2',
        bootstraps: [
          await proxyOn(await openStore(redisUrl), redis),
          await proxyOn(await openStore(redisUrl), redis),
        ],
        outage: redis,
      },
      {
        name: 'zookeeper',
        bootstraps: [await proxyOn(await openStore(`zk://${zkConnect}`), zookeeper)],
        outage: zookeeper,
      },
    ];
    return { targets, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
