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
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, rmSync, writeSync } from 'node:fs';
import path from 'node:path';
import { holdDataDir } from './data-dir-holder.js';
import { LAYOUT } from './embedded-migrate.js';
import { StoreUrlError } from './errors.js';
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
  /**
   * The embedded store only: hold its data directory as this writer ("proxy", "offsets set") while
   * the store is open, and refuse with DataDirHeldError when another process holds it
   * (data-dir-holder.ts). Readers leave it unset.
   */
  holder?: string;
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
          throw new StoreUrlError('invalid store URL', JSON.stringify(trimmed), 'bad percent-encoding');
        }
      }
      return { kind: 'embedded', dir: dir === '' ? dataDir : dir, url: trimmed };
    }
    case 'memory':
      if (trimmed !== 'memory://' && trimmed !== 'memory:')
        throw new StoreUrlError(
          'invalid store URL',
          JSON.stringify(redactUrl(trimmed)),
          'expected memory://',
        );
      return { kind: 'memory', url: trimmed };
    case 'redis':
    case 'rediss':
    case 'redis+sentinel':
    case 'redis+cluster':
      return { kind: 'redis', redis: parseRedisUrl(trimmed), url: trimmed };
    case 'zk':
      return { kind: 'zookeeper', zookeeper: parseZooKeeperUrl(trimmed), url: trimmed };
    default:
      throw new StoreUrlError(
        'unsupported store URL',
        JSON.stringify(redactUrl(trimmed)),
        `expected one of ${STORE_URL_FORMS} (or no URL for the embedded store)`,
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
      return openEmbedded(target.dir, common, opts);
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

/**
 * Space the embedded store must be able to write at start: LMDB's lock file and first pages
 * take about 50 KB; the rest is room for the first commits.
 */
export const START_SPACE_BYTES = 1 << 20;

/** LMDB's lock file (`lock.mdb`) is smaller than this for the default 126 readers (8,272 bytes). */
const LOCK_FILE_BYTES = 16 * 1024;

/** Writes `bytes` real bytes to a new file (no holes: every block is allocated), and syncs it. */
function writeAllocated(file: string, bytes: number): void {
  const fd = openSync(file, 'wx');
  try {
    const chunk = Buffer.alloc(Math.min(bytes, 64 * 1024));
    for (let left = bytes; left > 0; left -= chunk.length)
      writeSync(fd, chunk, 0, Math.min(left, chunk.length));
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

/**
 * Makes sure the data directory can be written before LMDB touches it. LMDB maps its lock file
 * and creates it with ftruncate, as a file with holes: on a full disk the first touch of such a
 * page is a SIGBUS (measured on a full tmpfs: the proxy died with signal 7 or 11, or exited 1 with
 * a bare "Input/output error", depending on how little space was left). So a probe file of
 * START_SPACE_BYTES is written, synced and removed, and a missing lock file is created with real
 * zero bytes (LMDB keeps a lock file at least as large as it needs and initialises it when it is
 * the first to open the directory).
 */
function prepareDataDir(dir: string): void {
  const fail = (what: string, err: unknown): never => {
    throw new Error(`data directory ${dir}: ${what}: ${(err as Error).message}`, { cause: err });
  };
  try {
    mkdirSync(dir, { recursive: true });
  } catch (err) {
    fail('cannot create it', err);
  }
  const probe = path.join(dir, `.kop-space-check-${process.pid}`);
  try {
    rmSync(probe, { force: true });
    writeAllocated(probe, START_SPACE_BYTES);
  } catch (err) {
    fail(`cannot write ${START_SPACE_BYTES} bytes in it`, err);
  } finally {
    rmSync(probe, { force: true });
  }
  const lock = path.join(dir, 'lock.mdb');
  if (!existsSync(lock)) {
    try {
      writeAllocated(lock, LOCK_FILE_BYTES);
    } catch (err) {
      // Another process created it in between: LMDB handles that.
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') fail('cannot create the lock file', err);
    }
  }
}

async function openEmbedded(
  dir: string,
  common: { operationTimeoutMs?: number },
  { notice, holder }: OpenStoreOptions,
): Promise<OffsetStore> {
  prepareDataDir(dir);
  // Held before LMDB opens it: a second writer never migrates or sweeps beside the first.
  const hold = holder === undefined ? undefined : await holdDataDir(dir, holder);
  const { EmbeddedStore } = await import('./embedded-store.js');
  const store = new EmbeddedStore({
    dataDir: dir,
    ...common,
    ...(notice
      ? {
          onMigrated: (report) =>
            notice(`embedded store migrated to layout ${LAYOUT}`, { dataDir: dir, ...report }),
        }
      : {}),
    ...(hold ? { onClosed: () => hold.release() } : {}),
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
