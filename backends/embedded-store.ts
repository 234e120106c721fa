/**
 * The default store: LMDB (npm `lmdb`) in a local data directory, in layout 4 (its databases and
 * keys: embedded-databases.ts).
 *
 * A data directory of layout 1 (ordered-binary array keys of the names), layout 2 (one offsets
 * value per partition, in offsets-v2) or layout 3 (no read orders) is migrated when the store
 * opens (embedded-migrate.ts).
 *
 * A commit runs inside one LMDB write transaction: the guard reads the group state and the
 * current offsets and writes every block of partitions inside it, so it is all-or-none and serialised
 * against every other writer (LMDB has a single writer, also across processes sharing the
 * directory). Every write that arrives while a transaction is being committed and synced joins
 * the next one (group commit, embedded-group-commit.ts): one fsync covers them all.
 *
 * Durability: lmdb-js by default resolves a write when the transaction is *committed* and
 * flushes to disk afterwards (`overlappingSync`). We open with `overlappingSync: false`, so the
 * commit itself includes the fsync, and answer from the transaction's own outcome: an
 * acknowledged commit is on disk (see docs/stores.md).
 *
 * Deadlines: a write's deadline is checked when its turn inside the transaction comes, so a write
 * whose caller was already answered (timed out) writes nothing; once its body has run, its caller
 * waits for the transaction's outcome instead of being told "timed out" while the write may still
 * commit. So an answered write never takes effect afterwards.
 *
 * A failed commit (disk full, I/O error) rejects the writes of its transaction, and lmdb-js also
 * rejects promises of its own that nobody awaits: the `commitError` attached to the error, and
 * with `eventTurnBatching` (its default) one promise per event-loop batch. Unhandled, either one
 * ends the process (exit 70 in the CLI). We open without event-turn batching (transactions of one
 * turn are still committed together: lmdb-js starts writing on the next turn) and handle every
 * `commitError` where the failure surfaces (embedded-group-commit.ts).
 */
import { statSync } from 'node:fs';
import { join } from 'node:path';
import { open } from 'lmdb';
import { walkInPages } from './bounded-walk.js';
import { applyGroupUpdate, decideCommit } from './commit-guard.js';
import {
  groupKey,
  offsetKey,
  orderedRequestKey,
  prefixRange,
  requestKey,
  requestTimeKey,
} from './embedded-keys.js';
import { checkOrder } from './commit-order.js';
import { openDatabases, readGroupRecord } from './embedded-databases.js';
import type { EmbeddedDatabases, GroupRecord } from './embedded-databases.js';
import { LAYOUT, migrate, readableLayout } from './embedded-migrate.js';
import type { MigrationReport } from './embedded-migrate.js';
import { StoreUnavailableError, withDeadline } from './errors.js';
import { withDiskSpace } from './embedded-disk-space.js';
import { GroupCommit, settle } from './embedded-group-commit.js';
import {
  blockOf,
  decodeBlock,
  encodeBlockWrites,
  mergeBlock,
  topicHeader,
  withoutPartitions,
} from './embedded-value.js';
import type { BlockWrite } from './embedded-value.js';
import { RequestSweep } from './embedded-request-sweep.js';
import { decodeOutcome, encodeOutcome } from './outcome-codec.js';
import { issuedAt, timeOrderedIdBytes } from './request-id.js';
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

export interface EmbeddedStoreOptions {
  dataDir: string;
  operationTimeoutMs?: number;
  /**
   * How long a commit outcome is remembered for resends (default 60 s). Shorter than Redis's 10
   * minutes on purpose: nothing between the proxy and an in-process store can hold a command and
   * send it again later (Redis has the client's offline queue and reconnects), so the records only
   * need to outlive the operation deadline.
   */
  requestTtlMs?: number;
  /** Expired request records removed per write transaction of a sweep (default 5,000). */
  sweepBatch?: number;
  /** Told what an opening migration from layout 1 or 2 copied (not called when none ran). */
  onMigrated?: (report: MigrationReport) => void;
  /** Called once the environment is closed: the data directory's hold is released then. */
  onClosed?: () => Promise<void>;
}

/** LMDB's data file in the data directory. */
const DATA_FILE = 'data.mdb';

export class EmbeddedStore implements OffsetStore {
  readonly kind = 'embedded';
  /**
   * Settles when the store can serve: the directory is open and in layout 4 (migrated if it was
   * older). Every operation waits for it; `openStore` awaits it so a failure stops start-up.
   */
  readonly ready: Promise<void>;
  private readonly db: EmbeddedDatabases;
  private readonly dataDir: string;
  private readonly timeoutMs: number;
  private readonly requestTtlMs: number;
  private readonly requestSweep: RequestSweep;
  private closed = false;
  private readonly onClosed: (() => Promise<void>) | undefined;
  private readonly writes: GroupCommit;

