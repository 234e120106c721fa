/**
 * `zk://host:port,host:port/chroot` through node-zookeeper-client, in Kafka 0.8's layout so
 * Burrow (ZooKeeper mode) and CMAK keep reading the offsets. Under the chroot:
 *
 *   /consumers/<group>/offsets/<topic>/<partition>          the offset, decimal UTF-8 (Kafka 0.8)
 *   /consumers/<group>/kop-offset-meta/<topic>/<partition>  JSON {o, e, m, c, x}: offset again,
 *                                                           leader epoch, metadata, commit and
 *                                                           expire timestamps (decimal strings)
 *   /consumers/<group>/kop-state                            GroupState JSON
 *   /consumers/<group>/kop-requests/<requestId>             outcome of an applied commit (swept after a TTL)
 *
 * Group and topic names are used as they are, except characters ZooKeeper forbids and '%' and
 * '/', which are percent-encoded (so ordinary names are exactly where Burrow looks).
 *
 * A commit reads the group state and the partitions' znodes, judges them (commit-guard.ts) and
 * applies everything in one multi fenced by the versions it read, or in several when it does not
 * fit in one: zookeeper-commit.ts. The connection, its retries and deadlines are
 * zookeeper-session.ts; the paths and what the znodes hold, zookeeper-znodes.ts.
 */
import { Exception } from 'node-zookeeper-client';
import type { Client, Stat } from 'node-zookeeper-client';
import { applyGroupUpdate } from './commit-guard.js';
import { StoreCorruptError } from './errors.js';
import { parseDecimal } from './outcome-codec.js';
import { commitToZooKeeper } from './zookeeper-commit.js';
import { DEFAULT_MAX_MULTI_BYTES } from './zookeeper-multi.js';
import { code, Retry, ZooKeeperSession } from './zookeeper-session.js';
import { sync } from './zookeeper-sync.js';
import { MIN_MULTI_BYTES, parseZooKeeperUrl } from './zookeeper-url.js';
import { decodeSegment, parseLease, parseOffset, parseState, ZooKeeperZnodes } from './zookeeper-znodes.js';
import type {
  CommitOutcome,
  CommitRequest,
  GroupState,
  GroupUpdate,
  OffsetStore,
  PartitionOffset,
  TopicPartition,
} from './store.js';
import { DEFAULT_STORE_TIMEOUT_MS } from './store.js';

export { parseZooKeeperUrl } from './zookeeper-url.js';
export { decodeSegment, encodeSegment } from './zookeeper-znodes.js';

export interface ZooKeeperStoreOptions {
  operationTimeoutMs?: number;
  sessionTimeoutMs?: number;
  /**
   * How long request markers are kept (default 2 minutes). Shorter than the other stores' 10:
   * markers are znodes in one directory per group, and a getChildren of it must stay far below
   * ZooKeeper's 1 MB jute.maxbuffer. Our own read-back after a lost connection happens within the
   * commit's deadline, well inside this.
   */
  requestTtlMs?: number;
  /**
   * Largest multi sent, in bytes (default 900,000; the URL's `?maxMultiBytes=` when the option is
   * absent). ZooKeeper drops a connection that sends more than its jute.maxbuffer (1 MB by
   * default), so a larger commit is applied in several multis. Raise both together.
   */
  maxMultiBytes?: number;
}

export class ZooKeeperStore implements OffsetStore {
  readonly kind = 'zookeeper';
  private readonly session: ZooKeeperSession;
  private readonly znodes: ZooKeeperZnodes;
  private readonly requestTtlMs: number;
  private readonly maxMultiBytes: number;
  /** Markers this process created, oldest first, to remove once older than the TTL. */
  private readonly markers: { path: string; at: number }[] = [];
  private readonly sweeper: NodeJS.Timeout;

  constructor(url: string, opts: ZooKeeperStoreOptions = {}) {
    const { connectString, chroot, maxMultiBytes, digest } = parseZooKeeperUrl(url);
    this.znodes = new ZooKeeperZnodes(chroot);
    this.requestTtlMs = opts.requestTtlMs ?? 120_000;
    this.maxMultiBytes = opts.maxMultiBytes ?? maxMultiBytes ?? DEFAULT_MAX_MULTI_BYTES;
    if (!Number.isInteger(this.maxMultiBytes) || this.maxMultiBytes < MIN_MULTI_BYTES)
      throw new Error(`maxMultiBytes must be an integer >= ${MIN_MULTI_BYTES}, got ${this.maxMultiBytes}`);
    this.session = new ZooKeeperSession({
      connectString,
      digest,
      sessionTimeoutMs: opts.sessionTimeoutMs ?? 10_000,
      timeoutMs: opts.operationTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS,
      // Kafka 0.8 layout readers (Burrow's ZooKeeper module, CMAK) watch <chroot>/consumers: it is
      // there as soon as the store has connected, before the first commit.
      dirOnConnect: this.znodes.consumers,
    });
    this.sweeper = setInterval(
      () => void this.sweepMarkers().catch(() => undefined),
      Math.max(1000, Math.min(10_000, this.requestTtlMs / 4)),
    );
    this.sweeper.unref();
  }

