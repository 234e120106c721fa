// The targets of the guard's differential runs: the broker itself, and the proxy on every store
// (two proxy instances sharing Redis, so a member and its successor may go through different
// instances).
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { EmbeddedStore } from '../../backends/embedded-store.js';
import { MemoryStore } from '../../backends/memory-store.js';
import { openStore } from '../../backends/open-store.js';
import type { OffsetStore } from '../../backends/store.js';
import type { Target } from './guard-differential.js';
import { startOffsetProxy } from './offset-proxy.js';
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
  const proxyOn = async (store: OffsetStore): Promise<string> => {
    stores.push(store);
    const p = await startOffsetProxy(broker, store);
    proxies.push(p);
    return p.bootstrap;
  };
  const stop = async () => {
    await Promise.allSettled(proxies.map((p) => p.stop()));
    await Promise.allSettled(stores.map((s) => s.close()));
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    const targets: Target[] = [
      { name: 'broker', bootstraps: [broker] },
      { name: 'memory', bootstraps: [await proxyOn(new MemoryStore())] },
      { name: 'embedded', bootstraps: [await proxyOn(new EmbeddedStore({ dataDir: dir }))] },
      {
        name: 'redis×2',
        bootstraps: [await proxyOn(await openStore(redisUrl)), await proxyOn(await openStore(redisUrl))],
      },
      { name: 'zookeeper', bootstraps: [await proxyOn(await openStore(`zk://${zkConnect}`))] },
    ];
    return { targets, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