  constructor(opts: EmbeddedStoreOptions) {
    this.timeoutMs = opts.operationTimeoutMs ?? DEFAULT_STORE_TIMEOUT_MS;
    this.dataDir = opts.dataDir;
    this.requestTtlMs = opts.requestTtlMs ?? 60_000;
    this.onClosed = opts.onClosed;
    // maxDbs: layout 3's six databases, and layout 1's four and offsets-v2 while a migration runs.
    const root = open({
      path: opts.dataDir,
      overlappingSync: false,
      noSync: false,
      maxDbs: 16,
      eventTurnBatching: false,
    });
    this.db = openDatabases(root);
    this.ready = this.prepare(opts.onMigrated);
    // An unobserved failure is reported by the first operation (and by openStore at start-up).
    this.ready.catch(() => undefined);
    this.writes = new GroupCommit(
      (callback) => this.db.root.transaction(callback),
      this.timeoutMs,
      () => this.closed,
      this.ready,
      (why) => withDiskSpace(opts.dataDir, why),
    );
    this.requestSweep = new RequestSweep(this.db, this.ready, this.requestTtlMs, opts.sweepBatch ?? 5_000);
  }

  private async prepare(onMigrated?: (report: MigrationReport) => void): Promise<void> {
    const layout = this.db.meta.get('layout');
    if (!readableLayout(layout))
      throw new StoreUnavailableError(
        `embedded store: the data directory has layout ${String(layout)}, this release reads layouts` +
          ` 1 to ${LAYOUT} (written by a newer release?)`,
      );
    const report = await settle('embedded store: opening', migrate(this.db));
    if (report.from !== LAYOUT) onMigrated?.(report);
  }