  /**
   * node-zookeeper-client can throw from inside its socket 'data' handler after connection trouble
   * (its open issues #23 and #70: a reply parsed at a wrong offset, "Unknown code: <n>"), where no
   * caller can catch it. The process-level handler asks the store; for such an error the client's
   * state is garbage, so it is replaced: operations in flight fail with a connection loss, read
   * back their markers and retry on the new client, as after a session expiry. Returns whether the
   * error was the library's.
   */
  recoverFromFault(err: unknown): boolean {
    // Where it was thrown (a stack frame of the library's files) is what tells: it has no codes.
    const stack = err instanceof Error ? (err.stack ?? '') : '';
    if (!/node-zookeeper-client[\\/]lib/.test(stack)) return false;
    if (this.session.isClosed) return true;
    this.session.replaceClient();
    return true;
  }

  /** Reads, judges and applies one commit (zookeeper-commit.ts). */
  commit(request: CommitRequest): Promise<CommitOutcome> {
    return commitToZooKeeper(
      {
        session: this.session,
        znodes: this.znodes,
        maxMultiBytes: this.maxMultiBytes,
        applied: (marker) => this.markers.push({ path: marker, at: Date.now() }),
      },
      request,
    );
  }

  private async readPartition(
    client: Client,
    group: string,
    tp: TopicPartition,
  ): Promise<PartitionOffset | null> {
    for (let attempt = 0; ; attempt++) {
      const [o, m] = await Promise.all([
        this.session.read(client, this.znodes.offset(group, tp)),
        this.session.read(client, this.znodes.meta(group, tp)),
      ]);
      if (o === null) return null;
      const offset = parseOffset(group, tp, o);
      let meta: { o?: string; e?: number; m?: string; c?: string; x?: string } | undefined;
      try {
        meta = m === null ? undefined : JSON.parse(m.data?.toString('utf8') ?? '');
      } catch {
        throw new StoreCorruptError(group, `metadata znode of ${tp.topic}-${tp.partition} is not JSON`);
      }
      // Two reads, not atomic: if a commit landed between them, read again.
      if (meta !== undefined && meta.o !== String(offset) && attempt < 3) continue;
      const fromMeta = meta !== undefined && meta.o === String(offset);
      return {
        topic: tp.topic,
        partition: tp.partition,
        offset,
        leaderEpoch: fromMeta && typeof meta?.e === 'number' ? meta.e : -1,
        metadata: fromMeta && typeof meta?.m === 'string' ? meta.m : '',
        // An offset written by something else (a Kafka 0.8 consumer): its mtime is the commit time.
        commitTimestamp: (fromMeta ? parseDecimal(meta?.c) : undefined) ?? o.stat.mtime.readBigInt64BE(0),
        expireTimestamp: (fromMeta ? parseDecimal(meta?.x) : undefined) ?? -1n,
      };
    }
  }

  fetch(group: string, partitions: TopicPartition[] | null): Promise<PartitionOffset[]> {
    return this.session.run('fetch', async (expired) => {
      const client = await this.syncedClient(expired);
      let tps = partitions;
      if (tps === null) {
        const base = `${this.znodes.group(group)}/offsets`;
        const topics = await this.session.children(client, base);
        const lists = await Promise.all(
          topics.map(async (t) =>
            (await this.session.children(client, `${base}/${t}`))
              .filter((p) => /^\d+$/.test(p))
              .map((p) => ({ topic: decodeSegment(t), partition: Number(p) })),
          ),
        );
        tps = lists.flat();
      }
      const found = await Promise.all(tps.map((tp) => this.readPartition(client, group, tp)));
      return found.filter((x): x is PartitionOffset => x !== null);
    });
  }

  /**
   * The session's connection once a sync answered on it: the server the session is on may be
   * behind the leader, or cut off from it, and reads after a sync see every write acknowledged
   * before it (zookeeper-sync.ts). Every read a client's answer is made of goes through it.
   */
  private async syncedClient(expired: () => boolean): Promise<Client> {
    const client = await this.session.connected(expired);
    const root = this.znodes.root;
    await this.session.call<undefined>(client, (cb) => sync(client, root === '' ? '/' : root, cb));
    return client;
  }

