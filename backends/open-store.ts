/**
 * Opens the offset store a URL names. Client libraries are imported only for the store in use,
 * so a proxy on the embedded default never loads ioredis or the ZooKeeper client.
 *
 *   (none)                       embedded LMDB store in dataDir (default ./kafka-offset-proxy-data)
 *   embedded: / embedded:///dir  embedded store (in dataDir, or in the given absolute directory)
 *   memory://                    in-process, not durable (tests)
 *   redis://, rediss://, redis+sentinel://, redis+cluster://
 *   zk://host:port[,host:port]/chroot
 *
 * No connection is awaited here: a store that is down at start-up answers StoreUnavailableError
 * per operation (and `ping` tells readiness), so the proxy can start before its store.
 */
import { mkdirSync } from 'node:fs';
import type { OffsetStore } from './store.js';

export const DEFAULT_DATA_DIR = './kafka-offset-proxy-data';

export interface OpenStoreOptions {
  dataDir?: string;
  operationTimeoutMs?: number;
  /** Told of what opening did beyond connecting (the embedded store migrating an older layout). */
  notice?: (message: string, fields: Record<string, unknown>) => void;
}

const SCHEMES = 'embedded:, memory://, redis://, rediss://, redis+sentinel://, redis+cluster://, zk://';

export async function openStore(url: string | undefined, opts: OpenStoreOptions = {}): Promise<OffsetStore> {
  const timeout = opts.operationTimeoutMs;
  if (timeout !== undefined && (!Number.isFinite(timeout) || timeout <= 0)) {
    throw new Error(`store operation timeout must be a positive number of milliseconds, got ${timeout}`);
  }
  const common = timeout === undefined ? {} : { operationTimeoutMs: timeout };
  const trimmed = url?.trim();
  if (trimmed === undefined || trimmed === '' || trimmed === 'embedded:' || trimmed === 'embedded://') {
    return openEmbedded(opts.dataDir ?? DEFAULT_DATA_DIR, common, opts.notice);
  }
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(trimmed)?.[1]?.toLowerCase();
  switch (scheme) {
    case 'embedded': {
      const m = /^embedded:\/\/(\/.*)$/.exec(trimmed);
      if (m === null)
        throw new Error(`invalid store URL ${trimmed}: expected embedded: or embedded:///absolute/dir`);
      return openEmbedded(decodeURIComponent(m[1]!), common, opts.notice);
    }
    case 'memory': {
      if (trimmed !== 'memory://' && trimmed !== 'memory:')
        throw new Error(`invalid store URL ${trimmed}: expected memory://`);
      const { MemoryStore } = await import('./memory-store.js');
      return new MemoryStore();
    }
    case 'redis':
    case 'rediss':
    case 'redis+sentinel':
    case 'redis+cluster': {
      const { RedisStore } = await import('./redis-store.js');
      return new RedisStore(trimmed, common);
    }
    case 'zk': {
      const { ZooKeeperStore } = await import('./zookeeper-store.js');
      return new ZooKeeperStore(trimmed, common);
    }
    default:
      throw new Error(
        `unsupported store URL ${JSON.stringify(trimmed.replace(/\/\/[^@/]*@/, '//***@'))}: ` +
          `expected one of ${SCHEMES} (or no URL for the embedded store)`,
      );
  }
}

async function openEmbedded(
  dir: string,
  common: { operationTimeoutMs?: number },
  notice: OpenStoreOptions['notice'],
): Promise<OffsetStore> {
  try {
    mkdirSync(dir, { recursive: true });
  } catch (err) {
    throw new Error(`cannot create the data directory ${dir}: ${(err as Error).message}`, { cause: err });
  }
  const { EmbeddedStore } = await import('./embedded-store.js');
  const store = new EmbeddedStore({
    dataDir: dir,
    ...common,
    ...(notice
      ? { onMigrated: (report) => notice('embedded store migrated to layout 2', { dataDir: dir, ...report }) }
      : {}),
  });
  try {
    // The directory is readable (and migrated) before the proxy serves from it.
    await store.ready;
  } catch (err) {
    await store.close();
    throw err;
  }
  return store;
}
