/**
 * `memory://`: an in-process store for unit tests and demos. Not durable; every operation is
 * synchronous inside, so a commit is trivially atomic.
 */
import { applyGroupUpdate, decideCommit } from './commit-guard.js';
import { checkOrder, isSuperseded } from './commit-order.js';
import type { CommitOrder } from './commit-order.js';
import type {
  CommitOutcome,
  CommitRequest,
  GroupState,
  GroupUpdate,
  OffsetStore,
  PartitionOffset,
  TopicPartition,
} from './store.js';
import { StoreUnavailableError } from './errors.js';

/**
 * Each topic's partition keys, made once: a key built per partition of every commit (a new
 * string, hashed anew by the Map) was most of this store's share of a 100-partition commit in
 * the commit benchmark, whose memory-store figure stands for the proxy alone. Bounded: cleared
 * when it knows more topics than a test or demo has.
 */
const keysByTopic = new Map<string, string[]>();

function partitionKey(tp: TopicPartition): string {
  let keys = keysByTopic.get(tp.topic);
  if (keys === undefined) {
    if (keysByTopic.size >= 10_000) keysByTopic.clear();
    keys = [];
    keysByTopic.set(tp.topic, keys);
  }
  const p = tp.partition;
  // Small non-negative partitions only: any other number gets its key made each time.
  if (p < 0 || p >= 100_000 || !Number.isInteger(p)) return `${tp.topic}\u0000${p}`;
  return (keys[p] ??= `${tp.topic}\u0000${p}`);
}

interface MemoryGroup {
  offsets: Map<string, PartitionOffset>;
  /** The read order of the commit that wrote each offset (absent: none given). */
  orders: Map<string, CommitOrder>;
  state: GroupState | null;
}

/** The data behind one or more MemoryStore instances (tests run "two proxies" over one). */
export class MemoryData {
  readonly groups = new Map<string, MemoryGroup>();
  /** requestId → outcome, so a repeated request is answered, not applied twice. */
  readonly outcomes = new Map<string, CommitOutcome>();
  readonly leases = new Map<string, { holder: string; until: number }>();
  readonly counts = new Map<string, number>();
}

export class MemoryStore implements OffsetStore {
  readonly kind = 'memory';
  private readonly groups: Map<string, MemoryGroup>;
  private readonly outcomes: Map<string, CommitOutcome>;
  private readonly leases: MemoryData['leases'];
  private readonly counts: MemoryData['counts'];
  private closed = false;

  constructor(data: MemoryData = new MemoryData()) {
    this.groups = data.groups;
    this.outcomes = data.outcomes;
    this.leases = data.leases;
    this.counts = data.counts;
  }

  private open(): void {
    if (this.closed) throw new StoreUnavailableError('memory store is closed');
  }

  private group(name: string, create: boolean): MemoryGroup | undefined {
    let g = this.groups.get(name);
    if (g === undefined && create) {
      g = { offsets: new Map(), orders: new Map(), state: null };
      this.groups.set(name, g);
    }
    return g;
  }

  async commit(request: CommitRequest): Promise<CommitOutcome> {
    this.open();
    checkOrder(request.order);
    const idKey = `${request.group}\u0000${request.requestId}`;
    const seen = this.outcomes.get(idKey);
    if (seen !== undefined) return seen;
    const g = this.group(request.group, false);
    const { outcome, newState } = decideCommit(
      g?.state ?? null,
      request,
      (tp) => g?.offsets.get(partitionKey(tp))?.offset ?? -1n,
    );
    let result: CommitOutcome = outcome;
    if (outcome.status === 'ok') {
      const target = this.group(request.group, true)!;
      if (newState !== null) target.state = newState;
      const order = request.order;
      // Partitions, not writes: a request may name one twice.
      let superseded: Set<string> | undefined;
      for (const w of request.writes) {
        const key = partitionKey(w);
        if (isSuperseded(order, target.orders.get(key))) {
          (superseded ??= new Set()).add(key);
          continue;
        }
        if (order === undefined) target.orders.delete(key);
        else target.orders.set(key, order);
        const stored: PartitionOffset = {
          topic: w.topic,
          partition: w.partition,
          offset: w.offset,
          leaderEpoch: w.leaderEpoch,
          metadata: w.metadata,
          commitTimestamp: w.commitTimestamp,
          expireTimestamp: w.expireTimestamp,
        };
        target.offsets.set(key, stored);
      }
      if (superseded !== undefined) result = { status: 'ok', superseded: superseded.size };
    }
    this.outcomes.set(idKey, result);
    // Bounded memory: forget the oldest outcomes (a resend comes within seconds).
    if (this.outcomes.size > 100_000) this.outcomes.delete(this.outcomes.keys().next().value!);
    return result;
  }

  async fetch(group: string, partitions: TopicPartition[] | null): Promise<PartitionOffset[]> {
    this.open();
    const g = this.group(group, false);
    if (g === undefined) return [];
    if (partitions === null) return [...g.offsets.values()].map((o) => ({ ...o }));
    const out: PartitionOffset[] = [];
    for (const tp of partitions) {
      const o = g.offsets.get(partitionKey(tp));
      if (o !== undefined) out.push({ ...o });
    }
    return out;
  }

  async deleteOffsets(group: string, partitions: TopicPartition[]): Promise<void> {
    this.open();
    const g = this.group(group, false);
    if (g === undefined) return;
    for (const tp of partitions) {
      g.offsets.delete(partitionKey(tp));
      g.orders.delete(partitionKey(tp));
    }
    if (g.offsets.size === 0 && g.state === null) this.groups.delete(group);
  }

  async deleteGroup(group: string): Promise<void> {
    this.open();
    this.groups.delete(group);
  }

  async listGroups(): Promise<string[]> {
    this.open();
    return [...this.groups.keys()];
  }

  async getGroup(group: string): Promise<GroupState | null> {
    this.open();
    const s = this.group(group, false)?.state ?? null;
    return s === null ? null : structuredClone(s);
  }

  async updateGroup(group: string, update: GroupUpdate): Promise<void> {
    this.open();
    const g = this.group(group, true)!;
    g.state = applyGroupUpdate(g.state, update);
  }

  async lease(name: string, holder: string, ttlMs: number): Promise<boolean> {
    this.open();
    const now = Date.now();
    const cur = this.leases.get(name);
    if (cur !== undefined && cur.holder !== holder && cur.until > now) return false;
    this.leases.set(name, { holder, until: now + ttlMs });
    return true;
  }

  async releaseLease(name: string, holder: string): Promise<void> {
    this.open();
    if (this.leases.get(name)?.holder === holder) this.leases.delete(name);
  }

  async addToCount(name: string): Promise<void> {
    this.open();
    this.counts.set(name, (this.counts.get(name) ?? 0) + 1);
  }

  async readCounts(): Promise<Map<string, number>> {
    this.open();
    return new Map(this.counts);
  }

  async ping(): Promise<void> {
    this.open();
  }

  async close(): Promise<void> {
    this.closed = true;
  }
}
