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
 * applies everything in ONE multi that also `check`s the state znode's version and `setData`s
 * each compare-and-set partition with the version it read: any change in between fails the
 * multi, and we start over. The library turns version 0 into -1 ("any") inside a transaction, so
 * a check against a fresh znode would silently pass: every znode we create is created AND
 * setData'd in the same multi, leaving it at version 1, and a version-0 znode somebody else
 * made is bumped by a plain setData (not affected by the bug) before we rely on its version.
 *
 * The multi also creates the request's marker znode: after a lost connection we read it back to
 * learn whether the commit applied, and a retry of an applied commit fails on it (NODE_EXISTS)
 * instead of applying twice.
 */
import type { Socket } from 'node:net';
import { createClient, Exception, State } from 'node-zookeeper-client';
import type { Client, Stat, Transaction } from 'node-zookeeper-client';
import { applyGroupUpdate, decideCommit } from './commit-guard.js';
import { StoreCorruptError, StoreUnavailableError, withDeadline } from './errors.js';
import { decodeOutcome, encodeOutcome, parseDecimal } from './outcome-codec.js';
import type { EncodedOutcome } from './outcome-codec.js';
import type {
  CommitOutcome,
  CommitRequest,
  GroupState,
  GroupUpdate,
  OffsetStore,
  PartitionOffset,
  TopicPartition,
} from './store.js';

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
}

export function parseZooKeeperUrl(url: string): { connectString: string; chroot: string } {
  const m = /^zk:\/\/([^/?#]+)(\/[^?#]*)?$/.exec(url);
  if (m === null)
    throw new Error(`invalid ZooKeeper store URL ${url}: expected zk://host:port[,host:port...][/chroot]`);
  for (const hp of m[1]!.split(',')) {
    if (!/^[^:,]+:\d{1,5}$/.test(hp))
      throw new Error(`invalid ZooKeeper store URL ${url}: bad host:port ${JSON.stringify(hp)}`);
  }
  const chroot = (m[2] ?? '').replace(/\/+$/, '');
  if (chroot.split('/').some((s, i) => i > 0 && (s === '' || s === '.' || s === '..')))
    throw new Error(`invalid ZooKeeper store URL ${url}: bad chroot ${JSON.stringify(chroot)}`);
  return { connectString: m[1]!, chroot };
}

/** Percent-encodes what ZooKeeper does not allow in a path segment, plus '%' and '/'. */
export function encodeSegment(name: string): string {
  if (name === '') return '%';
  if (name === '.' || name === '..') return name.replace(/\./g, '%2E');
  let out = '';
  for (const ch of name) {
    const cp = ch.codePointAt(0)!;
    const forbidden =
      ch === '%' ||
      ch === '/' ||
      cp < 0x20 ||
      (cp >= 0x7f && cp <= 0x9f) ||
      (cp >= 0xd800 && cp <= 0xf8ff) ||
      cp >= 0xfff0;
    out += forbidden ? encodeURIComponent(ch) : ch;
  }
  return out;
}

export function decodeSegment(segment: string): string {
  return segment === '%' ? '' : decodeURIComponent(segment);
}

const code = (err: unknown): number | undefined =>
  err instanceof Exception ||
  (typeof err === 'object' && err !== null && typeof (err as Exception).getCode === 'function')
    ? (err as Exception).getCode()
    : undefined;

/** Turns a node-style callback API into a promise. */
function call<T>(fn: (cb: (err: Exception | Error | null, value: T) => void) => void): Promise<T> {
  return new Promise((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value))));
}

interface Read {
  data: Buffer | undefined;
  stat: Stat;
}

class Retry extends Error {}

interface ConnectionManagerInternals {
  socket?: Socket;
  connect(): void;
}

/**
 * Ends a client for good. `close()` only ends a connected session: on a client that is still
 * connecting it writes to a socket that does not exist yet (a TypeError inside the library), and
 * the client keeps reconnecting. So we also stop its reconnect loop and destroy its socket,
 * reaching into the library's connection manager (pinned: node-zookeeper-client 1.1.x).
 */
