/**
 * Opens the offset store a URL names. Client libraries are imported only for the store in use,
 * so a proxy on the embedded default never loads ioredis or the ZooKeeper client.
 *
 *   (none), embedded:            embedded LMDB store in dataDir (default ./kafka-offset-proxy-data)
 *   embedded:<dir>               embedded store in <dir> (relative to the working directory, or absolute)
 *   embedded:///abs/dir          the same, URL form (percent-decoded)
 *   memory://                    in-process, not durable (tests)
 *   redis://, rediss://, redis+sentinel://, redis+cluster://   (redis-url.ts)
 *   zk://[user:password@]host:port[,host:port]/chroot           (zookeeper-url.ts)
 *
 * `parseStoreUrl` checks a URL without opening anything (the configuration calls it at start).
 * No connection is awaited by `openStore`: a store that is down at start-up answers
 * StoreUnavailableError per operation (and `ping` tells readiness), so the proxy can start before
 * its store.
 */
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { redactUrl } from './redact-url.js';
import { parseRedisUrl } from './redis-url.js';
import type { RedisTarget } from './redis-url.js';
import type { OffsetStore } from './store.js';
import { parseZooKeeperUrl } from './zookeeper-url.js';
import type { ZooKeeperTarget } from './zookeeper-url.js';

export const DEFAULT_DATA_DIR = './kafka-offset-proxy-data';

export interface OpenStoreOptions {
  dataDir?: string;
  operationTimeoutMs?: number;
  /** Told of what opening did beyond connecting (the embedded store migrating an older layout). */
  notice?: (message: string, fields: Record<string, unknown>) => void;
}

/** What a store URL names, parsed and checked. `url` is the text to open it with. */
export type StoreTarget =
  | { kind: 'embedded'; dir: string; url: string | undefined }
  | { kind: 'memory'; url: string }
  | { kind: 'redis'; redis: RedisTarget; url: string }
  | { kind: 'zookeeper'; zookeeper: ZooKeeperTarget; url: string };

export const STORE_URL_FORMS =
  'embedded:[<dir>], memory://, redis://[user:password@]host:port[/db], rediss://..., ' +
  'redis+sentinel://host:port,.../master, redis+cluster://host:port,..., zk://host:port,...[/chroot]';

/** Parses a store URL (undefined: the embedded store in `dataDir`); throws an Error naming what is wrong, never a password. */
export function parseStoreUrl(url: string | undefined, dataDir: string = DEFAULT_DATA_DIR): StoreTarget {
  const trimmed = url?.trim();
  if (trimmed === undefined || trimmed === '') return { kind: 'embedded', dir: dataDir, url: undefined };
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(trimmed)?.[1]?.toLowerCase();
  switch (scheme) {
    case 'embedded': {
      const rest = trimmed.slice('embedded:'.length);
      let dir = rest;
      if (rest.startsWith('//')) {
        try {
          dir = decodeURIComponent(rest.slice(2));
        } catch {
          throw new Error(`invalid store URL ${JSON.stringify(trimmed)}: bad percent-encoding`);
        }
      }
      return { kind: 'embedded', dir: dir === '' ? dataDir : dir, url: trimmed };
    }
    case 'memory':
      if (trimmed !== 'memory://' && trimmed !== 'memory:')
        throw new Error(`invalid store URL ${JSON.stringify(redactUrl(trimmed))}: expected memory://`);
      return { kind: 'memory', url: trimmed };
    case 'redis':
    case 'rediss':
    case 'redis+sentinel':
    case 'redis+cluster':
      return { kind: 'redis', redis: parseRedisUrl(trimmed), url: trimmed };
    case 'zk':
      return { kind: 'zookeeper', zookeeper: parseZooKeeperUrl(trimmed), url: trimmed };
    default:
      throw new Error(
        `unsupported store URL ${JSON.stringify(redactUrl(trimmed))}: expected one of ${STORE_URL_FORMS} ` +
          '(or no URL for the embedded store)',
      );
  }
}

/** Where the store is, for logs and metrics: directory or host:port list, never a credential. */
export function describeStoreTarget(t: StoreTarget): string {
  switch (t.kind) {
    case 'embedded':
      return path.resolve(t.dir);
    case 'memory':
      return 'memory';
    case 'redis': {
      const hosts = t.redis.endpoints.map((e) => `${e.host}:${e.port}`).join(',');
      if (t.redis.mode === 'sentinel') return `${hosts} (sentinels of ${t.redis.sentinelMaster})`;
      if (t.redis.mode === 'cluster') return `${hosts} (cluster)`;
      return t.redis.db === 0 ? hosts : `${hosts} db ${t.redis.db}`;
    }
    case 'zookeeper':
      return t.zookeeper.connectString + t.zookeeper.chroot;
  }
}

export async function openStore(url: string | undefined, opts: OpenStoreOptions = {}): Promise<OffsetStore> {
  return openStoreTarget(parseStoreUrl(url, opts.dataDir ?? DEFAULT_DATA_DIR), opts);
}

export async function openStoreTarget(
  target: StoreTarget,
  opts: OpenStoreOptions = {},
): Promise<OffsetStore> {
  const timeout = opts.operationTimeoutMs;
  if (timeout !== undefined && (!Number.isInteger(timeout) || timeout <= 0 || timeout > 2_147_483_647)) {
    throw new Error(
      `store operation timeout must be a whole number of milliseconds from 1 to 2147483647, got ${timeout}`,
    );
  }
  const common = timeout === undefined ? {} : { operationTimeoutMs: timeout };
  switch (target.kind) {
    case 'embedded':
      return openEmbedded(target.dir, common, opts.notice);
    case 'memory': {
      const { MemoryStore } = await import('./memory-store.js');
      return new MemoryStore();
    }
    case 'redis': {
      const { RedisStore } = await import('./redis-store.js');
      return new RedisStore(target.url, common);
    }
    case 'zookeeper': {
      const { ZooKeeperStore } = await import('./zookeeper-store.js');
      return new ZooKeeperStore(target.url, common);
    }
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
