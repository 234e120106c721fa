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
 * each partition with the version it read: any change in between fails the multi, and we start
 * over; a multi that arrives late (its caller answered) cannot overwrite a later commit. (A commit too large for one multi is applied in several, each fenced
 * the same way: see `commit`.) The library turns version 0 into -1 ("any") inside a transaction, so
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
import type { Client, Stat } from 'node-zookeeper-client';
import { applyGroupUpdate, decideCommit } from './commit-guard.js';
import { StoreCorruptError, StoreUnavailableError, withDeadline } from './errors.js';
import { decodeOutcome, encodeOutcome, parseDecimal } from './outcome-codec.js';
import type { EncodedOutcome } from './outcome-codec.js';
import { RequestWindow } from './request-window.js';
import { DEFAULT_MAX_MULTI_BYTES, splitMulti, toTransaction } from './zookeeper-multi.js';
import { MIN_MULTI_BYTES, parseZooKeeperUrl } from './zookeeper-url.js';
import type { MultiFrame, MultiOp } from './zookeeper-multi.js';
import type {
  CommitOutcome,
  CommitRequest,
  GroupState,
  GroupUpdate,
  OffsetStore,
  OffsetWrite,
  PartitionOffset,
  TopicPartition,
} from './store.js';
import { DEFAULT_STORE_TIMEOUT_MS } from './store.js';

export { parseZooKeeperUrl } from './zookeeper-url.js';

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

/** Requests outstanding per client at most (see request-window.ts for why there is a limit). */
const WINDOW = 256;

/** Identifies a partition within one commit. */
const tpKey = (tp: TopicPartition): string => `${tp.topic}\u0000${tp.partition}`;

/** The metadata znode's content for a write. */
const metaData = (w: OffsetWrite): Buffer =>
  Buffer.from(
    JSON.stringify({
      o: String(w.offset),
      e: w.leaderEpoch,
      m: w.metadata,
      c: String(w.commitTimestamp),
      x: String(w.expireTimestamp),
    }),
  );

interface ConnectionManagerInternals {
  socket?: Socket;
  connect(): void;
  /** Requests not yet written to the socket (sent on the next connection if this one ends). */
  packetQueue?: { queue?: unknown[] };
}

const internals = (client: Client): ConnectionManagerInternals | undefined =>
  (client as unknown as { connectionManager?: ConnectionManagerInternals }).connectionManager;

/** Whether the library holds requests of `client` it has not written to the socket yet. */
function queued(client: Client): boolean {
  return (internals(client)?.packetQueue?.queue?.length ?? 0) > 0;
}

/**
 * Ends a client for good. `close()` only ends a connected session: on a client that is still
 * connecting it writes to a socket that does not exist yet (a TypeError inside the library), and
 * the client keeps reconnecting. So we also stop its reconnect loop and destroy its socket,
 * reaching into the library's connection manager (pinned: node-zookeeper-client 1.1.x).
 */
