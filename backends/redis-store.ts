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
 * A commit is ONE script (redis-scripts.ts): ioredis may resend it after a reconnect, and the
 * request record makes the second run answer the first run's outcome instead of applying again.
 */
import { Redis, Cluster } from 'ioredis';
import type { RedisOptions } from 'ioredis';
import { describeConnectionError } from './connection-problem.js';
import { isCorruptionReply } from './redis-reply.js';
import { asStoreError, StoreCorruptError, StoreUnavailableError, withDeadline } from './errors.js';
import { checkOrder } from './commit-order.js';
import { decodeOutcome, parseDecimal } from './outcome-codec.js';
import type { EncodedOutcome } from './outcome-codec.js';
import { fieldOf, packCommitWrites } from './redis-pack.js';
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
import { keySlot } from './redis-slot.js';
import { parseRedisUrl } from './redis-url.js';
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
  kopCommit(...args: (string | number | Buffer)[]): Promise<string>;
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

interface WaitPipeline {
  kopCommit(...args: (string | number | Buffer)[]): WaitPipeline;
  pexpire(key: string, ms: number): WaitPipeline;
  wait(replicas: number, timeoutMs: number): WaitPipeline;
  exec(): Promise<[Error | null, unknown][]>;
}

/** A commit whose outcome the first answer did not tell (see RedisStore.commit). */
const UNKNOWN = Symbol('unknown');

/**
 * Waits for `attempt` until local time `until`: its outcome, or `failure` (an error that says
 * nothing about whether it applied; corruption is thrown, it says nothing was written), or
 * neither when it had not answered by then (it may still be running: its result is dropped).
 */
async function untilOrUnknown(
  attempt: Promise<CommitOutcome | typeof UNKNOWN>,
  until: number,
): Promise<{ outcome?: CommitOutcome; failure?: unknown }> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<typeof UNKNOWN>((resolve) => {
    timer = setTimeout(() => resolve(UNKNOWN), Math.max(0, until - localNow()));
  });
  try {
    const result = await Promise.race([attempt, late]);
    return result === UNKNOWN ? {} : { outcome: result };
  } catch (err) {
    if (isCorruptionReply(err) || err instanceof StoreUnavailableError) throw err;
    return { failure: err };
  } finally {
    clearTimeout(timer);
    attempt.catch(() => undefined);
  }
}

async function sleepUntil(t: number): Promise<void> {
  // +1: the timer's granularity; the time must have passed, not nearly.
  for (let left = t - localNow(); left > 0; left = t - localNow())
    await new Promise((r) => setTimeout(r, left + 1));
}

export interface RedisStoreOptions {
  operationTimeoutMs?: number;
}

/**
 * How long a group's orders hash outlives the last contended commit that recorded an order in it
 * (redis-scripts.ts COMMIT_LUA): longer than an older commit of the group, read before that one,
 * can take to reach Redis (its wait behind its connection's earlier requests and for the broker's
 * verdict, then its validity).
 */
const ORDERS_KEPT_MS = 10 * 60_000;

/** What the commit script answers for an applied commit (outcome-codec.ts's encoding of ok). */
const OK_REPLY = '{"s":"ok"}';
const OK_OUTCOME: CommitOutcome = Object.freeze({ status: 'ok' });

export class RedisStore implements OffsetStore {
  readonly kind = 'redis';
  private readonly client: Redis | Cluster;
  private readonly target: RedisTarget;
  private readonly timeoutMs: number;
  /** The last part of a commit's deadline, after its validity, for reading its record back. */
  private readonly readBackMs: number;
  private readonly clock = new RedisClock();
  private readonly prober: NodeJS.Timeout;
  private closed = false;
  /** The last connection error of the client, in words (connectionProblem); null once ready. */
  private problem: string | null = null;