  private async removeIfThere(client: Client, expired: () => boolean, path: string): Promise<void> {
    try {
      await this.session.write(client, expired, (cb) => client.remove(path, -1, cb));
    } catch (err) {
      if (code(err) !== Exception.NO_NODE) throw err;
    }
  }

  private async removeTree(client: Client, expired: () => boolean, path: string): Promise<void> {
    for (const child of await this.session.children(client, path))
      await this.removeTree(client, expired, `${path}/${child}`);
    try {
      await this.session.write(client, expired, (cb) => client.remove(path, -1, cb));
    } catch (err) {
      const c = code(err);
      if (c === Exception.NOT_EMPTY) throw new Retry(); // a commit raced us: remove again
      if (c !== Exception.NO_NODE) throw err;
    }
  }

  deleteOffsets(group: string, partitions: TopicPartition[]): Promise<void> {
    return this.session.run('deleteOffsets', async (expired) => {
      const client = await this.session.connected(expired);
      await Promise.all(
        partitions.map(async (tp) => {
          await this.removeIfThere(client, expired, this.znodes.offset(group, tp));
          await this.removeIfThere(client, expired, this.znodes.meta(group, tp));
        }),
      );
    });
  }

  deleteGroup(group: string): Promise<void> {
    return this.session.run('deleteGroup', async (expired) => {
      const client = await this.session.connected(expired);
      this.session.forgetDirs();
      await this.removeTree(client, expired, this.znodes.group(group));
    });
  }

  listGroups(): Promise<string[]> {
    return this.session.run('listGroups', async (expired) => {
      const client = await this.syncedClient(expired);
      const consumers = this.znodes.consumers;
      const names = await this.session.children(client, consumers);
      const ours = await Promise.all(
        names.map(async (n) => {
          const kids = await this.session.children(client, `${consumers}/${n}`);
          return kids.includes('offsets') || kids.includes('kop-state') ? decodeSegment(n) : null;
        }),
      );
      return ours.filter((x): x is string => x !== null);
    });
  }

  getGroup(group: string): Promise<GroupState | null> {
    return this.session.run('getGroup', async (expired) =>
      parseState(group, await this.session.read(await this.syncedClient(expired), this.znodes.state(group))),
    );
  }

  updateGroup(group: string, update: GroupUpdate): Promise<void> {
    // Every update is idempotent, so retrying after CONNECTION_LOSS (unknown outcome) is safe.
    return this.session.run('updateGroup', async (expired) => {
      const client = await this.session.connected(expired);
      const path = this.znodes.state(group);
      const read = await this.session.read(client, path);
      const next = Buffer.from(JSON.stringify(applyGroupUpdate(parseState(group, read), update)));
      try {
        if (read === null) {
          await this.session.ensureDir(client, this.znodes.group(group));
          await this.session.write(client, expired, (cb) =>
            client.transaction().create(path, next).setData(path, next, -1).commit(cb),
          );
        } else {
          // Plain setData checks version 0 correctly (only the transaction API has the bug).
          await this.session.write<Stat>(client, expired, (cb) =>
            client.setData(path, next, read.stat.version, cb),
          );
        }
      } catch (err) {
        this.retryOnConflict(err);
      }
    });
  }

  /**
   * Rethrows a failed write of a read-then-write step as a Retry when another writer moved first
   * (a version conflict, a node created meanwhile, or parents gone: read again from scratch), and
   * anything else as it is.
   */
  private retryOnConflict(err: unknown): never {
    const c = code(err);
    if (c === Exception.BAD_VERSION || c === Exception.NODE_EXISTS) throw new Retry();
    if (c === Exception.NO_NODE) {
      this.session.forgetDirs();
      throw new Retry();
    }
    throw err;
  }

  /**
   * A persistent znode `<chroot>/kop-leases/<name>` holding {h, u} (holder, end in ms since the
   * epoch), changed only by a setData against the version just read: of two proxies taking it at
   * once, one gets BAD_VERSION and reads it again.
   */
  lease(name: string, holder: string, ttlMs: number): Promise<boolean> {
    return this.session.run('lease', async (expired) => {
      const client = await this.session.connected(expired);
      const path = this.znodes.lease(name);
      const read = await this.session.read(client, path);
      const next = Buffer.from(JSON.stringify({ h: holder, u: Date.now() + ttlMs }));
      try {
        if (read === null) {
          await this.session.ensureDir(client, this.znodes.leases);
          // A plain create: version 0, and plain setData checks version 0 correctly.
          await this.session.write<string>(client, expired, (cb) => client.create(path, next, cb));
          return true;
        }
        const cur = parseLease(read);
        if (cur !== null && cur.h !== holder && cur.u > Date.now()) return false;
        await this.session.write<Stat>(client, expired, (cb) =>
          client.setData(path, next, read.stat.version, cb),
        );
        return true;
      } catch (err) {
        this.retryOnConflict(err);
      }
    });
  }

