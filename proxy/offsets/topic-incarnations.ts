/**
 * Which incarnation of a topic name the stored offsets belong to. When a topic is deleted, the
 * broker deletes its offsets in every group; the store keeps offsets by name and so would show
 * the old topic's offsets for a topic re-created under the same name. Here each name the cluster
 * lists has an incarnation: its id and `since`, the time before which offsets stored under the
 * name are the older topics' and are read as no offset (-1), as the broker answers.
 *
 * `since` must never hide a commit to the current topic, which may come (by name, OffsetCommit
 * v9 and older) before any proxy noticed the new id. So it is not the time of noticing: it is the
 * last time the fleet knows an older id of the name still existed (a Metadata refresh sent then
 * listed it), less a margin for the proxy instances' clocks. A commit stamped before that moment
 * was to an older topic. A commit between it and the deletion stays visible: after a commit the
 * cache is refreshed within its age (5 s, TopicIds.confirmSoon) so that window is short.
 *
 * A name is recorded the first time any proxy sees it, with since 0 (offsets from before count:
 * nothing tells which topic they were for), in the store's internal group
 * TOPIC_INCARNATIONS_GROUP (backends/internal-groups.ts): partition 0 of a record per topic name,
 * the offset a generation for compare-and-set (instances racing on a re-creation agree on one
 * record), the commit timestamp `since`, the metadata the id, the time it was seen and the ids it
 * replaced. A record's `seen` is written once; each instance knows later sightings in memory, and
 * after a restart the record's is the fallback. Ids a record replaced are never taken back (a
 * broker whose metadata lags may list the old id for a moment).
 *
 * Topics the cluster does not list (never had: mirrored offsets) have no record; their offsets
 * are as they were stored.
 */
import { newRequestId } from '../../backends/request-id.js';
import { TOPIC_INCARNATIONS_GROUP } from '../../backends/internal-groups.js';
import type { OffsetStore, OffsetWrite, PartitionOffset } from '../../backends/store.js';
import type { Logger } from '../common/log.js';
import type { TopicEntry, TopicIds } from './topic-ids.js';

/** How far the proxy instances' clocks may disagree (docs/design.md says so). */
export const INCARNATION_CLOCK_MARGIN_MS = 1_000;
/** How many replaced ids a record remembers. */
const RETIRED_KEPT = 4;
/** A read waits for the records of a refresh no longer than this (the store's own deadline is longer). */
const RECONCILE_WAIT_MS = 2_000;

export interface Incarnation {
  id: string;
  /** Offsets committed before this time (ms) belong to older topics of the name. 0: none hidden. */
  since: bigint;
  /** The last time (ms) the id is known to have existed. */
  seen: number;
  /** Ids of earlier topics of the name, newest last. */
  retired: string[];
  /** The record's compare-and-set value. */
  generation: bigint;
}

/** The record's metadata: the id, when it was seen, the ids it replaced. */
interface RecordMetadata {
  id: string;
  seen: number;
  retired: string[];
}

export function encodeIncarnation(topic: string, inc: Incarnation, expected: bigint): OffsetWrite {
  const metadata: RecordMetadata = { id: inc.id, seen: inc.seen, retired: inc.retired };
  return {
    topic,
    partition: 0,
    offset: inc.generation,
    leaderEpoch: -1,
    metadata: JSON.stringify(metadata),
    commitTimestamp: inc.since,
    expireTimestamp: -1n,
    expectedOffset: expected,
  };
}

/**
 * A stored record. One that cannot be read (written by hand) is taken as an unknown id seen at 0,
 * so that it is replaced (its generation is kept for the compare-and-set) and hides nothing.
 */
export function decodeIncarnation(o: PartitionOffset): Incarnation {
  const unreadable = { id: '', since: 0n, seen: 0, retired: [], generation: o.offset };
  try {
    const m = JSON.parse(o.metadata) as Partial<RecordMetadata>;
    if (typeof m.id !== 'string' || typeof m.seen !== 'number' || !Array.isArray(m.retired))
      return unreadable;
    const retired = m.retired.filter((r): r is string => typeof r === 'string' && r !== '');
    return { id: m.id, since: o.commitTimestamp, seen: m.seen, retired, generation: o.offset };
  } catch {
    return unreadable;
  }
}

