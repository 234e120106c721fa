/**
 * `redis://`, `rediss://`, `redis+sentinel://`, `redis+cluster://` through ioredis.
 *
 * Keys of group G (one hash slot, the tag is never empty even for G = ""):
 *   <prefix>:{g:G}:offsets        hash  "<topic>:<partition>" → "<offset>|<leaderEpoch>|<commitTs>|<expireTs>|<metadata>"
 *                                       (plus "~encoding" once it has 32 fields; see redis-scripts.ts)
 *   <prefix>:{g:G}:state          string, GroupState JSON
 *   <prefix>:{g:G}:orders         hash  "<topic>:<partition>" → "<instance>:<seq>", the read order of
 *                                       a contended commit that wrote the offset (commit-order.ts);
 *                                       expires 10 minutes after the last one (redis-scripts.ts)
 *   <prefix>:{g:G}:req:<requestId> string, a commit's outcome, expires after requestTtlMs
 *
 * A commit is ONE script (redis-scripts.ts, sent by redis-commit.ts): ioredis may resend it after
 * a reconnect, and the request record makes the second run answer the first run's outcome instead
 * of applying again.
 */
import { Cluster } from 'ioredis';
import type { Redis } from 'ioredis';
import { describeConnectionError } from './connection-problem.js';
import type { Endpoint } from './connection-problem.js';
import { isCorruptionReply } from './redis-reply.js';
import { asStoreError, StoreCorruptError, StoreUnavailableError, withDeadline } from './errors.js';
import { parseDecimal } from './outcome-codec.js';
import { fieldOf } from './redis-pack.js';
import { localNow, MARGIN_MS, PROBE_EVERY_MS, RedisClock } from './redis-clock.js';
import {
  COMMIT_LUA,
  DELETE_GROUP_LUA,
  DELETE_OFFSETS_LUA,
  EXPIRED_REPLY,
  HASHTABLE_MARKER_FIELD,
  LEASE_LUA,
  RELEASE_LEASE_LUA,
  UPDATE_GROUP_LUA,
} from './redis-scripts.js';
import { createRedisClient } from './redis-client.js';
import { RedisCommits } from './redis-commit.js';
import { keySlot } from './redis-slot.js';
import { parseRedisUrl } from './redis-url.js';
import { sleepUntil, UNKNOWN, untilOrUnknown } from './redis-validity.js';
import type { RedisTarget } from './redis-url.js';
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

interface ScriptClient {
  kopUpdateGroup(key: string, update: string, validUntil: number): Promise<number | string>;
  kopDeleteOffsets(
    offsets: string,
    orders: string,
    validUntil: number,
    ...fields: string[]
  ): Promise<number | string>;
  kopDeleteGroup(
    offsets: string,
    state: string,
    orders: string,
    validUntil: number,
  ): Promise<number | string>;
  kopLease(key: string, holder: string, ttlMs: number): Promise<number>;
  kopReleaseLease(key: string, holder: string): Promise<number>;
}

export interface RedisStoreOptions {
  operationTimeoutMs?: number;
}

export class RedisStore implements OffsetStore {
  readonly kind = 'redis';
  private readonly client: Redis | Cluster;
  private readonly target: RedisTarget;
  private readonly timeoutMs: number;
  /** The last part of a commit's deadline, after its validity, for reading its record back. */
  private readonly readBackMs: number;
  private readonly commits: RedisCommits;
  private readonly clock = new RedisClock();
  private readonly prober: NodeJS.Timeout;
  private closed = false;
  /** The last connection error of the client, in words (connectionProblem); null once ready. */
  private problem: string | null = null;

  constructor(url: string, opts: RedisStoreOptions = {}) {
    this.target = parseRedisUrl(url);
    this.timeoutMs = opts.operationTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
    const t = this.target;
    this.client = createRedisClient(t, this.timeoutMs);
    // Errors surface through the commands (an unhandled 'error' event would crash the process);
    // the last one is kept so failures can say which server did not answer, and why.
    const where = t.endpoints.map((e) => `${e.host}:${e.port}`).join(',');
    this.client.on('error', (err: unknown) => (this.problem = describeConnectionError(err, where, t.mode)));
    this.client.on(
      'node error',
      (err: unknown) => (this.problem = describeConnectionError(err, where, t.mode)),
    );
    this.client.on('ready', () => (this.problem = null));
    this.client.defineCommand('kopCommit', { numberOfKeys: 4, lua: COMMIT_LUA });
    this.client.defineCommand('kopUpdateGroup', { numberOfKeys: 1, lua: UPDATE_GROUP_LUA });
    this.client.defineCommand('kopDeleteOffsets', { numberOfKeys: 2, lua: DELETE_OFFSETS_LUA });
    this.client.defineCommand('kopDeleteGroup', { numberOfKeys: 3, lua: DELETE_GROUP_LUA });
    this.client.defineCommand('kopLease', { numberOfKeys: 1, lua: LEASE_LUA });
    this.client.defineCommand('kopReleaseLease', { numberOfKeys: 1, lua: RELEASE_LEASE_LUA });
    this.readBackMs = Math.min(1000, Math.max(50, Math.floor(this.timeoutMs / 4)));
    this.commits = new RedisCommits({
      client: this.client,
      target: this.target,
      timeoutMs: this.timeoutMs,
      readBackMs: this.readBackMs,
      key: (group, suffix) => this.key(group, suffix),
      validUntil: (group, validTo) => this.validUntil(group, validTo),
    });
    this.prober = setInterval(() => this.clock.refresh(this.nodes('all')), PROBE_EVERY_MS);
    this.prober.unref();
  }