  releaseLease(name: string, holder: string): Promise<void> {
    return this.session.run('releaseLease', async (expired) => {
      const client = await this.session.connected(expired);
      const path = this.znodes.lease(name);
      const read = await this.session.read(client, path);
      if (read === null || parseLease(read)?.h !== holder) return;
      try {
        await this.session.write(client, expired, (cb) => client.remove(path, read.stat.version, cb));
      } catch (err) {
        const c = code(err);
        if (c === Exception.BAD_VERSION) throw new Retry();
        if (c !== Exception.NO_NODE) throw err;
      }
    });
  }

  /**
   * A persistent znode `<chroot>/kop-counts/<name>` holding the decimal count, changed by a
   * setData against the version just read (two writers at once: one reads again).
   */
  addToCount(name: string): Promise<void> {
    return this.session.run('addToCount', async (expired) => {
      const client = await this.session.connected(expired);
      const path = this.znodes.count(name);
      const read = await this.session.read(client, path);
      try {
        if (read === null) {
          await this.session.ensureDir(client, this.znodes.counts);
          await this.session.write<string>(client, expired, (cb) =>
            client.create(path, Buffer.from('1'), cb),
          );
          return;
        }
        const next = Buffer.from(String(countOf(read) + 1));
        await this.session.write<Stat>(client, expired, (cb) =>
          client.setData(path, next, read.stat.version, cb),
        );
      } catch (err) {
        this.retryOnConflict(err);
      }
    });
  }

  readCounts(): Promise<Map<string, number>> {
    return this.session.run('readCounts', async (expired) => {
      const client = await this.session.connected(expired);
      const out = new Map<string, number>();
      for (const child of await this.session.children(client, this.znodes.counts)) {
        const read = await this.session.read(client, `${this.znodes.counts}/${child}`);
        if (read !== null) out.set(decodeSegment(child), countOf(read));
      }
      return out;
    });
  }

  ensureMarker(candidate: string): Promise<Map<string, string>> {
    return this.session.run('ensureMarker', async (expired) => {
      const client = await this.session.connected(expired);
      const path = this.znodes.storeMarker;
      const root = this.znodes.root;
      if (root !== '') await this.session.call<string>(client, (cb) => client.mkdirp(root, cb));
      try {
        await this.session.write<string>(client, expired, (cb) =>
          client.create(path, Buffer.from(candidate), cb),
        );
      } catch (err) {
        if (code(err) !== Exception.NODE_EXISTS) throw err;
      }
      const read = await this.session.read(client, path);
      if (read === null) throw new Retry();
      return new Map([[path, read.data?.toString('utf8') ?? '']]);
    });
  }

  readMarker(): Promise<Map<string, string | null>> {
    return this.session.run('readMarker', async (expired) => {
      const path = this.znodes.storeMarker;
      const read = await this.session.read(await this.session.connected(expired), path);
      return new Map([[path, read === null ? null : (read.data?.toString('utf8') ?? '')]]);
    });
  }

  onReconnect(listener: () => void): void {
    this.session.onReconnect(listener);
  }

  ping(): Promise<void> {
    return this.session.run('ping', async (expired) => {
      const client = await this.session.connected(expired);
      const root = this.znodes.root;
      await this.session.call<Stat | null>(client, (cb) => client.exists(root === '' ? '/' : root, cb));
    });
  }

  async close(): Promise<void> {
    if (this.session.isClosed) return;
    clearInterval(this.sweeper);
    this.session.close();
  }

  /**
   * Removes the request markers this process created that are older than the TTL. Markers of a
   * process that died stay behind (a few znodes per crash); deleteGroup removes them with the group.
   */
  private async sweepMarkers(): Promise<void> {
    const client = this.session.connectedClient;
    if (client === null) return;
    const cutoff = Date.now() - this.requestTtlMs;
    const due: string[] = [];
    while (this.markers.length > 0 && this.markers[0]!.at < cutoff) due.push(this.markers.shift()!.path);
    const never = () => false;
    const results = await Promise.allSettled(due.map((path) => this.removeIfThere(client, never, path)));
    // Keep what could not be removed (connection trouble) for the next sweep.
    results.forEach((r, i) => {
      if (r.status === 'rejected') this.markers.unshift({ path: due[i]!, at: 0 });
    });
  }
}

/** A count znode's value; 0 for one that is not a count (not ours: counted from 0 again). */
function countOf(read: { data?: Buffer | undefined }): number {
  const n = Number(read.data?.toString('utf8').trim());
  return Number.isSafeInteger(n) && n >= 0 ? n : 0;
}