  constructor(url: string, opts: RedisStoreOptions = {}) {
    this.target = parseRedisUrl(url);
    this.timeoutMs = opts.operationTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
    const t = this.target;
    const common: RedisOptions = {
      username: t.username,
      password: t.password,
      ...(t.tls ? { tls: {} } : {}),
      connectTimeout: this.timeoutMs,
      // Fail fast while Redis is down: one retry per command, then the command rejects (our
      // per-operation deadline bounds the rest). Queued commands still go out after a quick reconnect.
      maxRetriesPerRequest: 1,
      enableOfflineQueue: true,
      retryStrategy: (attempt: number) => Math.min(50 * attempt, 1000),
      // Each command goes out as soon as it is issued, not at the end of the event-loop turn:
      // Redis starts on the first commit while the proxy still decodes the next ones, so the two
      // processes work side by side instead of taking turns with whole batches (with 32 closed-loop
      // clients, the batched version left a core partly idle; bench/offset-commits.ts). Writes
      // issued while one is in progress are still coalesced by the socket.
      enableAutoPipelining: false,
    };
    if (t.mode === 'cluster') {
      this.client = new Cluster(t.endpoints, {
        redisOptions: common,
        enableOfflineQueue: true,
        enableAutoPipelining: false,
        maxRedirections: 16,
        retryDelayOnFailover: 100,
        clusterRetryStrategy: (attempt: number) => Math.min(100 * attempt, 1000),
      });
    } else if (t.mode === 'sentinel') {
      this.client = new Redis({
        ...common,
        sentinels: t.endpoints,
        name: t.sentinelMaster,
        db: t.db,
        sentinelPassword: t.sentinelPassword,
      });
    } else {
      this.client = new Redis({
        ...common,
        host: t.endpoints[0]!.host,
        port: t.endpoints[0]!.port,
        db: t.db,
      });
    }
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

  /**
   * A commit carries its own validity (redis-scripts.ts validityPrologue): the script does
   * nothing once Redis's clock has passed `validUntil`, computed from this process's deadline
   * `validTo` and a lower bound of Redis's clock skew (redis-clock.ts), so that no execution can
   * apply after local time `validTo`. An answer that leaves the outcome unknown (a connection
   * error, a lost reply, ioredis giving up, no reply by `validTo`, an expired script) is not
   * reported before `validTo`: from then on nothing can apply the commit any more, so the request
   * record read back then is conclusive (present: the commit applied and its reply was lost, and
   * the recorded outcome is the answer; absent: it never applied). So a commit answered with an
   * error never takes effect afterwards, however late a resend or a held packet reaches Redis.
   * The rest of the deadline (readBackMs) is for that read. (Each step has its own deadline, so
   * the usual path runs one timer, the validity's.)
   */
  commit(request: CommitRequest): Promise<CommitOutcome> {
    const { group } = request;
    if (this.closed) return Promise.reject(new StoreUnavailableError('redis store: commit: closed'));
    const validTo = localNow() + this.timeoutMs - this.readBackMs;
    return this.checked(group, async () => {
      checkOrder(request.order);
      const id = request.identity;
      const requestKey = this.key(group, `req:${request.requestId}`);
      const args: (string | number | Buffer)[] = [
        this.key(group, 'offsets'),
        this.key(group, 'state'),
        requestKey,
        this.key(group, 'orders'),
        id === undefined
          ? ''
          : JSON.stringify({
              g: id.generationIdOrMemberEpoch,
              m: id.memberId,
              i: id.groupInstanceId,
              v: id.requestVersion,
            }),
        this.target.requestTtlMs,
        packCommitWrites(request),
        // Nothing is sent yet: a failure to learn the skew is a plain failure.
        await this.validUntil(group, validTo),
        request.deferIfTransactional === true ? '1' : '',
        // Fixed width, so that the script compares orders as strings (redis-scripts.ts).
        request.order === undefined
          ? ''
          : `${request.order.instance}:${String(request.order.seq).padStart(16, '0')}`,
        request.order?.contended === false ? '' : ORDERS_KEPT_MS,
      ];
      const first =
        this.target.wait > 0
          ? await untilOrUnknown(this.commitAndWait(requestKey, args, validTo), validTo)
          : await untilOrUnknown(
              this.scripts.kopCommit(...args).then((reply) => {
                // The usual answer, without a JSON.parse per commit.
                if (reply === OK_REPLY) return OK_OUTCOME;
                if (reply === EXPIRED_REPLY) return UNKNOWN;
                return decodeOutcome(JSON.parse(reply) as EncodedOutcome);
              }),
              validTo,
            );
      if (first.outcome !== undefined) return first.outcome;
      await sleepUntil(validTo);
      return withDeadline('redis store: commit', this.readBackMs, () =>
        this.readBack(requestKey, first.failure),
      );
    })().catch((err: unknown) => {
      throw asStoreError('redis store: commit', err);
    });
  }

  /**
   * After the validity: the request record says whether the commit applied (with ?wait=N, it
   * must also be on N replicas, as for the commit itself).
   */
  private async readBack(requestKey: string, failure: unknown): Promise<CommitOutcome> {
    const why =
      failure instanceof Error
        ? failure.message
        : `no answer within ${this.timeoutMs - this.readBackMs} ms (or the script ran too late)`;
    let recorded: string | null;
    if (this.target.wait > 0) {
      const { wait, waitTimeoutMs, requestTtlMs } = this.target;
      const [got, touched, waited] = (await this.client
        .pipeline()
        .get(requestKey)
        .pexpire(requestKey, requestTtlMs)
        .wait(wait, waitTimeoutMs)
        .exec()) as [Error | null, unknown][];
      if (got![0] !== null) throw got![0];
      recorded = (got![1] as string | null) ?? null;
      if (recorded !== null && (touched![1] !== 1 || Number(waited![1]) < wait))
        throw new StoreUnavailableError(
          `redis store: commit applied on the primary, not on ${wait} replicas within ${waitTimeoutMs} ms (after: ${why})`,
        );
    } else {
      recorded = await this.client.get(requestKey);
    }
    if (recorded === null)
      throw new StoreUnavailableError(`redis store: commit not applied: ${why}`, {
        cause: failure,
        timedOut: !(failure instanceof Error),
      });
    return decodeOutcome(JSON.parse(recorded) as EncodedOutcome);
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

  /**
   * The commit script, a PEXPIRE of its request record and WAIT, as one pipeline: one connection,
   * to the primary that owns the group's slot (ioredis routes a Cluster pipeline by its keys; WAIT
   * has none). WAIT counts the replicas that have every write this connection made before it. The
   * PEXPIRE is such a write even when the script only answered a recorded outcome (a resend after a
   * lost connection writes nothing, and WAIT alone would then return at once), and its result 0
   * says the record is not on this primary at all (a failover promoted a replica that never got
   * the first attempt): then nothing is acknowledged. UNKNOWN when the script ran too late.
   */
  private async commitAndWait(
    requestKey: string,
    args: (string | number | Buffer)[],
    validTo: number,
  ): Promise<CommitOutcome | typeof UNKNOWN> {
    const { wait, waitTimeoutMs, requestTtlMs } = this.target;
    for (;;) {
      const pipeline = this.client.pipeline() as unknown as WaitPipeline;
      const [script, touched, waited] = (await pipeline
        .kopCommit(...args)
        .pexpire(requestKey, requestTtlMs)
        .wait(wait, waitTimeoutMs)
        .exec()) as [Error | null, unknown][];
      if (script![0] !== null) {
        // A Cluster pipeline is not redirected when its commands fail differently (the script
        // MOVED, WAIT answered): learn the new slot owner and run it again (the request record
        // makes a second run harmless), within the validity.
        if (this.client instanceof Cluster && !isCorruptionReply(script![0]) && localNow() + 200 < validTo) {
          this.client.refreshSlotsCache();
          await new Promise((r) => setTimeout(r, 100));
          continue;
        }
        throw script![0];
      }
      if (script![1] === EXPIRED_REPLY) return UNKNOWN;
      const outcome = decodeOutcome(JSON.parse(String(script![1])) as EncodedOutcome);
      if (touched![0] !== null || touched![1] !== 1) {
        throw new StoreUnavailableError(
          "redis store: the commit's request record is not on the primary that answered WAIT (failover?)",
        );
      }
      if (waited![0] !== null) throw waited![0];
      const acked = Number(waited![1]);
      if (acked < wait) {
        // Applied on the primary, not (yet) on enough replicas: the client retries with a new
        // request; the outcome stays unknown to it, as after any timeout.
        throw new StoreUnavailableError(
          `redis store: commit reached ${acked} of ${wait} replicas within ${waitTimeoutMs} ms`,
        );
      }
      return outcome;
    }
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
        send(validUntil).then((reply) => (reply === EXPIRED_REPLY ? UNKNOWN : OK_OUTCOME)),
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