  /** The connections to Redis servers: the client, or a Cluster's node connections. */
  private nodes(role: 'all' | 'master'): Redis[] {
    return this.client instanceof Cluster ? this.client.nodes(role) : [this.client];
  }

  private key(group: string, suffix: string): string {
    return `${this.target.prefix}:{g:${group}}:${suffix}`;
  }

  private get scripts(): ScriptClient {
    return this.client as unknown as ScriptClient;
  }

  private run<T>(what: string, group: string | null, op: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new StoreUnavailableError(`redis store: ${what}: closed`));
    return withDeadline(
      `redis store: ${what}`,
      this.timeoutMs,
      group === null ? op : this.checked(group, op),
    );
  }

  /** `op` with Redis's corruption errors (a wrong key type, KOPCORRUPT) as StoreCorruptError of `group`. */
  private checked<T>(group: string, op: () => Promise<T>): () => Promise<T> {
    return () =>
      op().catch((err: unknown) => {
        if (isCorruptionReply(err))
          throw new StoreCorruptError(group, (err as Error).message, { cause: err });
        throw err;
      });
  }

  /** The commit, with its validity and a definitive outcome (redis-commit.ts). */
  commit(request: CommitRequest): Promise<CommitOutcome> {
    if (this.closed) return Promise.reject(new StoreUnavailableError('redis store: commit: closed'));
    const validTo = localNow() + this.timeoutMs - this.readBackMs;
    return this.checked(request.group, () => this.commits.run(request, validTo))().catch((err: unknown) => {
      throw asStoreError('redis store: commit', err);
    });
  }

  /**
   * A lower bound of (Redis clock - local clock) for the server that runs `group`'s commit: the
   * primary of its slot in a Cluster (and no larger than any other node's known bound: after a
   * failover the script may run on another node), the current connection otherwise.
   */
  private async skewBound(group: string, validTo: number): Promise<number> {
    const client = this.client;
    const probe = (op: () => Promise<number>): Promise<number> =>
      withDeadline('redis store: commit: reading the clock', Math.max(1, validTo - localNow()), op);
    if (!(client instanceof Cluster))
      return this.clock.known(client) ?? probe(() => this.clock.probe(client));
    const nodes = client.nodes('all');
    const owner = client.slots[keySlot(this.key(group, 'offsets'))]?.[0];
    const node = nodes.find((n) => `${n.options.host}:${n.options.port}` === owner);
    let bound =
      node === undefined
        ? // Slots not known yet: TIME of any node (the cluster client waits until it is ready).
          await probe(async () => {
            const [seconds, micros] = await client.time();
            return Number(seconds) * 1000 + Number(micros) / 1000 - localNow();
          })
        : (this.clock.known(node) ?? (await probe(() => this.clock.probe(node))));
    for (const n of nodes) bound = Math.min(bound, this.clock.known(n) ?? bound);
    return bound;
  }

  private decode(group: string, field: string, value: string): PartitionOffset {
    const sep = field.lastIndexOf(':');
    const parts = value.split('|');
    const offset = parseDecimal(parts[0]);
    const leaderEpoch = Number(parts[1]);
    const commitTimestamp = parseDecimal(parts[2]);
    const expireTimestamp = parseDecimal(parts[3]);
    const partition = Number(field.slice(sep + 1));
    if (
      sep < 0 ||
      parts.length < 5 ||
      offset === undefined ||
      commitTimestamp === undefined ||
      expireTimestamp === undefined ||
      !Number.isInteger(leaderEpoch) ||
      !Number.isInteger(partition)
    )
      throw new StoreCorruptError(group, `offset field ${JSON.stringify(field)} holds a malformed value`);
    // The metadata is last and may itself contain '|'.
    const metadata = value.slice(parts.slice(0, 4).join('|').length + 1);
    return {
      topic: field.slice(0, sep),
      partition,
      offset,
      leaderEpoch,
      metadata,
      commitTimestamp,
      expireTimestamp,
    };
  }

  fetch(group: string, partitions: TopicPartition[] | null): Promise<PartitionOffset[]> {
    return this.run('fetch', group, async () => {
      const key = this.key(group, 'offsets');
      if (partitions === null) {
        const all = await this.client.hgetall(key);
        const out: PartitionOffset[] = [];
        for (const [f, v] of Object.entries(all)) {
          if (f !== HASHTABLE_MARKER_FIELD) out.push(this.decode(group, f, v));
        }
        return out;
      }
      if (partitions.length === 0) return [];
      const fields = partitions.map(fieldOf);
      const values = await this.client.hmget(key, ...fields);
      const out: PartitionOffset[] = [];
      values.forEach((v, i) => {
        if (v !== null) out.push(this.decode(group, fields[i]!, v));
      });
      return out;
    });
  }

  deleteOffsets(group: string, partitions: TopicPartition[]): Promise<void> {
    if (partitions.length === 0) return this.run('deleteOffsets', group, async () => undefined);
    return this.validWrite('deleteOffsets', group, (validUntil) =>
      this.scripts.kopDeleteOffsets(
        this.key(group, 'offsets'),
        this.key(group, 'orders'),
        validUntil,
        ...partitions.map(fieldOf),
      ),
    );
  }

  deleteGroup(group: string): Promise<void> {
    return this.validWrite('deleteGroup', group, (validUntil) =>
      this.scripts.kopDeleteGroup(
        this.key(group, 'offsets'),
        this.key(group, 'state'),
        this.key(group, 'orders'),
        validUntil,
      ),
    );
  }

  /**
   * A write without an outcome record (a delete, a membership update), with a validity as a
   * commit's: `send` passes `validUntil` to a script that starts with validityPrologue. When the
   * answer leaves the outcome unknown, the error is reported only after `validTo`, when no copy of
   * the script can apply any more (it may have applied before; both are idempotent, so the caller
   * may repeat them).
   */
  private validWrite(
    what: string,
    group: string,
    send: (validUntil: number) => Promise<number | string>,
  ): Promise<void> {
    if (this.closed) return Promise.reject(new StoreUnavailableError(`redis store: ${what}: closed`));
    const validTo = localNow() + this.timeoutMs - this.readBackMs;
    return this.checked(group, async () => {
      const validUntil = await this.validUntil(group, validTo);
      const first = await untilOrUnknown(
        send(validUntil).then((reply) => (reply === EXPIRED_REPLY ? UNKNOWN : true)),
        validTo,
      );
      if (first.outcome !== undefined) return;
      await sleepUntil(validTo);
      const why = first.failure instanceof Error ? first.failure.message : 'no answer in time';
      throw new StoreUnavailableError(
        `redis store: ${what}: outcome unknown (${why}); it cannot apply any more`,
        {
          cause: first.failure,
          timedOut: !(first.failure instanceof Error),
        },
      );
    })().catch((err: unknown) => {
      throw asStoreError(`redis store: ${what}`, err);
    });
  }

  /** `validTo` (local, monotonic) in Redis's clock, less the margin (redis-clock.ts). */
  private async validUntil(group: string, validTo: number): Promise<number> {
    return Math.floor(validTo + (await this.skewBound(group, validTo)) - MARGIN_MS);
  }

  listGroups(): Promise<string[]> {
    return this.run('listGroups', null, async () => {
      const nodes = this.client instanceof Cluster ? this.client.nodes('master') : [this.client];
      const prefix = `${this.target.prefix}:{g:`;
      const groups = new Set<string>();
      for (const node of nodes) {
        let cursor = '0';
        do {
          const [next, keys] = await node.scan(cursor, 'MATCH', `${this.target.prefix}:{g:*`, 'COUNT', 1000);
          cursor = next;
          for (const k of keys) {
            for (const suffix of ['}:offsets', '}:state']) {
              if (k.startsWith(prefix) && k.endsWith(suffix))
                groups.add(k.slice(prefix.length, k.length - suffix.length));
            }
          }
        } while (cursor !== '0');
      }
      return [...groups];
    });
  }

  private parseState(group: string, raw: string | null): GroupState | null {
    if (raw === null || raw === '') return null;
    try {
      const s = JSON.parse(raw) as GroupState;
      if (typeof s === 'object' && s !== null && Array.isArray(s.members)) return s;
    } catch {
      // fall through
    }
    throw new StoreCorruptError(group, 'group state is not a group record');
  }

  getGroup(group: string): Promise<GroupState | null> {
    return this.run('getGroup', group, async () =>
      this.parseState(group, await this.client.get(this.key(group, 'state'))),
    );
  }

  updateGroup(group: string, update: GroupUpdate): Promise<void> {
    return this.validWrite('updateGroup', group, (validUntil) =>
      this.scripts.kopUpdateGroup(this.key(group, 'state'), JSON.stringify(update), validUntil),
    );
  }

  lease(name: string, holder: string, ttlMs: number): Promise<boolean> {
    return this.run('lease', null, async () => {
      return (await this.scripts.kopLease(`${this.target.prefix}:lease:${name}`, holder, ttlMs)) === 1;
    });
  }

  releaseLease(name: string, holder: string): Promise<void> {
    return this.run('releaseLease', null, async () => {
      await this.scripts.kopReleaseLease(`${this.target.prefix}:lease:${name}`, holder);
    });
  }

  /** One hash, `<prefix>:counts` (one slot in a Cluster), a field per count. */
  addToCount(name: string): Promise<void> {
    return this.run('addToCount', null, async () => {
      await this.client.hincrby(`${this.target.prefix}:counts`, name, 1);
    });
  }

  readCounts(): Promise<Map<string, number>> {
    return this.run('readCounts', null, async () => {
      const all = await this.client.hgetall(`${this.target.prefix}:counts`);
      return new Map(Object.entries(all).map(([k, v]) => [k, Number(v)]));
    });
  }

  connectionProblem(): string | null {
    return this.client.status === 'ready' ? null : this.problem;
  }

  /**
   * Behind Sentinel, the master the client is connected to: a ping it does not answer is the
   * master's silence (frozen, or demoted and dropping its clients), while the sentinels, the
   * configured endpoints, answer. Null when not connected (the client's own error says why).
   */
  probeEndpoints(): Endpoint[] | null {
    if (this.target.mode !== 'sentinel' || this.client instanceof Cluster) return null;
    const { remoteAddress, remotePort } = this.client.stream ?? {};
    if (remoteAddress === undefined || remotePort === undefined) return null;
    return [{ host: remoteAddress, port: remotePort, role: `the master ${this.target.sentinelMaster}` }];
  }

  /** Marker keys chosen by ensureMarker. */
  private markerKeys: string[] = [];

  /**
   * One marker key, or in a Cluster one per primary: a key whose hash tag falls into a slot that
   * primary owns when the marker is first written (a primary that loses its data loses its
   * marker; a key moved by resharding moves with its slot and stays checked).
   */
  private chooseMarkerKeys(): string[] {
    const base = `${this.target.prefix}:marker`;
    const client = this.client;
    if (!(client instanceof Cluster)) return [base];
    const owners = new Set(client.slots.map((nodes) => nodes?.[0]).filter((k) => k !== undefined));
    if (owners.size === 0)
      throw new StoreUnavailableError('redis store: the cluster slots are not known yet');
    const keys: string[] = [];
    for (let i = 0; owners.size > 0 && i < 1_000_000; i++) {
      const key = `${base}:{m${i}}`;
      const owner = client.slots[keySlot(key)]?.[0];
      if (owner !== undefined && owners.delete(owner)) keys.push(key);
    }
    return keys;
  }

  ensureMarker(candidate: string): Promise<Map<string, string>> {
    return this.run('ensureMarker', null, async () => {
      const keys = this.chooseMarkerKeys();
      const out = new Map<string, string>();
      for (const key of keys) {
        await this.client.set(key, candidate, 'NX');
        const value = await this.client.get(key);
        if (value === null)
          throw new StoreUnavailableError(`redis store: marker ${key} vanished as it was written`);
        out.set(key, value);
      }
      this.markerKeys = keys;
      return out;
    });
  }

  readMarker(): Promise<Map<string, string | null>> {
    return this.run('readMarker', null, async () => {
      const out = new Map<string, string | null>();
      for (const key of this.markerKeys) out.set(key, await this.client.get(key));
      return out;
    });
  }

  onReconnect(listener: () => void): void {
    const client = this.client;
    if (!(client instanceof Cluster)) {
      client.on('ready', listener);
      return;
    }
    const watched = new WeakSet<Redis>();
    const watch = (node: Redis) => {
      if (watched.has(node)) return;
      watched.add(node);
      node.on('ready', listener);
    };
    client.nodes('all').forEach(watch);
    client.on('+node', watch);
    client.on('ready', listener);
  }

  ping(): Promise<void> {
    return this.run('ping', null, async () => {
      if (this.client instanceof Cluster) await Promise.all(this.client.nodes('master').map((n) => n.ping()));
      else await this.client.ping();
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.prober);
    try {
      await Promise.race([this.client.quit(), new Promise((r) => setTimeout(r, 1000).unref())]);
    } catch {
      // already gone
    }
    this.client.disconnect();
  }
}
