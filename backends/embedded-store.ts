/**
 * The default store: LMDB (npm `lmdb`) in a local data directory. One LMDB environment with three
 * sub-databases:
 *   offsets  [group, topic, partition] → { o, e, m, c, x }  (offset, leader epoch, metadata,
 *                                         commit and expire timestamps; bigints as decimal strings)
 *   groups   group → GroupState
 *   requests [group, requestId] → { at, r }   (recent commit outcomes, for idempotent resends)
 *   request-times [at, group, requestId] → 1  (the same, by time, so expiry reads only what expires)
 *
 * A commit is one LMDB write transaction: the guard reads the group state and the current
 * offsets and writes every partition inside it, so it is all-or-none and serialised against
 * every other writer (LMDB has a single writer, also across processes sharing the directory).
 *
 * Durability: lmdb-js by default resolves a write when the transaction is *committed* and
 * flushes to disk afterwards (`overlappingSync`). We open with `overlappingSync: false`, so the
 * commit itself includes the fsync, and in addition await `flushed` before acknowledging: an
 * acknowledged commit is on disk (see docs/stores.md).
 */
import { open } from 'lmdb';
import type { Database, RootDatabase } from 'lmdb';
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

interface StoredValue {
  o: string;
  e: number;
  m: string;
  c: string;
  x: string;
}

export interface EmbeddedStoreOptions {
  dataDir: string;
  operationTimeoutMs?: number;
  /**
   * How long a commit outcome is remembered for resends (default 60 s). Shorter than Redis's 10
   * minutes on purpose: nothing between the proxy and an in-process store can hold a command and
   * send it again later (Redis has the client's offline queue and reconnects), so the records only
   * need to outlive the operation deadline. Ten minutes of them, at thousands of commits per
   * second, were millions of records: disk, mapped memory and sweep work for nothing.
   */
  requestTtlMs?: number;
  /** Expired request records removed per write transaction of a sweep (default 20,000). */
  sweepBatch?: number;
}

/** The end of the key range of every key whose first element is `first`. */
const after = (first: string): [string] => [`${first}\u0000`];

export class EmbeddedStore implements OffsetStore {
  readonly kind = 'embedded';
  private readonly root: RootDatabase;
  private readonly offsets: Database<StoredValue, [string, string, number]>;
  private readonly groups: Database<GroupState, string>;
  private readonly requests: Database<{ at: number; r: EncodedOutcome }, [string, string]>;
  private readonly requestTimes: Database<1, [number, string, string]>;
  private readonly timeoutMs: number;
  private readonly requestTtlMs: number;
  private readonly sweepBatch: number;
  private readonly sweeper: NodeJS.Timeout;
  private sweeping = false;
  private closed = false;

  constructor(opts: EmbeddedStoreOptions) {
    this.timeoutMs = opts.operationTimeoutMs ?? 5000;
    this.requestTtlMs = opts.requestTtlMs ?? 60_000;
    this.sweepBatch = opts.sweepBatch ?? 20_000;
    this.root = open({ path: opts.dataDir, overlappingSync: false, noSync: false, maxDbs: 8 });
    this.offsets = this.root.openDB({ name: 'offsets' });
    this.groups = this.root.openDB({ name: 'groups' });
    this.requests = this.root.openDB({ name: 'requests' });
    this.requestTimes = this.root.openDB({ name: 'request-times' });
    this.sweeper = setInterval(() => void this.sweepRequests().catch(() => undefined), 10_000);
    this.sweeper.unref();
  }