/**
 * The record that follows `stored` (and what this instance knew, `known`) for a name now listed
 * with `id`: the first sighting hides nothing; a new id hides what was committed before the last
 * sighting of an older one.
 */
export function successor(
  id: string,
  stored: Incarnation | undefined,
  known: Incarnation | undefined,
  sentAt: number,
  marginMs: number,
): Incarnation {
  const generation = (stored?.generation ?? 0n) + 1n;
  const earlier = [stored, known].filter((i): i is Incarnation => i !== undefined && i.id !== id);
  if (earlier.length === 0) return { id, since: 0n, seen: sentAt, retired: [], generation };
  const lastOld = Math.max(...earlier.map((i) => i.seen));
  const retired = [...new Set([...earlier.flatMap((i) => [...i.retired, i.id])])]
    .filter((r) => r !== id && r !== '')
    .slice(-RETIRED_KEPT);
  const since = BigInt(Math.max(0, lastOld - marginMs));
  return { id, since, seen: sentAt, retired, generation };
}

export interface TopicIncarnationsOptions {
  marginMs?: number;
  log?: Logger;
  /**
   * False: the records are read, never written (the offsets CLI, a process that reads a store a
   * running proxy may hold): a re-creation no proxy recorded yet is worked out in memory, as a
   * restarted proxy would record it.
   */
  record?: boolean;
}

/** For each topic name, the time before which its stored offsets are an older topic's. */
export type HiddenBefore = (topics: readonly string[]) => Promise<ReadonlyMap<string, bigint>>;

/**
 * The one rule every reader of stored offsets follows (OffsetFetch, the fence's compare-and-set,
 * the admin API, the offsets CLI, lag): an offset committed before its name's `since` was
 * committed to an older topic of the name, which the broker has deleted, and is no offset.
 */
export function ofCurrentTopic(o: PartitionOffset, hidden: ReadonlyMap<string, bigint>): boolean {
  const since = hidden.get(o.topic);
  return since === undefined || o.commitTimestamp >= since;
}

export class TopicIncarnations {
  /** This instance's view of the records, with its own later sightings. */
  private readonly known = new Map<string, Incarnation>();
  private loaded = false;
  private work: Promise<void> = Promise.resolve();
  /** Reconciles queued and not yet done (a read waits for them, not for a settled queue). */
  private outstanding = 0;
  /** The first read of every record, when no refresh has read them (one at a time). */
  private loading: Promise<void> | null = null;
  private readonly marginMs: number;

  /** `store` with internal groups (InternalGroupsHidden.withInternalGroups). */
  constructor(
    private readonly store: OffsetStore,
    private readonly topicIds: TopicIds,
    private readonly opts: TopicIncarnationsOptions = {},
  ) {
    this.marginMs = opts.marginMs ?? INCARNATION_CLOCK_MARGIN_MS;
    topicIds.onRefresh((topics, sentAt) => void this.observe(topics, sentAt));
  }

  /** Takes a refresh's topics into the records; resolves when they are (never rejects). */
  observe(topics: readonly TopicEntry[], sentAt: number): Promise<void> {
    return this.queue(() => this.reconcile(topics, sentAt));
  }

  /** Runs `step` after the ones queued before it; never rejects (a failure is logged). */
  private queue(step: () => Promise<void>): Promise<void> {
    this.outstanding++;
    this.work = this.work
      .then(step)
      .catch((err: unknown) => {
        this.opts.log?.warn('could not record topic incarnations', { error: err });
      })
      .finally(() => {
        this.outstanding--;
      });
    return this.work;
  }