  /** A read: the deadline answers the caller, and a late read changes nothing. */
  private run<T>(what: string, op: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new StoreUnavailableError(`embedded store: ${what}: closed`));
    return withDeadline(`embedded store: ${what}`, this.timeoutMs, async () => {
      await this.ready;
      // A read starts from the newest committed state: lmdb-js keeps one read transaction until
      // the end of the event turn, and only this environment's own writes renew it, so a read
      // right after another process's write (the offsets CLI and the proxy share the directory)
      // could see the state before it.
      this.db.root.resetReadTxn();
      return op();
    });
  }

  /**
   * A write: `body` runs inside the next write transaction, with every other write that arrived
   * meanwhile (group commit, embedded-group-commit.ts), and the result is answered once that
   * transaction is durable. A body that runs after the deadline writes nothing; one that ran
   * before it is answered the transaction's outcome.
   */
  private write<T>(what: string, body: () => T): Promise<T> {
    const label = `embedded store: ${what}`;
    if (this.closed) return Promise.reject(new StoreUnavailableError(`${label}: closed`));
    return this.writes.submit(label, body);
  }

  private readRecord(group: string, key: Buffer): GroupRecord | undefined {
    return readGroupRecord(this.db, group, key);
  }

  commit(request: CommitRequest): Promise<CommitOutcome> {
    const { group } = request;
    const { offsets, groups, requests, requestTimes, orderedRequests } = this.db;
    const g = groupKey(group);
    const idBytes = timeOrderedIdBytes(request.requestId);
    const orderedKey = idBytes && orderedRequestKey(idBytes, g);
    const reqKey = requestKey(g, request.requestId);
    // The records are encoded before the transaction: inside it the one writer waits for every
    // line of the body, and so do the commits queued behind this one.
    let blocks: BlockWrite[];
    try {
      checkOrder(request.order);
      blocks = encodeBlockWrites(request.writes, request.order);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
    return this.write('commit', () => {
      // A time-ordered id whose issue time was far from the clock when it was first written is
      // in requests-v2 (below), and so is every other id.
      const seenInOrder = orderedKey && orderedRequests.get(orderedKey);
      if (seenInOrder !== undefined) return decodeOutcome(seenInOrder);
      const seen = requests.get(reqKey);
      if (seen !== undefined) return decodeOutcome(seen.r);
      const record = this.readRecord(group, g);
      const decided = decideCommit(record?.s ?? null, request, (tp) => this.storedOffset(group, g, tp));
      const { newState } = decided;
      let outcome = decided.outcome;
      // Everything here only reads (and throws on a corrupt record); the puts come last, so a
      // body that throws wrote nothing into the transaction it shares with other commits.
      // Synchronous puts: inside a transaction they are part of it and return no promise.
      if (outcome.status === 'ok') {
        const keys = blocks.map((b) => offsetKey(g, b.topic, b.block));
        // A read inside the transaction sees the puts of the bodies before this one.
        const counts = { superseded: 0 };
        const values = blocks.map((b, i) => mergeBlock(offsets.getBinaryFast(keys[i]!), b, group, counts));
        if (newState !== null) groups.putSync(g, { n: group, s: newState });
        for (let i = 0; i < keys.length; i++) offsets.putSync(keys[i]!, values[i]!);
        if (counts.superseded > 0) outcome = { status: 'ok', superseded: counts.superseded };
      }
      const at = Date.now();
      if (orderedKey !== undefined && this.expiresInOrder(issuedAt(orderedKey), at)) {
        orderedRequests.putSync(orderedKey, encodeOutcome(outcome));
      } else {
        requests.putSync(reqKey, { at, r: encodeOutcome(outcome) });
        requestTimes.putSync(requestTimeKey(at, reqKey), 1);
      }
      return outcome;
    });
  }

  /**
   * A requests-v3 record is swept a TTL after its id's issue time, not after it was written: an
   * id issued long before (or stamped ahead by a clock that stepped back since) would be kept too
   * briefly (too long), so those go to requests-v2, swept by the time written.
   */
  private expiresInOrder(issued: number, now: number): boolean {
    return issued >= now - this.requestTtlMs / 2 && issued <= now + this.requestTtlMs;
  }

  /** The stored offset of one partition, -1n when none (for a compare-and-set). */
  private storedOffset(group: string, g: Buffer, tp: TopicPartition): bigint {
    const stored = this.db.offsets.getBinaryFast(offsetKey(g, tp.topic, blockOf(tp.partition)));
    if (stored === undefined) return -1n;
    const found: PartitionOffset[] = [];
    decodeBlock(stored, group, found, {
      header: topicHeader(tp.topic),
      wanted: (p) => p === tp.partition,
    });
    return found[0]?.offset ?? -1n;
  }

  fetch(group: string, partitions: TopicPartition[] | null): Promise<PartitionOffset[]> {
    return this.run('fetch', async () => {
      const g = groupKey(group);
      const out: PartitionOffset[] = [];
      if (partitions === null) {
        // One snapshot for the whole group (a commit is never seen half-applied), in pages.
        await walkInPages(this.db.offsets.getRange(prefixRange(g)), ({ value }) => {
          decodeBlock(value, group, out);
        });
        return out;
      }
      // Each block is read and decoded once, and the partitions answered in the order asked.
      const blocks = new Map<string, Map<number, PartitionOffset>>();
      for (const tp of partitions) {
        const block = blockOf(tp.partition);
        const id = `${block}:${tp.topic}`;
        let found = blocks.get(id);
        if (found === undefined) {
          found = new Map();
          blocks.set(id, found);
          const stored = this.db.offsets.getBinaryFast(offsetKey(g, tp.topic, block));
          if (stored !== undefined) {
            const decoded: PartitionOffset[] = [];
            decodeBlock(stored, group, decoded, { header: topicHeader(tp.topic) });
            for (const o of decoded) found.set(o.partition, o);
          }
        }
        const o = found.get(tp.partition);
        if (o !== undefined) out.push({ ...o });
      }
      return out;
    });
  }

  deleteOffsets(group: string, partitions: TopicPartition[]): Promise<void> {
    const g = groupKey(group);
    const byBlock = new Map<string, { topic: string; block: number; partitions: Set<number> }>();
    for (const tp of partitions) {
      const block = blockOf(tp.partition);
      const id = `${block}:${tp.topic}`;
      const entry = byBlock.get(id) ?? { topic: tp.topic, block, partitions: new Set<number>() };
      entry.partitions.add(tp.partition);
      byBlock.set(id, entry);
    }
    const { offsets } = this.db;
    return this.write('deleteOffsets', () => {
      // Reads (and corruption checks) first, then the changes.
      const changes = [...byBlock.values()].map(({ topic, block, partitions: ps }) => {
        const key = offsetKey(g, topic, block);
        const stored = offsets.getBinaryFast(key);
        return { key, stored, left: stored && withoutPartitions(stored, topicHeader(topic), ps, group) };
      });
      for (const { key, stored, left } of changes) {
        if (stored === undefined) continue;
        if (left === undefined) offsets.removeSync(key);
        else offsets.putSync(key, left);
      }
    });
  }

  /**
   * One write transaction over the group's own key range: the group disappears whole. Its size is
   * the group's partition count, which its commits (each one transaction too) put there.
   */
  deleteGroup(group: string): Promise<void> {
    const g = groupKey(group);
    const { offsets, groups } = this.db;
    return this.write('deleteGroup', () => {
      for (const key of offsets.getKeys(prefixRange(g))) offsets.removeSync(key);
      groups.removeSync(g);
    });
  }

  listGroups(): Promise<string[]> {
    return this.run('listGroups', async () => {
      const names: string[] = [];
      await walkInPages(this.db.groups.getRange({}), ({ value }) => {
        if (typeof value?.n === 'string') names.push(value.n);
      });
      return names;
    });
  }

  getGroup(group: string): Promise<GroupState | null> {
    return this.run('getGroup', async () => this.readRecord(group, groupKey(group))?.s ?? null);
  }

  updateGroup(group: string, update: GroupUpdate): Promise<void> {
    const g = groupKey(group);
    return this.write('updateGroup', () => {
      const state = applyGroupUpdate(this.readRecord(group, g)?.s ?? null, update);
      this.db.groups.putSync(g, { n: group, s: state });
    });
  }

  /** In the meta database, one write transaction: processes sharing the directory agree too. */
  lease(name: string, holder: string, ttlMs: number): Promise<boolean> {
    const key = `lease:${name}`;
    const { meta } = this.db;
    return this.write('lease', () => {
      const now = Date.now();
      const cur = meta.get(key);
      if (typeof cur === 'object' && cur.h !== holder && cur.u > now) return false;
      meta.putSync(key, { h: holder, u: now + ttlMs });
      return true;
    });
  }

  releaseLease(name: string, holder: string): Promise<void> {
    const key = `lease:${name}`;
    const { meta } = this.db;
    return this.write('releaseLease', () => {
      const cur = meta.get(key);
      if (typeof cur === 'object' && cur.h === holder) meta.removeSync(key);
    });
  }

  /** In the meta database: the offsets CLI and the proxy share the directory (LMDB's processes). */
  addToCount(name: string): Promise<void> {
    const key = `count:${name}`;
    const { meta } = this.db;
    return this.write('addToCount', () => {
      const cur = meta.get(key);
      meta.putSync(key, (typeof cur === 'number' ? cur : 0) + 1);
    });
  }

  readCounts(): Promise<Map<string, number>> {
    return this.run('readCounts', async () => {
      const out = new Map<string, number>();
      for (const { key, value } of this.db.meta.getRange({ start: 'count:', end: 'count;' }))
        if (typeof value === 'number') out.set(key.slice('count:'.length), value);
      return out;
    });
  }

  ping(): Promise<void> {
    // A stalled disk fails no read: reads come from the map. Only the write transaction that
    // does not come back tells.
    const waited = this.writes.committingForMs();
    if (waited > this.timeoutMs)
      return Promise.reject(
        new StoreUnavailableError(
          `embedded store: ping: a write transaction has waited ${waited} ms for the disk (stalled?)`,
        ),
      );
    return this.run('ping', async () => {
      this.db.root.getStats();
    });
  }

  /**
   * The marker is an entry of the `meta` database, and the data file's identity (device and
   * inode): LMDB keeps reading a data file that was deleted or replaced under a running proxy
   * (its map stays), so only the file's identity tells.
   */
  ensureMarker(candidate: string): Promise<Map<string, string>> {
    return this.write('ensureMarker', () => {
      if (typeof this.db.meta.get('marker') !== 'string') this.db.meta.putSync('marker', candidate);
      return new Map([
        ['meta/marker', String(this.db.meta.get('marker'))],
        [DATA_FILE, this.dataFileIdentity() ?? ''],
      ]);
    });
  }

  readMarker(): Promise<Map<string, string | null>> {
    return this.run('readMarker', async () => {
      const marker = this.db.meta.get('marker');
      return new Map([
        ['meta/marker', typeof marker === 'string' ? marker : null],
        [DATA_FILE, this.dataFileIdentity()],
      ]);
    });
  }

  private dataFileIdentity(): string | null {
    try {
      const st = statSync(join(this.dataDir, DATA_FILE));
      return `${st.dev}:${st.ino}`;
    } catch {
      return null;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.requestSweep.stop();
    await this.ready.catch(() => undefined);
    try {
      await this.db.root.close();
    } finally {
      await this.onClosed?.();
    }
  }

  /** Removes the request records past their TTL now (every 10 s otherwise: embedded-request-sweep.ts). */
  sweepRequests(): Promise<void> {
    return this.requestSweep.sweep();
  }
}