  private run<T>(what: string, op: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new StoreUnavailableError(`embedded store: ${what}: closed`));
    return withDeadline(`embedded store: ${what}`, this.timeoutMs, op);
  }

  private decode(group: string, topic: string, partition: number, v: unknown): PartitionOffset {
    const s = v as Partial<StoredValue> | undefined;
    const offset = parseDecimal(s?.o);
    const commitTimestamp = parseDecimal(s?.c);
    const expireTimestamp = parseDecimal(s?.x);
    if (
      offset === undefined ||
      commitTimestamp === undefined ||
      expireTimestamp === undefined ||
      typeof s?.e !== 'number' ||
      typeof s.m !== 'string'
    )
      throw new StoreCorruptError(group, `offset record of ${topic}-${partition} is malformed`);
    return { topic, partition, offset, leaderEpoch: s.e, metadata: s.m, commitTimestamp, expireTimestamp };
  }

  private readState(group: string): GroupState | null {
    const s = this.groups.get(group) as unknown;
    if (s === undefined) return null;
    if (typeof s !== 'object' || s === null || !Array.isArray((s as GroupState).members))
      throw new StoreCorruptError(group, 'group record is malformed');
    return s as GroupState;
  }

  commit(request: CommitRequest): Promise<CommitOutcome> {
    return this.run('commit', async () => {
      const { group } = request;
      const outcome = await this.root.transaction(() => {
        const seen = this.requests.get([group, request.requestId]);
        if (seen !== undefined) return decodeOutcome(seen.r);
        const { outcome, newState } = decideCommit(this.readState(group), request, (tp) => {
          const v = this.offsets.get([group, tp.topic, tp.partition]);
          return v === undefined ? -1n : this.decode(group, tp.topic, tp.partition, v).offset;
        });
        if (outcome.status === 'ok') {
          if (newState !== null) void this.groups.put(group, newState);
          for (const w of request.writes) {
            void this.offsets.put([group, w.topic, w.partition], {
              o: String(w.offset),
              e: w.leaderEpoch,
              m: w.metadata,
              c: String(w.commitTimestamp),
              x: String(w.expireTimestamp),
            });
          }
        }
        const at = Date.now();
        void this.requests.put([group, request.requestId], { at, r: encodeOutcome(outcome) });
        void this.requestTimes.put([at, group, request.requestId], 1);
        return outcome;
      });
      // Belt and braces: with overlappingSync off the commit already synced; this costs nothing then.
      await this.root.flushed;
      return outcome;
    });
  }

  fetch(group: string, partitions: TopicPartition[] | null): Promise<PartitionOffset[]> {
    return this.run('fetch', async () => {
      if (partitions === null) {
        return [...this.offsets.getRange({ start: [group], end: after(group) as never })].map(
          ({ key, value }) => this.decode(group, key[1], key[2], value),
        );
      }
      const out: PartitionOffset[] = [];
      for (const tp of partitions) {
        const v = this.offsets.get([group, tp.topic, tp.partition]);
        if (v !== undefined) out.push(this.decode(group, tp.topic, tp.partition, v));
      }
      return out;
    });
  }

  deleteOffsets(group: string, partitions: TopicPartition[]): Promise<void> {
    return this.run('deleteOffsets', async () => {
      await this.root.transaction(() => {
        for (const tp of partitions) void this.offsets.remove([group, tp.topic, tp.partition]);
      });
      await this.root.flushed;
    });
  }

  deleteGroup(group: string): Promise<void> {
    return this.run('deleteGroup', async () => {
      await this.root.transaction(() => {
        for (const key of this.offsets.getKeys({ start: [group], end: after(group) as never }))
          void this.offsets.remove(key);
        void this.groups.remove(group);
      });
      await this.root.flushed;
    });
  }

  listGroups(): Promise<string[]> {
    return this.run('listGroups', async () => {
      const names = new Set<string>(this.groups.getKeys());
      // Skip from group to group instead of walking every partition.
      let start: unknown[] = [];
      for (;;) {
        let next: [string, string, number] | undefined;
        for (const k of this.offsets.getKeys({ start: start as never, limit: 1 })) next = k;
        if (next === undefined) break;
        names.add(next[0]);
        start = after(next[0]);
      }
      return [...names];
    });
  }

  getGroup(group: string): Promise<GroupState | null> {
    return this.run('getGroup', async () => this.readState(group));
  }

  updateGroup(group: string, update: GroupUpdate): Promise<void> {
    return this.run('updateGroup', async () => {
      await this.root.transaction(() => {
        void this.groups.put(group, applyGroupUpdate(this.readState(group), update));
      });
      await this.root.flushed;
    });
  }

  ping(): Promise<void> {
    return this.run('ping', async () => {
      this.root.getStats();
    });
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.sweeper);
    await this.root.close();
  }

  /**
   * Removes expired request records, in write transactions of `sweepBatch` so that none holds the
   * writer long, and batch after batch until none is left: a fixed amount per 10 s tick fell behind
   * any commit rate above it (2,000/s at the old 20,000 per tick), and the records piled up.
   */
  private async sweepRequests(): Promise<void> {
    if (this.closed || this.sweeping) return;
    this.sweeping = true;
    try {
      for (;;) {
        const cutoff = Date.now() - this.requestTtlMs;
        let removed = 0;
        await this.root.transaction(() => {
          for (const key of this.requestTimes.getKeys({ end: [cutoff] as never, limit: this.sweepBatch })) {
            void this.requests.remove([key[1], key[2]]);
            void this.requestTimes.remove(key);
            removed++;
          }
        });
        if (removed < this.sweepBatch || this.closed) return;
      }
    } finally {
      this.sweeping = false;
    }
  }
}