  /**
   * For `topics`, the time before which their stored offsets belong to an older topic of the
   * name (only names with such a time). Refreshes the topic ids first when their cache is old;
   * never rejects: without the cluster or the store, what this instance knows answers.
   */
  async hiddenBefore(topics: readonly string[]): Promise<Map<string, bigint>> {
    const out = new Map<string, bigint>();
    if (topics.length === 0) return out;
    await this.topicIds.fresh();
    // Without the cluster (unreachable, or a CLI given none) the records in the store still answer.
    if (!this.loaded)
      this.loading ??= this.queue(async () => {
        if (!this.loaded) await this.read([]);
      }).finally(() => {
        this.loading = null;
      });
    if (this.outstanding > 0) {
      let timer: NodeJS.Timeout | undefined;
      const late = new Promise((r) => (timer = setTimeout(r, RECONCILE_WAIT_MS)));
      await Promise.race([this.work, late]).finally(() => clearTimeout(timer));
    }
    for (const t of topics) {
      const since = this.known.get(t)?.since ?? 0n;
      if (since > 0n) out.set(t, since);
    }
    return out;
  }

  /** Offsets committed: the next refresh confirms their topics' ids after them. */
  committed(): void {
    this.topicIds.confirmSoon();
  }

  /** What this instance knows of a name (tests). */
  incarnationOf(topic: string): Incarnation | undefined {
    return this.known.get(topic);
  }

  private async reconcile(topics: readonly TopicEntry[], sentAt: number): Promise<void> {
    let pending: TopicEntry[] = [];
    for (const t of topics) {
      const k = this.known.get(t.name);
      if (k?.id === t.id) k.seen = Math.max(k.seen, sentAt);
      else if (!k?.retired.includes(t.id)) pending.push(t);
    }
    for (let attempt = 0; pending.length > 0 && attempt < 3; attempt++) {
      const stored = await this.read(pending);
      const writes: { topic: string; next: Incarnation; write: OffsetWrite }[] = [];
      for (const t of pending) {
        const r = stored.get(t.name);
        const k = this.known.get(t.name);
        if (r && (r.id === t.id || r.retired.includes(t.id))) {
          // Recorded already (by another instance): its since stands.
          const seen = r.id === t.id ? Math.max(r.seen, k?.id === r.id ? k.seen : 0, sentAt) : r.seen;
          this.known.set(t.name, { ...r, seen });
          continue;
        }
        const next = successor(t.id, r, k, sentAt, this.marginMs);
        writes.push({ topic: t.name, next, write: encodeIncarnation(t.name, next, r?.generation ?? -1n) });
      }
      if (writes.length === 0) return;
      if (this.opts.record === false) {
        for (const w of writes) this.known.set(w.topic, w.next);
        return;
      }
      const outcome = await this.store.commit({
        group: TOPIC_INCARNATIONS_GROUP,
        writes: writes.map((w) => w.write),
        requestId: newRequestId(),
      });
      if (outcome.status === 'ok') {
        for (const w of writes) {
          this.known.set(w.topic, w.next);
          if (w.next.since > 0n)
            this.opts.log?.info('topic re-created: older offsets hidden', {
              topic: w.topic,
              id: w.next.id,
              since: Number(w.next.since),
            });
        }
        return;
      }
      if (outcome.status !== 'cas-mismatch')
        throw new Error(`incarnation records refused: ${outcome.status}`);
      // Another instance wrote first; nothing was written: read again and agree.
      pending = pending.filter((t) => writes.some((w) => w.topic === t.name));
    }
  }

  /** The stored records of `topics`; the first time, every record (names the cluster lost too). */
  private async read(topics: readonly TopicEntry[]): Promise<Map<string, Incarnation>> {
    const all = !this.loaded;
    const rows = await this.store.fetch(
      TOPIC_INCARNATIONS_GROUP,
      all ? null : topics.map((t) => ({ topic: t.name, partition: 0 })),
    );
    const out = new Map<string, Incarnation>();
    for (const row of rows) {
      if (row.partition === 0) out.set(row.topic, decodeIncarnation(row));
    }
    if (all) {
      // Names not listed now (deleted topics) are remembered, for when they come back.
      for (const [name, inc] of out) if (!this.known.has(name)) this.known.set(name, inc);
      this.loaded = true;
    }
    return out;
  }
}
