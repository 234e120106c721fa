/**
 * `redis://`, `rediss://`, `redis+sentinel://`, `redis+cluster://` through ioredis.
 *
 * Keys of group G (one hash slot, the tag is never empty even for G = ""):
 *   <prefix>:{g:G}:offsets        hash  "<topic>:<partition>" → "<offset>|<leaderEpoch>|<commitTs>|<expireTs>|<metadata>"
 *                                       (plus "~encoding" once it has 32 fields; see redis-scripts.ts)
 *   <prefix>:{g:G}:state          string, GroupState JSON
 *   <prefix>:{g:G}:req:<requestId> string, a commit's outcome, expires after requestTtlMs
 *
 * A commit is ONE script (redis-scripts.ts): ioredis may resend it after a reconnect, and the
 * request record makes the second run answer the first run's outcome instead of applying again.
 */
import { Redis, Cluster } from 'ioredis';
import type { RedisOptions } from 'ioredis';
import { describeConnectionError } from './connection-problem.js';
import { StoreCorruptError, StoreUnavailableError, withDeadline } from './errors.js';
import { decodeOutcome, parseDecimal } from './outcome-codec.js';
import type { EncodedOutcome } from './outcome-codec.js';
import { fieldOf, packCommitWrites } from './redis-pack.js';
import {
  COMMIT_LUA,
  DELETE_OFFSETS_LUA,
  HASHTABLE_MARKER_FIELD,
  LEASE_LUA,
  RELEASE_LEASE_LUA,
  UPDATE_GROUP_LUA,
} from './redis-scripts.js';
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

interface ScriptClient {
  kopCommit(...args: (string | number | Buffer)[]): Promise<string>;
  kopUpdateGroup(key: string, update: string): Promise<number>;
  kopDeleteOffsets(key: string, ...fields: string[]): Promise<number>;
  kopLease(key: string, holder: string, ttlMs: number): Promise<number>;
  kopReleaseLease(key: string, holder: string): Promise<number>;
}

interface WaitPipeline {
  kopCommit(...args: (string | number | Buffer)[]): WaitPipeline;
  pexpire(key: string, ms: number): WaitPipeline;
  wait(replicas: number, timeoutMs: number): WaitPipeline;
  exec(): Promise<[Error | null, unknown][]>;
}

const isCorruption = (msg: string) => msg.includes('WRONGTYPE') || msg.includes('KOPCORRUPT');

export interface RedisStoreOptions {
  operationTimeoutMs?: number;
}

/** What the commit script answers for an applied commit (outcome-codec.ts's encoding of ok). */
const OK_REPLY = '{"s":"ok"}';
const OK_OUTCOME: CommitOutcome = Object.freeze({ status: 'ok' });

export class RedisStore implements OffsetStore {
  readonly kind = 'redis';
  private readonly client: Redis | Cluster;
  private readonly target: RedisTarget;
  private readonly timeoutMs: number;
  private closed = false;
  /** The last connection error of the client, in words (connectionProblem); null once ready. */
  private problem: string | null = null;

  constructor(url: string, opts: RedisStoreOptions = {}) {
    this.target = parseRedisUrl(url);
    this.timeoutMs = opts.operationTimeoutMs ?? 5000;
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
    this.client.on('error', (err: unknown) => (this.problem = describeConnectionError(err, where)));
    this.client.on('node error', (err: unknown) => (this.problem = describeConnectionError(err, where)));
    this.client.on('ready', () => (this.problem = null));
    this.client.defineCommand('kopCommit', { numberOfKeys: 3, lua: COMMIT_LUA });
    this.client.defineCommand('kopUpdateGroup', { numberOfKeys: 1, lua: UPDATE_GROUP_LUA });
    this.client.defineCommand('kopDeleteOffsets', { numberOfKeys: 1, lua: DELETE_OFFSETS_LUA });
    this.client.defineCommand('kopLease', { numberOfKeys: 1, lua: LEASE_LUA });
    this.client.defineCommand('kopReleaseLease', { numberOfKeys: 1, lua: RELEASE_LEASE_LUA });
  }

  private key(group: string, suffix: string): string {
    return `${this.target.prefix}:{g:${group}}:${suffix}`;
  }

  private get scripts(): ScriptClient {
    return this.client as unknown as ScriptClient;
  }

  private run<T>(what: string, group: string | null, op: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new StoreUnavailableError(`redis store: ${what}: closed`));
    const checked =
      group === null
        ? op
        : () =>
            op().catch((err: unknown) => {
              const msg = err instanceof Error ? err.message : String(err);
              if (isCorruption(msg)) throw new StoreCorruptError(group, msg, { cause: err });
              throw err;
            });
    return withDeadline(`redis store: ${what}`, this.timeoutMs, checked);
  }

  commit(request: CommitRequest): Promise<CommitOutcome> {
    const { group } = request;
    return this.run('commit', group, async () => {
      const id = request.identity;
      const args: (string | number | Buffer)[] = [
        this.key(group, 'offsets'),
        this.key(group, 'state'),
        this.key(group, `req:${request.requestId}`),
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
      ];
      if (this.target.wait > 0) return this.commitAndWait(this.key(group, `req:${request.requestId}`), args);
      const reply = await this.scripts.kopCommit(...args);
      // The usual answer, without a JSON.parse per commit.
      if (reply === OK_REPLY) return OK_OUTCOME;
      return decodeOutcome(JSON.parse(reply) as EncodedOutcome);
    });
  }

  /**
   * The commit script, a PEXPIRE of its request record and WAIT, as one pipeline: one connection,
   * to the primary that owns the group's slot (ioredis routes a Cluster pipeline by its keys; WAIT
   * has none). WAIT counts the replicas that have every write this connection made before it. The
   * PEXPIRE is such a write even when the script only answered a recorded outcome (a resend after a
   * lost connection writes nothing, and WAIT alone would then return at once), and its result 0
   * says the record is not on this primary at all (a failover promoted a replica that never got
   * the first attempt): then nothing is acknowledged.
   */
  private async commitAndWait(
    requestKey: string,
    args: (string | number | Buffer)[],
  ): Promise<CommitOutcome> {
    const { wait, waitTimeoutMs, requestTtlMs } = this.target;
    const deadline = Date.now() + this.timeoutMs;
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
        // makes a second run harmless), within the deadline.
        if (
          this.client instanceof Cluster &&
          !isCorruption(script![0].message) &&
          Date.now() + 200 < deadline
        ) {
          this.client.refreshSlotsCache();
          await new Promise((r) => setTimeout(r, 100));
          continue;
        }
        throw script![0];
      }
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
    return this.run('deleteOffsets', group, async () => {
      if (partitions.length > 0)
        await this.scripts.kopDeleteOffsets(this.key(group, 'offsets'), ...partitions.map(fieldOf));
    });
  }

  deleteGroup(group: string): Promise<void> {
    return this.run('deleteGroup', group, async () => {
      await this.client.del(this.key(group, 'offsets'), this.key(group, 'state'));
    });
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
    return this.run('updateGroup', group, async () => {
      await this.scripts.kopUpdateGroup(this.key(group, 'state'), JSON.stringify(update));
    });
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

  connectionProblem(): string | null {
    return this.client.status === 'ready' ? null : this.problem;
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
    try {
      await Promise.race([this.client.quit(), new Promise((r) => setTimeout(r, 1000).unref())]);
    } catch {
      // already gone
    }
    this.client.disconnect();
  }
}
