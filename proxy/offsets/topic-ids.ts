/**
 * Topic ids and names, as the cluster's metadata pairs them, for OffsetCommit and OffsetFetch v10
 * (KIP-848: topics named by id). The store keeps offsets by topic name, in every layout, as the
 * broker keeps them in __consumer_offsets: a v10 request's ids are mapped to names on the way in,
 * and names to ids on the way out.
 *
 * The pairs come from a Metadata request for all topics, cached. The cache is replaced whole by
 * each refresh, so it never holds more than the cluster's topics, and an id whose topic was
 * deleted (or deleted and re-created under the same name, with a new id) leaves with the refresh
 * that no longer lists it. An id or name the cache lacks is asked for (a topic created since: a
 * client commits with an id it has just read from Metadata), one refresh at a time, and a key a
 * refresh did not find is not asked for again for `missGapMs`: a client retrying an unknown id
 * (UNKNOWN_TOPIC_ID is retriable) costs one Metadata request per gap, not one per retry. A cache older than `maxAgeMs` is refreshed before it answers, so that an id whose topic
 * was deleted or re-created since is no longer taken after that age (a broker's cache learns of
 * it within moments; a commit with the old id stored under the name would land on the new
 * topic), but waited for no longer than `staleWaitMs`: a broker that does not answer holds up a
 * commit to a topic it had no longer than that, and the old cache answers.
 */
import { ZERO_UUID } from '../../protocol/generated-support.js';

/** One topic of the cluster: its name and id (base64url, as the codec carries uuids). */
export interface TopicEntry {
  name: string;
  id: string;
}

/** Bounds the memory of keys found missing (a flood of random ids): past it, they are forgotten. */
const MAX_MISSES = 10_000;

export interface TopicIdsOptions {
  /** How long a refresh is trusted before the next lookup refreshes it. */
  maxAgeMs?: number;
  /** How long a lookup of a known key waits for that refresh before the old cache answers. */
  staleWaitMs?: number;
  /** How long a key a refresh did not find is answered as unknown without asking again. */
  missGapMs?: number;
  now?: () => number;
}

/**
 * Told of every refresh: the cluster's topics and when the refresh was sent (each listed id
 * existed at some moment after it). Its promise is not waited for (topic-incarnations.ts).
 */
export type RefreshListener = (topics: readonly TopicEntry[], sentAt: number) => void;

interface Snapshot {
  byId: Map<string, string>;
  byName: Map<string, string>;
  at: number;
}

export class TopicIds {
  private snapshot: Snapshot | null = null;
  private refreshing: Promise<Snapshot> | null = null;
  /** Keys a refresh did not find, and when (see missGapMs); at most MAX_MISSES of them. */
  private readonly missed = new Map<string, number>();
  private readonly maxAgeMs: number;
  private readonly missGapMs: number;
  private readonly staleWaitMs: number;
  private readonly now: () => number;
  private readonly listeners: RefreshListener[] = [];
  private confirmTimer: NodeJS.Timeout | null = null;
  private refreshSentAt = 0;

  /** `list` asks the cluster for all its topics (Metadata v10+ carries their ids). */
  constructor(
    private readonly list: () => Promise<readonly TopicEntry[]>,
    opts: TopicIdsOptions = {},
  ) {
    this.maxAgeMs = opts.maxAgeMs ?? 5_000;
    this.missGapMs = opts.missGapMs ?? 500;
    this.staleWaitMs = opts.staleWaitMs ?? 1_000;
    this.now = opts.now ?? Date.now;
  }

  /**
   * The names of `ids` the cluster has; ids it does not have (unknown, or of a deleted topic) are
   * left out. Rejects only when the cache lacks an id and the cluster cannot be asked.
   */
  async namesOf(ids: readonly string[]): Promise<Map<string, string>> {
    const snap = await this.covering(ids, (s, id) => s.byId.has(id));
    return pick(snap.byId, ids);
  }

  /** The ids of `names` the cluster has, as namesOf the other way. */
  async idsOf(names: readonly string[]): Promise<Map<string, string>> {
    const snap = await this.covering(names, (s, name) => s.byName.has(name));
    return pick(snap.byName, names);
  }