function shutdown(client: Client): void {
  const cm = (client as unknown as { connectionManager?: ConnectionManagerInternals }).connectionManager;
  const connected = client.getState() === State.SYNC_CONNECTED;
  try {
    client.close();
  } catch {
    // see above
  }
  if (connected || cm === undefined) return;
  cm.connect = () => undefined;
  const kill = () => cm.socket?.destroy();
  kill();
  // A server lookup already scheduled (spinDelay) may still open one socket.
  for (const ms of [300, 1000]) setTimeout(kill, ms).unref();
}

export class ZooKeeperStore implements OffsetStore {
  readonly kind = 'zookeeper';
  private client: Client;
  private readonly connectString: string;
  private readonly root: string;
  private readonly timeoutMs: number;
  private readonly sessionTimeoutMs: number;
  private readonly requestTtlMs: number;
  /** Parent znodes known to exist (cleared when a multi says otherwise). */
  private readonly knownDirs = new Set<string>();
  /** Markers this process created, oldest first, to remove once older than the TTL. */
  private readonly markers: { path: string; at: number }[] = [];
  private readonly sweeper: NodeJS.Timeout;
  private closed = false;
  private stalls = 0;

  constructor(url: string, opts: ZooKeeperStoreOptions = {}) {
    const { connectString, chroot } = parseZooKeeperUrl(url);
    this.connectString = connectString;
    this.root = chroot;
    this.timeoutMs = opts.operationTimeoutMs ?? 5000;
    this.sessionTimeoutMs = opts.sessionTimeoutMs ?? 10_000;
    this.requestTtlMs = opts.requestTtlMs ?? 120_000;
    this.client = this.newClient();
    this.sweeper = setInterval(
      () => void this.sweepMarkers().catch(() => undefined),
      Math.max(1000, Math.min(10_000, this.requestTtlMs / 4)),
    );
    this.sweeper.unref();
  }

  private newClient(): Client {
    const client = createClient(this.connectString, {
      sessionTimeout: this.sessionTimeoutMs,
      spinDelay: 200,
      retries: 0,
    });
    // Every operation waiting for the connection listens for one state change (connected()).
    client.setMaxListeners(0);
    client.on('state', (state: State) => {
      // Session expiry is final for a client object: replace it. Nothing is lost: an operation
      // in flight fails, reads back its marker and retries on the new client.
      if (state === State.EXPIRED && this.client === client && !this.closed) {
        shutdown(client);
        this.client = this.newClient();
      }
    });
    client.connect();
    return client;
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
    const stack = err instanceof Error ? (err.stack ?? '') : '';
    if (!/node-zookeeper-client[\\/]lib/.test(stack)) return false;
    if (this.closed) return true;
    const old = this.client;
    this.client = this.newClient();
    shutdown(old);
    return true;
  }