function shutdown(client: Client): void {
  const cm = internals(client);
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
  /** `user:password` of ZooKeeper's digest scheme, from the URL. */
  private readonly digest: string | undefined;
  private readonly root: string;
  private readonly timeoutMs: number;
  private readonly sessionTimeoutMs: number;
  private readonly requestTtlMs: number;
  private readonly maxMultiBytes: number;
  /** Each client's request window (a replaced client's slots go with it). */
  private readonly windows = new WeakMap<Client, RequestWindow>();
  /** Parent znodes known to exist (cleared when a multi says otherwise). */
  private readonly knownDirs = new Set<string>();
  /** Markers this process created, oldest first, to remove once older than the TTL. */
  private readonly markers: { path: string; at: number }[] = [];
  private readonly sweeper: NodeJS.Timeout;
  private closed = false;
  private stalls = 0;
  private readonly reconnectListeners: (() => void)[] = [];

  constructor(url: string, opts: ZooKeeperStoreOptions = {}) {
    const { connectString, chroot, maxMultiBytes, digest } = parseZooKeeperUrl(url);
    this.connectString = connectString;
    this.digest = digest;
    this.root = chroot;
    this.timeoutMs = opts.operationTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
    this.sessionTimeoutMs = opts.sessionTimeoutMs ?? 10_000;
    this.requestTtlMs = opts.requestTtlMs ?? 120_000;
    this.maxMultiBytes = opts.maxMultiBytes ?? maxMultiBytes ?? DEFAULT_MAX_MULTI_BYTES;
    if (!Number.isInteger(this.maxMultiBytes) || this.maxMultiBytes < MIN_MULTI_BYTES)
      throw new Error(`maxMultiBytes must be an integer >= ${MIN_MULTI_BYTES}, got ${this.maxMultiBytes}`);
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
    this.windows.set(client, new RequestWindow(WINDOW));
    // Every operation waiting for the connection listens for one state change (connected()).
    client.setMaxListeners(0);
    // Kafka 0.8 layout readers (Burrow's ZooKeeper module, CMAK) watch <chroot>/consumers: it is
    // there as soon as the store has connected, before the first commit.
    client.once(
      'connected',
      () => void this.ensureDir(client, `${this.root}/consumers`).catch(() => undefined),
    );
    client.on('state', (state: State) => {
      if (state === State.SYNC_CONNECTED && this.client === client)
        for (const listener of this.reconnectListeners) listener();
      // Session expiry is final for a client object: replace it. Nothing is lost: an operation
      // in flight fails, reads back its marker and retries on the new client.
      if (state === State.EXPIRED && this.client === client && !this.closed) {
        shutdown(client);
        this.client = this.newClient();
      }
    });
    if (this.digest !== undefined) client.addAuthInfo('digest', Buffer.from(this.digest));
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

  /**
   * The current client once connected. Requests are only issued then: the library would queue them
   * without a timeout. Waits no longer than the operation's deadline.
   */
  private async connected(expired: () => boolean): Promise<Client> {
    for (;;) {
      if (this.closed) throw new StoreUnavailableError('zookeeper store: closed');
      const client = this.client;
      if (client.getState() === State.SYNC_CONNECTED) return client;
      if (expired()) throw new StoreUnavailableError('zookeeper store: not connected', { timedOut: true });
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

  /** One request of `client`, through its window. */
  private call<T>(
    client: Client,
    fn: (cb: (err: Exception | Error | null, value: T) => void) => void,
  ): Promise<T> {
    return this.windows.get(client)!.run(() => call(fn));
  }

  /**
   * A write of `client`, through its window, that goes out now or not at all: at the moment the
   * window admits it, the deadline must not have passed (its caller has been answered by then)
   * and the client must be connected with nothing queued before it. The library keeps requests
   * queued while disconnected, or behind a full socket, and sends them on the next connection,
   * however much later; a write that would wait there is not sent (Retry: the attempt starts over
   * from fresh reads, within the deadline). A write already sent may still apply after its
   * caller's deadline (its answer lost); commits are fenced so that it cannot overwrite a later
   * commit (see `commit`).
   */
  private write<T>(
    client: Client,
    expired: () => boolean,
    fn: (cb: (err: Exception | Error | null, value: T) => void) => void,
  ): Promise<T> {
    return this.windows.get(client)!.run(() => {
      if (expired())
        return Promise.reject(
          new StoreUnavailableError('zookeeper store: deadline passed before the write was sent', {
            timedOut: true,
          }),
        );
      if (
        this.closed ||
        client !== this.client ||
        client.getState() !== State.SYNC_CONNECTED ||
        queued(client)
      )
        return Promise.reject(new Retry());
      return call(fn);
    });
  }

  /**
   * Runs `op` until it succeeds or the deadline passes; `op` is told when the deadline has passed,
   * and no new attempt starts after it (the caller has its answer by then).
   */
  private run<T>(what: string, op: (expired: () => boolean) => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new StoreUnavailableError(`zookeeper store: ${what}: closed`));
    const deadline = performance.now() + this.timeoutMs;
    const expired = () => performance.now() >= deadline;
    const result = withDeadline(`zookeeper store: ${what}`, this.timeoutMs, async () => {
      for (;;) {
        if (expired())
          throw new StoreUnavailableError(`zookeeper store: ${what}: no answer within ${this.timeoutMs} ms`, {
            timedOut: true,
          });
        try {
          return await op(expired);
        } catch (err) {
          if (expired() || this.closed) throw err;
          const c = code(err);
          if (err instanceof Retry || c === Exception.CONNECTION_LOSS || c === Exception.SESSION_EXPIRED) {
            await new Promise((r) => setTimeout(r, 20));
            continue;
          }
          throw err;
        }
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
      return await this.call<Read>(client, (cb) =>
        client.getData(path, (err, data, stat) => cb(err, { data, stat })),
      );
    } catch (err) {
      if (code(err) === Exception.NO_NODE) return null;
      throw err;
    }
  }

  private async ensureDir(client: Client, path: string): Promise<void> {
    if (this.knownDirs.has(path)) return;
    await this.call<string>(client, (cb) => client.mkdirp(path, cb));
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
  private async bumpFromZero(
    client: Client,
    expired: () => boolean,
    path: string,
    read: Read,
  ): Promise<never> {
    try {
      await this.write<Stat>(client, expired, (cb) => client.setData(path, read.data ?? null, 0, cb));
    } catch (err) {
      if (code(err) !== Exception.BAD_VERSION && code(err) !== Exception.NO_NODE) throw err;
    }
    throw new Retry();
  }

  /**
   * Reads, judges and applies one commit in one multi (see the file comment). A commit whose
   * multi would exceed maxMultiBytes (6,000 new partitions are about 1.7 MB) is applied in
   * several multis, in order (zookeeper-multi.ts):
   * - every one carries the fence: the `check` of the state znode's version (the first one
   *   creates the state when there is none), so a membership change between two of them fails the
   *   later one and the commit is judged again from fresh reads;
   * - the compare-and-set partitions come first, so when they fit in the first multi (a few
   *   thousand) every compare-and-set is decided together with the fence, and a mismatch writes
   *   nothing;
   * - the request marker is in the last one only: the commit counts as applied once all are.
   * Each multi is atomic, the commit is not: a refusal after the first multi applied (the fence
   * after a membership change, a compare-and-set in a later multi, the deadline) leaves the
   * partitions of the applied ones written. A retry within this call (BAD_VERSION, a lost
   * connection) re-reads and re-judges only the partitions that no answered multi wrote. Those of
   * a multi whose answer was lost may have been written: a compare-and-set among them that finds
   * its partition holding exactly what this request writes (the offset, and the metadata znode
   * with its commit timestamp) counts as matched, as that is our own write; the retry then writes
   * the same values again.
   *
   * Every partition that exists is written with the version this attempt read (a new one is
   * created, which fails if it exists by then), so a multi is fenced against every later write of
   * its partitions as well as against membership changes. A multi of an attempt whose caller was
   * already answered (sent before the deadline, held by a frozen server or a slow connection,
   * applied later) therefore fails BAD_VERSION or NODE_EXISTS when any later commit wrote one of
   * its partitions: it can never overwrite a later commit. Where it applies, no commit touched
   * its partitions or the group's membership since it read them. No multi is sent after the
   * deadline (`write`). The partitions, not the state znode, carry the fence so that members of
   * one group committing their own partitions do not fail each other's multis (a setData of the
   * state in every multi cut 32 concurrent committers of one group from ~600 to ~50 commits/s).
   */
  commit(request: CommitRequest): Promise<CommitOutcome> {
    const { group } = request;
    const marker = this.markerPath(group, request.requestId);
    // A request naming one partition twice: the last write wins (as in the other stores), and
    // the multi must touch each znode once (a second create would fail NODE_EXISTS forever).
    const last = new Map<string, number>();
    const casAny = new Set<string>();
    request.writes.forEach((w, i) => {
      last.set(tpKey(w), i);
      if (w.expectedOffset !== undefined) casAny.add(tpKey(w));
    });
    // Each partition once, in the order of its last write.
    const order = [...last.entries()].sort((a, b) => a[1] - b[1]).map(([k]) => k);
    let checkMeta = false;
    /** Partitions written by an answered multi of this call, and by one whose answer was lost. */
    const written = new Set<string>();
    const inDoubt = new Set<string>();
    return this.run('commit', async (expired) => {
      const client = await this.connected(expired);
      // Applied before (a resend, or our own attempt whose answer was lost)?
      const prior = await this.read(client, marker);
      if (prior !== null)
        return decodeOutcome(JSON.parse(prior.data?.toString('utf8') ?? '') as EncodedOutcome);

      const keys = written.size === 0 ? order : order.filter((k) => !written.has(k));
      const writes = keys.map((k) => request.writes[last.get(k)!]!);
      // One round of pipelined reads: the state, every partition's offset znode, and (only on a
      // retry that met a surprise) whether each metadata znode exists.
      const [stateRead, reads, metaFound] = await Promise.all([
        this.read(client, this.statePath(group)),
        Promise.all(writes.map((w) => this.read(client, this.offsetPath(group, w)))),
        checkMeta
          ? Promise.all(
              writes.map((w) =>
                this.call<Stat | null>(client, (cb) => client.exists(this.metaPath(group, w), cb)),
              ),
            )
          : null,
      ]);
      const state = this.parseState(group, stateRead);
      // A metadata znode exists exactly where an offset znode does (written and removed together),
      // except beside offsets a Kafka 0.8 consumer wrote, or after a deleteOffsets cut short: the
      // multi then fails with NO_NODE/NODE_EXISTS and the retry checks each one.
      const metaExists = metaFound?.map((stat) => stat !== null) ?? reads.map((r) => r !== null);
      const readOf = new Map(keys.map((k, i) => [k, reads[i] ?? null]));
      const own = await this.holdingOwnWrite(
        client,
        group,
        writes,
        reads,
        (k) => inDoubt.has(k) && casAny.has(k),
      );
      const judged =
        written.size === 0 && own.size === 0
          ? request
          : {
              ...request,
              writes: request.writes
                .filter((w) => !written.has(tpKey(w)))
                .map((w) => (own.has(tpKey(w)) ? { ...w, expectedOffset: undefined } : w)),
            };
      const { outcome, newState } = decideCommit(state, judged, (tp) => {
        const r = readOf.get(tpKey(tp));
        return r === null || r === undefined ? -1n : this.parseOffset(group, tp, r);
      });
      if (outcome.status !== 'ok') return outcome;

      if (stateRead !== null && stateRead.stat.version === 0)
        await this.bumpFromZero(client, expired, this.statePath(group), stateRead);
      for (const [i, r] of reads.entries()) {
        if (r && r.stat.version === 0)
          await this.bumpFromZero(client, expired, this.offsetPath(group, writes[i]!), r);
      }
      const topics = new Set(writes.map((w) => encodeSegment(w.topic)));
      const g = this.groupPath(group);
      await Promise.all([
        this.ensureDir(client, `${g}/kop-requests`),
        ...[...topics].flatMap((t) => [
          this.ensureDir(client, `${g}/offsets/${t}`),
          this.ensureDir(client, `${g}/kop-offset-meta/${t}`),
        ]),
      ]);

      const statePath = this.statePath(group);
      const stateData = Buffer.from(JSON.stringify(newState));
      const frame: MultiFrame = {
        firstHead:
          stateRead === null
            ? [
                { type: 'create', path: statePath, data: stateData },
                { type: 'setData', path: statePath, data: stateData, version: -1 },
              ]
            : [{ type: 'check', path: statePath, version: stateRead.stat.version }],
        // The multis after the first: the state znode is at the version read, or at 1 if the first created it.
        head: [{ type: 'check', path: statePath, version: stateRead?.stat.version ?? 1 }],
        tail: [{ type: 'create', path: marker, data: Buffer.from(JSON.stringify(encodeOutcome(outcome))) }],
      };
      const units = writes.map((w, i) =>
        this.partitionOps(group, w, reads[i] ?? null, metaExists[i] ?? false),
      );
      let multis = splitMulti(units, frame, this.maxMultiBytes);
      if (multis.length > 1 && casAny.size > 0) {
        // Compare-and-sets first (see above); the sort is stable.
        const ranked = [...units.keys()].sort(
          (a, b) => Number(casAny.has(keys[b]!)) - Number(casAny.has(keys[a]!)),
        );
        multis = splitMulti(
          ranked.map((i) => units[i]!),
          frame,
          this.maxMultiBytes,
        ).map((m) => ({ ops: m.ops, units: m.units.map((j) => ranked[j]!) }));
      }
      for (const [n, multi] of multis.entries()) {
        const tx = toTransaction(client.transaction(), multi.ops);
        try {
          await this.write(client, expired, (cb) => tx.commit(cb));
        } catch (err) {
          if (err instanceof Retry || err instanceof StoreUnavailableError) throw err;
          const c = code(err);
          if (c === Exception.BAD_VERSION || c === Exception.NODE_EXISTS || c === Exception.NO_NODE) {
            // Something changed under us (or the parents went away): judge again from fresh reads.
            if (c === Exception.NO_NODE) this.knownDirs.clear();
            checkMeta = true;
            throw new Retry();
          }
          // CONNECTION_LOSS / SESSION_EXPIRED: the retry reads the marker back first. Without the
          // marker (not the last multi) it cannot tell whether this one applied.
          if (n < multis.length - 1) for (const i of multi.units) inDoubt.add(keys[i]!);
          throw err;
        }
        for (const i of multi.units) {
          written.add(keys[i]!);
          inDoubt.delete(keys[i]!);
        }
      }
      this.markers.push({ path: marker, at: Date.now() });
      return outcome;
    });
  }

  /** The ops writing one partition: its offset znode and its metadata znode. */
  private partitionOps(group: string, w: OffsetWrite, read: Read | null, metaExists: boolean): MultiOp[] {
    const path = this.offsetPath(group, w);
    const data = Buffer.from(String(w.offset));
    const ops: MultiOp[] =
      read === null
        ? // create + setData: the znode starts at version 1 (see the version-0 bug above), and its
          // first write is a real setData (Burrow reads the mtime).
          [
            { type: 'create', path, data },
            { type: 'setData', path, data, version: -1 },
          ]
        : // The version read: a later commit of this partition fails this multi (see `commit`).
          [{ type: 'setData', path, data, version: read.stat.version }];
    // A metadata znode may be left over from a deleted offset, or missing beside a Kafka 0.8 offset.
    const meta = { path: this.metaPath(group, w), data: metaData(w) };
    ops.push(metaExists ? { type: 'setData', ...meta, version: -1 } : { type: 'create', ...meta });
    return ops;
  }

  /**
   * Of the partitions `suspect` names, those holding exactly what this request writes there: the
   * offset znode its offset, the metadata znode its JSON (commit timestamp included).
   */
  private async holdingOwnWrite(
    client: Client,
    group: string,
    writes: OffsetWrite[],
    reads: (Read | null)[],
    suspect: (key: string) => boolean,
  ): Promise<Set<string>> {
    const candidates = writes.filter(
      (w, i) => suspect(tpKey(w)) && reads[i]?.data?.toString('utf8') === String(w.offset),
    );
    const metas = await Promise.all(candidates.map((w) => this.read(client, this.metaPath(group, w))));
    return new Set(candidates.filter((w, i) => metas[i]?.data?.equals(metaData(w))).map(tpKey));
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
      return await this.call<string[]>(client, (cb) => client.getChildren(path, cb));
    } catch (err) {
      if (code(err) === Exception.NO_NODE) return [];
      throw err;
    }
  }

  fetch(group: string, partitions: TopicPartition[] | null): Promise<PartitionOffset[]> {
    return this.run('fetch', async (expired) => {
      const client = await this.connected(expired);
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

  private async removeIfThere(client: Client, expired: () => boolean, path: string): Promise<void> {
    try {
      await this.write(client, expired, (cb) => client.remove(path, -1, cb));
    } catch (err) {
      if (code(err) !== Exception.NO_NODE) throw err;
    }
  }

  private async removeTree(client: Client, expired: () => boolean, path: string): Promise<void> {
    for (const child of await this.children(client, path))
      await this.removeTree(client, expired, `${path}/${child}`);
    try {
      await this.write(client, expired, (cb) => client.remove(path, -1, cb));
    } catch (err) {
      const c = code(err);
      if (c === Exception.NOT_EMPTY) throw new Retry(); // a commit raced us: remove again
      if (c !== Exception.NO_NODE) throw err;
    }
  }

  deleteOffsets(group: string, partitions: TopicPartition[]): Promise<void> {
    return this.run('deleteOffsets', async (expired) => {
      const client = await this.connected(expired);
      await Promise.all(
        partitions.map(async (tp) => {
          await this.removeIfThere(client, expired, this.offsetPath(group, tp));
          await this.removeIfThere(client, expired, this.metaPath(group, tp));
        }),
      );
    });
  }

  deleteGroup(group: string): Promise<void> {
    return this.run('deleteGroup', async (expired) => {
      const client = await this.connected(expired);
      this.knownDirs.clear();
      await this.removeTree(client, expired, this.groupPath(group));
    });
  }

  listGroups(): Promise<string[]> {
    return this.run('listGroups', async (expired) => {
      const client = await this.connected(expired);
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
    return this.run('getGroup', async (expired) =>
      this.parseState(group, await this.read(await this.connected(expired), this.statePath(group))),
    );
  }

  updateGroup(group: string, update: GroupUpdate): Promise<void> {
    // Every update is idempotent, so retrying after CONNECTION_LOSS (unknown outcome) is safe.
    return this.run('updateGroup', async (expired) => {
      const client = await this.connected(expired);
      const path = this.statePath(group);
      const read = await this.read(client, path);
      const next = Buffer.from(JSON.stringify(applyGroupUpdate(this.parseState(group, read), update)));
      try {
        if (read === null) {
          await this.ensureDir(client, this.groupPath(group));
          await this.write(client, expired, (cb) =>
            client.transaction().create(path, next).setData(path, next, -1).commit(cb),
          );
        } else {
          // Plain setData checks version 0 correctly (only the transaction API has the bug).
          await this.write<Stat>(client, expired, (cb) => client.setData(path, next, read.stat.version, cb));
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
      this.knownDirs.clear();
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
    return this.run('lease', async (expired) => {
      const client = await this.connected(expired);
      const path = this.leasePath(name);
      const read = await this.read(client, path);
      const next = Buffer.from(JSON.stringify({ h: holder, u: Date.now() + ttlMs }));
      try {
        if (read === null) {
          await this.ensureDir(client, `${this.root}/kop-leases`);
          // A plain create: version 0, and plain setData checks version 0 correctly.
          await this.write<string>(client, expired, (cb) => client.create(path, next, cb));
          return true;
        }
        const cur = this.parseLease(read);
        if (cur !== null && cur.h !== holder && cur.u > Date.now()) return false;
        await this.write<Stat>(client, expired, (cb) => client.setData(path, next, read.stat.version, cb));
        return true;
      } catch (err) {
        this.retryOnConflict(err);
      }
    });
  }

  releaseLease(name: string, holder: string): Promise<void> {
    return this.run('releaseLease', async (expired) => {
      const client = await this.connected(expired);
      const path = this.leasePath(name);
      const read = await this.read(client, path);
      if (read === null || this.parseLease(read)?.h !== holder) return;
      try {
        await this.write(client, expired, (cb) => client.remove(path, read.stat.version, cb));
      } catch (err) {
        const c = code(err);
        if (c === Exception.BAD_VERSION) throw new Retry();
        if (c !== Exception.NO_NODE) throw err;
      }
    });
  }

  private leasePath(name: string): string {
    return `${this.root}/kop-leases/${encodeSegment(name)}`;
  }

  private parseLease(read: Read): { h: string; u: number } | null {
    try {
      const v = JSON.parse(read.data?.toString('utf8') ?? '') as { h?: unknown; u?: unknown };
      return typeof v.h === 'string' && typeof v.u === 'number' ? { h: v.h, u: v.u } : null;
    } catch {
      // Not ours: a lease anyone may take.
      return null;
    }
  }

  /** Under the chroot, beside consumers/: written once, gone with the chroot. */
  private get markerZnode(): string {
    return `${this.root}/kop-marker`;
  }

  ensureMarker(candidate: string): Promise<Map<string, string>> {
    return this.run('ensureMarker', async (expired) => {
      const client = await this.connected(expired);
      const path = this.markerZnode;
      if (this.root !== '') await this.call<string>(client, (cb) => client.mkdirp(this.root, cb));
      try {
        await this.write<string>(client, expired, (cb) => client.create(path, Buffer.from(candidate), cb));
      } catch (err) {
        if (code(err) !== Exception.NODE_EXISTS) throw err;
      }
      const read = await this.read(client, path);
      if (read === null) throw new Retry();
      return new Map([[path, read.data?.toString('utf8') ?? '']]);
    });
  }

  readMarker(): Promise<Map<string, string | null>> {
    return this.run('readMarker', async (expired) => {
      const read = await this.read(await this.connected(expired), this.markerZnode);
      return new Map([[this.markerZnode, read === null ? null : (read.data?.toString('utf8') ?? '')]]);
    });
  }

  onReconnect(listener: () => void): void {
    this.reconnectListeners.push(listener);
  }

  ping(): Promise<void> {
    return this.run('ping', async (expired) => {
      const client = await this.connected(expired);
      await this.call<Stat | null>(client, (cb) => client.exists(this.root === '' ? '/' : this.root, cb));
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
    const never = () => false;
    const results = await Promise.allSettled(due.map((path) => this.removeIfThere(client, never, path)));
    // Keep what could not be removed (connection trouble) for the next sweep.
    results.forEach((r, i) => {
      if (r.status === 'rejected') this.markers.unshift({ path: due[i]!, at: 0 });
    });
  }
}