  /** Calls `listener` with each refresh's topics from now on. */
  onRefresh(listener: RefreshListener): void {
    this.listeners.push(listener);
  }

  /**
   * Has the cache refreshed if it is older than `maxAgeMs` (or empty), waiting for that no longer
   * than `staleWaitMs`; never rejects (a cluster that does not answer leaves the old cache).
   */
  async fresh(): Promise<void> {
    if (this.snapshot !== null && this.now() - this.snapshot.at < this.maxAgeMs) return;
    // A refresh outstanding for longer than the wait already: the cluster does not answer, and
    // each lookup waiting for it again would add that wait to every request until it does.
    if (this.refreshing !== null && this.now() - this.refreshSentAt >= this.staleWaitMs) return;
    await settledWithin(this.refresh(), this.staleWaitMs);
  }

  /**
   * Has a refresh sent within `maxAgeMs` from now, and not before now (one timer at a time): after
   * a commit, so the listeners learn that its topics still had their ids after it was stamped.
   */
  confirmSoon(): void {
    if (this.confirmTimer !== null) return;
    this.confirmTimer = setTimeout(() => {
      this.confirmTimer = null;
      void this.refresh().catch(() => undefined);
    }, this.maxAgeMs);
    this.confirmTimer.unref();
  }

  /** Stops a pending confirmSoon. */
  close(): void {
    if (this.confirmTimer !== null) clearTimeout(this.confirmTimer);
    this.confirmTimer = null;
  }

  /** A snapshot with every key in it if the cluster has it, refreshing as the class comment says. */
  private async covering(
    keys: readonly string[],
    has: (s: Snapshot, key: string) => boolean,
  ): Promise<Snapshot> {
    const first = this.snapshot === null;
    let snap = this.snapshot ?? (await this.refresh());
    const now = this.now();
    const age = now - snap.at;
    const lacking = keys.filter((k) => !has(snap!, k));
    const ask = lacking.filter((k) => !(now - (this.missed.get(k) ?? -Infinity) < this.missGapMs));
    if (ask.length > 0) {
      if (!first) snap = await this.refresh();
      for (const k of ask) if (!has(snap, k)) this.missed.set(k, this.now());
      if (this.missed.size > MAX_MISSES) this.missed.clear();
    } else if (age >= this.maxAgeMs) {
      // A failed or slow refresh leaves the old cache: the next lookup tries again.
      snap = (await settledWithin(this.refresh(), this.staleWaitMs)) ?? snap;
    }
    return snap;
  }

  private refresh(): Promise<Snapshot> {
    if (this.refreshing) return this.refreshing;
    const sentAt = this.now();
    this.refreshSentAt = sentAt;
    this.refreshing = this.list()
      .then((topics) => {
        const byId = new Map<string, string>();
        const byName = new Map<string, string>();
        for (const t of topics) {
          if (t.id === ZERO_UUID) continue; // a broker without topic ids (before Metadata v10)
          byId.set(t.id, t.name);
          byName.set(t.name, t.id);
        }
        this.snapshot = { byId, byName, at: this.now() };
        // A key found now is no longer missing; old misses go.
        for (const [k, at] of this.missed)
          if (byId.has(k) || byName.has(k) || this.now() - at >= this.missGapMs) this.missed.delete(k);
        const named = topics.filter((t) => t.id !== ZERO_UUID);
        for (const listener of this.listeners) listener(named, sentAt);
        return this.snapshot;
      })
      .finally(() => {
        this.refreshing = null;
      });
    return this.refreshing;
  }
}

/** The promise's value if it resolves within `ms`; null if it rejects or takes longer. */
function settledWithin<T>(p: Promise<T>, ms: number): Promise<T | null> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<null>((resolve) => {
    timer = setTimeout(() => resolve(null), ms);
  });
  return Promise.race([p.catch(() => null), late]).finally(() => clearTimeout(timer));
}

function pick(from: Map<string, string>, keys: readonly string[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const k of keys) {
    const v = from.get(k);
    if (v !== undefined) out.set(k, v);
  }
  return out;
}