  /** The current client once connected. Requests are only issued then: the library would queue them without a timeout. */
  private async connected(): Promise<Client> {
    for (;;) {
      if (this.closed) throw new StoreUnavailableError('zookeeper store: closed');
      const client = this.client;
      if (client.getState() === State.SYNC_CONNECTED) return client;
      await new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          client.removeListener('state', done);
          resolve();
        };
        const timer = setTimeout(done, 100);
        client.once('state', done);
      });
    }
  }

  private run<T>(what: string, op: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new StoreUnavailableError(`zookeeper store: ${what}: closed`));
    let expired = false;
    const result = withDeadline(`zookeeper store: ${what}`, this.timeoutMs, async () => {
      // Retries stop when the deadline has passed (the caller has its answer by then).
      const timer = setTimeout(() => (expired = true), this.timeoutMs);
      try {
        for (;;) {
          try {
            return await op();
          } catch (err) {
            if (expired || this.closed) throw err;
            const c = code(err);
            if (err instanceof Retry || c === Exception.CONNECTION_LOSS || c === Exception.SESSION_EXPIRED) {
              await new Promise((r) => setTimeout(r, 20));
              continue;
            }
            throw err;
          }
        }
      } finally {
        clearTimeout(timer);
      }
    });
    result.then(
      () => (this.stalls = 0),
      (err: unknown) => {
        // A connection that says "connected" but answers nothing (seen after a server restart
        // under load): after two timed-out operations in a row, start over with a new client.
        if (err instanceof StoreUnavailableError && err.timedOut && ++this.stalls >= 2 && !this.closed) {
          this.stalls = 0;
          const old = this.client;
          this.client = this.newClient();
          shutdown(old);
        }
      },
    );
    return result;
  }

  // Paths.
  private groupPath(g: string): string {
    return `${this.root}/consumers/${encodeSegment(g)}`;
  }
  private offsetPath(g: string, tp: TopicPartition): string {
    return `${this.groupPath(g)}/offsets/${encodeSegment(tp.topic)}/${tp.partition}`;
  }
  private metaPath(g: string, tp: TopicPartition): string {
    return `${this.groupPath(g)}/kop-offset-meta/${encodeSegment(tp.topic)}/${tp.partition}`;
  }
  private statePath(g: string): string {
    return `${this.groupPath(g)}/kop-state`;
  }
  private markerPath(g: string, requestId: string): string {
    return `${this.groupPath(g)}/kop-requests/${encodeSegment(requestId)}`;
  }

  private async read(client: Client, path: string): Promise<Read | null> {
    try {
      return await new Promise<Read>((resolve, reject) =>
        client.getData(path, (err, data, stat) => (err ? reject(err) : resolve({ data, stat }))),
      );
    } catch (err) {
      if (code(err) === Exception.NO_NODE) return null;
      throw err;
    }
  }

  private async ensureDir(client: Client, path: string): Promise<void> {
    if (this.knownDirs.has(path)) return;
    await call<string>((cb) => client.mkdirp(path, cb));
    this.knownDirs.add(path);
  }

  private parseState(group: string, read: Read | null): GroupState | null {
    if (read === null) return null;
    try {
      const s = JSON.parse(read.data?.toString('utf8') ?? '') as GroupState;
      if (typeof s === 'object' && s !== null && Array.isArray(s.members)) return s;
    } catch {
      // fall through
    }
    throw new StoreCorruptError(group, 'kop-state znode is not a group record');
  }

  private parseOffset(group: string, tp: TopicPartition, read: Read): bigint {
    const offset = parseDecimal(read.data?.toString('utf8').trim());
    if (offset === undefined)
      throw new StoreCorruptError(
        group,
        `offset znode of ${tp.topic}-${tp.partition} is not a decimal number`,
      );
    return offset;
  }

  /** Bumps a znode at version 0 to 1 with a plain setData, so a later versioned check in a multi is real. */
  private async bumpFromZero(client: Client, path: string, read: Read): Promise<never> {
    try {
      await call<Stat>((cb) => client.setData(path, read.data ?? null, 0, cb));
    } catch (err) {
      if (code(err) !== Exception.BAD_VERSION && code(err) !== Exception.NO_NODE) throw err;
    }
    throw new Retry();
  }

  commit(request: CommitRequest): Promise<CommitOutcome> {
    const { group } = request;
    const marker = this.markerPath(group, request.requestId);
    let checkMeta = false;
    return this.run('commit', async () => {
      const client = await this.connected();
      // Applied before (a resend, or our own attempt whose answer was lost)?
      const prior = await this.read(client, marker);
      if (prior !== null)
        return decodeOutcome(JSON.parse(prior.data?.toString('utf8') ?? '') as EncodedOutcome);

      // One round of pipelined reads: the state, every partition's offset znode, and (only on a
      // retry that met a surprise) whether each metadata znode exists.
      const [stateRead, reads, metaFound] = await Promise.all([
        this.read(client, this.statePath(group)),
        Promise.all(request.writes.map((w) => this.read(client, this.offsetPath(group, w)))),
        checkMeta
          ? Promise.all(
              request.writes.map((w) =>
                call<Stat | null>((cb) => client.exists(this.metaPath(group, w), cb)),
              ),
            )
          : null,
      ]);
      const state = this.parseState(group, stateRead);
      // A metadata znode exists exactly where an offset znode does (written and removed together),
      // except beside offsets a Kafka 0.8 consumer wrote, or after a deleteOffsets cut short: the
      // multi then fails with NO_NODE/NODE_EXISTS and the retry checks each one.
      const metaExists = metaFound ?? reads.map((r) => r !== null);
      const { outcome, newState } = decideCommit(state, request, (tp) => {
        const i = request.writes.findIndex((w) => w.topic === tp.topic && w.partition === tp.partition);
        const r = reads[i];
        return r === null || r === undefined ? -1n : this.parseOffset(group, tp, r);
      });
      if (outcome.status !== 'ok') return outcome;

      if (stateRead !== null && stateRead.stat.version === 0)
        await this.bumpFromZero(client, this.statePath(group), stateRead);
      // A request naming one partition twice: the last write wins (as in the other stores), and
      // the multi must touch each znode once (a second create would fail NODE_EXISTS forever).
      const tpKey = (w: TopicPartition) => `${w.topic}\u0000${w.partition}`;
      const last = new Map<string, number>();
      const casAny = new Set<string>();
      request.writes.forEach((w, i) => {
        last.set(tpKey(w), i);
        if (w.expectedOffset !== undefined) casAny.add(tpKey(w));
      });
      const applied = [...last.values()].sort((a, b) => a - b);
      for (const i of applied) {
        const w = request.writes[i]!;
        const r = reads[i];
        if (r && r.stat.version === 0 && casAny.has(tpKey(w)))
          await this.bumpFromZero(client, this.offsetPath(group, w), r);
      }
      const topics = new Set(request.writes.map((w) => encodeSegment(w.topic)));
      const g = this.groupPath(group);
      await Promise.all([
        this.ensureDir(client, `${g}/kop-requests`),
        ...[...topics].flatMap((t) => [
          this.ensureDir(client, `${g}/offsets/${t}`),
          this.ensureDir(client, `${g}/kop-offset-meta/${t}`),
        ]),
      ]);

      const tx: Transaction = client.transaction();
      if (stateRead === null) {
        const data = Buffer.from(JSON.stringify(newState));
        tx.create(this.statePath(group), data).setData(this.statePath(group), data, -1);
      } else {
        tx.check(this.statePath(group), stateRead.stat.version);
      }
      for (const i of applied) {
        const w = request.writes[i]!;
        const offsetData = Buffer.from(String(w.offset));
        const meta = Buffer.from(
          JSON.stringify({
            o: String(w.offset),
            e: w.leaderEpoch,
            m: w.metadata,
            c: String(w.commitTimestamp),
            x: String(w.expireTimestamp),
          }),
        );
        const r = reads[i];
        if (r === null || r === undefined) {
          // create + setData: the znode starts at version 1 (see the version-0 bug above), and
          // its first write is a real setData (Burrow reads the mtime).
          tx.create(this.offsetPath(group, w), offsetData).setData(this.offsetPath(group, w), offsetData, -1);
          if (metaExists[i])
            tx.setData(this.metaPath(group, w), meta, -1); // left over from a deleted offset
          else tx.create(this.metaPath(group, w), meta);
        } else {
          tx.setData(this.offsetPath(group, w), offsetData, casAny.has(tpKey(w)) ? r.stat.version : -1);
          if (metaExists[i]) tx.setData(this.metaPath(group, w), meta, -1);
          else tx.create(this.metaPath(group, w), meta);
        }
      }
      const encoded = JSON.stringify(encodeOutcome(outcome));
      tx.create(marker, Buffer.from(encoded));
      try {
        await call((cb) => tx.commit(cb));
      } catch (err) {
        const c = code(err);
        if (c === Exception.BAD_VERSION || c === Exception.NODE_EXISTS || c === Exception.NO_NODE) {
          // Something changed under us (or the parents went away): judge again from fresh reads.
          if (c === Exception.NO_NODE) this.knownDirs.clear();
          checkMeta = true;
          throw new Retry();
        }
        // CONNECTION_LOSS / SESSION_EXPIRED: the retry reads the marker back first.
        throw err;
      }
      this.markers.push({ path: marker, at: Date.now() });
      return outcome;
    });
  }

  private async readPartition(
    client: Client,
    group: string,
    tp: TopicPartition,
  ): Promise<PartitionOffset | null> {
    for (let attempt = 0; ; attempt++) {
      const [o, m] = await Promise.all([
        this.read(client, this.offsetPath(group, tp)),
        this.read(client, this.metaPath(group, tp)),
      ]);
      if (o === null) return null;
      const offset = this.parseOffset(group, tp, o);
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

  private async children(client: Client, path: string): Promise<string[]> {
    try {
      return await call<string[]>((cb) => client.getChildren(path, cb));
    } catch (err) {
      if (code(err) === Exception.NO_NODE) return [];
      throw err;
    }
  }

  fetch(group: string, partitions: TopicPartition[] | null): Promise<PartitionOffset[]> {
    return this.run('fetch', async () => {
      const client = await this.connected();
      let tps = partitions;
      if (tps === null) {
        const base = `${this.groupPath(group)}/offsets`;
        const topics = await this.children(client, base);
        const lists = await Promise.all(
          topics.map(async (t) =>
            (await this.children(client, `${base}/${t}`))
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

  private async removeIfThere(client: Client, path: string): Promise<void> {
    try {
      await call((cb) => client.remove(path, -1, cb));
    } catch (err) {
      if (code(err) !== Exception.NO_NODE) throw err;
    }
  }

  private async removeTree(client: Client, path: string): Promise<void> {
    for (const child of await this.children(client, path)) await this.removeTree(client, `${path}/${child}`);
    try {
      await call((cb) => client.remove(path, -1, cb));
    } catch (err) {
      const c = code(err);
      if (c === Exception.NOT_EMPTY) throw new Retry(); // a commit raced us: remove again
      if (c !== Exception.NO_NODE) throw err;
    }
  }

  deleteOffsets(group: string, partitions: TopicPartition[]): Promise<void> {
    return this.run('deleteOffsets', async () => {
      const client = await this.connected();
      await Promise.all(
        partitions.map(async (tp) => {
          await this.removeIfThere(client, this.offsetPath(group, tp));
          await this.removeIfThere(client, this.metaPath(group, tp));
        }),
      );
    });
  }

  deleteGroup(group: string): Promise<void> {
    return this.run('deleteGroup', async () => {
      const client = await this.connected();
      this.knownDirs.clear();
      await this.removeTree(client, this.groupPath(group));
    });
  }

  listGroups(): Promise<string[]> {
    return this.run('listGroups', async () => {
      const client = await this.connected();
      const names = await this.children(client, `${this.root}/consumers`);
      const ours = await Promise.all(
        names.map(async (n) => {
          const kids = await this.children(client, `${this.root}/consumers/${n}`);
          return kids.includes('offsets') || kids.includes('kop-state') ? decodeSegment(n) : null;
        }),
      );
      return ours.filter((x): x is string => x !== null);
    });
  }

  getGroup(group: string): Promise<GroupState | null> {
    return this.run('getGroup', async () =>
      this.parseState(group, await this.read(await this.connected(), this.statePath(group))),
    );
  }

  updateGroup(group: string, update: GroupUpdate): Promise<void> {
    // Every update is idempotent, so retrying after CONNECTION_LOSS (unknown outcome) is safe.
    return this.run('updateGroup', async () => {
      const client = await this.connected();
      const path = this.statePath(group);
      const read = await this.read(client, path);
      const next = Buffer.from(JSON.stringify(applyGroupUpdate(this.parseState(group, read), update)));
      try {
        if (read === null) {
          await this.ensureDir(client, this.groupPath(group));
          await call((cb) => client.transaction().create(path, next).setData(path, next, -1).commit(cb));
        } else {
          // Plain setData checks version 0 correctly (only the transaction API has the bug).
          await call<Stat>((cb) => client.setData(path, next, read.stat.version, cb));
        }
      } catch (err) {
        const c = code(err);
        if (c === Exception.BAD_VERSION || c === Exception.NODE_EXISTS) throw new Retry();
        if (c === Exception.NO_NODE) {
          this.knownDirs.clear();
          throw new Retry();
        }
        throw err;
      }
    });
  }

  ping(): Promise<void> {
    return this.run('ping', async () => {
      const client = await this.connected();
      await call<Stat | null>((cb) => client.exists(this.root === '' ? '/' : this.root, cb));
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.sweeper);
    shutdown(this.client);
  }

  /**
   * Removes the request markers this process created that are older than the TTL. Markers of a
   * process that died stay behind (a few znodes per crash); deleteGroup removes them with the group.
   */
  private async sweepMarkers(): Promise<void> {
    if (this.closed || this.client.getState() !== State.SYNC_CONNECTED) return;
    const client = this.client;
    const cutoff = Date.now() - this.requestTtlMs;
    const due: string[] = [];
    while (this.markers.length > 0 && this.markers[0]!.at < cutoff) due.push(this.markers.shift()!.path);
    const results = await Promise.allSettled(due.map((path) => this.removeIfThere(client, path)));
    // Keep what could not be removed (connection trouble) for the next sweep.
    results.forEach((r, i) => {
      if (r.status === 'rejected') this.markers.unshift({ path: due[i]!, at: 0 });
    });
  }
}
